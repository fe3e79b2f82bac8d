#!/usr/bin/env bash
# The C boundary under the sanitizers: libplugrl built instrumented, and
# the C and C++ tests run through it against the real servers.
#
#   sanitizers.sh race|asan|msan REPO_ROOT BIN_DIR CONFORMANCE
#
# race: the library built with Go's race detector, so that C threads
#   calling in at once (threads.c, churn.c, signals.cpp's handlers, the
#   runner's and the client's calls from other threads) are checked for
#   data races inside the library, which `go test -race` cannot reach: its
#   callers are Go. The detector takes every crossing between Go and C as
#   a synchronisation (runtime/cgocall.go), so it sees a race between two
#   calls that overlap, and only between accesses with no call into C
#   between them in either thread: what two C threads calling in at once
#   do to the library's shared state, not what a C caller's own missing
#   lock does to its calls in turn. The race runtime cannot map the shadow of a library
#   loaded high in the address space (Go's c-shared build fails at start
#   with "ThreadSanitizer failed to allocate"), so the library is built as
#   a c-archive and linked into non-PIE programs.
# asan: the library built with Go's -asan, which checks the Go code's every
#   load and store against AddressSanitizer's shadow: a read of a caller's
#   array or a write to a caller's buffer one byte past its end is caught
#   where a plain build would read or corrupt the caller's memory
#   silently. With the purego tag, so that the copies of observation
#   arrays run in instrumented Go instead of the unchecked AVX2 assembly.
#   The programs are built with -fsanitize=address,undefined.
# msan: the library built with Go's -msan (and purego) and the C programs
#   with clang's -fsanitize=memory: the library's every read of a caller's
#   memory is checked for bytes the caller never wrote (options, arrays,
#   names), and the programs' every use of what the library returned
#   (statuses, actions, flags, metadata, statistics, messages) for bytes
#   the library never wrote. MemorySanitizer needs every part of a
#   program instrumented but the C library, which it intercepts; Debian's
#   libstdc++ is not, so only the C programs run (misuse, threads, churn,
#   the C probe client, hostile): the C++ wrapper is header-only over the
#   same calls.
#
# Each library is also built with GOEXPERIMENT=cgocheck2: every store of a
# Go pointer into memory that is not Go's (a caller's struct, a C buffer)
# is a fatal error, which fails the program's run. The design promises that
# C never holds a Go pointer; this checks it on every path the programs
# take. No C input can make the library do that, so there is no canary for
# it: the build's own record (go version -m) must show the experiment.
#
# Each run's sanitizer reports go to files (log_path); any report fails the
# run, whatever the program's exit status. The memory, CPU and time bounds
# of churn.c and of some hostile cases are the sanitizers' own there, and
# are skipped (listed below). Needs Go, cc, c++ (msan: clang) and the servers in BIN_DIR
# (plugrl, plugrl-hostile: ./build.sh). Exits 77 (skipped) where the toolchain
# cannot build a sanitized program.
set -euo pipefail

