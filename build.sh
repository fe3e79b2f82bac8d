#!/usr/bin/env bash
# libplugrl's build, test and install.
#
#   ./build.sh                  build everything into build/
#   ./build.sh demo             build, then watch MuJoCo cartpoles (C++) learn
#                               to balance against `plugrl serve --policy cem`;
#                               writes build/demo/cartpole_returns.svg
#   ./build.sh run              build, start the reference server, run the
#                               C++ probe client against it
#   ./build.sh test             build, then run every test
#   ./build.sh bench            build, then compare libplugrl with the
#                               transport floor (tests/bench.sh)
#   ./build.sh install PREFIX   build, then install the library, headers,
#                               CMake package, pkg-config file and Valgrind
#                               suppressions to PREFIX
#                               (PLUGRL_NO_BUILD=1: install what is built)
#
# PLUGRL_CROSS=aarch64-linux-gnu ./build.sh [install PREFIX] builds for a
# 64-bit ARM robot (a Jetson, a Raspberry Pi 4/5 on a 64-bit OS) from this
# machine, into build-aarch64-linux-gnu/, with Debian's
# gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu and libc6-dev-arm64-cross
# (tests/cross_arm64.sh runs the result under qemu-aarch64).
#
# build/ then holds:
#   lib/libplugrl.so.X.Y.Z      SONAME libplugrl.so.0.Y before 1.0 (a minor
#                               version may break the ABI), libplugrl.so.X
#                               from 1.0; and the symlinks
#   lib/libplugrl.so.0.Y (or .X), lib/libplugrl.so
#   include/plugrl.h, include/plugrl.hpp
#   lib/cmake/plugrl/           plugrlConfig.cmake, plugrlConfigVersion.cmake
#   lib/pkgconfig/plugrl.pc
#   bin/plugrl                  `plugrl serve`: the reference server
#   bin/plugrl_mujoco_cartpole  the MuJoCo cartpole env client of ./build.sh demo
#   bin/plugrl_probe_client_c, bin/plugrl_probe_client, ...  the examples and tests,
#                               built by CMake in build/cmake against the
#                               tree above through find_package(plugrl)
#   bench/libplugrl_gofloor.so  the bench's Go floor (bench/gofloor), which
#                               bin/plugrl_bench_gofloor uses (not in a cross build)
#
# Needs Go and a C compiler. The rest (cmake, pkg-config, g++, make,
# python3 with websockets, msgpack and numpy for the protocol checker, and
# MuJoCo: libmujoco-dev, with libqhull-dev, libgl-dev and libopengl-dev for
# its CMake package; ament-cmake and colcon for examples/ros2) are Debian
# packages: run as root, this script installs the missing ones that the
# command needs and the distribution packages (see ensure_deps); otherwise
# it prints the apt-get line to run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$root"
build=$root/build
jobs=2 # the CI machine has 2 cores

# A cross build (PLUGRL_CROSS=aarch64-linux-gnu, the one target tested):
# Go's GOARCH and CMake's processor for the GNU triplet, its compilers for
# cgo and CMake, and a build tree of its own. processor is the CPU the
# built tree is for, which its CMake package checks.
cross=${PLUGRL_CROSS:-}
cmake_cross=()
processor=$(uname -m)
# The Debian packages a cross build to aarch64 needs (tests/cross_arm64.sh
# adds qemu-user to run it).
arm64_cross_packages=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross)
if [[ -n $cross ]]; then
  if [[ $cross != aarch64-linux-gnu ]]; then
    printf 'build.sh: PLUGRL_CROSS=%s: the one cross target is aarch64-linux-gnu (64-bit ARM Linux)\n' "$cross" >&2
    exit 2
  fi
  export GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=$cross-gcc CXX=$cross-g++
  build=$root/build-$cross
  processor=aarch64
  cmake_cross=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR="$processor"
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX")
fi

# say: a step's line, with the seconds since build.sh started, so that a
# CI log shows where its time goes before CTest's per-test times.
say() { printf '==> %s [%d s]\n' "$*" "$SECONDS"; }
die() {
  printf 'build.sh: %s\n' "$*" >&2
  exit 1
}

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

