#!/usr/bin/env bash
# libplugrl against the transport floor (`./build.sh bench` runs this after
# building):
#
#   tests/bench.sh BIN_DIR
#
# Environment (the last two are opt-in and make the run several minutes):
#
#   PLUGRL_BENCH_REPS         interleaved repetitions (default 5; an even
#                             count balances the clients' order, below)
#   PLUGRL_BENCH_SECONDS      the measured window in s (default 1.5)
#   PLUGRL_BENCH_TAIL_SECONDS the window of the SMALL cells under
#                             SCHED_FIFO, whose p99.99 is a bound of its
#                             own and needs 100,000 exchanges timed
#                             (default 10, or PLUGRL_BENCH_SECONDS where
#                             that is longer: the slowest such cell here,
#                             split with load, makes 14-25k a second)
#   PLUGRL_BENCH_WARMUP       the warm-up before it in s (default 0.5)
#   PLUGRL_BENCH_FLOOR_CHUNK  the floor's --chunk (default 0: one send per frame)
#   PLUGRL_BENCH_FIFO=1       every cell also with server and client under
#                             SCHED_FIFO (chrt -f 50, both at 50, pinned as
#                             usual); where chrt -f is not permitted, says so
#                             and runs the normal cells only; 0 (the
#                             default) or 1, anything else is refused
#   PLUGRL_BENCH_LOAD=1       every cell also with a low-priority busy loop
#                             on every core (nice 19, absolute, one per core,
#                             each checked to run at nice 19 on its core and
#                             to live through the run) while it runs: a
#                             real-time loop's latency should not care what
#                             low-priority work shares the machine; the cells
#                             say other+load and fifo+load; 0 or 1
#   PLUGRL_BENCH_MLOCKALL=1   both clients lock their memory first
#                             (--mlockall 1: mlockall(MCL_CURRENT |
#                             MCL_FUTURE), as a real-time process does) and
#                             print what they locked (client.out's memory
#                             line); a kernel that refuses fails the run,
#                             saying why; 0 (the default) or 1
#   PLUGRL_BENCH_POLL_IDLE=1  the whole bench with cores 0 and 1 kept out
#                             of their idle states (each core's
#                             power/pm_qos_resume_latency_us set to n/a:
#                             an idle core polls rather than halts, as a
#                             real-time loop's core is often set up), the
#                             values found put back at the end; where they
#                             cannot be written (not root, no such file),
#                             says so and runs with the machine's setting;
#                             0 (the default) or 1
#   PLUGRL_BENCH_CPU_SYSFS=DIR  where PLUGRL_BENCH_POLL_IDLE finds the
#                             cores' cpuN/power and cpuN/cpuidle files
#                             (default /sys/devices/system/cpu; a fake tree
#                             lets tests/bench_poll_idle.sh check the change
#                             and its undoing on any machine)
#   PLUGRL_BENCH_LEDGER=0     leave out the ledger-digest and ledger-full
#                             clients (libplugrl recording a step ledger); 0
#                             or 1 (the default)
#   PLUGRL_BENCH_LEDGER_PAIRS=N  also the ledger's cost measured the firmer
#                             way: for SMALL and LARGE, each pinning, N
#                             triplets of back-to-back runs (libplugrl,
#                             ledger-digest, ledger-full, in each of the six
#                             orders in turn: N a multiple of 6 balances
#                             them, and the bench warns otherwise), each
#                             ledger run against the libplugrl run of its
#                             triplet, with a 90 % bootstrap interval of the
#                             median (N=24: about 12 minutes more; normal
#                             scheduling only)
#   PLUGRL_BENCH_WORKLOADS="SMALL LARGE"  the single-connection workloads
#                             to run (default both): PLUGRL_BENCH_WORKLOADS=SMALL
#                             PLUGRL_BENCH_SECONDS=10 measures SMALL's tails to
#                             p99.99 in a fraction of the whole grid's time; the
#                             A/A gauge below needs LARGE and is left out
#                             without it
#   PLUGRL_BENCH_GOFLOOR=1    also the Go floor in every cell (below): what a
#                             Go library costs before any work of its own
#   PLUGRL_BENCH_INSTRUCTIONS=0  leaves out the instruction counts (below;
#                             about a minute)
#   PLUGRL_BENCH_HANDLES="8 64"  also N-handle cells: the SMALL workload on N
#                             connections at once, served each on its own
#                             goroutine; the clients run N threads (libplugrl:
#                             a plugrl_client each; floor: a raw socket each)
#
# For the SMALL workload (1 env, no image, state 8) and the LARGE one (16
# envs, 2 cameras of 224x224x3, state 32), both with H=8 and D=7 actions,
# it runs build/bin/plugrl-bench-server against
#
#   floor      plugrl_bench_floor: frames of exactly the sizes libplugrl
#              sends for that workload, masked with a fresh key each, and no
#              encoding at all, one send per frame: the reference the
#              performance issues' criteria are stated against
#   floor-held the floor, its feedback held back so that it leaves
#              with the next infer in one send, as libplugrl's does in a tight loop
#              (plugrl_feedback): the floor for a client that knows it (one
#              send per exchange, as libplugrl makes); a feedback over 64 KiB
#              is never held, so for LARGE it is the floor's very program
#   libplugrl  plugrl_bench_client: the workload through libplugrl.so's
#              plugrl_infer / plugrl_feedback
#   go-floor   (PLUGRL_BENCH_GOFLOOR=1) plugrl_bench_gofloor: floor-held's
#              very program, its system calls made through a Go library that
#              does nothing else but keep the runtime as libplugrl does (its
#              Ps, its yield, its threads' policy; bench/gofloor): over
#              floor-held, the Go runtime's cost to a thread that calls in
#              from C; libplugrl over it, libplugrl's own path
#   ledger-digest, ledger-full
#              the same, recording a step ledger (docs/LEDGER.md) at that
#              level: their ratio is to libplugrl, the ledger's cost; after
#              each such run `plugrl ledger summary` reads the ledger, and a
#              cell whose ledger did not record everything is marked
#
# with both processes pinned to core 0 (same-core: the CPU cost of an
# exchange) and with the server on core 0 and the client on core 1 (split:
# the latency), in interleaved repetitions: in each, every cell's clients
# run back to back, in an order that changes from one repetition to the
# next (a Williams design: the rows of a balanced Latin square, each
# followed by its reverse, so that over an even count of repetitions every
# client runs as often after libplugrl as before it). For every run:
#
#   ex/s        the server's count of exchanges in its window (all
#               connections together)
#   cpu us/ex   the client process's CPU time (CLOCK_PROCESS_CPUTIME_ID)
#               per exchange over the server's window: the server prints the
#               window in CLOCK_MONOTONIC ns before it stops the client,
#               which then reads it from the server's output
#               (--window-file) and interpolates the samples of CPU time and
#               exchange count its sampler thread took every 5 ms at its
#               ends (bench/bench_cpu.hpp); a table splits it into user
#               time (the client's own code: for libplugrl, the library
#               and its Go runtime) and kernel time (getrusage's split)
#   turnaround  timed at the server, every exchange in the window: from
#               having written an action to having read the next infer (the
#               client's library work; its env step is nothing here)
#   infer->fb   timed at the server: from having read an infer to having
#               read its feedback
#   n           the exchanges timed; the server gives a percentile q only
#               where n >= 10/(1-q) (at least 10 samples beyond it), "-"
#               otherwise
#   per-conn    N-handle cells: the fewest and the most exchanges one
#               connection made in the window (evenness)
#
# Prints every run and these tables: the medians of the repetitions, with
# the min-max of throughput and CPU, of the runs that succeeded (latency
# percentiles, p50/p90/p99/p99.9/p99.99/max in us, are the medians of each
# run's; "-" where a run had too few samples for it) and how many did;
# libplugrl against the floors, paired per repetition, beside the ratio of
# the medians; with the Go floor, its table (go-floor over floor-held,
# libplugrl over go-floor); the floor-held/floor ratio of LARGE, an A/A
# test of the bench's noise; libplugrl's tail over the floor's; the bounds, each
# figure beside its limit; and the ledger's cost paired per repetition.
#
# A run that fails ends the bench, except under SCHED_FIFO, where a failure
# (a real-time client starving what it waits for) is a finding: the run is
# left out of the medians and its cell says how many of its runs
# succeeded. A chrt -f that the kernel refuses on a cell's run is the
# environment's limit, not the library's: the run is left out the same way
# and the bench says so. A client still running 10 s after its server
# ended has hung: its threads are dumped into BIN_DIR/../bench-hangs (with
# gdb's backtraces where gdb is installed), the log names the file, and the
# run fails.
#
# Then the instructions of a SMALL exchange for libplugrl, the Go floor and
# floor-held, counted by callgrind (tests/bench_instructions.sh: where
# valgrind is not installed it says so); a failure fails the bench.
#
# Last, the resident memory of an idle client: 64 and then 512 clients
# opened against plugrl serve and left idle for a second
# (plugrl_bench_client --idle K: VmRSS before and after, per client). Its
# failure fails the bench; without BIN_DIR/plugrl it is skipped, and the
# bench says so.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The arithmetic of the tables (medians, ratios, pairing, bootstrap), apart so
# that tests/bench_stats_test.sh can feed it fixed numbers.
# shellcheck source=tests/bench_stats.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_stats.sh"

