#!/usr/bin/env bash
# PLUGRL_BENCH_POLL_IDLE=1 (tests/bench.sh) in one short repetition of the
# SMALL cells: the bench says which idle setting it ran with, and puts
# back each core's PM QoS value as it found it, whether or not it could
# change them (as root it can; elsewhere it says it could not).
#
#   tests/bench_poll_idle.sh BIN_DIR
set -euo pipefail
bin=${1:?usage: tests/bench_poll_idle.sh BIN_DIR}
here=$(dirname "${BASH_SOURCE[0]}")
qos() { cat /sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us /sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us 2>/dev/null || true; }
before=$(qos)
out=$(PLUGRL_BENCH_POLL_IDLE=1 PLUGRL_BENCH_WORKLOADS=SMALL PLUGRL_BENCH_REPS=1 PLUGRL_BENCH_SECONDS=0.2 \
  PLUGRL_BENCH_WARMUP=0.1 PLUGRL_BENCH_LEDGER=0 "$here/bench.sh" "$bin" 2>&1)
after=$(qos)
head=$(grep -m1 '^libplugrl vs. the transport floor' <<<"$out" || true)
echo "$head"
case $head in
*"idle: cores 0 and 1 polling"*) ;;
*"could not be applied"*) grep -q 'NOTE: PLUGRL_BENCH_POLL_IDLE=1 but' <<<"$out" || {
  echo "FAIL: the bench could not apply the setting and did not say why" >&2
  exit 1
} ;;
*)
  echo "FAIL: the bench did not say which idle setting it ran with" >&2
  echo "$out" >&2
  exit 1
  ;;
esac
[[ $before == "$after" ]] || {
  echo "FAIL: the cores' PM QoS values were $(echo $before) before the bench and $(echo $after) after" >&2
  exit 1
}
echo "ok: PM QoS values put back as found ($(echo $before))"
