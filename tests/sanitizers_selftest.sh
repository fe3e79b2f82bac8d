#!/usr/bin/env bash
# tests/sanitizers.sh's own failure paths, which its runs never take:
#
#   sanitizers_selftest.sh REPO_ROOT BIN_DIR
#
# 1. A C compiler that cannot build a sanitized program: sanitizers.sh
#    skips (exit 77, what CTest's SKIP_RETURN_CODE takes) and leaves no
#    temporary directory behind. (Its EXIT trap called a function defined
#    only further down: exit 127, a failure, and the directory left.)
# 2. Under asan and msan, with an uninstrumented libplugrl.so (BIN_DIR/../lib, the
#    plain build) first on LD_LIBRARY_PATH: the programs still load the
#    instrumented one, and its canary is reported. (Linked with
#    -l:libplugrl.so and an rpath, they loaded the plain one, and every
#    run passed with nothing checked.)
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 REPO_ROOT BIN_DIR" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
native=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkdir -p "$work/fakecc" "$work/tmp"
for c in cc clang; do
  printf '#!/bin/sh\necho "%s: error: unrecognized argument to -fsanitize=" >&2\nexit 1\n' "$c" >"$work/fakecc/$c"
  chmod +x "$work/fakecc/$c"
done
for mode in race asan msan; do
  rc=0
  PATH=$work/fakecc:$PATH TMPDIR=$work/tmp "$root/tests/sanitizers.sh" "$mode" "$root" "$native" /nonexistent \
    >"$work/out" 2>&1 || rc=$?
  [[ $rc -eq 77 ]] || { cat "$work/out" >&2; fail "$mode: a compiler without the sanitizer gave exit $rc, want 77 (skipped)"; }
  left=$(ls -A "$work/tmp")
  [[ -z $left ]] || fail "$mode: the skip left $left in TMPDIR"
  echo "$mode: a compiler without the sanitizer: skipped (77), nothing left behind"
done

plain=$native/../lib
for mode in asan msan; do
  if [[ ! -e $plain/libplugrl.so ]]; then
    echo "$mode with a plain libplugrl.so on LD_LIBRARY_PATH: skipped, no $plain/libplugrl.so"
    continue
  fi
  rc=0
  LD_LIBRARY_PATH=$(cd "$plain" && pwd) PLUGRL_SANITIZERS_CANARY_ONLY=1 \
    "$root/tests/sanitizers.sh" "$mode" "$root" "$native" /nonexistent >"$work/out" 2>&1 || rc=$?
  if [[ $rc -ne 77 ]]; then
    [[ $rc -eq 0 ]] && grep -q "the canary: reported" "$work/out" || {
      cat "$work/out" >&2
      fail "$mode with a plain libplugrl.so on LD_LIBRARY_PATH: exit $rc and no canary report"
    }
    echo "$mode with a plain libplugrl.so on LD_LIBRARY_PATH: the instrumented one ran, the canary was reported"
  fi
done
echo "PASS: sanitizers.sh skips cleanly and sees its canary"
