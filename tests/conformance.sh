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

port=$("$here/free_port.sh")
cmd="$(printf '%q' "$client") --url ws://127.0.0.1:$port --envs 3"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

rc=0
"$checker" --probe --scenario all --timeout 40 --port "$port" --client "$cmd" "$@" >"$out" 2>&1 || rc=$?
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
