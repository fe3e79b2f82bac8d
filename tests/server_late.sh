#!/usr/bin/env bash
# libplugrl and a server that is not up yet: tests/c/hostile.c's case
# server-late, through the C API (options.open_wait_ms).
#
#   server_late.sh BIN_DIR
#
# A robot often starts before its trainer. This picks a free port, starts
# `hostile --case server-late ws://127.0.0.1:PORT` (nothing listens there
# yet), and a second later `plugrl-hostile --scenario normal` on that
# port: the case's first open (no wait) must fail at once, its second
# (open_wait_ms 10000) must connect once the server is up and exchange.
# The case then checks a wait that ends, and one that plugrl_interrupt
# ends, against a port where nothing ever listens.
#
# Then a robot whose clock is not set yet: `plugrl-hostile --tls-self-signed
# CA --tls-valid-in 1500ms` serves wss:// with a certificate not valid yet,
# and `hostile --case clock-behind` (trusting CA) must fail at once
# without a wait, saying the clock is behind, and connect with one.
set -uo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=tests/lib.sh
source "$here/lib.sh"

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BIN_DIR" >&2
  exit 2
fi
bin=$1
require_built "$bin" plugrl-hostile hostile

tmp=$(mktemp -d)
server=
trap '[[ -n $server ]] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
status=0

# report NAME RC: the case's result line, and its stderr when it failed.
report() {
  local line
  line=$(grep '^case=' "$tmp/out" | tail -n 1)
  [[ -n $line ]] || line="case=$1 result=CRASH(rc=$2)"
  echo "$line"
  if [[ $2 -ne 0 ]]; then
    cat "$tmp/err" >&2
    status=1
  elif [[ -s $tmp/err ]]; then
    sed "s/^/    /" "$tmp/err"
  fi
}
port=$("$here/free_port.sh")
url=ws://127.0.0.1:$port

timeout -k 5 60 "$bin/hostile" --case server-late "$url" >"$tmp/out" 2>"$tmp/err" &
case_pid=$!
sleep 1
: >"$tmp/url"
"$bin/plugrl-hostile" --scenario normal --addr "127.0.0.1:$port" >"$tmp/url" 2>"$tmp/server.err" &
server=$!
if ! wait_url "$tmp/url" "$server" >/dev/null; then
  echo "$0: plugrl-hostile could not serve on port $port (taken since it was picked?):" >&2
  cat "$tmp/url" "$tmp/server.err" >&2
fi
rc=0
wait "$case_pid" || rc=$?
report server-late "$rc"
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null

: >"$tmp/url"
"$bin/plugrl-hostile" --scenario normal --tls-self-signed "$tmp/ca.pem" --tls-valid-in 1500ms >"$tmp/url" 2>"$tmp/server.err" &
server=$!
if url=$(wait_url "$tmp/url" "$server"); then
  rc=0
  HOSTILE_CA_FILE=$tmp/ca.pem timeout -k 5 60 "$bin/hostile" --case clock-behind "$url" >"$tmp/out" 2>"$tmp/err" || rc=$?
  report clock-behind "$rc"
else
  echo "$0: plugrl-hostile --tls-valid-in did not start:" >&2
  cat "$tmp/url" "$tmp/server.err" >&2
  status=1
fi
exit "$status"
