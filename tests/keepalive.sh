#!/usr/bin/env bash
# libplugrl and a Python websockets server's keepalive, through the C API:
# tests/c/hostile.c's case keepalive against tests/keepalive_server.py.
#
#   keepalive.sh BIN_DIR CHECKER
#
# PlugRL servers run on Python websockets, which drops a client that leaves
# its pings unanswered with close code 1011, reason "keepalive ping
# timeout": what a client stopped in a debugger for longer than the
# server's ping_timeout (20 s by default) meets when it runs again. The
# server here pings every second and waits 2 s; the case stops its own
# process for 5 s between calls, and its next infer must reconnect
# (PLUGRL_RECONNECTED), not report the server failed. CHECKER is
# ../shared/conformance/plugrl-conformance, whose protocol codec the
# server uses; it needs Debian's python3 with python3-websockets,
# python3-msgpack and python3-numpy, as the checker does.
set -uo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=tests/lib.sh
source "$here/lib.sh"

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BIN_DIR CHECKER" >&2
  exit 2
fi
bin=$1
checker=$2
require_built "$bin" hostile

tmp=$(mktemp -d)
server=
trap '[[ -n $server ]] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
# The server runs until its stdin closes: when this script exits.
mkfifo "$tmp/stdin"
"$here/keepalive_server.py" "$checker" --ping-interval 1 --ping-timeout 2 <"$tmp/stdin" >"$tmp/url" 2>"$tmp/server.err" &
server=$!
exec {hold}>"$tmp/stdin"
if ! url=$(wait_url "$tmp/url" "$server"); then
  echo "$0: tests/keepalive_server.py did not start:" >&2
  cat "$tmp/url" "$tmp/server.err" >&2
  exit 1
fi
rc=0
timeout -k 5 60 "$bin/hostile" --case keepalive "$url" >"$tmp/out" 2>"$tmp/err" || rc=$?
line=$(grep '^case=' "$tmp/out" | tail -n 1)
[[ -n $line ]] || line="case=keepalive result=CRASH(rc=$rc)"
echo "$line"
sed "s/^/    /" "$tmp/server.err"
if [[ $rc -ne 0 ]]; then
  cat "$tmp/err" >&2
  exit 1
fi
# The server logs each connection's end: the one it dropped for the pings
# (1006 on its side: it closed the socket after its close frame), then ours.
grep -q "connection ended" "$tmp/server.err" || { echo "$0: the server logged no connection's end" >&2; exit 1; }
exec {hold}>&-
exit 0
