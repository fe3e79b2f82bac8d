#!/usr/bin/env bash
# libplugrl against the transport floor (`./build.sh bench` runs this after
# building):
#
#   tests/bench.sh BIN_DIR
#
# For the SMALL workload (1 env, no image, state 8) and the LARGE one (16
# envs, 2 cameras of 224x224x3, state 32), both with H=8 and D=7 actions,
# it runs build/bin/plugrl-bench-server against
#
#   floor      plugrl_bench_floor: frames of exactly the sizes libplugrl
#              sends for that workload, masked with a fresh key each, and no
#              encoding at all
#   libplugrl  plugrl_bench_client: the workload through libplugrl.so's
#              plugrl_infer / plugrl_feedback
#
# with both processes pinned to core 0 (same-core: the CPU cost of an
# exchange) and with the server on core 0 and the client on core 1 (split:
# the latency), in interleaved repetitions. The server measures exchanges/s
# the same way for both clients. Prints every run and a table of medians
# with the library/floor ratio.
#
# Environment: PLUGRL_BENCH_REPS (default 5), PLUGRL_BENCH_SECONDS (the
# measured window, default 1.5), PLUGRL_BENCH_WARMUP (default 0.5),
# PLUGRL_BENCH_FLOOR_CHUNK (the floor's --chunk, default 0: one send per
# frame).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=${1:?usage: tests/bench.sh BIN_DIR}
reps=${PLUGRL_BENCH_REPS:-5}
window=${PLUGRL_BENCH_SECONDS:-1.5}
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

# name envs cams img state
workloads=("SMALL 1 0 0 8" "LARGE 16 2 224 32")
pinnings=(same split)
cores=$(nproc)
if [[ $cores -lt 2 ]]; then
  echo "tests/bench.sh: one core only: the split runs are skipped" >&2
  pinnings=(same)
fi

tmp=$(mktemp -d)
spid=
cleanup() {
  if [[ -n $spid ]] && kill -0 "$spid" 2>/dev/null; then kill "$spid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# run_one CLIENT PINNING ENVS CAMS IMG STATE: prints the server's exchanges/s.
run_one() {
  local client=$1 pin=$2 envs=$3 cams=$4 img=$5 state=$6 ccore=0 url=
  [[ $pin == split ]] && ccore=1
  taskset -c 0 "$bin/plugrl-bench-server" --envs "$envs" --warmup "${warmup}s" --seconds "${window}s" \
    >"$tmp/server.out" 2>"$tmp/server.err" &
  spid=$!
  url=$(wait_url "$tmp/server.out" "$spid") || url=
  [[ -n $url ]] || {
    echo "tests/bench.sh: the bench server did not start: $(cat "$tmp/server.err")" >&2
    exit 1
  }
  local rc=0
  if [[ $client == floor ]]; then
    taskset -c "$ccore" "$bin/plugrl_bench_floor" --url "$url" --infer-bytes "$infer_bytes" \
      --feedback-bytes "$feedback_bytes" --chunk "$floor_chunk" >"$tmp/client.out" 2>"$tmp/client.err" || rc=$?
  else
    taskset -c "$ccore" "$bin/plugrl_bench_client" --url "$url" --envs "$envs" --cams "$cams" --img "$img" \
      --state "$state" >"$tmp/client.out" 2>"$tmp/client.err" || rc=$?
  fi
  wait "$spid" || rc=$?
  spid=
  if [[ $rc -ne 0 ]]; then
    echo "tests/bench.sh: $client run failed ($rc):" >&2
    cat "$tmp/client.err" "$tmp/server.err" >&2
    exit 1
  fi
  sed -n 's/^exchanges\/s //p' "$tmp/server.out" | tail -n 1
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

declare -A runs
start=$SECONDS
echo "libplugrl vs. the transport floor: $reps interleaved repetitions of ${window} s windows (after ${warmup} s warm-up), $cores cores"
for wl in "${workloads[@]}"; do
  read -r name envs cams img state <<<"$wl"
  read -r infer_bytes feedback_bytes < <("$bin/plugrl-bench-server" --sizes --envs "$envs" --cams "$cams" --img "$img" \
    --state "$state" | sed 's/infer=\([0-9]*\) feedback=\([0-9]*\).*/\1 \2/')
  eval "bytes_$name='$infer_bytes/$feedback_bytes'"
done
for ((rep = 1; rep <= reps; rep++)); do
  for wl in "${workloads[@]}"; do
    read -r name envs cams img state <<<"$wl"
    IFS=/ read -r infer_bytes feedback_bytes <<<"$(eval echo "\$bytes_$name")"
    for pin in "${pinnings[@]}"; do
      order=(floor libplugrl)
      ((rep % 2 == 0)) && order=(libplugrl floor)
      line="rep $rep $name $pin:"
      for client in "${order[@]}"; do
        r=$(run_one "$client" "$pin" "$envs" "$cams" "$img" "$state")
        runs[$name/$pin/$client]+=" $r"
        line+=" $client $r"
      done
      echo "  $line"
    done
  done
done

echo
printf '%-8s %-10s %16s %16s %8s\n' workload pinning "floor ex/s" "libplugrl ex/s" lib/floor
for wl in "${workloads[@]}"; do
  read -r name _ <<<"$wl"
  for pin in "${pinnings[@]}"; do
    f=$(median <<<"${runs[$name/$pin/floor]}")
    l=$(median <<<"${runs[$name/$pin/libplugrl]}")
    printf '%-8s %-10s %16.1f %16.1f %8.3f\n' "$name" "$pin" "$f" "$l" "$(awk -v l="$l" -v f="$f" 'BEGIN {print l / f}')"
  done
done
echo "(medians of $reps; same = both on core 0, split = server core 0, client core 1; $(date -u +%Y-%m-%d), $cores cores, $((SECONDS - start)) s)"
