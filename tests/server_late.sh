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
line=$(grep '^case=' "$tmp/out" | tail -n 1)
[[ -n $line ]] || line="case=server-late result=CRASH(rc=$rc)"
echo "$line"
if [[ $rc -ne 0 ]]; then
  cat "$tmp/err" >&2
  exit 1
fi
[[ -s $tmp/err ]] && sed "s/^/    /" "$tmp/err"
exit 0
