#!/usr/bin/env bash
# The rclcpp signal problem, many times (tests/cpp/signals.cpp):
#
#   signals.sh PLUGRL_BIN SIGNALS_BIN [RUNS]
#
# starts one `PLUGRL_BIN serve --action-dim 3 --horizon 4` (through
# tests/run_with_server.sh) and runs SIGNALS_BIN URL RUNS times (20 by
# default) against it, each killed after SIGNALS_TIMEOUT seconds (20). It
# prints one line per run and a summary, and fails if any run crashed, hung
# or exited non-zero. PLUGRL_NO_FIX=1 in the environment reaches the
# program, which then skips plugrl_fix_signal_handlers() (not part of
# CTest; it showed the crash the fix prevents until plugrl_open began to
# add SA_ONSTACK to the handlers installed before it).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ ${1:-} == --runs-against ]]; then
  # Inner mode, under run_with_server.sh: --runs-against SIGNALS_BIN RUNS URL
  bin=$2 runs=$3 url=$4
  per_run=${SIGNALS_TIMEOUT:-20}
  ok=0 crashed=0 hung=0 failed=0
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  for i in $(seq "$runs"); do
    t0=$(date +%s.%N)
    rc=0
    timeout -k 2 "$per_run" "$bin" "$url" >"$out" 2>&1 || rc=$?
    took=$(awk "BEGIN{printf \"%.2f\", $(date +%s.%N)-$t0}")
    if [[ $rc -eq 0 ]]; then
      ok=$((ok + 1))
      what="ok"
    elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
      hung=$((hung + 1))
      what="HUNG (killed after ${per_run}s)"
    elif [[ $rc -gt 128 ]]; then
      crashed=$((crashed + 1))
      what="CRASHED: signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null || echo '?'))"
    else
      failed=$((failed + 1))
      what="FAILED: exit $rc"
    fi
    echo "run $i: $what in ${took}s: $(grep '^signals:' "$out" | tail -n 1)"
    if [[ $rc -ne 0 ]]; then
      tail -n 30 "$out" | sed 's/^/    /'
    fi
  done
  echo "signals: $runs runs${PLUGRL_NO_FIX:+ (PLUGRL_NO_FIX=$PLUGRL_NO_FIX)}: $ok ok, $crashed crashed, $hung hung, $failed failed"
  [[ $ok -eq $runs ]]
  exit
fi

if [[ $# -lt 2 ]]; then
  echo "usage: $0 PLUGRL_BIN SIGNALS_BIN [RUNS]" >&2
  exit 2
fi
plugrl=$1 bin=$2 runs=${3:-20}
if [[ ! -x $bin ]]; then
  echo "$0: $bin is not an executable (build it with ./build.sh)" >&2
  exit 2
fi
exec "$here/run_with_server.sh" "$plugrl" --action-dim 3 --horizon 4 --quiet -- "$0" --runs-against "$bin" "$runs"