# ---------------------------------------------------------------- deps

# What the library and its C/C++ programs need to build (./build.sh,
# install, run): without these nothing builds.
build_packages=(cmake make g++ pkg-config binutils)
# MuJoCo for the cartpole demo (./build.sh demo; built whenever found):
# libmujoco-dev, whose package config also needs the other three. Debian 12
# packages it; Ubuntu 22.04 and Debian 11 do not, and a build there leaves
# the demo out.
demo_packages=(libmujoco-dev libqhull-dev libgl-dev libopengl-dev)
# The tests' and the bench's own tools.
test_packages=(procps python3 python3-websockets python3-msgpack python3-numpy) # the protocol checker
test_packages+=(strace) # bench_floor_wire: the floor sends each frame in one system call
test_packages+=(gdb) # a bench client found hung has its threads' backtraces kept (tests/lib.sh, thread_dump)
test_packages+=(libclang-dev) # bindgen, for examples/rust (plugrl-sys)
test_packages+=(clang libclang-rt-dev) # go build -msan, the CTest sanitize_msan (its runtime)
test_packages+=(valgrind) # the CTest valgrind: a host under Memcheck, Helgrind or DRD sees only its own errors; the bench's instruction counts (callgrind)
test_packages+=(iproute2 mount) # the CTest names: its own network namespace's loopback (ip), bind-mounted /etc files
test_packages+=(debootstrap) # the CTest old_glibc: a Debian 11 (glibc 2.31) chroot that builds against the library
# colcon and ament_cmake for examples/ros2 (tests/ros2.sh; rclcpp itself is
# not packaged for Debian, so its nodes build only under a sourced ROS 2)
test_packages+=(ament-cmake ament-cmake-googletest colcon python3-colcon-cmake python3-colcon-ros
  python3-colcon-test-result python3-colcon-recursive-crawl python3-colcon-package-selection
  python3-colcon-parallel-executor python3-colcon-output python3-colcon-library-path python3-colcon-defaults)
# A cross build needs its compilers; the tests (tests/cross_arm64.sh) run
# one under qemu, on an x86-64 machine, where Debian packages them so
# (./build.sh test only: the bench has no use for them).
cross_test_packages=()
if [[ -n $cross ]]; then
  build_packages+=("${arm64_cross_packages[@]}")
  demo_packages=() # the demo is the build machine's, never cross-built
elif command -v dpkg >/dev/null && [[ $(dpkg --print-architecture) == amd64 ]]; then
  cross_test_packages=("${arm64_cross_packages[@]}" qemu-user)
fi

# packaged P: this system's apt has package P to install (its lists name
# it). A purely virtual package, which apt-cache show exits 0 for while
# printing nothing, does not count: apt-get install refuses it.
packaged() {
  apt-cache show "$1" 2>/dev/null | grep '^Package: ' >/dev/null
}

# ensure_deps COMMAND: installs, as root, the Debian packages COMMAND
# needs (build, install and run: build_packages and, where packaged,
# demo_packages; demo: both, and python3 for its plot; bench: all three;
# test: those and, on x86-64, the cross compilers and qemu-user), or says
# which to install. On Debian 12 every one is packaged. Elsewhere (Ubuntu
# 20.04 or 22.04, Debian 11: a robot's own computer, building natively) a
# package the distribution lacks is left out, saying so, unless COMMAND
# cannot do without it: a build without MuJoCo has no demo, and the tests
# that need a missing tool skip or fail, each saying what it lacked.
# Without root, a missing package that apt has stops it with the apt-get
# line to run, as one does as root.
ensure_deps() {
  command -v go >/dev/null || die "Go is not on PATH (https://go.dev/dl/)"
  if command -v dpkg >/dev/null; then
    ensure_packages "$1"
  else
    local tool
    for tool in cmake make c++ pkg-config nm; do
      command -v "$tool" >/dev/null || die "$tool is not on PATH"
    done
  fi
  # After the packages, which as root install a cross build's compilers.
  if [[ -n $cross ]]; then
    if ! command -v "$CC" >/dev/null || ! command -v "$CXX" >/dev/null; then
      die "PLUGRL_CROSS=$cross needs $CC and $CXX (Debian: ${arm64_cross_packages[*]})"
    fi
  fi
}

