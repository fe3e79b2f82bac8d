#!/usr/bin/env bash
# The library on real-time threads: the bench client under SCHED_FIFO
# (chrt -f 50), pinned to the server's core and to a core of its own, with
# the 16-env image workload and the 1-env workload, must finish its run.
# Before the library created the Go runtime's threads SCHED_OTHER, the
# image workload on the server's core hung in every run.
#
#   sched_fifo.sh BIN_DIR
#
# Skipped (exit 0, with a message) where chrt -f is not permitted.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${1:?usage: sched_fifo.sh BIN_DIR}
if ! chrt -f 50 true 2>/dev/null; then
  echo "sched_fifo.sh: SKIPPED: chrt -f 50 is not permitted here (needs CAP_SYS_NICE or an rtprio limit)"
  exit 0
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
run() { # CLIENT_CORE ENVS CAMS IMG STATE
  local core=$1 envs=$2 cams=$3 img=$4 state=$5 url=
  : >"$tmp/server.out" # see wait_url
  taskset -c 0 "$bin/plugrl-bench-server" --envs "$envs" --warmup 0.2s --seconds 0.5s \
    >"$tmp/server.out" 2>"$tmp/server.err" &
  spid=$!
  url=$(wait_url "$tmp/server.out" "$spid") || {
    echo "FAIL: the bench server did not start: $(cat "$tmp/server.err")"
    exit 1
  }
  local rc=0
  timeout -s KILL 30 taskset -c "$core" chrt -f 50 "$bin/plugrl_bench_client" --url "$url" --envs "$envs" \
    --cams "$cams" --img "$img" --state "$state" >"$tmp/client.out" 2>&1 || rc=$?
  wait "$spid" 2>/dev/null || true
  spid=
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: SCHED_FIFO client on core $core, $envs envs x $cams cams: exit $rc (137: hung, killed after 30 s)"
    cat "$tmp/client.out"
    fail=1
  else
    echo "ok   SCHED_FIFO client on core $core, $envs envs x $cams cams: $(tail -n 1 "$tmp/client.out")"
  fi
}

for core in 0 $([[ $cores -gt 1 ]] && echo 1); do
  run "$core" 16 2 224 32
  run "$core" 1 0 224 8
done
exit $fail
