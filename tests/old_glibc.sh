#!/usr/bin/env bash
# libplugrl on glibc 2.31, the oldest glibc it supports: Ubuntu 20.04 (ROS
# Noetic, Foxy, Galactic), Debian 11, a Jetson on JetPack 5.
#
#   old_glibc.sh REPO_ROOT CONFORMANCE
#
# Debian 11 (bullseye: glibc 2.31, gcc 10, g++ 9 as Ubuntu 20.04 has it,
# cmake 3.18) is debootstrapped into REPO_ROOT/build/old-glibc once
# (about 50 s and 300 MB). This build's library is installed into it
# (./build.sh install); this project's C and C++ examples and tests are
# built there by its own compilers through the installed CMake package
# (about 5 s); and both probe clients run in the chroot, under the protocol
# checker outside it (over 127.0.0.1: a chroot shares the network). A library that asks for
# a glibc symbol version the chroot's glibc lacks fails to load: the
# library before capi/glibc_compat.h got "version `GLIBC_2.34' not found".
#
# Skipped, saying why, when not run as root (chroot, debootstrap), without
# debootstrap (Debian: debootstrap), or when the Debian mirror does not
# answer.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 REPO_ROOT CONFORMANCE" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
checker=$2
suite=bullseye
# The mirror apt uses here (deb822 or one-line sources), else debootstrap's
# own default; PLUGRL_DEBIAN_MIRROR overrides both.
apt_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' "$f"
  done
  if [[ -f /etc/apt/sources.list ]]; then
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:.*\/debian\/?$/) { print $i; exit } }' /etc/apt/sources.list
  fi
}
mirror=${PLUGRL_DEBIAN_MIRROR:-$(apt_mirror | head -n 1)}
rootfs=$root/build/old-glibc/$suite

skip() {
  echo "SKIPPED: old_glibc.sh: $*"
  exit 0
}
[[ $(id -u) -eq 0 ]] || skip "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (Debian: debootstrap)"
[[ -x $checker ]] || { echo "FAIL: $checker is not an executable" >&2; exit 1; }

# unmount_rootfs unmounts whatever is mounted in the chroot, deepest
# first: what a cut-short debootstrap left, or the /proc this script mounts
# (below), which a run killed by SIGKILL (CTest's, at its timeout) leaves
# mounted, as no trap runs.
unmount_rootfs() {
  local m
  awk -v d="$(realpath -m "$rootfs")" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
}
remove_rootfs() {
  unmount_rootfs
  rm -rf --one-file-system "$rootfs"
}
# A debootstrap cut short (CTest's timeout kills it; ^C; the machine went
# down) leaves packages unpacked but not configured, /usr/bin/cmake among
# them, and can leave the target's /proc and /sys mounted. So the chroot
# counts as built once debootstrap's log says it finished, and one that
# did not is unmounted before it is removed (and rm never crosses into a
# mount: --one-file-system).
if ! grep -qx 'I: Base system installed successfully.' "$rootfs.log" 2>/dev/null ||
  [[ ! -x $rootfs/usr/bin/cmake || ! -x $rootfs/usr/bin/g++-9 ]]; then
  echo "== debootstrap $suite into $rootfs${mirror:+ from $mirror}"
  remove_rootfs
  mkdir -p "$rootfs"
  # Within CTest's 600 s, so that debootstrap, stopped by SIGTERM, unmounts
  # what it mounted and this script says why it failed.
  if ! timeout 420 debootstrap --variant=minbase --include=gcc,g++,g++-9,libc6-dev,cmake,make \
    "$suite" "$rootfs" ${mirror:+"$mirror"} >"$rootfs.log" 2>&1; then
    remove_rootfs
    # A mirror that does not answer is this machine's network, not the
    # library: skipped, saying so.
    unreachable='Failed getting release file|Temporary failure resolving|Could not resolve|Connection refused|Network is unreachable|Connection timed out'
    if grep -Eq "$unreachable" "$rootfs.log"; then
      skip "debootstrap could not reach the Debian mirror: $(grep -Em1 "$unreachable" "$rootfs.log")"
    fi
    tail -20 "$rootfs.log" >&2
    echo "FAIL: debootstrap $suite (or it took over 420 s; its log: $rootfs.log)" >&2
    exit 1
  fi
