#!/usr/bin/env bash
# The instructions a SMALL exchange costs each client, counted by
# callgrind: the one measure of the library's own path that this machine's
# noise does not reach (timed runs of the same program differ by tens of
# percent here; these counts by about 1 %).
#
#   tests/bench_instructions.sh BIN_DIR
#
# For each client in turn (libplugrl's plugrl_bench_client; the Go floor,
# plugrl_bench_gofloor, where it was built; the C floor, plugrl_bench_floor
# holding feedback as libplugrl does), SMALL (1 env, state 8, text)
# against plugrl-bench-server on loopback, the client under
# valgrind --tool=callgrind. Callgrind dumps its counts 6 s after the
# client has connected (start-up and warm-up) and again 10 s later: the
# second dump is the steady state. PLUGRL_BENCH_INSTRUCTIONS_WARMUP and
# PLUGRL_BENCH_INSTRUCTIONS_SECONDS change the two (whole seconds; the
# CTest bench_smoke takes 2 and 1). Its instructions, summed over every
# thread of the client's process in user space (the kernel's work is not
# counted), over the exchanges in it (the calls of a function the client
# runs once per exchange: libplugrl's Client.Feedback, the floor's
# send_two; for the Go floor its receive, one per exchange while the
# server's action arrives in one read, as SMALL's 362 bytes do on
# loopback; callgrind miscounts calls of C functions that call into Go)
# are the figure. Beside it, the misses of
# callgrind's simulation of this machine's first-level caches
# (--cache-sim=yes; the code's and the data's, per exchange): how far an
# exchange's code and data outgrow them. The simulation sees user space
# only; on the real core the kernel's code and data share those caches.
# libplugrl's 15 most costly functions follow, each by its own
# instructions per exchange.
#
# Under callgrind a client runs slower (libplugrl's about 25 times, the Go
# floor's about 5, with the cache simulation), and some of its
# work follows the clock rather than the exchanges (the Go runtime's
# background threads; libplugrl's looks before a send, which read the
# socket only when the last read is over 100 us old): the figures are for
# comparing builds and clients under the same settings, and count more
# than a native run executes.
#
# go-floor minus floor-held is what the Go runtime costs a C caller for
# the two calls of an exchange (cgo's way in and out, the system calls'
# entry and exit); libplugrl minus go-floor is libplugrl's own path (see
# docs/PERFORMANCE.md, "Instructions per exchange").
#
# GODEBUG=asyncpreemptoff=1: callgrind fails an assertion on the signal
# the Go runtime preempts goroutines with. Without valgrind (or
# callgrind_control, which comes with it) the script says so and exits 0.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=${1:?usage: tests/bench_instructions.sh BIN_DIR}
warm=${PLUGRL_BENCH_INSTRUCTIONS_WARMUP:-6}
win=${PLUGRL_BENCH_INSTRUCTIONS_SECONDS:-10}
for v in PLUGRL_BENCH_INSTRUCTIONS_WARMUP:"$warm" PLUGRL_BENCH_INSTRUCTIONS_SECONDS:"$win"; do
  [[ ${v#*:} =~ ^[1-9][0-9]?$ ]] || {
    echo "tests/bench_instructions.sh: ${v%%:*} wants whole seconds, 1 to 99, got \"${v#*:}\"" >&2
    exit 1
  }
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  echo "NOTE: valgrind is not installed: no instruction counts"
  exit 0
fi
command -v python3 >/dev/null || {
  echo "tests/bench_instructions.sh: python3 is needed to read callgrind's counts" >&2
  exit 1
}
tmp=$(mktemp -d)
spid= cpid=
cleanup() {
  for p in $cpid $spid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

sizes=$("$bin/plugrl-bench-server" --sizes --envs 1 --cams 0 --img 0 --state 8) || {
  echo "tests/bench_instructions.sh: plugrl-bench-server --sizes failed" >&2
  exit 1
}
read -r ib fb < <(sed 's/infer=\([0-9]*\) feedback=\([0-9]*\).*/\1 \2/' <<<"$sizes")
[[ $ib =~ ^[0-9]+$ && $fb =~ ^[0-9]+$ ]] || {
  echo "tests/bench_instructions.sh: plugrl-bench-server --sizes said \"$sizes\", not infer=N feedback=N" >&2
  exit 1
}

# connected PORT CLIENT_PID: waits up to 60 s for the client under
# callgrind to have its connection to the server on PORT (a Go client
# takes seconds to start under valgrind, more on a loaded machine); the
# server's warm-up counts from there, and so do the dumps. Without ss
# (iproute2) it waits 5 s and says so.
connected() {
  local _
  if ! command -v ss >/dev/null; then
    echo "NOTE: no ss (iproute2): the warm-up counts from 5 s after the client's start" >&2
    sleep 5
    return 0
  fi
  for _ in $(seq 600); do
    kill -0 "$2" 2>/dev/null || return 1
    [[ -n $(ss -Htn state established "( sport = :$1 )" 2>/dev/null) ]] && return 0
    sleep 0.1
  done
  return 1
}

# dump N: asks callgrind for dump N, its answer kept for a failure's report.
dump() {
  callgrind_control -d "$cpid" >"$tmp/dump.$1" 2>&1 || true
}

# count NAME KEY CMD...: runs CMD (a client; --url is appended) under
# callgrind against a fresh server, and prints its steady-state line
# (callgrind_per_exchange.py, with the top functions for libplugrl).
count() {
  local name=$1 key=$2 top=0
  shift 2
  [[ $name == libplugrl ]] && top=15
  : >"$tmp/server.out"
  # The server's window, which opens its warm-up after the connection,
  # ends the run after the second dump.
  timeout -s KILL $((warm + win + 120)) "$bin/plugrl-bench-server" --envs 1 --conns 1 \
    --warmup "$((warm + win + 2))s" --seconds 2s \
    >"$tmp/server.out" 2>"$tmp/server.err" &
  spid=$!
  local url
  url=$(wait_url "$tmp/server.out" "$spid") || {
    echo "tests/bench_instructions.sh: the bench server did not start: $(cat "$tmp/server.err")" >&2
    return 1
  }
  rm -f "$tmp"/cg.out* "$tmp"/dump.*
  # Not under timeout: callgrind_control needs valgrind's own pid. The
  # server's end ends the client; one still running 30 s later is killed.
  GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$tmp/cg.out" \
    "$@" --url "$url" >"$tmp/client.out" 2>&1 &
  cpid=$!
  if connected "${url##*:}" "$cpid"; then
    sleep "$warm"
    dump 1
    sleep "$win"
    dump 2
  else
    # No client to count: the server would wait out its 60 s for one.
    kill "$spid" 2>/dev/null || true
  fi
  wait "$spid" || true
  local _
  for _ in $(seq 300); do
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$cpid" 2>/dev/null || true
  wait "$cpid" || true
  spid= cpid=
  [[ -s $tmp/cg.out.2 ]] || {
    echo "tests/bench_instructions.sh: $name: callgrind left no second dump (the client never connected," \
      "or ended first); callgrind_control said: $(cat "$tmp"/dump.* 2>/dev/null | tr '\n' ' ')" >&2
    echo "its output:" >&2
    tail -n 20 "$tmp/client.out" >&2
    return 1
  }
  local line
  line=$(python3 "$here/callgrind_per_exchange.py" "$tmp/cg.out.2" "$key" "$top") || return 1
  printf '%-11s %s\n' "$name" "$(head -n 1 <<<"$line")"
  tail -n +2 <<<"$line" >"$tmp/top.$name"
}

echo
echo "Instructions and first-level cache misses per SMALL exchange (callgrind, caches simulated: user space, all the client's threads, $win s of steady state)"
count libplugrl 'github.com/plugrl/libplugrl/core/client.(*Client).Feedback' \
  "$bin/plugrl_bench_client" --envs 1 --cams 0 --img 0 --state 8
if [[ -x $bin/plugrl_bench_gofloor ]]; then
  count go-floor main.gf_recv \
    "$bin/plugrl_bench_gofloor" --infer-bytes "$ib" --feedback-bytes "$fb" --chunk 0 --hold 1
else
  echo "go-floor    (not built: no figure)"
fi
count floor-held send_two \
  "$bin/plugrl_bench_floor" --infer-bytes "$ib" --feedback-bytes "$fb" --chunk 0 --hold 1
echo "libplugrl's costliest functions, own instructions per exchange:"
cat "$tmp/top.libplugrl"
