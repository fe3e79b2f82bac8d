#!/usr/bin/env bash
# A program that links libplugrl, checked with Valgrind's Memcheck and the
# library's suppressions (share/valgrind/plugrl.supp), sees its own errors
# and none of the library's:
#
#   valgrind.sh SUPPRESSIONS BIN_DIR
#
# 1. Memcheck, `--leak-check=full --errors-for-leak-kinds=definite,possible
#    --error-exitcode`, on clean hosts, each against a fresh `plugrl
#    serve`: the C probe client on the low-level API over wss:// with a
#    full step ledger, the C++ probe client on plugrl::Runner over ws://,
#    threads (8 threads, a handle each) and valgrind_host --clean (every
#    action branched on in the host's code, after a thread of its own was
#    joined), with GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0.
#    Each must exit 0 with no error. Without the suppressions the first reports hundreds (the Go
#    runtime's stacks; README "Checking a host with Valgrind").
# 2. Helgrind and DRD on threads: no error either (without the
#    suppressions, thousands: the runtime's own synchronisation).
# 3. valgrind_host, which has bugs of its own (tests/c/valgrind_host.c): a
#    branch on a value it never wrote, a leaked block, an observation
#    column it never wrote, which the library sends, and two threads adding
#    to a counter with no lock. Memcheck must report exactly the first
#    three, Helgrind and DRD exactly the race, each traced to
#    valgrind_host.c (read from the tool's XML).
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
require_built "$bin" plugrl plugrl_probe_client_c plugrl_probe_client threads valgrind_host

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# glibc's stack cache off, as README says: a host thread joined before the
# runtime makes its next thread lends that thread its cached stack and its
# thread-local storage, which Memcheck then reports as "possibly lost" at
# the host's pthread_create (valgrind_host's worker: 288 bytes, every run).
export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.pthread.stack_cache_size=0
common=(--error-exitcode=99 --suppressions="$supp" --num-callers=40)
memcheck=(valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite,possible "${common[@]}")
helgrind=(valgrind --tool=helgrind "${common[@]}")
drd=(valgrind --tool=drd "${common[@]}")
probe_flags="--policy probe --action-dim 3 --horizon 4"

# clean NAME "SERVE FLAGS" CMD...: CMD URL (CMD runs valgrind, its log in
# $tmp/NAME.log) against `plugrl serve SERVE FLAGS`; fails, showing the
# log, unless it exits 0 with no error.
clean() {
  local name=$1 rc=0
  # shellcheck disable=SC2086
  set -- "$1" $2 -- "${@:3}"
  shift
  if ! "$here/run_with_server.sh" "$bin/plugrl" "$@" >"$tmp/$name.out" 2>&1; then
    rc=1
  fi
  if [[ $rc -ne 0 ]] || ! grep -q "ERROR SUMMARY: 0 errors" "$tmp/$name.log"; then
    cat "$tmp/$name.out" "$tmp/$name.log" >&2 || true
    echo "FAIL $name: want exit 0 and no error under Valgrind with $supp" >&2
    exit 1
  fi
  echo "ok   $name: $(head -n 1 "$tmp/$name.out"); $(grep -o 'ERROR SUMMARY.*' "$tmp/$name.log")"
  grep -h "recording" "$tmp/$name.out" || true
}

# planted NAME WANT CMD...: valgrind_host under the valgrind of CMD (its
# XML in $tmp/NAME.xml) must exit 99 with exactly the errors WANT names
# ("KIND:FUNCTION ...": one error context or more of each KIND, each with
# FUNCTION among its frames, every error with a frame in valgrind_host.c).
planted() {
  local name=$1 want=$2 rc=0 verdict
  shift 2
  # shellcheck disable=SC2086
  "$here/run_with_server.sh" "$bin/plugrl" $probe_flags -- "$@" --log-file="$tmp/$name.log" \
    --xml=yes --xml-file="$tmp/$name.xml" "$bin/valgrind_host" >"$tmp/$name.out" 2>&1 || rc=$?
  if [[ $rc -ne 99 ]] || ! grep -q "every action right" "$tmp/$name.out"; then
    cat "$tmp/$name.out" "$tmp/$name.log" >&2 || true
    echo "FAIL $name: valgrind_host exited $rc; want 99 (its errors reported) after a run with every action right" >&2
    exit 1
  fi
  verdict=$(python3 - "$tmp/$name.xml" "$want" <<'PY'
import sys
import xml.etree.ElementTree as ET

want = dict(w.split(":") for w in sys.argv[2].split())
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
print(", ".join(sorted(seen)) + ", each traced to valgrind_host.c")
PY
  ) || {
    cat "$tmp/$name.out" "$tmp/$name.log" >&2 || true
    echo "FAIL $name: $verdict" >&2
    exit 1
  }
  echo "ok   $name: $verdict"
}

# run_with_server.sh appends the URL; the probe clients take it after --url.
PLUGRL_TEST_TLS=1 PLUGRL_LEDGER="$tmp/probe_c.ledger" PLUGRL_LEDGER_LEVEL=full \
  clean probe_c "$probe_flags --stop-after 150" bash -c '"${@:1:$#-1}" --url "${@: -1}" --ca-file "$PLUGRL_TEST_CA_FILE"' _ \
  "${memcheck[@]}" --log-file="$tmp/probe_c.log" "$bin/plugrl_probe_client_c" --envs 3
# The run above is the one that puts the ledger's writer under Memcheck: a
# library that recorded no ledger passed it as well, with that code never
# run. Its full ledger must exist and read as whole.
if [[ ! -s $tmp/probe_c.ledger ]] || ! "$bin/plugrl" ledger summary "$tmp/probe_c.ledger" >"$tmp/probe_c.summary" 2>&1 ||
  ! grep -q "recording a full ledger to $tmp/probe_c.ledger" "$tmp/probe_c.out"; then
  cat "$tmp/probe_c.out" "$tmp/probe_c.summary" >&2 2>/dev/null || true
  echo "FAIL probe_c: no full step ledger was recorded to $tmp/probe_c.ledger (PLUGRL_LEDGER, PLUGRL_LEDGER_LEVEL=full)" >&2
  exit 1
fi
echo "ok   probe_c: its full step ledger: $(grep -m1 -i 'records' "$tmp/probe_c.summary" || head -n 1 "$tmp/probe_c.summary")"
clean probe_cpp "$probe_flags --stop-after 150" bash -c '"${@:1:$#-1}" --url "${@: -1}"' _ \
  "${memcheck[@]}" --log-file="$tmp/probe_cpp.log" "$bin/plugrl_probe_client" --envs 3
clean host_clean "$probe_flags" "${memcheck[@]}" --log-file="$tmp/host_clean.log" "$bin/valgrind_host" --clean
threads_flags="$probe_flags --features reuse-feedback-obs"
clean threads_memcheck "$threads_flags" "${memcheck[@]}" --log-file="$tmp/threads_memcheck.log" "$bin/threads"
clean threads_helgrind "$threads_flags" "${helgrind[@]}" --log-file="$tmp/threads_helgrind.log" "$bin/threads"
clean threads_drd "$threads_flags" "${drd[@]}" --log-file="$tmp/threads_drd.log" "$bin/threads"

# The host's own bugs: reported, and nothing else. (The sent column's
# report names main only through its origin: --track-origins.)
planted host_memcheck "UninitCondition:host_branch_on_unwritten Leak_DefinitelyLost:main SyscallParam:main" \
  "${memcheck[@]}" --track-origins=yes
planted host_helgrind "Race:racer" "${helgrind[@]}"
planted host_drd "ConflictingAccess:racer" "${drd[@]}"
