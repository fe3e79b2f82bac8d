#!/usr/bin/env bash
# Runs the protocol authors' checker against a probe client:
#
#   conformance.sh CONFORMANCE CLIENT [checker flags...]
#
# runs `CONFORMANCE --probe --scenario all --timeout 40 --port P
# --client "CLIENT --url ws://127.0.0.1:P --envs 3" [checker flags...]` on a
# free port P, and passes only if the report says "no violations" and has no
# "advisory note".
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 CONFORMANCE CLIENT [checker flags...]" >&2
  exit 2
fi
checker=$1
client=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for f in "$checker" "$client"; do
  if [[ ! -x $f ]]; then
    echo "$0: $f is not an executable" >&2
    exit 1
  fi
done

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The port is free when picked and bound by the checker a moment later
# (and again for each scenario): meanwhile another test under ctest -j 2
# may take it, as a listener or as the local end of a connection (the
# kernel's pick for port 0 and for an outgoing connection come from the
# same range). The checker then exits "address already in use" before
# any scenario has run: take another port, at most three times.
for attempt in 1 2 3; do
  port=$("$here/free_port.sh")
  cmd="$(printf '%q' "$client") --url ws://127.0.0.1:$port --envs 3"
  rc=0
  "$checker" --probe --scenario all --timeout 40 --port "$port" --client "$cmd" "$@" >"$out" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]] || ! grep -qi "address already in use" "$out"; then
    break
  fi
  echo "conformance.sh: port $port was taken before the checker bound it (attempt $attempt); another port" >&2
done
cat "$out"

if [[ $rc -ne 0 ]]; then
  echo "FAIL: the checker exited with status $rc" >&2
  exit 1
fi
if ! grep -q "no violations" "$out"; then
  echo "FAIL: the report does not say \"no violations\"" >&2
  exit 1
fi
if grep -q "advisory note" "$out"; then
  echo "FAIL: the report has advisory notes" >&2
  exit 1
fi
echo "PASS: no violations, no advisory notes"
