#!/usr/bin/env bash
# PLUGRL_BENCH_POLL_IDLE=1 (tests/bench.sh) in one short repetition of the
# SMALL cells: the bench says which idle setting it ran with, and puts
# back each core's PM QoS value as it found it, whether or not it could
# change them (as root it can; elsewhere it says it could not).
#
#   tests/bench_poll_idle.sh BIN_DIR
#
# Twice: first against a fake cpu tree (PLUGRL_BENCH_CPU_SYSFS) whose cores
# have a POLL idle state and PM QoS values of their own, so that the change
# and its undoing are checked on every machine: the values must read n/a
# while the bench runs and what they were after it. (Against the machine's
# own files alone the check could not fail where they already read n/a,
# as haltpoll leaves them on the CI machine, or where no core has a POLL
# state: a bench that put nothing back passed.) Then against the
# machine's own files, as before.
set -euo pipefail
bin=${1:?usage: tests/bench_poll_idle.sh BIN_DIR}
here=$(dirname "${BASH_SOURCE[0]}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_bench [ENV...]: the short bench, its output in $out and its first
# line in $head.
run_bench() {
  out=$(env "$@" PLUGRL_BENCH_POLL_IDLE=1 PLUGRL_BENCH_WORKLOADS=SMALL PLUGRL_BENCH_REPS=1 PLUGRL_BENCH_SECONDS=0.2 \
    PLUGRL_BENCH_WARMUP=0.1 PLUGRL_BENCH_LEDGER=0 PLUGRL_BENCH_INSTRUCTIONS=0 "$here/bench.sh" "$bin" 2>&1)
  head=$(grep -m1 '^libplugrl vs. the transport floor' <<<"$out" || true)
  echo "$head"
}

# 1. A fake tree: cores 0 and 1 with POLL as idle state 0, PM QoS 0 and 125.
fake=$tmp/cpu
for c in 0 1; do
  mkdir -p "$fake/cpu$c/power" "$fake/cpu$c/cpuidle/state0"
  echo POLL >"$fake/cpu$c/cpuidle/state0/name"
done
echo 0 >"$fake/cpu0/power/pm_qos_resume_latency_us"
echo 125 >"$fake/cpu1/power/pm_qos_resume_latency_us"
fqos() { cat "$fake/cpu0/power/pm_qos_resume_latency_us" "$fake/cpu1/power/pm_qos_resume_latency_us"; }
fbefore=$(fqos)
# What the values read while the bench runs (it writes them before its
# first run and puts them back as it exits, seconds later).
(
  while [[ ! -e $tmp/done ]]; do
    fqos | paste -sd' ' >>"$tmp/seen"
    sleep 0.05
  done
) &
watcher=$!
run_bench PLUGRL_BENCH_CPU_SYSFS="$fake"
touch "$tmp/done"
wait "$watcher"
fafter=$(fqos)
case $head in
*"idle: cores 0 and 1 polling"*) ;;
*)
  echo "FAIL: with cores that have a POLL state the bench did not say it ran them polling" >&2
  echo "$out" >&2
  exit 1
  ;;
esac
grep -qx 'n/a n/a' "$tmp/seen" || {
  echo "FAIL: the cores' PM QoS values never read n/a while the bench ran: $(sort -u "$tmp/seen" | paste -sd,)" >&2
  exit 1
}
[[ $fbefore == "$fafter" ]] || {
  echo "FAIL: the fake cores' PM QoS values were $(echo $fbefore) before the bench and $(echo $fafter) after" >&2
  exit 1
}
echo "ok: fake cores: n/a while the bench ran, put back as found ($(echo $fbefore)) after"

# 2. The machine's own files.
qos() { cat /sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us /sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us 2>/dev/null || true; }
before=$(qos)
run_bench
after=$(qos)
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
