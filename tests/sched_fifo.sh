#!/usr/bin/env bash
# The library on real-time threads: the bench client under SCHED_FIFO
# (chrt -f 50), pinned to the server's core and to a core of its own, with
# the 16-env image workload and the 1-env workload, must finish its run.
# Before the library created the Go runtime's threads SCHED_OTHER, the
# image workload on the server's core hung in every run.
#
# The image workload once more with the memory locked (mlockall), as
# real-time processes do; skipped with a note where the kernel refuses.
#
# Then, the 1-env workload on a core of its own for longer: no exchange may
# take half a second. Go 1.26's sysmon briefly blocks a thread's return
# from a system call; a real-time client that preempted it there spun
# until the kernel's real-time throttling let sysmon run: a stall of
# 0.90-0.95 s every few seconds, until the library ran sysmon at the
# caller's priority. So the client's sysmon must be SCHED_FIFO too (the one
# real-time thread besides the client's own, seen asleep in nanosleep).
#
# Then, 64 SCHED_FIFO threads of one process open a client each at once on
# one core and exchange: each thread's first call into Go waited for a
# spare runtime M in a loop of 1 us sleeps, 60 of them at a time, and the
# handshakes starved until the server gave up, until first calls were
# made one at a time (capi/exports.c).
#
# Last, a day of handles under SCHED_FIFO on one core (tests/c/churn.c:
# thousands of sessions, from one thread and from waves of 16 threads):
# no session may take half a second. The collection the library runs after
# a close scanned the stacks of other real-time callers, which spun against
# the preempted scanner until the kernel's throttling: a session in a few
# hundred took 0.95-2 s, until collections waited for the library to be
# idle and held calls at the door meanwhile (capi/helpers.c).
#
#   sched_fifo.sh BIN_DIR
#
# Skipped (exit 77, CTest's SKIP_RETURN_CODE, with a message) where chrt -f
# is not permitted: an exit 0 there counted as a pass of checks never run.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${1:?usage: sched_fifo.sh BIN_DIR}
if ! chrt -f 50 true 2>/dev/null; then
  echo "sched_fifo.sh: SKIPPED: chrt -f 50 is not permitted here (needs CAP_SYS_NICE or an rtprio limit)"
  exit 77