bin=${1:?usage: tests/bench.sh BIN_DIR}
reps=${PLUGRL_BENCH_REPS:-5}
window=${PLUGRL_BENCH_SECONDS:-1.5}
tail_window=${PLUGRL_BENCH_TAIL_SECONDS:-$(awk -v w="$window" 'BEGIN {print (w + 0 > 10) ? w : 10}')}
warmup=${PLUGRL_BENCH_WARMUP:-0.5}
floor_chunk=${PLUGRL_BENCH_FLOOR_CHUNK:-0}
for b in plugrl-bench-server plugrl_bench_floor plugrl_bench_client; do
  [[ -x $bin/$b ]] || {
    echo "tests/bench.sh: $bin/$b is missing (./build.sh builds it)" >&2
    exit 1
  }
done
command -v taskset >/dev/null || {
  echo "tests/bench.sh: taskset (util-linux) is needed to pin the processes" >&2
  exit 1
}
[[ $reps =~ ^[0-9]+$ && $((10#$reps)) -ge 1 ]] || {
  echo "tests/bench.sh: PLUGRL_BENCH_REPS wants a count of at least 1, got \"$reps\"" >&2
  exit 1
}
reps=$((10#$reps))
for w in PLUGRL_BENCH_SECONDS:"$window" PLUGRL_BENCH_TAIL_SECONDS:"$tail_window"; do
  [[ ${w#*:} =~ ^[0-9]*\.?[0-9]+$ && ${w#*:} =~ [1-9] ]] || {
    echo "tests/bench.sh: ${w%%:*} wants a window in seconds above 0 (such as 1.5), got \"${w#*:}\"" >&2
    exit 1
  }
done

# switch NAME DEFAULT: the variable's value, 0 or 1; anything else ends
# the bench (a typo must not silently turn a mode off).
switch() {
  local v=${!1:-$2}
  [[ $v == 0 || $v == 1 ]] || {
    echo "tests/bench.sh: $1 wants 1 or 0, got \"$v\"" >&2
    exit 1
  }
  echo "$v"
}
fifo=$(switch PLUGRL_BENCH_FIFO 0)
poll_idle=$(switch PLUGRL_BENCH_POLL_IDLE 0)
load=$(switch PLUGRL_BENCH_LOAD 0)
with_ledger=$(switch PLUGRL_BENCH_LEDGER 1)
lock=()
[[ $(switch PLUGRL_BENCH_MLOCKALL 0) == 1 ]] && lock=(--mlockall 1)
handles=${PLUGRL_BENCH_HANDLES:-}
lpairs=${PLUGRL_BENCH_LEDGER_PAIRS:-0}
[[ $lpairs =~ ^[0-9]+$ ]] || {
  echo "tests/bench.sh: PLUGRL_BENCH_LEDGER_PAIRS wants a count, got \"$lpairs\"" >&2
  exit 1
}
lpairs=$((10#$lpairs))
if [[ $lpairs != 0 && $with_ledger == 0 ]]; then
  echo "tests/bench.sh: NOTE: PLUGRL_BENCH_LEDGER=0 leaves out the ledger runs, PLUGRL_BENCH_LEDGER_PAIRS with them" >&2
  lpairs=0
fi
if ((lpairs % 6 != 0)); then
  echo "tests/bench.sh: NOTE: PLUGRL_BENCH_LEDGER_PAIRS=$lpairs is not a multiple of 6: the six orders of its triplets" \
    "are not run equally often, so the ledger levels are not as often before libplugrl as after it" >&2
fi
for n in $handles; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || {
    echo "tests/bench.sh: PLUGRL_BENCH_HANDLES wants counts, got \"$handles\"" >&2
    exit 1
  }
done

# name envs cams img state conns
workloads=()
for w in ${PLUGRL_BENCH_WORKLOADS:-SMALL LARGE}; do
  case $w in
  SMALL) workloads+=("SMALL 1 0 0 8 1") ;;
  LARGE) workloads+=("LARGE 16 2 224 32 1") ;;
  *)
    echo "tests/bench.sh: PLUGRL_BENCH_WORKLOADS wants SMALL and/or LARGE, got \"$w\"" >&2
    exit 1
    ;;
  esac
done
[[ ${#workloads[@]} -gt 0 ]] || {
  echo "tests/bench.sh: PLUGRL_BENCH_WORKLOADS names no workload" >&2
  exit 1
}
have_large=0 have_small=0
[[ " ${workloads[*]} " == *" LARGE "* ]] && have_large=1
[[ " ${workloads[*]} " == *" SMALL "* ]] && have_small=1
single=("${workloads[@]}") # the single-connection workloads, for the ledger's triplets
for n in $handles; do workloads+=("SMALLx$n 1 0 0 8 $n"); done
pinnings=(same split)
# The clients of every cell: the floor, the floor holding feedback for the
# next infer as libplugrl does in a tight loop, libplugrl, and libplugrl
# recording a step ledger at each level (PLUGRL_BENCH_LEDGER=0 leaves those
# out).
clients=(floor floor-held libplugrl)
[[ $with_ledger == 1 ]] && clients+=(ledger-digest ledger-full)
with_gofloor=$(switch PLUGRL_BENCH_GOFLOOR 0)
with_instructions=$(switch PLUGRL_BENCH_INSTRUCTIONS 1)
if [[ $with_gofloor == 1 ]]; then
  [[ -x $bin/plugrl_bench_gofloor ]] || {
    echo "tests/bench.sh: PLUGRL_BENCH_GOFLOOR=1 wants $bin/plugrl_bench_gofloor (./build.sh builds it, except in a cross build)" >&2
    exit 1
  }
  clients+=(go-floor)
fi
cores=$(nproc)
if [[ $cores -lt 2 ]]; then
  echo "tests/bench.sh: one core only: the split runs are skipped" >&2
  pinnings=(same)
fi
scheds=(other)
if [[ $fifo == 1 ]]; then
  # Asked as the cells will ask: pinned, on each core a client runs on.
  rt_ok=1 probe=(0)
  [[ ${#pinnings[@]} -gt 1 ]] && probe+=(1)
  for c in "${probe[@]}"; do
    taskset -c "$c" chrt -f 50 true 2>/dev/null || rt_ok=0
  done
  if [[ $rt_ok == 1 ]]; then
    scheds+=(fifo)
  else
    echo "tests/bench.sh: NOTE: PLUGRL_BENCH_FIFO=1 but chrt -f 50 is not permitted here (needs CAP_SYS_NICE" \
      "or an rtprio limit): SCHED_FIFO cells skipped, normal scheduling only" >&2
  fi
fi
if [[ $load == 1 ]]; then
  for s in "${scheds[@]}"; do scheds+=("$s+load"); done
fi
have_fifo=0
[[ " ${scheds[*]} " == *" fifo"* ]] && have_fifo=1

tmp=$(mktemp -d)
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  if [[ -n ${ipid:-} ]] && kill -0 "$ipid" 2>/dev/null; then kill "$ipid" 2>/dev/null || true; fi
  restore_idle
  rm -rf "$tmp"
}
# idle_was: each PM QoS file PLUGRL_BENCH_POLL_IDLE changed, and the value
# it found there, which restore_idle writes back.
declare -A idle_was=()
restore_idle() {
  local f
  for f in "${!idle_was[@]}"; do echo "${idle_was[$f]}" >"$f" 2>/dev/null || true; done
  idle_was=()
}
trap cleanup EXIT

# PLUGRL_BENCH_POLL_IDLE=1: the cores' idle states off for the bench (the
# per-core PM QoS resume latency "n/a" leaves cpuidle only its polling
# state), each core's value put back by cleanup. A core where it cannot be
# set ends the attempt: the bench then runs as the machine is, and says so.
idle_note="idle: the machine's setting"
cpu_sysfs=${PLUGRL_BENCH_CPU_SYSFS:-/sys/devices/system/cpu}
if [[ $poll_idle == 1 ]]; then
  idle_note="idle: cores 0 and 1 polling (PLUGRL_BENCH_POLL_IDLE=1)"
  for c in 0 1; do
    f=$cpu_sysfs/cpu$c/power/pm_qos_resume_latency_us
    # "n/a" leaves cpuidle its state 0, which polls only where it is the
    # POLL state (x86 drivers); with no cpuidle driver, or an ARM one
    # (state 0 is WFI), the core still halts and the note would be false.
    why="cannot be written (needs root, and a kernel with per-core PM QoS)"
    state0=$(cat "$cpu_sysfs/cpu$c/cpuidle/state0/name" 2>/dev/null || true)
    if [[ $state0 != POLL ]]; then
      why="would not make core $c poll: its idle state 0 is \"${state0:-none}\", not POLL (cpuidle driver"
      why+=" $(cat "$cpu_sysfs/cpuidle/current_driver" 2>/dev/null || echo none))"
    fi
    if [[ $state0 == POLL ]] && was=$(cat "$f" 2>/dev/null) && echo n/a 2>/dev/null >"$f"; then
      idle_was[$f]=$was
    else
      echo "tests/bench.sh: NOTE: PLUGRL_BENCH_POLL_IDLE=1 but $f $why: the bench runs with the machine's idle setting" >&2
      restore_idle
      idle_note="idle: the machine's setting (PLUGRL_BENCH_POLL_IDLE=1 could not be applied)"
      break
    fi
  done
fi

# A run that hangs (a real-time process starving another) is killed at
# its limit (limit_of WINDOW, in s); a client still running 10 s after its
# server ended is dumped first (watch_client, in tests/lib.sh).
limit_of() { awk -v w="$1" -v u="$warmup" 'BEGIN {print int(w + u + 30)}'; }

# cell_window NAME SCHED: the window of a cell's runs, in s. SMALL under
# SCHED_FIFO has the tail window: its p99.99 is a bound (the real-time
# issue's), and a run of fewer than 100,000 exchanges has none (split with
# load made 91k in 6 s).
cell_window() {
  if [[ $1 == SMALL && $2 == fifo* ]]; then echo "$tail_window"; else echo "$window"; fi
}


# The run's fields, in the order run_one prints them:
#   status  ok; failed (under SCHED_FIFO: a finding); refused (the kernel
#           refused chrt -f on this run: the environment)
#   rate cpu, the turnaround's n and six percentiles, infer->feedback's,
#   the fewest and most exchanges per connection, the records the
#   ledger did not record (ledger runs: a count, or "?" when it could not
#   be checked; "-" for the other clients), and the client's CPU per
#   exchange split into user and kernel time (bench_cpu.hpp's cpu_split)
# A field its program did not print is "nan", a percentile with too few
# samples "-".
metrics=(status rate cpu tn t50 t90 t99 t999 t9999 tmax fn f50 f90 f99 f999 f9999 fmax cmin cmax lost cpu_user cpu_kernel)
nan_fields() { # STATUS: a run with no numbers
  local out=$1 k
  for ((k = 1; k < ${#metrics[@]} - 3; k++)); do out+=" nan"; done
  echo "$out - nan nan"
}


# ledger_lost: the records the ledger(s) of the last run did not record,
# summed over its files (one per handle: bench.ledger, bench.ledger.2, ...)
# from `plugrl ledger summary`; "?" when that cannot tell (no plugrl, a
# summary that fails, a ledger not closed cleanly), with a note.
ledger_lost() {
  local f out n lost=0
  if [[ ! -x $bin/plugrl ]]; then
    echo "tests/bench.sh: NOTE: no $bin/plugrl: the ledger's records are not checked" >&2
    echo "?"
    return
  fi
  local files=("$tmp"/bench.ledger*)
  [[ -e ${files[0]} ]] || {
    echo "tests/bench.sh: the ledger run left no ledger" >&2
    echo "?"
    return
  }
  for f in "${files[@]}"; do
    if ! out=$("$bin/plugrl" ledger summary "$f" 2>&1); then
      echo "tests/bench.sh: plugrl ledger summary $f failed: $(head -n 3 <<<"$out")" >&2
      echo "?"
      return
    fi
    if ! head -n 1 <<<"$out" | grep -q 'closed cleanly'; then
      echo "tests/bench.sh: the ledger $f was not closed cleanly: $(head -n 1 <<<"$out")" >&2
      echo "?"
      return
    fi
    n=$(sed -n 's/^NOT RECORDED: \([0-9]*\) records.*/\1/p' <<<"$out")
    lost=$((lost + ${n:-0}))
  done
  echo "$lost"
}

# The processes of the run under way, for run_cleanup.
spid=
busy=()
run_cleanup() {
  if [[ ${#busy[@]} -gt 0 ]]; then
    kill "${busy[@]}" 2>/dev/null || true
    wait "${busy[@]}" 2>/dev/null || true
  fi
  busy=()
  if [[ -n $spid ]]; then
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
  fi
  spid=
}

# start_load: a busy loop at nice 19 on every core, for the whole run,
# each checked to run at nice 19 (nice -n 39: 19 from any niceness the
# bench itself runs at; the kernel caps it) on its core; a load that is not
# there ends the bench, since the +load cells would measure no load.
start_load() {
  local c pid k ni cpus
  for ((c = 0; c < cores; c++)); do
    taskset -c "$c" nice -n 39 sh -c 'while :; do :; done' >/dev/null 2>&1 &
    busy+=($!)
  done
  for ((c = 0; c < cores; c++)); do
    pid=${busy[$c]} ni='' cpus=''
    # taskset and nice exec the loop's shell in the same process: wait for it.
    for ((k = 0; k < 200; k++)); do
      if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == sh ]]; then
        ni=$(awk '{print $19}' "/proc/$pid/stat" 2>/dev/null)
        cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)
        break
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.01
    done
    if [[ $ni != 19 || $cpus != "$c" ]]; then
      echo "tests/bench.sh: LOAD FAILED: the busy loop for core $c (pid $pid) runs at nice \"$ni\" on CPUs \"$cpus\"" \
        "(wanted nice 19 on $c; dead if empty): the +load cells would not be what they say" >&2
      exit 1
    fi
  done
}
# check_load: every busy loop is still running.
check_load() {
  local pid
  for pid in "${busy[@]}"; do
    kill -0 "$pid" 2>/dev/null || {
      echo "tests/bench.sh: LOAD FAILED: a busy loop (pid $pid) died during the run: its +load cell ran without" \
        "its load" >&2
      exit 1
    }
  done
}


# run_one CLIENT PINNING SCHED CONNS ENVS CAMS IMG STATE WINDOW: prints the run's
# fields (metrics above), space-separated. It runs in a subshell
# (out=$(run_one ...)), whose exit the script's cleanup does not see: the
# subshell stops its own server and load, whichever way it ends.
run_one() {
  local client=$1 pin=$2 sched=$3 conns=$4 envs=$5 cams=$6 img=$7 state=$8 win=$9 ccore=0 url=
  local limit
  limit=$(limit_of "$win")
  [[ $pin == split ]] && ccore=1
  local rt=()
  [[ $BASH_SUBSHELL -gt 0 ]] && trap run_cleanup EXIT
  [[ $sched == fifo* ]] && rt=(chrt -f 50)
  [[ $sched == *+load ]] && start_load
  : >"$tmp/server.out" # see wait_url
  : >"$tmp/client.err"
  timeout -s KILL "$limit" taskset -c 0 "${rt[@]}" "$bin/plugrl-bench-server" --envs "$envs" --conns "$conns" \
    --warmup "${warmup}s" --seconds "${win}s" >"$tmp/server.out" 2>"$tmp/server.err" &
  spid=$!
  url=$(wait_url "$tmp/server.out" "$spid") || url=
  if [[ -z $url ]]; then
    run_cleanup # a server that is alive but said nothing
    if [[ ${#rt[@]} -gt 0 ]] && grep -q '^chrt: failed to set' "$tmp/server.err"; then
      echo "tests/bench.sh: NOTE: $client $pin $sched: the kernel refused chrt -f 50 for the server" \
        "($(head -n 1 "$tmp/server.err")): an environment limit, the run is left out" >&2
      nan_fields refused
      return 0
    fi
    echo "tests/bench.sh: the bench server did not start: $(cat "$tmp/server.err")" >&2
    exit 1
  fi
  local rc=0
  local ledger=()
  if [[ $client == ledger-* ]]; then
    rm -f "$tmp"/bench.ledger*
    ledger=(env PLUGRL_LEDGER="$tmp/bench.ledger" PLUGRL_LEDGER_LEVEL="${client#ledger-}")
  fi
  if [[ $client == floor* || $client == go-floor ]]; then
    local hold=0 floor=plugrl_bench_floor
    [[ $client == floor-held || $client == go-floor ]] && hold=1
    [[ $client == go-floor ]] && floor=plugrl_bench_gofloor
    timeout -s KILL "$limit" taskset -c "$ccore" "${rt[@]}" "$bin/$floor" --url "$url" \
      --infer-bytes "$infer_bytes" --feedback-bytes "$feedback_bytes" --chunk "$floor_chunk" --hold "$hold" --handles "$conns" \
      --window-file "$tmp/server.out" "${lock[@]}" >"$tmp/client.out" 2>"$tmp/client.err" &
  else
    timeout -s KILL "$limit" "${ledger[@]}" taskset -c "$ccore" "${rt[@]}" "$bin/plugrl_bench_client" --url "$url" \
      --envs "$envs" --cams "$cams" --img "$img" --state "$state" --handles "$conns" \
      --window-file "$tmp/server.out" "${lock[@]}" >"$tmp/client.out" 2>"$tmp/client.err" &
  fi
  watch_client $! "$spid" "$tmp/server.out" "$bin/../bench-hangs" || rc=$?
  [[ $sched == *+load ]] && check_load
  if [[ $rc -ne 0 ]] && [[ ${#rt[@]} -gt 0 ]] && grep -q '^chrt: failed to set' "$tmp/client.err"; then
    run_cleanup
    echo "tests/bench.sh: NOTE: $client $pin $sched: the kernel refused chrt -f 50 for the client" \
      "($(head -n 1 "$tmp/client.err")): an environment limit, the run is left out" >&2
    nan_fields refused
    return 0
  fi
  local src=${server_rc:-0}
  [[ -n $server_rc ]] || wait "$spid" || src=$?
  [[ $rc -ne 0 ]] || rc=$src # the client's own failure first
  spid=
  run_cleanup
  local rate='' cpu='' turn ifb conn lost=- split
  if [[ $rc -eq 0 ]]; then
    rate=$(sed -n 's/^exchanges\/s \([^ ]*\)$/\1/p' "$tmp/server.out" | tail -n 1)
    cpu=$(sed -n 's/^cpu_us_per_exchange \([^ ]*\)$/\1/p' "$tmp/client.out" | tail -n 1)
    split=$(sed -n 's/^cpu_split user_us_per_exchange \([^ ]*\) kernel_us_per_exchange \([^ ]*\)$/\1 \2/p' \
      "$tmp/client.out" | tail -n 1)
    turn=$(lat_fields "$tmp/server.out" turnaround)
    ifb=$(lat_fields "$tmp/server.out" infer_feedback)
    conn=$(sed -n 's/^conn_exchanges min \([0-9]*\) max \([0-9]*\)$/\1 \2/p' "$tmp/server.out" | tail -n 1)
    # The CPU figure is over the server's window only if the client found
    # it in the server's output; otherwise it silently falls back to the
    # client's own guess of the warm-up (bench_cpu.hpp), a different measure.
    if [[ $rc -eq 0 ]] && ! grep -q '^cpu_measured_over server-window ' "$tmp/client.out"; then
      echo "tests/bench.sh: $client $pin $sched: the client did not measure its CPU over the server's window:" \
        "$(grep '^cpu_measured_over' "$tmp/client.out" || echo 'no cpu_measured_over line')" >&2
      rc=1
    fi
    if ! isnum "$rate" || ! isnum "$cpu" || ! isnum "${split%% *}" || ! isnum "${split##* }" ||
      [[ -z $conn || $turn == *nan* || $ifb == *nan* ]]; then
      echo "tests/bench.sh: $client $pin $sched: the run's output is incomplete (exchanges/s \"$rate\"," \
        "cpu_us_per_exchange \"$cpu\", cpu_split \"$split\", conn_exchanges \"$conn\"," \
        "latency \"$turn\" / \"$ifb\")" >&2
      rc=1
    fi
  fi
  if [[ $rc -ne 0 ]]; then
    echo "tests/bench.sh: $client $pin $sched run failed ($rc; 137: killed, at the $limit s limit or as hung):" >&2
    sort "$tmp/client.err" | uniq -c | head -n 5 >&2
    head -n 5 "$tmp/server.err" >&2
    # Under SCHED_FIFO a failure is a finding (a real-time client starving
    # what it waits for), not a broken bench: the run is left out of the
    # medians and its cell says so.
    [[ $sched == fifo* ]] || exit 1
    echo "tests/bench.sh: (recorded as failed)" >&2
    nan_fields failed
    return 0
  fi
  [[ $client == ledger-* ]] && lost=$(ledger_lost)
  rm -f "$tmp"/bench.ledger*
  echo "ok $rate $cpu $turn $ifb $conn $lost ${split:-nan nan}"
}


# The order of the clients in repetition REP (1-based), as indices into
# clients: the rows of a Williams design for n clients (0 1 n-1 2 n-2 ...,
# shifted by the row), each followed by its reverse. Over every two
# repetitions each client runs once before libplugrl and once after it;
# over 2n (6 with the three clients, 8 with the Go floor, 10 or 12 with the
# ledger clients) every client is in every
# place twice, and directly after every other client twice.
williams=()
for ((j = 0; j < ${#clients[@]}; j++)); do
  if ((j == 0)); then
    williams+=(0)
  elif ((j % 2)); then
    williams+=($(((j + 1) / 2)))
  else
    williams+=($((${#clients[@]} - j / 2)))
  fi
done
order_of() {
  local k=$(($1 - 1)) n=${#clients[@]} j idx=()
  for j in "${williams[@]}"; do idx+=($(((j + k / 2) % n))); done
  if ((k % 2)); then
    for ((j = n - 1; j >= 0; j--)); do echo -n "${clients[${idx[$j]}]} "; done
  else
    for ((j = 0; j < n; j++)); do echo -n "${clients[${idx[$j]}]} "; done
  fi
}

declare -A runs after_lib
start=$SECONDS
windows="${window} s windows"
if [[ $have_fifo == 1 && $have_small == 1 && $tail_window != "$window" ]]; then
  windows+=" (SMALL under SCHED_FIFO: $tail_window s)"
fi
echo "libplugrl vs. the transport floor: $reps interleaved repetitions of $windows (after ${warmup} s warm-up), $cores cores; $idle_note"
for wl in "${workloads[@]}"; do
  read -r name envs cams img state conns <<<"$wl"
  read -r infer_bytes feedback_bytes < <("$bin/plugrl-bench-server" --sizes --envs "$envs" --cams "$cams" --img "$img" \
    --state "$state" | sed 's/infer=\([0-9]*\) feedback=\([0-9]*\).*/\1 \2/')
  eval "bytes_$name='$infer_bytes/$feedback_bytes'"
done
refused=0 failed=0 gf_failed=0
for ((rep = 1; rep <= reps; rep++)); do
  read -r -a order <<<"$(order_of "$rep")"
  seen_lib=0
  for client in "${order[@]}"; do
    [[ $client == libplugrl ]] && seen_lib=1 && continue
    after_lib[$client]=$((${after_lib[$client]:-0} + seen_lib))
  done
  for wl in "${workloads[@]}"; do
    read -r name envs cams img state conns <<<"$wl"
    IFS=/ read -r infer_bytes feedback_bytes <<<"$(eval echo "\$bytes_$name")"
    for sched in "${scheds[@]}"; do
      for pin in "${pinnings[@]}"; do
        line="rep $rep $name $pin $sched:"
        for client in "${order[@]}"; do
          out=$(run_one "$client" "$pin" "$sched" "$conns" "$envs" "$cams" "$img" "$state" "$(cell_window "$name" "$sched")")
          read -r -a vals <<<"$out"
          for k in "${!metrics[@]}"; do runs[$name/$pin/$sched/$client/${metrics[$k]}]+=" ${vals[$k]}"; done
          case ${vals[0]} in
            ok) line+=" $client ${vals[1]} ex/s ${vals[2]} cpu-us/ex" ;;
            refused) line+=" $client REFUSED(chrt)" refused=$((refused + 1)) ;;
            *)
              line+=" $client FAILED"
              if [[ $client == go-floor ]]; then gf_failed=$((gf_failed + 1)); else failed=$((failed + 1)); fi
              ;;
          esac
          case ${vals[19]} in
            - | 0 | nan) ;;
            \?) line+=" (ledger unchecked)" ;;
            *) line+=" (ledger dropped ${vals[19]} records)" ;;
          esac
        done
        echo "  $line"
      done
    done
  done
done

# The cell's numbers. med KEY METRIC: the median of its runs that succeeded.
med() { median <<<"${runs[$1/$2]}"; }
# medq KEY METRIC: a percentile's median; "-" when any run that succeeded
# had too few samples for it (the server printed "-").
medq() { medq_of "${runs[$1/$2]:-}"; }
# oks KEY: "k/N", the runs of the cell that succeeded of those made.
oks() { awk '{k = 0; for (i = 1; i <= NF; i++) k += ($i == "ok"); printf "%d/%d", k, NF}' <<<"${runs[$1/status]}"; }
# notes KEY: what the cell's runs did not do: FAILED (a finding, under
# SCHED_FIFO), chrt refused (the environment), the ledger's dropped records.
notes() {
  local out
  out=$(awk '{for (i = 1; i <= NF; i++) c[$i]++}
    END {if (c["failed"]) printf " FAILED %d", c["failed"]; if (c["refused"]) printf " chrt-refused %d", c["refused"]}' \
    <<<"${runs[$1/status]}")
  echo "$out$(lost_mark "${runs[$1/lost]}")"
}
# lost_mark LOST: " *dropped N records" when a ledger of the runs whose
# lost fields LOST lists did not record everything (N: all of them
# together), " *unchecked" when one could not be checked; nothing otherwise.
lost_mark() {
  awk '{for (i = 1; i <= NF; i++) if ($i == "?") u = 1; else if ($i ~ /^[0-9]+$/) n += $i}
    END {if (n > 0) printf " *dropped %d records", n; if (u) printf " *unchecked"}' <<<"$1"
}
# lat KEY t|f: the medians of the six percentiles, joined by /.
lat() {
  local out='' q v
  for q in 50 90 99 999 9999 max; do
    v=$(medq "$1" "$2$q")
    if isnum "$v"; then out+=$(printf '%.1f/' "$v"); else out+="$v/"; fi
  done
  echo "${out%/}"
}


echo
printf '%-9s %-5s %-10s %-13s %-5s %9s %-17s %6s %8s %-13s %6s  %6s %-34s %6s %-34s %-19s %s\n' workload pin sched client ok \
  ex/s "(min-max)" lib/fl "cpu-us/ex" "(min-max)" lib/fl n "turnaround us p50/90/99/99.9/99.99/max" n \
  "infer->feedback us (same)" "per-conn ex min/max" notes
for wl in "${workloads[@]}"; do
  read -r name _ _ _ _ conns <<<"$wl"
  for sched in "${scheds[@]}"; do
    for pin in "${pinnings[@]}"; do
      fkey=$name/$pin/$sched/floor
      fr=$(med "$fkey" rate) fc=$(med "$fkey" cpu)
      lkey=$name/$pin/$sched/libplugrl
      lr=$(med "$lkey" rate) lc=$(med "$lkey" cpu)
      for client in "${clients[@]}"; do
        key=$name/$pin/$sched/$client
        r=$(med "$key" rate) c=$(med "$key" cpu)
        rr=- cr=- per=-
        if [[ $client == libplugrl || $client == floor-held || $client == go-floor ]]; then
          rr=$(ratio "$r" "$fr") cr=$(ratio "$c" "$fc")
        elif [[ $client == ledger-* ]]; then
          rr=$(ratio "$r" "$lr") cr=$(ratio "$c" "$lc")
        fi
        [[ $conns -gt 1 ]] && per="$(med "$key" cmin)/$(med "$key" cmax)"
        printf '%-9s %-5s %-10s %-13s %-5s %9s %-17s %6s %8s %-13s %6s  %6s %-34s %6s %-34s %-19s%s\n' "$name" "$pin" "$sched" \
          "$client" "$(oks "$key")" "$(num %.1f "$r")" "($(spread <<<"${runs[$key/rate]}"))" "$rr" "$(num %.2f "$c")" \
          "($(spread <<<"${runs[$key/cpu]}"))" "$cr" "$(num %.0f "$(med "$key" tn)")" "$(lat "$key" t)" \
          "$(num %.0f "$(med "$key" fn)")" "$(lat "$key" f)" "$per" "$(notes "$key")"
      done
    done
  done
done
echo "(medians of the runs that succeeded, ok: how many of the $reps did; same = both on core 0, split = server core 0,"
echo " client core 1; fifo = both under chrt -f 50; +load = a nice 19 busy loop on every core during the run;"
echo " lib/fl: the ratio of the medians, libplugrl/floor (and floor-held/floor, go-floor/floor), throughput and CPU per exchange; on"
echo " ledger-digest and ledger-full rows, libplugrl recording a step ledger (PLUGRL_LEDGER) at that level / libplugrl"
echo " without; n: the exchanges the server timed (median); a percentile q is \"-\" where a run had n < 10/(1-q), too few"
echo " samples beyond it (p99 needs 1000, p99.9 10000, p99.99 100000); notes: FAILED k, k runs failed under SCHED_FIFO (a"
echo " finding: left out of the medians); chrt-refused k, the kernel refused chrt -f on k runs (the environment, not the"
echo " library); *dropped N records, the cell's ledgers did not record N records (queue full: plugrl ledger summary's NOT"
echo " RECORDED), so its cost is that of a ledger that recorded less; *unchecked, a ledger could not be checked;"
echo " $(date -u +%Y-%m-%d), $cores cores, $((SECONDS - start)) s)"

# libplugrl against the floors, paired: each repetition's libplugrl run
# against the floor runs of the same repetition and cell, which ran
# seconds before or after it (the clients of a cell run back to back),
# where the ratio of the medians above compares runs minutes apart and
# carries this machine's drift of tens of percent.
echo
echo "libplugrl against the floors, paired: the median of each repetition's libplugrl/floor ratio (that cell's runs are"
echo "back to back), with a 90 % bootstrap interval, beside the ratio of the medians above (runs up to minutes apart: it"
echo "carries the machine's drift); floor (one send per frame) is the reference of the issues' criteria, floor-held (one"
echo "send per exchange, as libplugrl) the floor for a client that holds feedback as libplugrl does"
printf '%-9s %-5s %-10s | %-61s | %s\n' "" "" "" "exchanges/s, libplugrl over" "client cpu-us/ex, libplugrl over"
printf '%-9s %-5s %-10s | %-7s %-26s %-26s | %-7s %-26s %s\n' workload pin sched floor "floor, paired" \
  "floor-held, paired" floor "floor, paired" "floor-held, paired"
for wl in "${workloads[@]}"; do
  read -r name _ _ _ _ _ <<<"$wl"
  for sched in "${scheds[@]}"; do
    for pin in "${pinnings[@]}"; do
      fkey=$name/$pin/$sched/floor hkey=$name/$pin/$sched/floor-held lkey=$name/$pin/$sched/libplugrl
      printf '%-9s %-5s %-10s | %-7s %-26s %-26s | %-7s %-26s %s\n' "$name" "$pin" "$sched" \
        "$(ratio "$(med "$lkey" rate)" "$(med "$fkey" rate)")" \
        "$(paired "${runs[$lkey/rate]}" "${runs[$fkey/rate]}" ratio boot)" \
        "$(paired "${runs[$lkey/rate]}" "${runs[$hkey/rate]}" ratio boot)" \
        "$(ratio "$(med "$lkey" cpu)" "$(med "$fkey" cpu)")" \
        "$(paired "${runs[$lkey/cpu]}" "${runs[$fkey/cpu]}" ratio boot)" \
        "$(paired "${runs[$lkey/cpu]}" "${runs[$hkey/cpu]}" ratio boot)"
    done
  done
done
echo "(floor: the ratio of the medians; paired: the median of the repetitions' ratios (90 % bootstrap interval);"
echo " [k/N]: only k of the N repetitions had both runs)"

# The bench's own noise: a LARGE feedback (over 64 KiB) is never held, so
# LARGE's floor-held runs the floor's very program. Its ratio to the floor
# would be 1.000 on a quiet machine; what it is instead is how far apart
# two identical clients come out, the scale against which the ratios above
# can be read.
echo
if [[ $have_large == 1 ]]; then
  echo "noise gauge, an A/A test: LARGE floor-held / floor, the same program (a LARGE feedback is over 64 KiB and never held):"
  echo "any distance from 1.000 is the machine's drift and noise, by which the ratios above can be wrong"
  printf '%-9s %-5s %-10s | %-34s | %s\n' "" "" "" "exchanges/s, floor-held over" "client cpu-us/ex, floor-held over"
  printf '%-9s %-5s %-10s | %-7s %-26s | %-7s %s\n' workload pin sched floor "floor, paired" floor "floor, paired"
  for sched in "${scheds[@]}"; do
    for pin in "${pinnings[@]}"; do
      fkey=LARGE/$pin/$sched/floor hkey=LARGE/$pin/$sched/floor-held
      printf '%-9s %-5s %-10s | %-7s %-26s | %-7s %s\n' LARGE "$pin" "$sched" \
        "$(ratio "$(med "$hkey" rate)" "$(med "$fkey" rate)")" "$(paired "${runs[$hkey/rate]}" "${runs[$fkey/rate]}" ratio boot)" \
        "$(ratio "$(med "$hkey" cpu)" "$(med "$fkey" cpu)")" "$(paired "${runs[$hkey/cpu]}" "${runs[$fkey/cpu]}" ratio boot)"
    done
  done
  echo "(as the table above: the ratio of the medians, and the paired median with its 90 % bootstrap interval)"
else
  echo "noise gauge (an A/A test on LARGE): left out, as PLUGRL_BENCH_WORKLOADS leaves out LARGE"
fi

# The Go floor's table: where libplugrl misses a bound, whether a Go
# library that does nothing but the system calls misses it too (the
# runtime's cost, against floor-held, the C client that holds feedback as
# both do) or libplugrl's own path is what is left (libplugrl over it).
if [[ $with_gofloor == 1 ]]; then
  echo
  echo "the Go floor, paired as above: go-floor over floor-held (the Go runtime's cost to a thread calling in from C) and"
  echo "libplugrl over go-floor (libplugrl's own path), exchanges/s and client cpu-us/ex; the turnaround tail p99.9/p99.99 of"
  echo "go-floor over the floor's and of libplugrl over go-floor's (ratios of the medians)"
  printf '%-9s %-5s %-10s | %-26s %-26s | %-26s %-26s | %-13s %s\n' workload pin sched "ex/s go-floor/held" "ex/s lib/go-floor" \
    "cpu go-floor/held" "cpu lib/go-floor" "tail gf/floor" "tail lib/gf"
  for wl in "${workloads[@]}"; do
    read -r name _ _ _ _ _ <<<"$wl"
    for sched in "${scheds[@]}"; do
      for pin in "${pinnings[@]}"; do
        fkey=$name/$pin/$sched/floor hkey=$name/$pin/$sched/floor-held
        gkey=$name/$pin/$sched/go-floor lkey=$name/$pin/$sched/libplugrl
        printf '%-9s %-5s %-10s | %-26s %-26s | %-26s %-26s | %-13s %s\n' "$name" "$pin" "$sched" \
          "$(paired "${runs[$gkey/rate]}" "${runs[$hkey/rate]}" ratio boot)" \
          "$(paired "${runs[$lkey/rate]}" "${runs[$gkey/rate]}" ratio boot)" \
          "$(paired "${runs[$gkey/cpu]}" "${runs[$hkey/cpu]}" ratio boot)" \
          "$(paired "${runs[$lkey/cpu]}" "${runs[$gkey/cpu]}" ratio boot)" \
          "$(ratio "$(medq "$gkey" t999)" "$(medq "$fkey" t999)")/$(ratio "$(medq "$gkey" t9999)" "$(medq "$fkey" t9999)")" \
          "$(ratio "$(medq "$lkey" t999)" "$(medq "$gkey" t999)")/$(ratio "$(medq "$lkey" t9999)" "$(medq "$gkey" t9999)")"
      done
    done
  done
fi

# Where each client's CPU per exchange goes: user time is the client's
# own code (for libplugrl, the library and its Go runtime; for the Go
# floor, the runtime's way in and out), kernel time the system calls and
# the network stack. Clients making the same system calls would be
# expected to spend alike in the kernel (floor-held and the Go clients
# send once an exchange, the floor twice), but libplugrl's kernel time
# has come out a few us higher (docs/PERFORMANCE.md): the user time is a
# lower bound on a client's own cost. Each figure is its own median, so
# the two do not add up to the cpu-us/ex median exactly.
echo
echo "client CPU per exchange, user / kernel us (getrusage's split of cpu-us/ex; each the median of the runs that"
echo "succeeded)"
header=$(printf '%-9s %-5s %-10s' workload pin sched)
for client in "${clients[@]}"; do header+=$(printf ' %-19s' "$client"); done
echo "$header"
for wl in "${workloads[@]}"; do
  read -r name _ _ _ _ _ <<<"$wl"
  for sched in "${scheds[@]}"; do
    for pin in "${pinnings[@]}"; do
      row=$(printf '%-9s %-5s %-10s' "$name" "$pin" "$sched")
      for client in "${clients[@]}"; do
        key=$name/$pin/$sched/$client
        row+=$(printf ' %-19s' "$(num %.1f "$(med "$key" cpu_user)") / $(num %.1f "$(med "$key" cpu_kernel)")")
      done
      echo "$row"
    done
  done
done

# The turnaround's tail against the floor's, per cell (the medians above):
# a real-time loop's deadline is set by its slowest exchanges.
echo
echo "turnaround tail, libplugrl / floor (medians of the runs that succeeded): p99 p99.9 p99.99; \"-\" where a run had"
echo "too few samples for that percentile (n < 10/(1-q)); n: the exchanges timed, libplugrl/floor (medians)"
printf '%-9s %-5s %-10s %6s %6s %6s  %s\n' workload pin sched p99 p99.9 p99.99 n
for wl in "${workloads[@]}"; do
  read -r name _ _ _ _ _ <<<"$wl"
  for sched in "${scheds[@]}"; do
    for pin in "${pinnings[@]}"; do
      fkey=$name/$pin/$sched/floor lkey=$name/$pin/$sched/libplugrl
      printf '%-9s %-5s %-10s %6s %6s %6s  %s\n' "$name" "$pin" "$sched" "$(ratio "$(medq "$lkey" t99)" "$(medq "$fkey" t99)")" \
        "$(ratio "$(medq "$lkey" t999)" "$(medq "$fkey" t999)")" "$(ratio "$(medq "$lkey" t9999)" "$(medq "$fkey" t9999)")" \
        "$(num %.0f "$(med "$lkey" tn)")/$(num %.0f "$(med "$fkey" tn)")"
    done
  done
done

# The bounds this bench was built to check (the real-time and many-handle
# issue's), each from the figures above, one row each, so that one run
# says which hold: exchanges/s at least 0.9 of the floor's (each
# single-connection and N-handle cell under normal scheduling without
# load), client CPU per exchange at most 1.1 of it on the server's core,
# SMALL's p99.9 and p99.99 under SCHED_FIFO at most 1.3 of the floor's,
# and no run failed under SCHED_FIFO. Throughput and CPU are the paired
# medians (runs seconds apart), the tails the tail table's ratio of
# medians, with [k/N] where only k of the cell's N libplugrl runs succeeded.
# With the Go floor in the cells, its figure for each bound stands beside
# libplugrl's, so that one run says which share misses.
echo
echo "bounds, libplugrl over the floor: exchanges/s >= 0.9 and client cpu-us/ex <= 1.1 (one core) as the paired medians,"
echo "normal scheduling without load; SMALL's turnaround p99.9 and p99.99 under SCHED_FIFO <= 1.3 as the tail table's"
echo "ratios ([k/N]: of libplugrl's N runs, k succeeded); SCHED_FIFO runs of any client but go-floor that failed (hung, or ended in"
echo "error; refused by the kernel: not counted) = 0; \"-\": not measured in this run (a cell left out, too few samples)"
if [[ $with_gofloor == 1 ]]; then
  # Beside each bound the Go floor's figure, by the same statistic: a bound
  # it misses too is the runtime's share as much as libplugrl's path.
  echo "go-floor: the Go floor's figure for the same bound and statistic (its failed SCHED_FIFO runs apart), and whether it holds"
  printf '%-46s %-26s %-6s %-5s %s\n' bound value limit holds go-floor
else
  printf '%-46s %-26s %-6s %s\n' bound value limit holds
fi
# gofloor_paired KEY STAT: the Go floor's paired median over the floor
# for cell KEY (name/pin/sched) and STAT (rate, cpu), without its interval
# ("-" without a pair; empty when the Go floor is not in the cells).
gofloor_paired() {
  [[ $with_gofloor == 1 ]] || return 0
  local v
  v=$(paired "${runs[$1/go-floor/$2]:-}" "${runs[$1/floor/$2]:-}" ratio)
  echo "${v%% *}"
}
# gofloor_tail KEY Q: the Go floor's tail ratio over the floor's for cell
# KEY and percentile key Q (t999, t9999); empty without the Go floor.
gofloor_tail() {
  [[ $with_gofloor == 1 ]] || return 0
  ratio "$(medq "$1/go-floor" "$2")" "$(medq "$1/floor" "$2")"
}
# bound_row NAME VALUE OP LIMIT [GOFLOOR_VALUE]: one bound's row.
bound_row() {
  if [[ $with_gofloor == 1 ]]; then
    printf '%-46s %-26s %-6s %-5s %s\n' "$1" "$2" "$3 $4" "$(holds "$2" "$3" "$4")" "${5:--} ($(holds "${5:--}" "$3" "$4"))"
  else
    printf '%-46s %-26s %-6s %s\n' "$1" "$2" "$3 $4" "$(holds "$2" "$3" "$4")"
  fi
}
pin_name() { if [[ $1 == same ]]; then echo "one core"; else echo "$1"; fi; }
for wl in "${workloads[@]}"; do
  read -r name _ _ _ _ _ <<<"$wl"
  for pin in "${pinnings[@]}"; do
    key=$name/$pin/other
    bound_row "exchanges/s, $name, $(pin_name "$pin"), other" \
      "$(paired "${runs[$key/libplugrl/rate]}" "${runs[$key/floor/rate]}" ratio boot)" '>=' 0.9 \
      "$(gofloor_paired "$key" rate)"
  done
  [[ $name == SMALLx* ]] && continue
  key=$name/same/other
  bound_row "client cpu-us/ex, $name, one core, other" \
    "$(paired "${runs[$key/libplugrl/cpu]}" "${runs[$key/floor/cpu]}" ratio boot)" '<=' 1.1 \
    "$(gofloor_paired "$key" cpu)"
done
fifo_failed_gf=0 fifo_runs_gf=0
fifo_failed=0 fifo_runs=0
for sched in "${scheds[@]}"; do
  [[ $sched == fifo* ]] || continue
  for pin in "${pinnings[@]}"; do
    if [[ $have_small == 1 ]]; then
      lkey=SMALL/$pin/$sched/libplugrl
      ok=$(oks "$lkey")
      [[ ${ok%/*} == "${ok#*/}" ]] && ok= || ok=" [$ok]"
      for q in 99.9 99.99; do
        bound_row "SMALL p$q, $(pin_name "$pin"), $sched" \
          "$(ratio "$(medq "$lkey" "t${q//./}")" "$(medq "SMALL/$pin/$sched/floor" "t${q//./}")")$ok" '<=' 1.3 \
          "$(gofloor_tail "SMALL/$pin/$sched" "t${q//./}")"
      done
    fi
    for wl in "${workloads[@]}"; do
      read -r name _ _ _ _ _ <<<"$wl"
      for client in "${clients[@]}"; do
        for st in ${runs[$name/$pin/$sched/$client/status]}; do
          [[ $st == ok || $st == failed ]] || continue # refused: the kernel's, not a run made
          # The Go floor's runs are counted apart: a reference, not a
          # client the bound is about.
          if [[ $client == go-floor ]]; then
            fifo_runs_gf=$((fifo_runs_gf + 1))
            [[ $st == ok ]] || fifo_failed_gf=$((fifo_failed_gf + 1))
          else
            fifo_runs=$((fifo_runs + 1))
            [[ $st == ok ]] || fifo_failed=$((fifo_failed + 1))
          fi
        done
      done
    done
  done
done
if [[ $have_fifo == 0 || $have_small == 0 ]]; then
  bound_row "SMALL p99.9 and p99.99 under SCHED_FIFO" - '<=' 1.3
fi
if ((fifo_runs)); then
  gf=-
  ((fifo_runs_gf)) && gf="$fifo_failed_gf of $fifo_runs_gf"
  bound_row "SCHED_FIFO runs that failed, of $fifo_runs made" "$fifo_failed" '<=' 0 "$gf"
else
  bound_row "SCHED_FIFO runs that failed" - '<=' 0
fi

# The order's balance: how often each client ran after libplugrl (the
# rest of the repetitions, before it). A client that always ran after it
# would carry any drift within a cell into its paired ratio.
after=
for client in "${clients[@]}"; do
  [[ $client == libplugrl ]] || after+=" $client ${after_lib[$client]:-0},"
done
odd=
((reps % 2)) && odd=" (an odd count: the last repetition's order is not balanced by its reverse)"
echo
echo "order: of the $reps repetitions, each client ran after libplugrl in:${after%,}$odd"

# The ledger's cost again, paired: each repetition's ledger run against
# the libplugrl run of the same repetition (the runs of one repetition are
# seconds apart, and this machine's speed drifts by tens of percent over
# minutes, which the ratio of two medians above carries and a median of
# per-repetition ratios mostly cancels).
if [[ $with_ledger == 1 ]]; then
  echo
  echo "step ledger cost, paired: ledger run / libplugrl run of the same repetition, median (min-max) over the"
  echo "repetitions where both succeeded ([k/N]: only k of the N)"
  printf '%-9s %-5s %-10s %-40s %-26s %-40s %s\n' workload pin sched "digest ex/s" "digest cpu-us/ex" "full ex/s" "full cpu-us/ex"
  for wl in "${workloads[@]}"; do
    read -r name _ _ _ _ _ <<<"$wl"
    for sched in "${scheds[@]}"; do
      for pin in "${pinnings[@]}"; do
        lkey=$name/$pin/$sched/libplugrl dkey=$name/$pin/$sched/ledger-digest ukey=$name/$pin/$sched/ledger-full
        printf '%-9s %-5s %-10s %-40s %-26s %-40s %s\n' "$name" "$pin" "$sched" \
          "$(paired "${runs[$dkey/rate]}" "${runs[$lkey/rate]}")$(lost_mark "${runs[$dkey/lost]}")" \
          "$(paired "${runs[$dkey/cpu]}" "${runs[$lkey/cpu]}")" \
          "$(paired "${runs[$ukey/rate]}" "${runs[$lkey/rate]}")$(lost_mark "${runs[$ukey/lost]}")" \
          "$(paired "${runs[$ukey/cpu]}" "${runs[$lkey/cpu]}")"
      done
    done
  done
  echo "(*dropped N records: that level's ledgers in the cell did not record N records, the queue being full (plugrl"
  echo " ledger summary: NOT RECORDED): its figure is the cost of a ledger that recorded less, not of a whole one;"
  echo " *unchecked: a ledger could not be checked)"
fi

# The ledger's cost in adjacent runs (PLUGRL_BENCH_LEDGER_PAIRS=N): the
# repetitions above put a ledger run up to four runs from its libplugrl
# run, and this machine's speed drifts by tens of percent over minutes; a
# 5 % cost needs runs seconds apart and many of them. Each triplet runs
# libplugrl and both ledger levels back to back, in the six orders in turn:
# over the six, each ledger level runs as often before libplugrl as after
# it (3 and 3), but next to it in 4 and one run apart in 2 (libplugrl is
# in the middle of 2 of the 6 orders, next to both; at an end in the other
# 4, next to one of them): no order of three can balance that. The figure
# is the median of the per-triplet ratios (exchanges/s) and differences
# (client CPU per exchange), with a 90 % bootstrap interval of that median
# (2000 resamples, a fixed seed).
if [[ $lpairs != 0 ]]; then
  declare -A adj
  trio=(libplugrl ledger-digest ledger-full)
  perms=("0 1 2" "1 2 0" "2 0 1" "0 2 1" "2 1 0" "1 0 2")
  for wl in "${single[@]}"; do # SMALL and LARGE, as selected
    read -r name envs cams img state conns <<<"$wl"
    IFS=/ read -r infer_bytes feedback_bytes <<<"$(eval echo "\$bytes_$name")"
    for pin in "${pinnings[@]}"; do
      for ((i = 1; i <= lpairs; i++)); do
        order=()
        for k in ${perms[$((i % 6))]}; do order+=("${trio[$k]}"); done
        for client in "${order[@]}"; do
          out=$(run_one "$client" "$pin" other "$conns" "$envs" "$cams" "$img" "$state" "$window")
          read -r -a vals <<<"$out"
          adj[$name/$pin/$client/rate]+=" ${vals[1]}"
          adj[$name/$pin/$client/cpu]+=" ${vals[2]}"
          adj[$name/$pin/$client/lost]+=" ${vals[19]}"
        done
      done
    done
  done
  echo
  echo "step ledger cost in adjacent runs: $lpairs triplets per cell (libplugrl, digest, full back to back, six orders in turn);"
  echo "ledger / libplugrl exchanges/s and ledger - libplugrl client cpu-us/ex, median (90 % bootstrap interval)"
  printf '%-9s %-5s %-40s %-24s %-40s %s\n' workload pin "digest ex/s" "digest cpu-us/ex" "full ex/s" "full cpu-us/ex"
  for wl in "${single[@]}"; do
    read -r name _ _ _ _ _ <<<"$wl"
    for pin in "${pinnings[@]}"; do
      k=$name/$pin
      dmark=$(lost_mark "${adj[$k/ledger-digest/lost]}")
      fmark=$(lost_mark "${adj[$k/ledger-full/lost]}")
      printf '%-9s %-5s %-40s %-24s %-40s %s\n' "$name" "$pin" \
        "$(paired "${adj[$k/ledger-digest/rate]}" "${adj[$k/libplugrl/rate]}" ratio boot)$dmark" \
        "$(paired "${adj[$k/ledger-digest/cpu]}" "${adj[$k/libplugrl/cpu]}" diff boot)" \
        "$(paired "${adj[$k/ledger-full/rate]}" "${adj[$k/libplugrl/rate]}" ratio boot)$fmark" \
        "$(paired "${adj[$k/ledger-full/cpu]}" "${adj[$k/libplugrl/cpu]}" diff boot)"
    done
  done
  echo "(*dropped N records, *unchecked: as in the table above)"
fi

if [[ $refused -gt 0 ]]; then
  echo
  echo "NOTE: the kernel refused chrt -f 50 on $refused run(s) (though it allowed it when the bench began): the"
  echo "environment's real-time limit (RLIMIT_RTPRIO, CAP_SYS_NICE, the cgroup's real-time runtime), not the library;"
  echo "those runs are left out, and their cells' ok column says so"
fi
if [[ $gf_failed -gt 0 ]]; then
  echo
  echo "NOTE: $gf_failed run(s) of the Go floor under SCHED_FIFO failed (see above): the Go floor's, not libplugrl's;"
  echo "left out of the medians"
fi
if [[ $failed -gt 0 ]]; then
  echo
  echo "NOTE: $failed run(s) under SCHED_FIFO failed (see above): a finding about real-time callers; left out of the medians"
fi

# The instructions of a SMALL exchange, counted by callgrind for each client
# (tests/bench_instructions.sh); PLUGRL_BENCH_INSTRUCTIONS=0 leaves them
# out. A failure fails the bench (after the tables), as the idle memory's
# does.
instructions_failed=0
if [[ $with_instructions == 1 ]]; then
  "$(dirname "${BASH_SOURCE[0]}")/bench_instructions.sh" "$bin" || {
    echo "tests/bench.sh: FAILED: the instruction counts" >&2
    instructions_failed=1
  }
fi

# The memory of an idle client: K clients opened and left idle against
# plugrl serve, the client process's resident set before and after
# (plugrl_bench_client --idle). A failure fails the bench (after the
# tables).
idle_failed=0
if [[ -x $bin/plugrl ]]; then
  "$bin/plugrl" serve --addr 127.0.0.1:0 --quiet >"$tmp/idle.out" 2>"$tmp/idle.err" &
  ipid=$!
  if iurl=$(wait_url "$tmp/idle.out" "$ipid"); then
    echo
    for k in 64 512; do
      if ! timeout -s KILL 60 "$bin/plugrl_bench_client" --url "$iurl" --idle "$k"; then
        echo "tests/bench.sh: FAILED: the idle-memory measurement of $k clients" >&2
        idle_failed=1
      fi
    done
  else
    echo "tests/bench.sh: FAILED: plugrl serve did not start; no idle-memory figures: $(cat "$tmp/idle.err")" >&2
    idle_failed=1
  fi
  kill "$ipid" 2>/dev/null || true
  wait "$ipid" 2>/dev/null || true
  ipid=
else
  echo
  echo "NOTE: no $bin/plugrl: the idle-memory figures are skipped"
fi
exit $((idle_failed | instructions_failed))
