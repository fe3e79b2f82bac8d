#!/usr/bin/env bash
# The arithmetic of tests/bench.sh's tables (tests/bench_stats.sh) on fixed
# numbers, against figures computed by hand: the bench itself runs on
# numbers no test can predict, so a median of the wrong rank, a ratio upside
# down or runs paired across repetitions would pass bench_smoke and change
# every published figure.
#
#   tests/bench_stats_test.sh
set -euo pipefail
# shellcheck source=tests/bench_stats.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_stats.sh"

fails=0
# check WHAT GOT WANT
check() {
  if [[ $2 != "$3" ]]; then
    echo "FAIL: $1: got \"$2\", want \"$3\"" >&2
    fails=$((fails + 1))
  fi
}

# median: the middle one, or the mean of the two middle ones; numeric order
# (9 < 10 < 100, where a text sort puts 100 in the middle); nan and "-"
# (failed runs, too few samples) left out.
check "median odd" "$(median <<<" 3 1 2")" 2
check "median even" "$(median <<<" 4 1 3 2")" 2.5
check "median numeric order" "$(median <<<" 9 100 10")" 10
check "median skips nan and -" "$(median <<<" nan 7 - 5")" 6
check "median of nothing" "$(median <<<" nan -")" -
check "median of lines" "$(printf '1\n20\n3\n' | median)" 3

# spread: min-max in numeric order.
check "spread" "$(spread <<<" 10 9 nan 100")" 9-100
check "spread of nothing" "$(spread <<<" -")" -

# ratio: the first over the second.
check "ratio" "$(ratio 3 4)" 0.750
check "ratio by 0" "$(ratio 1 0)" -
check "ratio of -" "$(ratio - 4)" -
check "num" "$(num %.1f 2.25)" 2.2
check "num of nan" "$(num %.1f nan)" -

# holds: a bound met or not, at its edge too; a paired figure by its
# median; no number, no verdict.
check "holds >= above" "$(holds 0.905 '>=' 0.9)" yes
check "holds >= at the edge" "$(holds 0.900 '>=' 0.9)" yes
check "holds >= below" "$(holds 0.899 '>=' 0.9)" NO
check "holds <= above" "$(holds 1.302 '<=' 1.3)" NO
check "holds <= at the edge" "$(holds 1.300 '<=' 1.3)" yes
check "holds paired" "$(holds '0.867 (0.792-1.179)' '>=' 0.9)" NO
check "holds paired, few pairs" "$(holds '1.010 (0.921-1.041) [2/3]' '>=' 0.9)" yes
check "holds no number" "$(holds '- [0/3]' '>=' 0.9)" -
check "holds count" "$(holds 0 '<=' 0)" yes
check "holds count over" "$(holds 2 '<=' 0)" NO
check "holds compares numbers, not strings" "$(holds 10 '>=' 9)" yes
check "holds exponent" "$(holds 1e3 '>=' 0.9)" yes

# medq_of: a percentile's median is "-" as soon as one run had too few
# samples for it.
check "medq_of" "$(medq_of " 5 7")" 6
check "medq_of with a -" "$(medq_of " 5 - 7")" -

# paired: A[i]/B[i] of the same repetition i, only where both are numbers:
# 2/1, 6/2, 8/2 (the third repetition's A failed): median 3, range 2-4.
check "paired ratio" "$(paired " 2 6 nan 8" " 1 2 4 2")" "3.000 (2.000-4.000) [3/4]"
check "paired, B failed" "$(paired " 4 9" " 2 nan")" "2.000 (2.000-2.000) [1/2]"
check "paired, none" "$(paired " nan" " 1")" "- [0/1]"
# diff: A[i]-B[i]: 4 5 6 6, median 5.5.
check "paired diff" "$(paired " 5 7 9 10" " 1 2 3 4" diff)" "+5.50 (+4.00..+6.00)"
# The bootstrap's 90 % interval of the median of 1..9: a resample's median
# is at most 2 with probability P(at least 5 of 9 draws <= 2, p = 2/9) =
# 0.03 (60 of the 2000) and at most 3 with 0.145 (290): the 101st of the
# sorted 2000 is 3 (and the 1900th 7, by symmetry), far from either edge,
# whatever the awk's random numbers; the range would be 1-9.
check "paired bootstrap" "$(paired " 1 2 3 4 5 6 7 8 9" " 1 1 1 1 1 1 1 1 1" ratio boot)" "5.000 (3.000-7.000)"
check "paired bootstrap, diff" "$(paired " 11 12 13 14 15 16 17 18 19" " 10 10 10 10 10 10 10 10 10" diff boot)" \
  "+5.00 (+3.00..+7.00)"

# lat_fields: the server's line, by label, nan for what it lacks.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cat >"$tmp" <<'OUT'
latency_us turnaround n 1000 p50 1.5 p90 2.5 p99 9.0 p99.9 - p99.99 - max 40.0
latency_us infer_feedback n 1000 p50 3.5 p90 4.5 p99 - max 50.0
OUT
check "lat_fields turnaround" "$(lat_fields "$tmp" turnaround)" "1000 1.5 2.5 9.0 - - 40.0"
check "lat_fields infer_feedback" "$(lat_fields "$tmp" infer_feedback)" "1000 3.5 4.5 - nan nan 50.0"

if [[ $fails -gt 0 ]]; then
  echo "tests/bench_stats_test.sh: $fails check(s) failed" >&2
  exit 1
fi
echo "tests/bench_stats_test.sh: ok"