fi
# A chroot kept from an earlier run: nothing of that run left mounted in it.
unmount_rootfs
echo "== $(chroot "$rootfs" ldd --version | head -n 1)"

# The install, and this project's examples and tests built against it
# there (CMakeLists.txt through find_package(plugrl), as ./build.sh builds
# them here), fresh each run: C with Debian 11's gcc 10, C++ with g++ 9,
# Ubuntu 20.04's compiler, at -O0 and -Werror (each compiler warns of its
# own things; at -O0 every libm call is a call).
rm -rf "$rootfs/opt/plugrl" "$rootfs/opt/src" "$rootfs/opt/out" "$rootfs/opt/cmake.log" "$rootfs/opt/make.log"
PLUGRL_NO_BUILD=1 "$root/build.sh" install "$rootfs/opt/plugrl" >/dev/null
mkdir -p "$rootfs/opt/src"
tar -C "$root" --exclude=./build --exclude='./build-*' --exclude=./.git -cf - . | tar -C "$rootfs/opt/src" -xf -
echo "== cmake, make in the chroot: the examples and tests, find_package(plugrl) from /opt/plugrl"
if ! chroot "$rootfs" sh -c 'cmake -S /opt/src -B /opt/out -Dplugrl_DIR=/opt/plugrl/lib/cmake/plugrl \
  -DCMAKE_CXX_COMPILER=g++-9 >/opt/cmake.log 2>&1 && make -C /opt/out -j 2 >/opt/make.log 2>&1'; then
  cat "$rootfs/opt/cmake.log" >&2 || true
  # No make.log: cmake failed, and said why above.
  if [[ -f $rootfs/opt/make.log ]]; then
    grep -E -B2 -A6 'error|Error' "$rootfs/opt/make.log" >&2 || tail -40 "$rootfs/opt/make.log" >&2
  fi
  echo "FAIL: building the examples and tests against the installed library on $suite" >&2
  exit 1
fi

# The library loads (the dynamic loader refuses a missing symbol version
# before main, with status 127), or the loader's message says why not.
if ! out=$(chroot "$rootfs" /opt/out/bin/plugrl_probe_client_c --help 2>&1); then
  echo "$out" >&2
  echo "FAIL: plugrl_probe_client_c --help failed on $suite: does libplugrl load on its glibc?" >&2
  exit 1
fi

tmp=$(mktemp -d)
# On the way out (SIGKILL runs no trap: the next run unmounts what that
# left, above): the chroot's /proc, mounted below, unmounted, $tmp removed.
trap 'unmount_rootfs; rm -rf "$tmp"' EXIT
# chroot_wrapper NAME WORD...: $tmp/NAME, a program that runs WORD... and
# its own arguments in the chroot, for at most $chroot_limit seconds (the
# tests it runs take 0.1-5 s; a hang is killed and named, where it used to
# take old_glibc's whole CTest timeout and say only which test began last).
# In bash: %q may quote in bash's own way ($'\303\251' for a byte outside
# the locale, in a C locale), which sh (dash) does not read.
chroot_limit=120
chroot_wrapper() {
  local name=$1
  shift
  {
    # --foreground: the program stays in the caller's process group, so a
    # terminal's ^C still reaches it, as when the wrapper exec'd the
    # program itself (without it timeout makes a group of its own, which
    # ^C never reaches: the test ran on for its 120 s, and the next began).
    # A TERM or INT sent to timeout itself it passes on to the program;
    # the program is timeout's child (chroot execs it), the one
    # --foreground times out.
    printf '#!/usr/bin/env bash\nexec timeout --foreground --kill-after=5 %d chroot %q' "$chroot_limit" "$rootfs"
    printf ' %q' "$@"
    printf ' "$@"\n'
  } >"$tmp/$name"
  chmod +x "$tmp/$name"
}
failed=()
for client in plugrl_probe_client_c plugrl_probe_client; do
  # conformance.sh runs the client by its path, with its arguments after.
  chroot_wrapper "$client" "/opt/out/bin/$client"
  echo "== conformance: $client in the $suite chroot"
  "$root/tests/conformance.sh" "$checker" "$tmp/$client" || failed+=("$client")
