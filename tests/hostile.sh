#!/usr/bin/env bash
# libplugrl against hostile servers: every case of tests/c/hostile.c, each
# in its own process against its own plugrl-hostile server.
#
#   hostile.sh BIN_DIR [CASE...]            the CTest run (short counts)
#   hostile.sh --figures BIN_DIR [CASE...]  full counts, then a markdown
#                                           table of the results (README)
#   hostile.sh --tls [--figures] BIN_DIR [CASE...]
#                                           the same over wss://
#
# With --tls each server is started with --tls-self-signed $tmp/ca.pem (a
# certificate made for it) and the case runs with HOSTILE_CA_FILE set to
# that file, so every case's options trust it (tls_ca_file).
#
# BIN_DIR holds plugrl-hostile and hostile (build/bin). For each case (all
# of `hostile --list` by default), this starts `plugrl-hostile --scenario S
# [flags]` as --list gives them, reads the URL line it prints, runs
# `hostile --case NAME [counts] URL` (killed after HOSTILE_CASE_TIMEOUT
# seconds, 120 by default), stops the server, and prints the case's result
# line. Exit status 1 if any case failed, crashed or hung. HOSTILE_SHORT=1
# in the environment (tests/sanitizers.sh sets it) runs the garble cases
# with fewer draws.
set -uo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

figures=0
tls=0
while [[ ${1:-} == --* ]]; do
  case $1 in
  --figures) figures=1 ;;
  --tls) tls=1 ;;
  *)
    echo "$0: unknown flag $1" >&2
    exit 2
    ;;
  esac
  shift
done
if [[ $# -lt 1 ]]; then
  echo "usage: $0 [--tls] [--figures] BIN_DIR [CASE...]" >&2
  exit 2
fi
bin=$1
shift
for exe in plugrl-hostile hostile; do
  if [[ ! -x $bin/$exe ]]; then
    echo "$0: $bin/$exe is not an executable (build it with ./build.sh)" >&2
    exit 2
  fi
done
case_timeout=${HOSTILE_CASE_TIMEOUT:-120}

# The counts: CTest keeps the run short, --figures measures properly.
case_args() {
  case $1 in
  interrupt-latency) if ((figures)); then echo "--n 1000"; else echo "--n 200"; fi ;;
  interrupt-signal) echo "--n 100" ;;
  # HOSTILE_SHORT (the sanitizer runs, where each is 5-8 times slower):
  # fewer draws, still every outcome of each case at its seed.
  garble | garble-runner) if [[ -n ${HOSTILE_SHORT:-} ]]; then echo "--n 300"; fi ;;
  garble-metadata) if [[ -n ${HOSTILE_SHORT:-} ]]; then echo "--n 100"; fi ;;
  garble-frames) if [[ -n ${HOSTILE_SHORT:-} ]]; then echo "--n 200"; fi ;;
  esac
}

declare -A server_of
all=()
while read -r name scenario; do
  [[ -n $name ]] || continue
  server_of[$name]=$scenario
  all+=("$name")
