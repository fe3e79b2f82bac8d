#!/usr/bin/env bash
# The MuJoCo cartpole learns to balance through PlugRL:
#
#   cartpole_learns.sh PLUGRL_BIN CARTPOLE_BIN PLOT_RETURNS_PY
#
# runs the cartpole client (8 envs, H = 1) for 200 episodes against
# `plugrl serve --policy random`, then twice for 320 episodes against
# `plugrl serve --policy cem --seed 1`, and passes if the two cem runs gave
# the same returns, and the mean return of cem's last 40 episodes is at
# least 3 times its first 40's and at least 5 times the random policy's.
# Everything is seeded and runs on one connection: the returns are the same
# on every run and every machine speed; nothing here is a timing.
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 PLUGRL_BIN CARTPOLE_BIN PLOT_RETURNS_PY" >&2
  exit 2
fi
plugrl=$1
client=$2
plot=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

serve=(--horizon 1 --action-dim 1 --action-dtype float64 --quiet --seed 1)
run() { # POLICY EPISODES CSV
  "$here/run_with_server.sh" "$plugrl" --policy "$1" "${serve[@]}" -- \
    "$client" --envs 8 --episodes "$2" --seed 1 --quiet --csv "$3" --url
}

run random 200 "$tmp/random.csv"
run cem 320 "$tmp/cem.csv"
run cem 320 "$tmp/cem2.csv"

if ! diff <(cut -d, -f1,2,4,5,6 "$tmp/cem.csv") <(cut -d, -f1,2,4,5,6 "$tmp/cem2.csv") >/dev/null; then
  echo "FAIL: two runs with the same seeds gave different episodes" >&2
  exit 1
fi
echo "two seeded runs: the same $(($(wc -l <"$tmp/cem.csv") - 1)) episodes"
python3 "$plot" "$tmp/cem.csv" --random "$tmp/random.csv" --window 40 \
  --require-gain 3 --require-ratio 5 --out "$tmp/returns.svg"
echo "PASS: the cartpole learns"
