#!/usr/bin/env bash
# Ctrl-C and SIGTERM on the probe clients, the examples a user copies first:
#
#   probe_signals.sh PLUGRL_BIN HOSTILE_BIN PROBE_CLIENT...
#
# For each client:
# 1. SIGINT in the middle of a run (plugrl serve --policy probe): exit 130,
#    and a ledger recorded through PLUGRL_LEDGER closed cleanly (the
#    program closed its client) that audits clean.
# 2. SIGTERM while an infer waits for an action that does not come
#    (plugrl-hostile slow-action): exit 143 at once, and the connection
#    ends with a close frame (SPEC 7.5).
# 3. SIGINT while the handshake trickles in (slow-handshake): exit 130 at
#    once.
# 4. Started with SIGINT ignored (a script's background job): the
#    program leaves it ignored, as the shell asks, and SIGTERM still ends
#    it cleanly (exit 143).
# 5. SIGINT in the program's first milliseconds, while the library starts
#    and plugrl_open begins, at several delays: never a hang (a signal
#    that came before the open had a handle to raise was lost, and the
#    open waited out its 30 s timeouts). Before the handler is installed
#    the signal's default action ends the program: 130 either way. The
#    signals run with their default actions restored (env
#    --default-signal), whatever this script was started with.
# Native only: tests/cross_arm64.sh does not run it under qemu.
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: $0 PLUGRL_BIN HOSTILE_BIN PROBE_CLIENT..." >&2
  exit 2
fi
plugrl=$1
hostile=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib.sh
source "$here/lib.sh"
tmp=$(mktemp -d)
spid=
cleanup() {
  bg_server_stop
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

start() { bg_server_start "$tmp" "$@" || fail "no server"; } # BIN ARGS...: its URL in $url

stop() { bg_server_stop; }

for client in "$@"; do
  name=$(basename "$client")

  start "$plugrl" serve --policy probe --action-dim 2 --horizon 3 --quiet
  PLUGRL_LEDGER=$tmp/$name.ledger signal_run "$tmp/$name.run" INT 1.5 130 "$client" --envs 3 --url "$url" ||
    fail "$name: SIGINT in the middle of a run"
  stop
  "$plugrl" ledger summary "$tmp/$name.ledger" >"$tmp/summary" || fail "$name: ledger summary"
  grep -q "closed cleanly" "$tmp/summary" || { head -n 3 "$tmp/summary" >&2; fail "$name: the ledger was not closed after SIGINT"; }
  grep -Eq '; exchanges: [1-9]' "$tmp/summary" || { cat "$tmp/summary" >&2; fail "$name: no exchange before the SIGINT"; }
  "$plugrl" ledger audit "$tmp/$name.ledger" >"$tmp/audit" && grep -q '^clean: ' "$tmp/audit" ||
    { cat "$tmp/audit" >&2; fail "$name: the ledger after SIGINT does not audit clean"; }
  echo "$name: SIGINT mid-run: exit 130 after $signal_run_took s, its ledger closed cleanly and audits clean"

  start "$hostile" --scenario slow-action --action-delay 60s --watch-stdin=false -v
  signal_run "$tmp/$name.wait" TERM 1 143 "$client" --envs 2 --url "$url" || fail "$name: SIGTERM while waiting for an action"
  stop
  grep -q "the client closed" "$tmp/server.err" || { cat "$tmp/server.err" >&2; fail "$name: no close frame after SIGTERM"; }
  echo "$name: SIGTERM while waiting: exit 143 after $signal_run_took s, with a close frame"

  start "$hostile" --scenario slow-handshake --byte-every 1s --watch-stdin=false
  signal_run "$tmp/$name.connect" INT 1 130 "$client" --envs 2 --url "$url" || fail "$name: SIGINT while connecting"
  stop
  echo "$name: SIGINT while connecting: exit 130 after $signal_run_took s"

  start "$hostile" --scenario slow-handshake --byte-every 1s --watch-stdin=false
  sigint_ignored_run "$tmp/ignored.out" "interrupted (SIGTERM)" "$client" --envs 2 --url "$url" ||
    fail "$name: started with SIGINT ignored (above)"
  echo "$name: started with SIGINT ignored: SIGINT left it running, SIGTERM ended it (143)"
  for delay in 0.002 0.005 0.01 0.02 0.03 0.05 0.08 0.12; do
    rc=0
    timeout --preserve-status -s INT -k 3 "$delay" env --default-signal=INT "$client" --envs 2 --url "$url" >"$tmp/early.out" 2>&1 ||
      rc=$?
    [[ $rc -eq 130 ]] || { cat "$tmp/early.out" >&2; fail "$name: SIGINT after $delay s: exit $rc, want 130 (137: it hung until killed)"; }
  done
  stop
  echo "$name: SIGINT in its first 2-120 ms: exit 130 each time"
done
echo "PASS: the probe clients end cleanly on SIGINT and SIGTERM"