fi
cores=$(nproc)
tmp=$(mktemp -d)
spid=
cleanup() {
  [[ -n $spid ]] && kill "$spid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
# start_server COMMAND...: COMMAND (the bench server, maybe under chrt) on
# core 0; sets url (the caller's local) and spid.
start_server() {
  : >"$tmp/server.out" # see wait_url
  taskset -c 0 "$@" >"$tmp/server.out" 2>"$tmp/server.err" &
  spid=$!
  url=$(wait_url "$tmp/server.out" "$spid") || {
    echo "FAIL: the bench server did not start: $(cat "$tmp/server.err")"
    exit 1
  }
}

run() { # CLIENT_CORE ENVS CAMS IMG STATE [MLOCKALL]
  local core=$1 envs=$2 cams=$3 img=$4 state=$5 lock=${6:-0} url= what
  what="SCHED_FIFO client on core $core, $envs envs x $cams cams"
  [[ $lock == 1 ]] && what+=", memory locked (mlockall)"
  start_server "$bin/plugrl-bench-server" --envs "$envs" --warmup 0.2s --seconds 0.5s
  local rc=0
  timeout -s KILL 30 taskset -c "$core" chrt -f 50 "$bin/plugrl_bench_client" --url "$url" --envs "$envs" \
    --cams "$cams" --img "$img" --state "$state" --mlockall "$lock" >"$tmp/client.out" 2>&1 || rc=$?
  wait "$spid" 2>/dev/null || true
  spid=
  if [[ $rc -ne 0 && $lock == 1 ]] && grep -q 'mlockall(MCL_CURRENT | MCL_FUTURE): ' "$tmp/client.out"; then
    echo "note $what: SKIPPED, the kernel refused the lock: $(grep -m 1 'mlockall(' "$tmp/client.out")"
  elif [[ $rc -ne 0 ]]; then
    echo "FAIL: $what: exit $rc (137: hung, killed after 30 s)"
    cat "$tmp/client.out"
    fail=1
  else
    echo "ok   $what: $(grep -m 1 '^cpu_us_per_exchange' "$tmp/client.out")" \
      "$(grep -m 1 '^memory' "$tmp/client.out" || true)"
  fi
}

for core in 0 $([[ $cores -gt 1 ]] && echo 1); do
  run "$core" 16 2 224 32
  run "$core" 1 0 224 8
done
# A real-time process usually locks its memory: every mapping the runtime
# makes is then made resident as it is made (thread stacks, heap), on the
# loop's own core here.
run 0 16 2 224 32 1

# stalls CORE: a 3 s SMALL run with the client under SCHED_FIFO on CORE;
# fails on an exchange of 0.5 s or more, or if sysmon is not real-time.
stalls() {
  local core=$1 url= cpid rc=0 max
  start_server "$bin/plugrl-bench-server" --envs 1 --warmup 0.5s --seconds 3s
  timeout -s KILL 30 taskset -c "$core" chrt -f 50 "$bin/plugrl_bench_client" --url "$url" --envs 1 \
    --state 8 >"$tmp/client.out" 2>&1 &
  cpid=$!
  sleep 1
  # The client's real-time threads: its main thread, and sysmon (the
  # bench's CPU sampler, bench/bench_cpu.hpp, is the bench's, not the
  # library's). sysmon ticks in nanosleep while a call waits in a system
  # call.
  local rt=() tid asleep=0 pid
  pid=$(pgrep -P "$cpid" | head -n 1) || pid= # timeout's child: the client
  for tid in $(ls "/proc/${pid:-0}/task" 2>/dev/null); do
    [[ $tid == "$pid" ]] && continue
    [[ $(cat "/proc/$pid/task/$tid/comm" 2>/dev/null) == bench-sampler ]] && continue
    [[ $(chrt -p "$tid" 2>/dev/null) == *SCHED_FIFO* ]] && rt+=("$tid")
  done
  if [[ ${#rt[@]} -eq 1 ]]; then
    for _ in $(seq 200); do
      [[ $(cut -d' ' -f1 "/proc/$pid/task/${rt[0]}/syscall" 2>/dev/null) == "$nanosleep" ]] && { asleep=1; break; }
      sleep 0.005
    done
  fi
  wait "$cpid" || rc=$?
  wait "$spid" 2>/dev/null || true
  spid=
  max=$(sed -n 's/^latency_us turnaround .* max \([0-9.]*\)$/\1/p' "$tmp/server.out")
  if [[ $rc -ne 0 || -z $max ]]; then
    echo "FAIL: SCHED_FIFO SMALL client on core $core: exit $rc (137: hung, killed after 30 s)"
    cat "$tmp/client.out"
    fail=1
  elif [[ ${#rt[@]} -ne 1 || $asleep -ne 1 ]]; then
    echo "FAIL: SCHED_FIFO SMALL client on core $core: real-time threads besides its own: ${rt[*]:-none}" \
      "(want exactly one, sysmon, seen in nanosleep: $asleep)"
    fail=1
  elif awk -v m="$max" 'BEGIN {exit !(m >= 500000)}'; then
    echo "FAIL: SCHED_FIFO SMALL client on core $core: an exchange took $max us (a stall behind sysmon?)"
    fail=1
  else
    echo "ok   SCHED_FIFO SMALL client on core $core for 3 s: sysmon real-time, longest exchange $max us"
  fi
}

# The system call number of nanosleep, where this check knows it.
case $(uname -m) in
  x86_64) nanosleep=35 ;;
  aarch64) nanosleep=101 ;;
  *) nanosleep= ;;
esac
if [[ -n $nanosleep ]]; then
  for _ in 1 2; do stalls "$([[ $cores -gt 1 ]] && echo 1 || echo 0)"; done
else
  echo "sched_fifo.sh: the sysmon check knows nanosleep's number only on x86_64 and aarch64: skipped"
fi

# many CORE: 64 SCHED_FIFO handles on CORE open at once and run.
many() {
  local core=$1 url= rc=0
  start_server chrt -f 50 "$bin/plugrl-bench-server" --envs 1 --conns 64 --warmup 0.5s --seconds 1s
  timeout -s KILL 60 taskset -c "$core" chrt -f 50 "$bin/plugrl_bench_client" --url "$url" --envs 1 --state 8 \
    --handles 64 >"$tmp/client.out" 2>&1 || rc=$?
  if ! wait "$spid" 2>/dev/null && [[ $rc -eq 0 ]]; then
    rc=1 # the server gave up (a handshake timed out)
  fi
  spid=
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: 64 SCHED_FIFO handles on core $core: exit $rc (137: killed after 60 s)"
    sort "$tmp/client.out" | uniq -c | sort -rn | head -n 3
    head -n 3 "$tmp/server.err"
    fail=1
  else
    echo "ok   64 SCHED_FIFO handles on core $core opened at once and ran: $(grep '^exchanges/s' "$tmp/server.out")"
  fi
}
many "$([[ $cores -gt 1 ]] && echo 1 || echo 0)"
many 0

# churn CORE: tests/c/churn.c under SCHED_FIFO on CORE, against `plugrl
# serve` on core 0; it must pass, and no session may take 0.5 s.
churn() {
  local core=$1 url= rc=0
  start_server "$bin/plugrl" serve --addr 127.0.0.1:0 --action-dim 2 --horizon 1 --features reuse-feedback-obs
  timeout -s KILL 120 taskset -c "$core" chrt -f 50 "$bin/churn" "$url" >"$tmp/churn.out" 2>&1 || rc=$?
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  spid=
  local slowest
  slowest=$(sed -n 's/.*slowest session *\([0-9.]*\) ms$/\1/p' "$tmp/churn.out" | sort -n | tail -n 1)
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: churn under SCHED_FIFO on core $core: exit $rc (137: hung, killed after 120 s)"
    cat "$tmp/churn.out"
    fail=1
  elif [[ -z $slowest ]] || awk -v s="$slowest" 'BEGIN { exit !(s >= 500) }'; then
    echo "FAIL: churn under SCHED_FIFO on core $core: a session took ${slowest:-?} ms (a real-time stall)"
    cat "$tmp/churn.out"
    fail=1
  else
    echo "ok   churn under SCHED_FIFO on core $core: $(tail -n 1 "$tmp/churn.out"); slowest session $slowest ms"
  fi
}
churn "$([[ $cores -gt 1 ]] && echo 1 || echo 0)"
exit $fail
