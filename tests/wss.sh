#!/usr/bin/env bash
# wss:// end to end through the C ABI: the C probe client against `plugrl
# serve --tls-self-signed` (the reference server over TLS, with a
# certificate made for the run):
#
#   wss.sh PLUGRL_BIN PROBE_CLIENT
#
# A client that trusts the written certificate (options.tls_ca_file) runs
# probe envs until the server stops the run; one with tls_insecure does
# too; one that trusts only the system's roots, or another server's
# certificate, or a machine with no CA certificates at all, or that speaks
# ws:// to the TLS port, fails to connect at once, with a message that
# says what mends it.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 2 ]]; then
  echo "usage: $0 PLUGRL_BIN PROBE_CLIENT" >&2
  exit 2
fi
server=$1
client=$2
for f in "$server" "$client"; do
  if [[ ! -x $f ]]; then
    echo "$0: $f is not an executable (build it with ./build.sh)" >&2
    exit 1
  fi
done

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.out "$tmp"/*.err; do
    [[ -s $f ]] && { echo "---- $f"; tail -n 20 "$f"; } >&2
  done
  exit 1
}

# start NAME STOP_AFTER: a TLS server whose certificate's PEM is
# $tmp/NAME.pem; sets url.
start() {
  : >"$tmp/$1.out"
  "$server" serve --addr 127.0.0.1:0 --policy probe --features reuse-feedback-obs --stop-after "$2" \
    --tls-self-signed "$tmp/$1.pem" >"$tmp/$1.out" 2>"$tmp/$1.err" &
  pids+=($!)
  url=$(wait_url "$tmp/$1.out" "$!") || fail "server $1 did not start"
}

# refused WHAT WHY ARGS...: the client must fail to connect (status 1,
# PLUGRL_CONNECT_FAILED), within 10 s, with the library's message saying
# why (matching the extended regular expression WHY). The client prints
# "connecting: <status>: <message>" itself: "connect" alone in its output
# proves nothing about the library's message.
refused() {
  local what=$1 why=$2 rc=0 t0=$SECONDS msg
  shift 2
  timeout 20 "$client" --envs 2 --max-reconnects 0 --timeout-ms 5000 "$@" >"$tmp/refused.log" 2>&1 || rc=$?
  [[ $rc -eq 1 ]] || fail "$what: the client exited $rc, want 1: $(cat "$tmp/refused.log")"
  ((SECONDS - t0 <= 10)) || fail "$what: took $((SECONDS - t0)) s"
  msg=$(sed -n 's/^.*: connecting: connection failed: //p' "$tmp/refused.log")
  [[ -n $msg ]] || fail "$what: not PLUGRL_CONNECT_FAILED with a message: $(cat "$tmp/refused.log")"
  grep -Eqi -- "$why" <<<"$msg" || fail "$what: the message does not say why (want /$why/): $msg"
  echo "ok   $what: $(tail -n 1 "$tmp/refused.log")"
}

start a 300
url_a=$url
start b 50
url_b=$url
[[ $url_a == wss://127.0.0.1:* ]] || fail "the server's URL is $url_a, want wss://127.0.0.1:PORT"

# (A machine without ca-certificates has no system roots either.)
refused "system roots only" "(none of the system's CA certificates|no CA certificates).*tls_ca_file" --url "$url_a"
refused "another server's certificate" "none of the CA file given" --url "$url_a" --ca-file "$tmp/b.pem"
# A container image without CA certificates: Go reads the system's roots
# from SSL_CERT_FILE and SSL_CERT_DIR when they are set.
SSL_CERT_FILE=$tmp/none.pem SSL_CERT_DIR=$tmp/none.d \
  refused "no system roots at all" "no CA certificates.*tls_ca_file" --url "$url_a"
refused "ws:// to the TLS port" "TLS" --url "ws://${url_a#wss://}" --ca-file "$tmp/a.pem"

"$client" --url "$url_a" --envs 3 --ca-file "$tmp/a.pem" --timeout-ms 10000 >"$tmp/client-a.log" 2>&1 ||
  fail "the client trusting a.pem: $(cat "$tmp/client-a.log")"
wait "${pids[0]}" || fail "server a exited $?"
grep -q "300 exchanges" "$tmp/a.out" || fail "server a did not count 300 exchanges: $(cat "$tmp/a.out")"
echo "ok   tls_ca_file: $(tail -n 1 "$tmp/a.out")"

"$client" --url "$url_b" --envs 1 --tls-insecure 1 --timeout-ms 10000 >"$tmp/client-b.log" 2>&1 ||
  fail "the client with tls_insecure: $(cat "$tmp/client-b.log")"
wait "${pids[1]}" || fail "server b exited $?"
grep -q "50 exchanges" "$tmp/b.out" || fail "server b did not count 50 exchanges: $(cat "$tmp/b.out")"
echo "ok   tls_insecure: $(tail -n 1 "$tmp/b.out")"
echo "PASS"