if [[ $# -ne 4 || ($1 != race && $1 != asan && $1 != msan) ]]; then
  echo "usage: $0 race|asan|msan REPO_ROOT BIN_DIR CONFORMANCE" >&2
  exit 2
fi
mode=$1
root=$(cd "$2" && pwd)
native=$(cd "$3" && pwd)
checker=$4
# shellcheck source=tests/lib.sh
. "$root/tests/lib.sh"
require_built "$native" plugrl plugrl-hostile plugrl-bench-server
tmp=$(mktemp -d)
trap 'bg_server_stop; rm -rf "$tmp"' EXIT
# Ctrl-C ends the whole run (a child that catches it and exits would
# otherwise count as one failed step, and the run would go on).
trap 'exit 130' INT
trap 'exit 143' TERM
bin=$tmp/bin
reports=$tmp/reports
mkdir -p "$bin" "$reports"

# cgo's objects are cached by the flags, not by headers outside the
# package: the headers' hash keys them, as build.sh does.
headers=$(cat "$root/include/plugrl.h" "$root"/capi/*.h | sha256sum | cut -c1-16)
export CGO_CFLAGS="-O1 -g -DPLUGRL_HEADERS_HASH=$headers"

cc=cc cxx=c++
case $mode in
race)
  cflags=(-O1 -g -no-pie)
  lib=("$tmp/libplugrl.a" -lpthread -lm)
  build_lib() {
    (cd "$root" && GOEXPERIMENT=cgocheck2 go build -race -p 2 -buildmode=c-archive -o "$tmp/libplugrl.a" ./capi)
  }
  export GORACE="log_path=$reports/race"
  ;;
asan)
  cflags=(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  # By its path: the library has no soname, so the programs name this file
  # and no other. (-l:libplugrl.so with an rpath left it to the search,
  # in which LD_LIBRARY_PATH comes before the rpath: with build/lib in it,
  # as tests/rust.sh sets it, the programs ran the plain library, and the
  # run passed unchecked.)
  lib=("$tmp/libplugrl.so" -lpthread -lm)
  build_lib() {
    (cd "$root" && GOEXPERIMENT=cgocheck2 go build -asan -tags purego -p 2 -buildmode=c-shared -o "$tmp/libplugrl.so" ./capi)
  }
  # Leaks are not checked: the Go runtime's threads and heap live until
  # the process ends, by design.
  export ASAN_OPTIONS="detect_leaks=0:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan"
  ;;
msan)
  # Go's -msan needs clang, for the library's own C (capi/helpers.c,
  # runtime/cgo) as for the programs. Origins tracked, so that a report
  # names where the bytes came from.
  cc=clang cxx=clang++
  export CC=clang
  cflags=(-O1 -g -fno-omit-frame-pointer -fsanitize=memory -fsanitize-memory-track-origins)
  lib=("$tmp/libplugrl.so" -lpthread -lm)
  build_lib() {
    (cd "$root" && GOEXPERIMENT=cgocheck2 go build -msan -tags purego -p 2 -buildmode=c-shared -o "$tmp/libplugrl.so" ./capi)
  }
  export MSAN_OPTIONS="log_path=$reports/msan"
  # The shadow and origins of an 8 MiB action are 16 MiB more: the hostile
  # memory cases' 64 MB bound would measure MemorySanitizer.
  export HOSTILE_NO_MEMORY_BOUND=1
  ;;
esac

# Skipped, not failed, where this toolchain has no such sanitizer (a
# compiler without libtsan/libasan, no clang or no MemorySanitizer runtime
# (Debian: clang libclang-rt-dev), a Go without cgo).
probe=$tmp/probe.c
echo 'int main(void) { return 0; }' >"$probe"
if ! "$cc" "${cflags[@]}" "$probe" -o "$tmp/probe" 2>"$tmp/probe.err"; then
  echo "SKIPPED: sanitizers.sh $mode: $cc cannot build with ${cflags[*]}: $(head -n 3 "$tmp/probe.err")"
  exit 77
fi

echo "== libplugrl ($mode)"
if ! build_lib >"$tmp/build.log" 2>&1; then
  if grep -q -e 'not supported' -e 'requires cgo' "$tmp/build.log"; then
    echo "SKIPPED: sanitizers.sh $mode: $(head -n 3 "$tmp/build.log")"
    exit 77
  fi
  cat "$tmp/build.log" >&2
  exit 1
fi

compile() { # NAME SOURCE: the program, as CMakeLists.txt builds it, with the sanitizer
  local name=$1 src=$2 cc_=$cc std=-std=c99
  if [[ $src == *.cpp ]]; then
    cc_=$cxx std=-std=c++17
  fi
  "$cc_" "$std" -Wall -Wextra -pedantic -Werror "${cflags[@]}" -I"$root/include" "$root/$src" "${lib[@]}" -o "$bin/$name"
}
# The positive control (tests/c/sanitizer_canary.c): a misuse that the
# instrumented library must report. If it is not reported where run looks,
# the sanitizer is not watching (its runtime not loaded, a plain libplugrl
# loaded instead, reports not written there) and would report nothing
# below either: that fails, it does not pass.
compile sanitizer_canary tests/c/sanitizer_canary.c
case $mode in
race) canary='WARNING: DATA RACE' ;;
asan) canary='ERROR: AddressSanitizer' ;;
msan) canary='in __msan_read_go' ;; # the library's Go code read it
esac
"$bin/sanitizer_canary" "$mode" >"$tmp/canary.out" 2>&1 || true
if ! grep -qs "$canary" "$reports"/*; then
  cat "$tmp/canary.out" >&2
  echo "FAIL: the $mode sanitizer did not report the canary (tests/c/sanitizer_canary.c) in $reports: it is not watching" >&2
  exit 1
fi
rm -f "$reports"/*
echo "== the canary: reported, as it must be"
# The Go build record of the library (for the race build's archive, in
# the program linked with it).
record=$tmp/libplugrl.so
[[ $mode == race ]] && record=$bin/sanitizer_canary
if ! go version -m "$record" 2>/dev/null | grep -q 'GOEXPERIMENT=.*cgocheck2'; then
  echo "FAIL: the $mode library was not built with GOEXPERIMENT=cgocheck2 (go version -m $record)" >&2
  exit 1
fi
echo "== built with cgocheck2: a Go pointer stored in C memory is fatal"
if [[ ${PLUGRL_SANITIZERS_CANARY_ONLY:-0} == 1 ]]; then
  exit 0 # tests/sanitizers_selftest.sh
fi

echo "== the C and C++ programs ($mode)"
compile misuse tests/c/misuse.c
compile threads tests/c/threads.c
compile churn tests/c/churn.c
compile hostile tests/c/hostile.c
compile plugrl_probe_client_c examples/c/probe_client.c
probe_clients=(plugrl_probe_client_c)
# The C++ programs, but under msan (an uninstrumented libstdc++: its
# reports would be its own, as streaming a std::string).
cpp=1
[[ $mode == msan ]] && cpp=
if [[ -n $cpp ]]; then
  compile hpp_test tests/cpp/hpp_test.cpp
  compile signals tests/cpp/signals.cpp
  compile plugrl_probe_client examples/cpp/probe_client.cpp
  compile plugrl_bench_client bench/bench_client.cpp
  probe_clients+=(plugrl_probe_client)
fi
# The MuJoCo cartpole, the template users copy, where MuJoCo is installed
# (Debian's libmujoco-dev; MuJoCo itself is not instrumented).
mujoco=
if [[ -n $cpp ]] && echo '#include <mujoco/mujoco.h>' | c++ -x c++ -E - >/dev/null 2>&1; then
  lib+=(-lmujoco)
  compile plugrl_mujoco_cartpole examples/cpp/mujoco_cartpole.cpp
  mujoco=$bin/plugrl_mujoco_cartpole
fi
for exe in plugrl plugrl-hostile plugrl-bench-server; do
  ln -sfn "$native/$exe" "$bin/$exe"
done
server=$native/plugrl

failed=()
# run NAME CMD...: CMD must succeed and leave no sanitizer report.
run() {
  local name=$1 found
  shift
  echo "== $name"
  if ! "$@"; then
    failed+=("$name")
  fi
  found=$(find "$reports" -type f ! -name '*.seen' | sort)
  if [[ -n $found ]]; then
    echo "FAIL: $name: the $mode sanitizer reported:" >&2
    while read -r f; do
      cat "$f" >&2
      mv "$f" "$f.seen"
    done <<<"$found"
    failed+=("$name (report)")
  fi
}

run misuse "$root/tests/run_with_server.sh" "$server" --action-dim 2 --features reuse-feedback-obs -- "$bin/misuse"
run threads "$root/tests/run_with_server.sh" "$server" --action-dim 3 --horizon 4 --features reuse-feedback-obs \
  --policy probe -- "$bin/threads"
if [[ -n $cpp ]]; then
  run hpp "$root/tests/run_with_server.sh" "$server" --action-dim 3 --horizon 4 --action-dtype float64 \
    --features reuse-feedback-obs --policy probe --stop-after 40 -- "$bin/hpp_test"
  run "hpp width-change" "$root/tests/run_with_server.sh" "$native/plugrl-hostile" --scenario width-change -d 3 \
    -- "$bin/hpp_test" --width-change
fi
# churn's bounds on resident memory measure the sanitizer's shadow and
# per-thread state, not the library: --no-memory-bound.
run churn "$root/tests/run_with_server.sh" "$server" --action-dim 2 --horizon 1 --features reuse-feedback-obs \
  -- "$bin/churn" --quick --no-memory-bound
run "churn reconnects" "$root/tests/run_with_server.sh" "$server" --action-dim 2 --horizon 1 --feedback-timeout 10ms \
  -- "$bin/churn" --no-memory-bound --reconnects 240
[[ -n $cpp ]] && run signals "$root/tests/signals.sh" "$server" "$bin/signals" 5
run "probe clients on SIGINT and SIGTERM" "$root/tests/probe_signals.sh" "$server" "$native/plugrl-hostile" \
  "${probe_clients[@]/#/"$bin"/}" # quoted: bash 5.2 takes an & in $bin for the match
if [[ -n $mujoco ]]; then
  run "the MuJoCo cartpole" "$root/tests/cartpole_client.sh" "$server" "$native/plugrl-hostile" "$mujoco"
elif [[ -n $cpp ]]; then
  echo "== the MuJoCo cartpole: skipped, c++ finds no <mujoco/mujoco.h> (Debian: libmujoco-dev)"
fi
# audit_ledgers FILE...: every ledger named must audit clean (the reference
# server's audit); prints how many there were. A pattern that matched
# nothing counts none.
audit_ledgers() {
  local f n=0
  for f in "$@"; do
    [[ -e $f ]] || continue
    "$native/plugrl" ledger audit "$f" >"$tmp/audit.out" 2>&1 || {
      cat "$tmp/audit.out" >&2
      return 1
    }
    n=$((n + 1))
  done
  echo "$n"
}

# conformance CLIENT: the checker's scenarios, every connection recording
# a full ledger (the caller's copies of what was sent and received, the
# writer's thread), each of which must then audit clean.
conformance() {
  local client=$1 dir=$tmp/ledgers-$1 n
  mkdir -p "$dir"
  PLUGRL_LEDGER=$dir PLUGRL_LEDGER_LEVEL=full "$root/tests/conformance.sh" "$checker" "$bin/$client" \
    --features reuse-feedback-obs --action-dtype float64 || return 1
  n=$(audit_ledgers "$dir"/*.ledger) || return 1
  if [[ $n -eq 0 ]]; then
    echo "FAIL: $client wrote no ledger in $dir" >&2
    return 1
  fi
  echo "$client: $n full ledgers audit clean"
}
if [[ -e $checker ]]; then
  for client in "${probe_clients[@]}"; do
    run "conformance $client, full ledgers" conformance "$client"
  done
else
  echo "== conformance: skipped, plugrl-conformance not found at $checker"
fi

# bench NAME LEDGER_LEVEL CONNS ENVS CAMS IMG STATE: the bench client
# against the bench server for a 1 s window, CONNS handles on as many
# threads, recording a ledger at LEDGER_LEVEL (or none for -), which the
# reference server's audit then reads back clean.
bench() {
  local level=$2 conns=$3 envs=$4 cams=$5 img=$6 state=$7 rc=0 ledger=()
  bg_server_start "$tmp" "$native/plugrl-bench-server" --envs "$envs" --conns "$conns" \
    --warmup 0.2s --seconds 1s || return 1
  rm -f "$tmp"/bench.ledger*
  if [[ $level != - ]]; then
    ledger=(env PLUGRL_LEDGER="$tmp/bench.ledger" PLUGRL_LEDGER_LEVEL="$level")
  fi
  timeout -s KILL 120 "${ledger[@]}" "$bin/plugrl_bench_client" --url "$url" --envs "$envs" --cams "$cams" \
    --img "$img" --state "$state" --handles "$conns" --window-file "$tmp/server.out" >"$tmp/client.out" 2>&1 || rc=$?
  wait "$spid" 2>/dev/null || rc=1
  spid=
  if [[ $rc -ne 0 ]]; then
    cat "$tmp/client.out" "$tmp/server.err" >&2
    return 1
  fi
  local said=
  if [[ $level != - ]]; then
    local n
    n=$(audit_ledgers "$tmp"/bench.ledger*) || return 1
    if [[ $n -ne $conns ]]; then
      echo "FAIL: $conns handles wrote $n ledgers" >&2
      return 1
    fi
    said="; $n $level ledgers audit clean"
  fi
  echo "$1: $(grep '^exchanges/s' "$tmp/server.out")$said"
}
# LARGE: 16 envs of two 224x224 cameras, 4.8 MB an infer through the
# instrumented copy; 16 handles on 16 threads, each with a ledger (the
# caller's records and the writer's thread).
if [[ -n $cpp ]]; then
  run "bench LARGE" bench "LARGE" - 1 16 2 224 32
  run "bench 16 handles, full ledgers" bench "16 handles" full 16 1 0 0 8
fi

# The hostile cases but for those that bound memory or CPU, which are the
# sanitizer's there: rlimit (AddressSanitizer reserves terabytes of
# address space, over any RLIMIT_AS), idle-cpu, and tokens (4.2 million
# opens, minutes instrumented); and vanish-idle, 4.5 s of sleep whose
# calls are vanish's (a connection the poller ended, then a reconnect),
# run by CTest hostile and hostile_tls.
cases=()
if list=$(hostile_cases "$bin/hostile" rlimit idle-cpu tokens vanish-idle); then
  mapfile -t cases <<<"$list"
  # The garble cases with fewer draws (HOSTILE_SHORT): instrumented, each
  # took 4-6 s over wss://, a fifth of the run.
  export HOSTILE_SHORT=1
  # Deadlines within 1 s of their bound, not 250 ms: instrumented and
  # sharing the cores with another test (ctest -j 2), a case's own
  # slowness is most of its overshoot (no-read: 896 ms against 300 in one
  # run); CTest hostile and hostile_tls hold the 250 ms.
  export HOSTILE_OVERSHOOT_LIMIT_MS=1000
  # And the interrupt cases' p99 within 50 ms (the slowest within 500),
  # not 10: an interrupt passes through two threads (the watcher's, the
  # waiting call's) that each wait for a core, and instrumented code on
  # each (race, over wss://, beside four busy loops: p99 12.3 ms of 90 in
  # one run). A broken interrupt
  # still fails: it waits the server's 60 s, and one left to the poller's
  # look a second. CTest hostile and hostile_tls hold the 10 ms.
  export HOSTILE_INTERRUPT_LIMIT_US=50000
  run "hostile (${#cases[@]} cases)" "$root/tests/hostile.sh" "$bin" "${cases[@]}"
  # Over wss://: the TLS transport's own read and write paths.
  run "hostile over wss:// (${#cases[@]} cases)" "$root/tests/hostile.sh" --tls "$bin" "${cases[@]}"
  unset HOSTILE_SHORT HOSTILE_OVERSHOOT_LIMIT_MS HOSTILE_INTERRUPT_LIMIT_US
else
  failed+=(hostile)
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'FAIL: under the %s sanitizer: %s\n' "$mode" "${failed[*]}" >&2
  exit 1
fi
if [[ -n $cpp ]]; then
  echo "PASS: misuse, threads, hpp, churn, signals, the probe clients, ${mujoco:+the MuJoCo cartpole, }the bench client and ${#cases[@]} hostile cases (ws:// and wss://) under the $mode sanitizer, no report"
else
  echo "PASS: misuse, threads, churn, the C probe client and ${#cases[@]} hostile cases (ws:// and wss://) under the $mode sanitizer, no report"
fi
