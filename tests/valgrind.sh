#!/usr/bin/env bash
# A program that links libplugrl, checked with Valgrind's Memcheck and the
# library's suppressions (share/valgrind/plugrl.supp), sees its own errors
# and none of the library's:
#
#   valgrind.sh SUPPRESSIONS BIN_DIR
#
# 1. Clean hosts, each against a fresh `plugrl serve`, under
#    `--leak-check=full --errors-for-leak-kinds=definite,possible
#    --error-exitcode`: the C probe client on the low-level API over wss://
#    with a full step ledger, the C++ probe client on plugrl::Runner over
#    ws://, and valgrind_host --clean (every action branched on in the
#    host's code). Each must exit 0 with no error. Without the suppressions
#    the first reports hundreds (the Go runtime's stacks, README
#    "Valgrind").
# 2. valgrind_host, which has three bugs of its own (tests/c/valgrind_host.c):
#    a branch on a value it never wrote, a leaked block, and an observation
#    with a row it never wrote, which the library sends. Memcheck must report
#    exactly those three, each traced to valgrind_host.c.
#
# Exits 77 (CTest skip) where valgrind is not installed (Debian: valgrind;
# ./build.sh test installs it when run as root).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 2 ]]; then
  echo "usage: $0 SUPPRESSIONS BIN_DIR" >&2
  exit 2
fi
supp=$1
bin=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v valgrind >/dev/null; then
  echo "valgrind is not installed (Debian: apt-get install valgrind): skipped"
  exit 77
fi
[[ -f $supp ]] || {
  echo "$0: no suppressions file at $supp" >&2
  exit 1
}
require_built "$bin" plugrl plugrl_probe_client_c plugrl_probe_client valgrind_host

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
memcheck=(valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite,possible
  --error-exitcode=99 --suppressions="$supp" --num-callers=40)

# clean NAME CMD...: CMD URL (CMD runs valgrind, its log in $tmp/NAME.log)
# against a probe server; fails, showing the log, unless it exits 0 with no
# error.
clean() {
  local name=$1 rc=0
  shift
  if ! "$here/run_with_server.sh" "$bin/plugrl" --policy probe --action-dim 3 --horizon 4 --stop-after 150 \
    -- "$@" >"$tmp/$name.out" 2>&1; then
    rc=1
  fi
  if [[ $rc -ne 0 ]] || ! grep -q "ERROR SUMMARY: 0 errors" "$tmp/$name.log"; then
    cat "$tmp/$name.out" "$tmp/$name.log" >&2 || true
    echo "FAIL $name: want exit 0 and no error under Memcheck with $supp" >&2
    exit 1
  fi
  echo "ok   $name: $(head -n 1 "$tmp/$name.out"); $(grep -o 'ERROR SUMMARY.*' "$tmp/$name.log")"
  grep -h "ledger" "$tmp/$name.out" || true
}

# run_with_server.sh appends the URL; the probe clients take it after --url.
PLUGRL_TEST_TLS=1 PLUGRL_LEDGER="$tmp/probe_c.ledger" PLUGRL_LEDGER_LEVEL=full \
  clean probe_c bash -c '"${@:1:$#-1}" --url "${@: -1}" --ca-file "$PLUGRL_TEST_CA_FILE"' _ \
  "${memcheck[@]}" --log-file="$tmp/probe_c.log" "$bin/plugrl_probe_client_c" --envs 3
clean probe_cpp bash -c '"${@:1:$#-1}" --url "${@: -1}"' _ \
  "${memcheck[@]}" --log-file="$tmp/probe_cpp.log" "$bin/plugrl_probe_client" --envs 3
clean host_clean "${memcheck[@]}" --log-file="$tmp/host_clean.log" "$bin/valgrind_host" --clean

# The host's own bugs: reported, each traced to its file, and nothing else.
# Read from Memcheck's XML, one <error> per context.
rc=0
"$here/run_with_server.sh" "$bin/plugrl" --policy probe --action-dim 3 --horizon 4 \
  -- "${memcheck[@]}" --track-origins=yes --log-file="$tmp/host.log" --xml=yes --xml-file="$tmp/host.xml" \
  "$bin/valgrind_host" >"$tmp/host.out" 2>&1 || rc=$?
fail() {
  cat "$tmp/host.out" "$tmp/host.log" >&2 || true
  echo "FAIL host: $*" >&2
  exit 1
}
[[ $rc -eq 99 ]] || fail "valgrind_host exited $rc under Memcheck; want 99 (its errors reported)"
grep -q "every action right" "$tmp/host.out" || fail "the run itself went wrong"
verdict=$(python3 - "$tmp/host.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

# Each planted bug: its Memcheck kind, and what its report must name.
want = {
    "UninitCondition": "host_branch_on_unwritten",  # the branch, in its frame
    "Leak_DefinitelyLost": "main",                   # the malloc of the leak
    "SyscallParam": "main",                          # the origin of the sent bytes
}
seen = set()
for err in ET.parse(sys.argv[1]).getroot().iter("error"):
    kind = err.findtext("kind")
    what = err.findtext("what") or err.findtext("xwhat/text") or ""
    frames = [(f.findtext("fn") or "", f.findtext("file") or "") for f in err.iter("frame")]
    if not any(file == "valgrind_host.c" for _, file in frames):
        print("an error not of the host's own (%s): %s, frames %s" % (kind, what, frames))
        sys.exit(1)
    if kind not in want or not any(fn == want[kind] for fn, _ in frames):
        print("an error the host did not plant (%s): %s, frames %s" % (kind, what, frames))
        sys.exit(1)
    if kind == "SyscallParam" and "uninitialised" not in what:
        print("a system call's parameter reported for another reason: " + what)
        sys.exit(1)
    seen.add(kind)
missing = sorted(set(want) - seen)
if missing:
    print("not reported: " + ", ".join(missing))
    sys.exit(1)
print("its three bugs, %s, each traced to valgrind_host.c" % ", ".join(sorted(seen)))
PY
) || fail "$verdict"
echo "ok   host: $verdict"