ensure_packages() {
  local command=$1
  local required=("${build_packages[@]}") optional=()
  case $command in
    demo) required+=("${demo_packages[@]}" python3) ;; # python3: examples/plot_returns.py
    test) optional+=("${demo_packages[@]}" "${test_packages[@]}" "${cross_test_packages[@]}") ;;
    bench) optional+=("${demo_packages[@]}" "${test_packages[@]}") ;;
    *) optional+=("${demo_packages[@]}") ;;
  esac
  local missing_required=() missing_optional=() p
  for p in "${required[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing_required+=("$p")
  done
  for p in "${optional[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing_optional+=("$p")
  done
  [[ ${#missing_required[@]} -eq 0 && ${#missing_optional[@]} -eq 0 ]] && return
  local as_root=0
  if [[ $(id -u) -eq 0 ]]; then
    as_root=1
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
  fi
  # Lists that lack even cmake are no lists (never updated, or emptied as
  # container images do): without root, every package then counts as
  # packaged, so that a missing one is asked for, not left out unseen.
  local lists=1
  if ! packaged cmake; then
    [[ $as_root -eq 0 ]] || die "apt knows no cmake even after apt-get update: no package lists (see /etc/apt/sources.list)"
    lists=0
  fi
  # The demo's packages go together: without libmujoco-dev the others
  # serve nothing.
  local demo_packaged=1
  if [[ $lists -eq 1 ]]; then
    for p in "${demo_packages[@]}"; do
      packaged "$p" || demo_packaged=0
    done
  fi
  local install=() absent_required=() absent_optional=()
  for p in "${missing_required[@]}"; do
    if [[ $lists -eq 0 ]] || packaged "$p"; then install+=("$p"); else absent_required+=("$p"); fi
  done
  for p in "${missing_optional[@]}"; do
    if [[ $demo_packaged -eq 0 && " ${demo_packages[*]} " == *" $p "* ]]; then
      absent_optional+=("$p")
    elif [[ $lists -eq 0 ]] || packaged "$p"; then
      install+=("$p")
    else
      absent_optional+=("$p")
    fi
  done
  [[ ${#absent_required[@]} -eq 0 ]] || die "./build.sh $command needs ${absent_required[*]}, which this system's apt does not have"
  if [[ ${#absent_optional[@]} -gt 0 ]]; then
    say "not packaged here (or, for the demo's, not all of them), so left out: ${absent_optional[*]}"
  fi
  [[ ${#install[@]} -gt 0 ]] || return 0
  if [[ $as_root -eq 0 ]]; then
    die "missing Debian packages; run:
    sudo apt-get update && sudo apt-get install -y ${install[*]}"
  fi
  say "installing ${install[*]}"
  apt-get install -y --no-install-recommends "${install[@]}"
}

# ---------------------------------------------------------------- version

version=$(sed -n 's/^#define PLUGRL_VERSION_STRING "\(.*\)"$/\1/p' include/plugrl.h)
[[ $version =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "no PLUGRL_VERSION_STRING in include/plugrl.h"
major=${BASH_REMATCH[1]}
minor=${BASH_REMATCH[2]}
# The SONAME changes whenever the ABI may: before 1.0 with the minor version,
# as plugrlConfigVersion.cmake and plugrl::version_matches() have it, so
# that a program built against 0.2 keeps loading 0.2 once 0.3 is installed
# beside it, and one built against 0.3 does not start with 0.2 (with one
# libplugrl.so.0 for every 0.x, both ran with whichever was installed last).
soversion=$major
[[ $major != 0 ]] || soversion=$major.$minor
soname=libplugrl.so.$soversion
libfile=libplugrl.so.$version
libdir_name=lib

# configure IN OUT PREFIX: the @VAR@ substitutions of cmake/*.in.
configure() {
  # PREFIX goes into sed's replacement, where & is the match, \ escapes and
  # | ends it: a prefix /opt/r&d gave plugrl.pc prefix=/opt/r@PREFIX@d.
  local prefix=${3//\\/\\\\}
  prefix=${prefix//&/\\&}
  prefix=${prefix//|/\\|}
  sed -e "s|@PLUGRL_VERSION@|$version|g" \
    -e "s|@PLUGRL_VERSION_MAJOR@|$major|g" \
    -e "s|@PLUGRL_VERSION_MINOR@|$minor|g" \
    -e "s|@PLUGRL_SOVERSION@|$soversion|g" \
    -e "s|@PLUGRL_LIBDIR@|$libdir_name|g" \
    -e "s|@PLUGRL_PROCESSOR@|$processor|g" \
    -e "s|@PREFIX@|$prefix|g" \
    "$1" >"$2.tmp"
  mv "$2.tmp" "$2"
}

# ---------------------------------------------------------------- build

# version_script SRC NAME: a copy of the linker version script SRC in
# build/tmp, named NAME-HASH.map by its contents' hash, whose path it
# prints. Go's build cache keys on the flags, not on the script's
# contents: a script named by its hash relinks when it is edited.
version_script() {
  local map
  map=$build/tmp/$2-$(sha256sum "$1" | cut -c1-16).map
  rm -f "$build/tmp/$2"-*.map
  cp "$1" "$map"
  echo "$map"
}

build_lib() {
  say "libplugrl $version (go build -buildmode=c-shared ./capi)"
  mkdir -p "$build/lib" "$build/include" "$build/tmp" "$build/lib/cmake/plugrl" "$build/lib/pkgconfig"
  local map
  map=$(version_script capi/exports.map exports)
  # Nor does it hash headers outside the package's directory
  # (include/plugrl.h): a changed header (a version, a struct) would reuse
  # the cgo objects of the old one. CGO_CFLAGS is part of the key, so the
  # headers' hash goes there.
  local headers
  headers=$(cat include/plugrl.h capi/*.h | sha256sum | cut -c1-16)
  # -z now: every relocation at load, so the whole GOT is read-only after
  # it (full RELRO; Go's link gave only the partial kind, the PLT's GOT
  # writable for lazy binding), and no lazy symbol lookup on the first
  # call of a libc function from a real-time caller's loop.
  # DWARF 4, not Go 1.25's DWARF 5, whose forms Valgrind 3.19 (Debian 12)
  # cannot read: a program that linked the library got "Serious error when
  # reading debug info" from Memcheck, naming libplugrl (tests/valgrind.sh).
  # Debuggers and profilers read both. Skipped by a Go that no longer has
  # the experiment.
  local experiment=${GOEXPERIMENT:-}
  if GOEXPERIMENT=${experiment:+$experiment,}nodwarf5 go env GOEXPERIMENT >/dev/null 2>&1; then
    experiment=${experiment:+$experiment,}nodwarf5
  fi
  # glibc 2.31 (Ubuntu 20.04, JetPack 5): capi/glibc_compat.h binds every
  # C file's calls, the Go runtime's included, to symbol versions it has,
  # and the libraries that held those functions before glibc 2.34 merged
  # them into libc.so.6 are named as needed (on a newer glibc, stubs).
  local compat=$root/capi/glibc_compat.h
  [[ $compat != *[[:space:]]* ]] || die "build.sh cannot pass -include '$compat' in CGO_CFLAGS: the path has a space"
  GOEXPERIMENT=$experiment CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -DPLUGRL_HEADERS_HASH=$headers -include $compat" \
    go build -p "$jobs" -buildmode=c-shared -o "$build/tmp/$libfile" \
    -ldflags "-extldflags '-Wl,-soname,$soname -Wl,--version-script=$map -Wl,-z,relro -Wl,-z,now -Wl,--push-state,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2 -l:libresolv.so.2 -Wl,--pop-state'" ./capi
  check_glibc "$build/tmp/$libfile"
  # go build also writes cgo's generated header beside the library; the
  # contract is include/plugrl.h, so only the library is kept.
  rm -f "$build/tmp/libplugrl".*.h
  chmod 0755 "$build/tmp/$libfile"
  mv -f "$build/tmp/$libfile" "$build/lib/$libfile"
  ln -sfn "$libfile" "$build/lib/$soname"
  ln -sfn "$soname" "$build/lib/libplugrl.so"

  cp include/plugrl.h include/plugrl.hpp "$build/include/"
  mkdir -p "$build/share/plugrl"
  cp share/valgrind/plugrl.supp "$build/share/plugrl/valgrind.supp"
  configure cmake/plugrlConfig.cmake.in "$build/lib/cmake/plugrl/plugrlConfig.cmake" "$build"
  configure cmake/plugrlConfigVersion.cmake.in "$build/lib/cmake/plugrl/plugrlConfigVersion.cmake" "$build"
  configure cmake/plugrl.pc.in "$build/lib/pkgconfig/plugrl.pc" "$build"
}

build_cmds() {
  local b=${build#"$root"/}/bin
  say "$b/plugrl, $b/plugrl-probe, $b/plugrl-hostile, $b/plugrl-bench-server"
  mkdir -p "$build/bin"
  # The servers and the ledger tools without cgo (none of them calls C):
  # static programs, which run on any Linux of their processor whatever its
  # C library, so that `plugrl ledger` can be copied to a robot on JetPack
  # 5 or Ubuntu 20.04 and read its ledgers there. With cgo, which Go's net
  # took for its resolver, the runtime's cgo calls (pthread_create and
  # others) asked for glibc 2.34. plugrl-probe, a client, keeps cgo: it
  # resolves a server's name as libplugrl does, through glibc's
  # getaddrinfo and nsswitch.conf (trainer.local over mDNS), which Go's own
  # resolver cannot.
  local c
  for c in plugrl plugrl-hostile plugrl-bench-server; do
    CGO_ENABLED=0 go build -p "$jobs" -o "$build/bin/$c" "./cmd/$c"
  done
  go build -p "$jobs" -o "$build/bin/plugrl-probe" ./cmd/plugrl-probe
  build_gofloor
}

# build_gofloor builds the bench's Go floor, libplugrl_gofloor.so
# (bench/gofloor), for CMake's plugrl_bench_gofloor; not in a cross build,
# whose bench does not run. Only the bench needs it: where it does not
# build, the bench's PLUGRL_BENCH_GOFLOOR=1 is what says so, not the rest.
build_gofloor() {
  gofloor_lib=
  [[ -z $cross ]] || return 0
  mkdir -p "$build/bench" "$build/tmp"
  local map
  map=$(version_script bench/gofloor/exports.map gofloor-exports)
  if ! go build -p "$jobs" -buildmode=c-shared -o "$build/bench/libplugrl_gofloor.so" \
    -ldflags "-extldflags '-Wl,-soname,libplugrl_gofloor.so -Wl,--version-script=$map'" ./bench/gofloor; then
    say "the bench's Go floor did not build: plugrl_bench_gofloor is left out"
    return 0
  fi
  rm -f "$build/bench/libplugrl_gofloor.h"
  gofloor_lib=$build/bench/libplugrl_gofloor.so
}

build_examples() {
  say "examples and tests (cmake, find_package(plugrl) from ${build#"$root"/}/lib/cmake/plugrl)"
  # Where libmujoco-dev is installed, a CMake that does not find MuJoCo is
  # a fault (a dependency of its CMake package missing), not a system
  # without it: it fails rather than skip the cartpole's tests.
  local mujoco=OFF
  if [[ -z $cross ]] && command -v dpkg-query >/dev/null &&
    [[ $(dpkg-query -W -f='${Status}' libmujoco-dev 2>/dev/null) == "install ok installed" ]]; then
    mujoco=ON
  fi
  cmake -S "$root" -B "$build/cmake" "${cmake_cross[@]}" -DPLUGRL_REQUIRE_MUJOCO="$mujoco" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -Dplugrl_DIR="$build/lib/cmake/plugrl" \
    -DPLUGRL_BIN_DIR="$build/bin" \
    -DPLUGRL_SERVER_BIN="$build/bin/plugrl" \
    -DPLUGRL_GOFLOOR_LIB="${gofloor_lib:-}" >/dev/null
  cmake --build "$build/cmake" -j "$jobs"
}

build_all() {
  ensure_deps "$cmd"
  build_lib
  build_cmds
  build_examples
  say "built into $build"
}

# ---------------------------------------------------------------- test

# check_glibc LIB: LIB asks for no glibc symbol version that glibc 2.31
# lacks, so that it loads where Ubuntu 20.04's or JetPack 5's glibc is
# (readelf's list of the versions it needs; a Go release that adds a call
# to a function glibc 2.32-2.34 moved gets it into capi/glibc_compat.h).
# Numbered versions must be 2.31 or older, compared as numbers (2.4 is
# older, 2.40 newer); any other GLIBC_ name is refused too:
# GLIBC_ABI_DT_RELR (glibc 2.36, which ld -z pack-relative-relocs asks
# for), GLIBC_ABI_GNU_TLS and the like, or GLIBC_PRIVATE.
check_glibc() {
  local newer
  newer=$(readelf -V -W "$1" | sed -n 's/.*Name: \(GLIBC_[^[:space:]]*\).*/\1/p' |
    awk -F'[_.]' '$2 !~ /^[0-9]+$/ || $2 > 2 || ($2 == 2 && $3 > 31)' | sort -u -V | paste -sd' ')
  [[ -n $newer ]] || return 0
  local syms
  syms=$(readelf --dyn-syms -W "$1" | awk -v newer=" $newer " '{
    n = split($8, p, "@+"); if (n == 2 && index(newer, " " p[2] " ")) print "  " p[1] "@" p[2] }' | sort -u)
  if [[ -n $syms ]]; then
    die "$(basename "$1") needs $newer, which glibc 2.31 lacks, for:
$syms
bind them to their old versions in capi/glibc_compat.h"
  fi
  die "$(basename "$1") needs $newer, which glibc 2.31 lacks, for no symbol: a link option asks for it (GLIBC_ABI_DT_RELR: ld's -z pack-relative-relocs)"
}

# Only the functions of plugrl.h may be exported, and all of them must be.
check_exports() {
  say "exported symbols of build/lib/libplugrl.so"
  local exported declared
  exported=$(nm -D --defined-only "$build/lib/libplugrl.so" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
  declared=$(grep -o '\bplugrl_[a-z_0-9]*[[:space:]]*(' include/plugrl.h | sed 's/[[:space:]]*($//' |
    grep -v '_fn$' | sort -u)
  local bad
  bad=$(grep -v '^plugrl_[a-z]' <<<"$exported" || true)
  [[ -z $bad ]] || die "libplugrl.so exports symbols that are not plugrl_*:
$bad"
  if [[ $exported != "$declared" ]]; then
    die "libplugrl.so's exports differ from plugrl.h's functions:
$(diff <(echo "$declared") <(echo "$exported") || true)"
  fi
  echo "    $(wc -l <<<"$exported") symbols, exactly the functions of include/plugrl.h"
}

run_tests() {
  build_all
  check_exports
  # The Go core is usable from Go on every platform (the C library is
  # Linux's): check it where its files differ, so a Linux-only change to a
  # shared signature cannot break them unseen.
  say "go vet ./core/... for darwin (amd64, arm64), go build ./core/... for windows"
  GOOS=darwin go vet ./core/...
  GOOS=darwin GOARCH=arm64 go vet ./core/...
  GOOS=windows go build ./core/...
  # The portable masking and digest code (every CPU but amd64 and arm64,
  # and the purego builds) has no CPU of its own here: test it on this one.
  say "go test -tags purego ./core/maskcopy (the portable kernels)"
  go test -count=1 -tags purego ./core/maskcopy
  # Two packages at a time (-p 2, one per core): their tests mostly wait
  # on sockets and timers, and this took 146 s at -p 1 and 78-82 s at -p 2,
  # the same tests passing in six runs (2026-12 early; the suite has grown
  # since: 165 s at -p 2 in a clean-clone CI run on 2026-12-07, the
  # largest step outside CTest).
  say "go test -race -p 2 ./..."
  go test -race -p 2 ./...
  # The race detector allocates, so the tests that prove an exchange
  # allocates nothing skip under it: they run here without it.
  say "go test -run Alloc ./... (no allocation per exchange, per record, per encode)"
  go test -count=1 -p 1 -run Alloc ./...
  say "ctest"
  # Two at a time: the suite mostly waits (CMakeLists.txt, at its end).
  local rc=0
  (cd "$build/cmake" && ctest --output-on-failure -j 2) || rc=$?
  if [[ $rc -ne 0 ]]; then
    tail_failed_tests
    exit "$rc"
  fi
}

# tail_failed_tests: each failed test's last lines once more, at the end
# of the log. A test's reason to fail (sanitizers.sh's FAIL line, a
# race report) comes last in its output, which CTest prints whole in
# the middle of the run, and a CI page that shows only the head and the
# tail of a long log cut it out (the stop-60 run's sanitize_race).
tail_failed_tests() {
  local dir=$build/cmake/Testing/Temporary name
  [[ -f $dir/LastTestsFailed.log ]] || return 0
  while IFS=: read -r _ name; do
    say "the last 60 lines of failed test $name"
    awk -v head="Testing: $name" '
      !on && index($0, head) && substr($0, index($0, head)) == head { on = 1; next }
      on && $0 == "<end of output>" { exit }
      on' "$dir/LastTest.log" | tail -n 60
  done <"$dir/LastTestsFailed.log"
}

# ---------------------------------------------------------------- run

# The probe demo: the bundled reference server and the C++ probe
# client (SPEC 8.1, on the runner) against it, until the server stops the run.
run_demo() {
  build_all
  local log=$build/tmp/serve.log url pid
  say "starting build/bin/plugrl serve (probe policy, H=4, 7-dim actions, reuse-feedback-obs, stop after 200 exchanges)"
  "$build/bin/plugrl" serve --addr 127.0.0.1:0 --policy probe --horizon 4 --action-dim 7 \
    --features reuse-feedback-obs --stop-after 200 >"$log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    url=$(head -n 1 "$log" 2>/dev/null | grep -o 'ws://[^ ]*' || true)
    [[ -n $url ]] && break
    sleep 0.1
  done
  [[ -n $url ]] || die "the server did not start: $(cat "$log")"
  say "build/bin/plugrl_probe_client --url $url --envs 4"
  "$build/bin/plugrl_probe_client" --url "$url" --envs 4
  wait "$pid" || true
  trap - EXIT
  say "what the server saw:"
  grep -v '^ws://[^ ]*$' "$log" | tail -n +2 # the URL line was said above
}

# ---------------------------------------------------------------- demo

# start_server LOG [serve flags...]: `plugrl serve` on a free port in the
# background, its stdout in LOG (stderr in LOG.err); sets server_pid and
# server_url.
start_server() {
  local log=$1
  shift
  "$build/bin/plugrl" serve --addr 127.0.0.1:0 "$@" >"$log" 2>"$log.err" &
  server_pid=$!
  server_url=
  for _ in $(seq 100); do
    server_url=$(head -n 1 "$log" 2>/dev/null | grep -o 'ws://[^ ]*' || true)
    [[ -n $server_url ]] && return
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  die "the server did not start: $(cat "$log" "$log.err")"
}

stop_server() {
  [[ -n ${server_pid:-} ]] || return 0
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

# The main job: N MuJoCo cartpoles in a C++ env client learn to balance
# through PlugRL against the bundled server's learner (the cross-entropy
# method, internal/learn/cem), after a baseline run against random actions.
# Everything is seeded. build/demo/ then holds both runs' episodes (CSV, and
# the client's per-episode lines), the server's table, and the plot.
run_cartpole_demo() {
  local start=$SECONDS
  build_all
  local dir=$build/demo envs=8 episodes=800
  local client=$build/bin/plugrl_mujoco_cartpole
  [[ -x $client ]] || die "the demo needs MuJoCo, which the build did not find (Debian 12: libmujoco-dev)"
  local serve=(--horizon 1 --action-dim 1 --action-dtype float64 --seed 1 --quiet)
  rm -rf "$dir"
  mkdir -p "$dir"
  trap stop_server EXIT

  say "baseline: $envs cartpoles, 200 episodes against plugrl serve --policy random"
  start_server "$dir/random-serve.log" --policy random "${serve[@]}"
  "$client" --url "$server_url" --envs "$envs" --episodes 200 --seed 1 --csv "$dir/random.csv" \
    >"$dir/random-episodes.log"
  stop_server
  tail -n 1 "$dir/random-episodes.log"

  say "learning: $envs cartpoles, $episodes episodes against plugrl serve --policy cem (H = 1: closed loop)"
  start_server "$dir/cem-serve.log" --policy cem "${serve[@]}"
  echo "build/bin/plugrl_mujoco_cartpole --url $server_url --envs $envs --episodes $episodes"
  echo "(each episode's return: build/demo/cem-episodes.log; the server's table, live:)"
  tail -n +2 -f --pid="$server_pid" "$dir/cem-serve.log" &
  local tail_pid=$!
  "$client" --url "$server_url" --envs "$envs" --episodes "$episodes" --seed 1 --csv "$dir/cem.csv" \
    >"$dir/cem-episodes.log"
  sleep 0.2 # the last row
  stop_server
  wait "$tail_pid" 2>/dev/null || true
  trap - EXIT
  tail -n 2 "$dir/cem-episodes.log"

  say "learned vs random (the demo fails below 5 x)"
  python3 examples/plot_returns.py "$dir/cem.csv" --random "$dir/random.csv" --window 40 \
    --require-ratio 5 --out "$dir/cartpole_returns.svg" \
    --title "MuJoCo cartpole ($envs envs, C++) learning through PlugRL (plugrl serve --policy cem)"
  say "demo done in $((SECONDS - start)) s; the plot of return against time: $dir/cartpole_returns.svg"
}

# ---------------------------------------------------------------- install

install_to() {
  local prefix=$1
  if [[ ${PLUGRL_NO_BUILD:-0} != 1 ]]; then
    build_all
  fi
  [[ -f $build/lib/$libfile ]] || die "nothing built in $build: run ${cross:+PLUGRL_CROSS=$cross }./build.sh first"
  mkdir -p "$prefix"
  prefix=$(cd "$prefix" && pwd)
  say "installing into $prefix"
  install -d "$prefix/$libdir_name" "$prefix/include" "$prefix/$libdir_name/cmake/plugrl" \
    "$prefix/$libdir_name/pkgconfig"
  install -m 0755 "$build/lib/$libfile" "$prefix/$libdir_name/$libfile"
  ln -sfn "$libfile" "$prefix/$libdir_name/$soname"
  ln -sfn "$soname" "$prefix/$libdir_name/libplugrl.so"
  install -m 0644 include/plugrl.h include/plugrl.hpp "$prefix/include/"
  install -d "$prefix/share/plugrl"
  install -m 0644 share/valgrind/plugrl.supp "$prefix/share/plugrl/valgrind.supp"
  install -m 0644 "$build/lib/cmake/plugrl/plugrlConfig.cmake" "$build/lib/cmake/plugrl/plugrlConfigVersion.cmake" \
    "$prefix/$libdir_name/cmake/plugrl/"
  configure cmake/plugrl.pc.in "$prefix/$libdir_name/pkgconfig/plugrl.pc" "$prefix"
  chmod 0644 "$prefix/$libdir_name/pkgconfig/plugrl.pc"
  echo "    $prefix/$libdir_name/$libfile (+ $soname, libplugrl.so)"
  echo "    $prefix/include/plugrl.h, plugrl.hpp"
  echo "    $prefix/$libdir_name/cmake/plugrl/, $prefix/$libdir_name/pkgconfig/plugrl.pc"
  echo "    $prefix/share/plugrl/valgrind.supp"
}

# ---------------------------------------------------------------- main

cmd=${1:-build}
if [[ -n $cross && $cmd != build && $cmd != install ]]; then
  die "PLUGRL_CROSS builds programs for another machine: only ./build.sh and ./build.sh install PREFIX take it"
fi
case $cmd in
  build) build_all ;;
  demo) run_cartpole_demo ;;
  run) run_demo ;;
  test) run_tests ;;
  bench)
    build_all
    tests/bench.sh "$build/bin"
    ;;
  install)
    [[ $# -eq 2 ]] || die "usage: ./build.sh install PREFIX"
    install_to "$2"
    ;;
  -h | --help | help) usage ;;
  *)
    usage >&2
    exit 2
    ;;
esac