done < <("$bin/hostile" --list-all)
default=()
while read -r name _; do [[ -n $name ]] && default+=("$name"); done < <("$bin/hostile" --list)
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=("${default[@]}")
if [[ ${#cases[@]} -eq 0 ]]; then
  echo "$0: no cases to run: $bin/hostile --list listed none" >&2
  exit 1
fi
for c in "${cases[@]}"; do
  if [[ -z ${server_of[$c]:-} ]]; then
    echo "$0: unknown case $c; the cases are: ${all[*]}" >&2
    exit 2
  fi
done

tmp=$(mktemp -d)
pid=
srv_in=
stop_server() {
  if [[ -n $srv_in ]]; then
    exec {srv_in}>&-
    srv_in=
  fi
  if [[ -n $pid ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
  fi
}
trap 'stop_server; rm -rf "$tmp"' EXIT

# start_server SCENARIO [FLAGS...]: sets url. The server's stdin is a FIFO
# this script holds open, so that the server exits if this script dies.
start_server() {
  local fifo=$tmp/stdin
  rm -f "$fifo" "$tmp/url" "$tmp/server.err"
  mkfifo "$fifo"
  exec {srv_in}<>"$fifo"
  local tls_flags=()
  if ((tls)); then
    rm -f "$tmp/ca.pem"
    tls_flags=(--tls-self-signed "$tmp/ca.pem")
  fi
  # shellcheck disable=SC2086
  "$bin/plugrl-hostile" "${tls_flags[@]}" --scenario "$@" <"$fifo" >"$tmp/url" 2>"$tmp/server.err" {srv_in}>&- &
  pid=$!
  if url=$(wait_url "$tmp/url" "$pid"); then
    if ((tls)) && [[ $url != wss://* || ! -s $tmp/ca.pem ]]; then
      echo "$0: plugrl-hostile --tls-self-signed printed $url and wrote no $tmp/ca.pem" >&2
      return 1
    fi
    return 0
  fi
  echo "$0: plugrl-hostile --scenario $* printed no URL; its output:" >&2
  cat "$tmp/url" "$tmp/server.err" >&2
  return 1
}

results=$tmp/results
: >"$results"
failed=()
start=$(date +%s.%N)
for c in "${cases[@]}"; do
  # shellcheck disable=SC2086
  if ! start_server ${server_of[$c]}; then
    failed+=("$c")
    echo "case=$c status=- took_ms=- deadline_ms=- overshoot_ms=- peak_rss_kb=- result=NO-SERVER" >>"$results"
    stop_server
    continue
  fi
  t0=$(date +%s.%N)
  rc=0
  # shellcheck disable=SC2046
  HOSTILE_CA_FILE=$( ((tls)) && echo "$tmp/ca.pem") \
    timeout -k 5 "$case_timeout" "$bin/hostile" --case "$c" $(case_args "$c") "$url" \
    >"$tmp/case.out" 2>"$tmp/case.err" {srv_in}>&- || rc=$?
  t1=$(date +%s.%N)
  stop_server
  line=$(grep '^case=' "$tmp/case.out" | tail -n 1)
  if [[ -z $line ]]; then
    why="CRASH(rc=$rc)"
    [[ $rc -eq 124 || $rc -eq 137 ]] && why="HUNG(killed after ${case_timeout}s)"
    line="case=$c status=- took_ms=- deadline_ms=- overshoot_ms=- peak_rss_kb=- result=$why"
  fi
  # How long the case's process ran, for whoever keeps CI's time down.
  line="$line case_s=$(awk "BEGIN{printf \"%.1f\", $t1-$t0}")"
  echo "$line"
  echo "$line" >>"$results"
  if [[ $rc -ne 0 ]]; then
    failed+=("$c")
    echo "---- $c (exit $rc, $(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s): stderr" >&2
    tail -n 40 "$tmp/case.err" >&2
    echo "---- plugrl-hostile stderr (last 20 lines)" >&2
    tail -n 20 "$tmp/server.err" >&2
  elif [[ -s $tmp/case.err ]]; then
    sed "s/^/    /" "$tmp/case.err"
  fi
done
end=$(date +%s.%N)

if ((figures)); then
  echo
  echo "| case | status | deadline (ms) | elapsed (ms) | overshoot (ms) | peak RSS (MB) | result | notes |"
  echo "|---|---|---:|---:|---:|---:|---|---|"
  awk '{
    delete f; notes = ""
    for (i = 1; i <= NF; i++) {
      k = substr($i, 1, index($i, "=") - 1); v = substr($i, index($i, "=") + 1)
      f[k] = v
      if (i > 7) notes = notes (notes == "" ? "" : " ") $i
    }
    rss = f["peak_rss_kb"] ~ /^[0-9]+$/ ? sprintf("%.1f", f["peak_rss_kb"] / 1024) : "-"
    dl = f["deadline_ms"]; if (dl == "0") dl = "0 (at once)"
    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f["case"], f["status"], dl, f["took_ms"], f["overshoot_ms"], rss, f["result"], notes
  }' "$results"
  echo
  # The cases that measure interrupt latency (grep's pairs of case and
  # figures went out of step at the other interrupt-* cases).
  awk '{
    delete f
    for (i = 1; i <= NF; i++) { eq = index($i, "="); if (eq) f[substr($i, 1, eq - 1)] = substr($i, eq + 1) }
    if ("interrupt_us_median" in f)
      printf "interrupt latency (%s): median %s us, p99 %s us, max %s us\n", f["case"], f["interrupt_us_median"], f["p99"], f["max"]
  }' "$results"
fi
echo
over=
((tls)) && over=" over wss://"
printf '%d cases%s in %.1f s; ' "${#cases[@]}" "$over" "$(awk "BEGIN{print $end-$start}")"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all passed"
