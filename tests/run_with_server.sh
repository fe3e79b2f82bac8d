#!/usr/bin/env bash
# Runs a command against a fresh reference server:
#
#   run_with_server.sh PLUGRL_BIN [serve flags...] -- COMMAND [ARGS...]
#
# starts `PLUGRL_BIN serve --addr 127.0.0.1:0 [serve flags...]` (a free
# port), waits for the ws:// URL it prints as the first line of its stdout,
# runs COMMAND ARGS... URL, stops the server and exits with COMMAND's
# status. The server's output is shown when the command fails. PLUGRL_BIN
# may also be plugrl-hostile, which takes its flags without `serve`.
#
# With PLUGRL_TEST_TLS=1 in the environment the server serves wss:// with a
# self-signed certificate (--tls-self-signed), whose PEM the command finds
# named by PLUGRL_TEST_CA_FILE (for options.tls_ca_file).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -lt 3 ]]; then
  echo "usage: $0 PLUGRL_BIN [serve flags...] -- COMMAND [ARGS...]" >&2
  exit 2
fi
server=$1
shift
flags=()
while [[ $# -gt 0 && $1 != -- ]]; do
  flags+=("$1")
  shift
done
if [[ $# -lt 2 ]]; then
  echo "$0: missing -- COMMAND" >&2
  exit 2
fi
shift # --
if [[ ! -x $server ]]; then
  echo "$0: $server is not an executable (build it with ./build.sh)" >&2
  exit 1
fi

tmp=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

cmd=("$server" serve)
if [[ $(basename "$server") == plugrl-hostile ]]; then
  cmd=("$server")
fi
if [[ ${PLUGRL_TEST_TLS:-0} == 1 ]]; then
  flags+=(--tls-self-signed "$tmp/ca.pem")
  export PLUGRL_TEST_CA_FILE=$tmp/ca.pem
fi
# Port 0: the server picks a free port and prints the URL it listens on.
"${cmd[@]}" --addr 127.0.0.1:0 "${flags[@]}" >"$tmp/out" 2>"$tmp/err" &
pid=$!

url=$(wait_url "$tmp/out" "$pid") || url=
if [[ -z $url ]]; then
  echo "$0: the server printed no ws:// or wss:// URL; its output:" >&2
  cat "$tmp/out" "$tmp/err" >&2
  exit 1
fi
echo "server: $url (${flags[*]:-default flags})"

rc=0
"$@" "$url" || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "---- server stdout" >&2
  cat "$tmp/out" >&2
  echo "---- server stderr (last 50 lines)" >&2
  tail -n 50 "$tmp/err" >&2
fi
exit "$rc"