done

# The C tests whose ground is glibc's own threads and signals, which before
# 2.34 were libpthread's separate code: run in the chroot as CTest runs
# them here (tests/run_with_server.sh: a server out of the chroot, its URL
# last), with the chroot's /proc mounted for the library's reads of it.
if ! mount -t proc proc "$rootfs/proc" 2>/dev/null; then
  echo "note: /proc could not be mounted in the chroot; the tests run without it"
fi
plugrl=$root/build/bin/plugrl
run_in_chroot() { # NAME SERVER [flags...] -- PROGRAM [ARGS...]: PROGRAM under /opt/out
  local name=$1 args=() program
  shift
  while [[ $1 != -- ]]; do
    args+=("$1")
    shift
  done
  shift
  program=$1
  shift
  chroot_wrapper "$name" "/opt/out/$program"
  echo "== $name in the $suite chroot"
  local rc=0
  "$root/tests/run_with_server.sh" "${args[@]}" -- "$tmp/$name" "$@" || rc=$?
  if ((rc != 0)); then
    failed+=("$name")
    if ((rc == 124 || rc == 137)); then # timeout's: the limit passed, TERM then KILL (137: also any SIGKILL)
      echo "FAIL: $name ran over ${chroot_limit} s in the chroot and was killed" >&2
    fi
  fi
}
run_in_chroot misuse "$plugrl" --action-dim 2 --features reuse-feedback-obs -- bin/misuse
run_in_chroot threads "$plugrl" --action-dim 3 --horizon 4 --features reuse-feedback-obs --policy probe -- bin/threads
run_in_chroot sigmask "$plugrl" --action-dim 3 --horizon 4 -- bin/sigmask
run_in_chroot cancel "$root/build/bin/plugrl-hostile" --scenario slow-action --action-delay 30s -- bin/cancel
run_in_chroot main_exit "$plugrl" --action-dim 3 --horizon 4 --policy probe -- bin/main_exit
run_in_chroot coroutine "$plugrl" --action-dim 3 --horizon 4 --policy probe -- bin/coroutine
run_in_chroot plugin "$plugrl" --action-dim 3 --horizon 4 --policy probe --feedback-timeout 200ms \
  -- bin/plugin_host /opt/out/libplugrl_test_plugin.so
run_in_chroot bad_memory "$plugrl" --action-dim 3 --horizon 4 --policy probe -- bin/bad_memory

# A step ledger recorded there (PLUGRL_LEDGER) and audited there by this
# build's plugrl, a static program that asks no C library for anything.
echo "== a step ledger recorded in the $suite chroot, audited there by plugrl"
mkdir -p "$rootfs/opt/cli"
install -m 0755 "$plugrl" "$rootfs/opt/cli/plugrl"
rm -f "$rootfs/opt/probe.ledger"
chroot_wrapper ledger_probe env PLUGRL_LEDGER=/opt/probe.ledger /opt/out/bin/plugrl_probe_client_c --envs 3 --url
# The client closes its ledger (plugrl_close): a truncated one, which the
# audit reads up to its last whole block and passes, saying so on stderr
# (its one line there when it passes), fails here.
if ! "$root/tests/run_with_server.sh" "$plugrl" --policy probe --horizon 4 --action-dim 7 \
  --features reuse-feedback-obs --stop-after 200 -- "$tmp/ledger_probe" >/dev/null ||
  ! timeout --foreground --kill-after=5 "$chroot_limit" chroot "$rootfs" /opt/cli/plugrl ledger audit /opt/probe.ledger 2>"$tmp/audit.err" ||
  [[ -s $tmp/audit.err ]]; then
  [[ ! -s $tmp/audit.err ]] || cat "$tmp/audit.err" >&2
  failed+=(ledger)
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAIL: on $suite (glibc 2.31): ${failed[*]}" >&2
  exit 1
fi
echo "PASS: libplugrl on $suite (glibc 2.31): the examples and tests built against it by gcc 10, g++ 9 and cmake 3.18 there; both probe clients conform; misuse, threads, sigmask, cancel, main_exit, coroutine, plugin and bad_memory pass there; its ledger audits clean there"
