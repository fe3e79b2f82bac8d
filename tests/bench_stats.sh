# Sourced by tests/bench.sh: the arithmetic of its tables, apart from the
# runs, so that tests/bench_stats_test.sh can check it on fixed numbers
# against hand-computed figures (a median of the wrong rank or a ratio
# upside down would otherwise change every published figure and fail no
# test).

# isnum VALUE: a plain non-negative number (not nan, not "-").
isnum() { [[ $1 =~ ^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]]; }

# lat_fields FILE KIND: "n p50 p90 p99 p99.9 p99.99 max" from the server's
# "latency_us KIND n N p50 X ..." line, by label; nan for what is absent.
lat_fields() {
  awk -v k="$2" '$1 == "latency_us" && $2 == k { for (i = 3; i < NF; i += 2) v[$i] = $(i + 1); seen = 1 }
    END { n = split("n p50 p90 p99 p99.9 p99.99 max", l, " ")
          for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), ((l[i] in v) ? v[l[i]] : "nan"); print "" }' "$1"
}

# median: of the numbers on stdin (space- or line-separated); nan and "-"
# are left out; "-" when there is none.
median() {
  tr ' ' '\n' | awk '/^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/' | sort -g |
    awk '{v[NR]=$1} END {if (NR == 0) print "-"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'
}
spread() {
  tr ' ' '\n' | awk '/^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/' | sort -g |
    awk 'NR==1 {lo=$1} {hi=$1} END {if (NR == 0) print "-"; else printf "%.6g-%.6g", lo, hi}'
}

# ratio A B: A/B to three places, or "-" when either is not a number or B is 0.
ratio() { if isnum "$1" && isnum "$2"; then awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "-"}'; else echo -; fi; }

# num FORMAT VALUE: VALUE printed with FORMAT, or "-" when not a number.
num() {
  # shellcheck disable=SC2059 # the format is the argument
  if isnum "$2"; then printf "$1" "$2"; else echo -; fi
}

# paired A B [MODE [SPREAD]]: the median of A[i]/B[i] (MODE ratio, the
# default) or A[i]-B[i] (MODE diff) over the pairs where both are numbers
# (a failed run's are not), with its spread: the min-max of the pairs
# (SPREAD range, the default) or a 90 % bootstrap interval of the median
# (SPREAD boot: 2000 resamples, a fixed seed); " [k/N]" after it when only
# k of the N pairs were numbers.
paired() {
  awk -v a="$1" -v b="$2" -v mode="${3:-ratio}" -v spread="${4:-range}" '
    function med(v, n,   i, j, t) { # sorts v[1..n]
      for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
      return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    BEGIN {
      n = split(a, x, " "); nb = split(b, y, " "); if (nb > n) n = nb; k = 0
      num = "^[0-9]+(\\.[0-9]*)?([eE][-+]?[0-9]+)?$"
      for (i = 1; i <= n; i++) if (x[i] ~ num && y[i] ~ num && y[i] > 0)
        r[++k] = (mode == "ratio") ? x[i] / y[i] : x[i] - y[i]
      if (k == 0) { printf "- [0/%d]", n; exit }
      m = med(r, k)
      lo = r[1]; hi = r[k]
      if (spread == "boot") {
        srand(1)
        for (s = 1; s <= 2000; s++) {
          for (i = 1; i <= k; i++) c[i] = r[int(rand() * k) + 1]
          ms[s] = med(c, k)
        }
        med(ms, 2000)
        lo = ms[101]; hi = ms[1900]
      }
      fmt = (mode == "ratio") ? "%.3f (%.3f-%.3f)" : "%+.2f (%+.2f..%+.2f)"
      printf fmt, m, lo, hi
      if (k < n) printf " [%d/%d]", k, n
    }'
}

# medq_of VALUES: the median of a percentile's runs; "-" when any of them
# had too few samples for it (the server printed "-").
medq_of() {
  if [[ " $1 " == *" - "* ]]; then echo -; else median <<<"$1"; fi
}

# holds VALUE OP LIMIT: whether VALUE meets a bound: "yes" when it is OP
# (>= or <=) LIMIT, "NO" when not, "-" when it is not a number. VALUE may
# be a figure as paired prints it ("0.905 (0.792-1.179)"): its median, the
# first field, is what is compared, as printed (to three places).
holds() {
  local v=${1%% *}
  if ! isnum "$v"; then
    echo -
    return
  fi
  awk -v v="$v" -v op="$2" -v l="$3" 'BEGIN {
    ok = (op == ">=") ? (v + 0 >= l + 0) : (v + 0 <= l + 0); print ok ? "yes" : "NO" }'
}
