#!/usr/bin/env bash
# The bench's instruction count (tests/bench_instructions.sh) where it must
# fail, and its parser (tests/callgrind_per_exchange.py) on hand-made
# dumps.
#
#   tests/bench_instructions_test.sh
#
# bench_smoke runs the script end to end on a healthy machine, so its
# failure paths had been tried only by hand. Against stand-ins (a bench
# server that cannot size the workload, or that sizes it and then waits
# for a client, as the real one does for 60 s; a valgrind that starts no
# client; callgrind_control), each case checks that the script fails,
# saying what went wrong, within 15 s: a bench run whose count failed must
# say why, not print a figure from a dump that is not there, nor wait out
# the server's limit.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

echo "== callgrind_per_exchange.py on hand-made dumps"
python3 "$here/callgrind_per_exchange_test.py" || fails=$((fails + 1))

# Stand-ins on PATH: valgrind runs no client (as one that failed to start:
# it says so and exits 1), callgrind_control finds nothing to dump.
mkdir -p "$tmp/path" "$tmp/bin"
cat >"$tmp/path/valgrind" <<'EOF'
#!/bin/sh
echo "stand-in valgrind: no client started" >&2
exit 1
EOF
cat >"$tmp/path/callgrind_control" <<'EOF'
#!/bin/sh
echo "stand-in callgrind_control: no callgrind run" >&2
exit 1
EOF
chmod +x "$tmp/path/valgrind" "$tmp/path/callgrind_control"

# server MODE: the stand-in bench server. MODE fails: --sizes exits 1;
# garbles / garbles-feedback: --sizes prints what is not infer=N
# feedback=N; serves: --sizes answers, and a run prints a URL, then waits
# 30 s for a client that never comes, as the real server does (60 s).
server() {
  cat >"$tmp/bin/plugrl-bench-server" <<EOF
#!/bin/sh
mode=$1
EOF
  cat >>"$tmp/bin/plugrl-bench-server" <<'EOF'
case "$1:$mode" in
--sizes:fails) echo "stand-in: cannot size" >&2; exit 1 ;;
--sizes:garbles) echo "infer=lots"; exit 0 ;;
--sizes:garbles-feedback) echo "infer=362 feedback=x"; exit 0 ;;
--sizes:serves) echo "infer=362 feedback=420"; exit 0 ;;
esac
echo "bench server: ws://127.0.0.1:9 (stand-in)"
exec sleep 30
EOF
  chmod +x "$tmp/bin/plugrl-bench-server"
}

# fails_saying NAME WANT [VAR=VALUE...]: runs the script against the
# stand-ins, with short windows (or the VARs given); it must exit 1 within
# 15 s, saying WANT on its error output.
fails_saying() {
  local name=$1 want=$2 rc=0 start=$SECONDS took
  shift 2
  echo "== $name"
  env PATH="$tmp/path:$PATH" PLUGRL_BENCH_INSTRUCTIONS_WARMUP=1 PLUGRL_BENCH_INSTRUCTIONS_SECONDS=1 "$@" \
    timeout -s KILL 40 "$here/bench_instructions.sh" "$tmp/bin" >"$tmp/out" 2>"$tmp/err" || rc=$?
  took=$((SECONDS - start))
  if [[ $rc -ne 1 || $took -gt 15 ]] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL: $name: exit $rc after $took s (want 1 within 15 s, saying \"$want\"); it said:" >&2
    cat "$tmp/out" "$tmp/err" >&2
    fails=$((fails + 1))
    return
  fi
  echo "ok: exit 1 after $took s: $(grep -F -- "$want" "$tmp/err" | head -n 1)"
}

server fails
fails_saying "the workload's sizes unknown" "plugrl-bench-server --sizes failed"
server garbles
fails_saying "the workload's sizes garbled" 'said "infer=lots", not infer=N feedback=N'
server garbles-feedback
fails_saying "the feedback's size garbled" 'said "infer=362 feedback=x", not infer=N feedback=N'
server serves
# The client never connects (valgrind ran nothing): no dump, and the
# script names the dump it lacks and what the client said, without
# waiting for the server to give up on its client.
fails_saying "no client, no dump" "libplugrl: callgrind left no second dump"
grep -qF "stand-in valgrind: no client started" "$tmp/err" || {
  echo "FAIL: no client, no dump: the client's own output is not in the report" >&2
  fails=$((fails + 1))
}
# Bad windows are refused before anything runs.
fails_saying "a window that is no whole number of seconds" \
  'PLUGRL_BENCH_INSTRUCTIONS_SECONDS wants whole seconds, 1 to 99, got "0.5"' PLUGRL_BENCH_INSTRUCTIONS_SECONDS=0.5

if [[ $fails -gt 0 ]]; then
  echo "FAIL: $fails check(s) of tests/bench_instructions.sh failed" >&2
  exit 1
fi
echo "PASS: tests/bench_instructions.sh fails where it must, saying why; its parser reads callgrind's format right"
