#!/usr/bin/env bash
# Proves the installed package works for a program outside this repository:
#
#   consumer.sh REPO_ROOT
#
# installs what ./build.sh built (without rebuilding) into a temporary
# prefix, then builds and runs a tiny C program there with pkg-config, and
# the README's "C API in one example" against `plugrl serve`; moves
# the prefix elsewhere (the CMake package must be relocatable) and builds and
# runs a C and a C++ program with find_package(plugrl). Each prints
# plugrl_version() and checks it against the header it was compiled with.
set -euo pipefail

root=$(cd "$1" && pwd)
# shellcheck source=tests/lib.sh
source "$root/tests/lib.sh"
tmp=$(mktemp -d)
spid=
trap '[[ -n $spid ]] && kill "$spid" 2>/dev/null; rm -rf "$tmp"' EXIT
cc=${CC:-cc}
cxx=${CXX:-c++}

echo "== install into $tmp/prefix"
PLUGRL_NO_BUILD=1 "$root/build.sh" install "$tmp/prefix"

mkdir "$tmp/src"
cat >"$tmp/src/main.c" <<'C'
#include <plugrl.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  plugrl_options o;
  printf("plugrl_version() = %s (header %s)\n", plugrl_version(), PLUGRL_VERSION_STRING);
  if (strcmp(plugrl_version(), PLUGRL_VERSION_STRING) != 0) return 1;
  if (plugrl_version_number() != PLUGRL_VERSION_NUMBER) return 1;
  return plugrl_options_init(&o) == PLUGRL_OK && o.size == sizeof o ? 0 : 1;
}
C
cat >"$tmp/src/main.cpp" <<'CPP'
#include <plugrl.hpp>
#include <iostream>

int main() {
  std::cout << "plugrl::version() = " << plugrl::version() << " (header " << PLUGRL_VERSION_STRING << ")\n";
  try {
    plugrl::Client client(plugrl::Options("ws://127.0.0.1:1").max_reconnects(-1).connect_timeout_ms(2000));
    return 1;
  } catch (const plugrl::Error &e) {
    std::cout << "expected: " << e.what() << "\n";
    if (e.status() != PLUGRL_CONNECT_FAILED) return 1;
  }
  return plugrl::version_matches() ? 0 : 1;
}
CPP
cat >"$tmp/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(plugrl_consumer LANGUAGES C CXX)
find_package(plugrl 0.2 CONFIG REQUIRED)
message(STATUS "found plugrl ${plugrl_VERSION} at ${plugrl_DIR}")
if(NOT EXISTS "${plugrl_VALGRIND_SUPPRESSIONS}")
  message(FATAL_ERROR "plugrl_VALGRIND_SUPPRESSIONS is [${plugrl_VALGRIND_SUPPRESSIONS}], no file")
endif()
message(STATUS "valgrind suppressions ${plugrl_VALGRIND_SUPPRESSIONS}")
add_executable(main_c main.c)
target_link_libraries(main_c PRIVATE plugrl::plugrl)
add_executable(main_cpp main.cpp)
target_compile_features(main_cpp PRIVATE cxx_std_17)
target_link_libraries(main_cpp PRIVATE plugrl::plugrl)
CMAKE

# The SONAME carries what may break the ABI: the minor version before 1.0
# (as find_package(plugrl VERSION) and version_matches() have it), the
# major one after. With libplugrl.so.0 for every 0.x, a program built
# against 0.2 ran with 0.3 once it was installed over it, and one built
# against 0.3 with 0.2.
major=$(sed -n 's/^#define PLUGRL_VERSION_MAJOR \([0-9]*\)$/\1/p' "$root/include/plugrl.h")
minor=$(sed -n 's/^#define PLUGRL_VERSION_MINOR \([0-9]*\)$/\1/p' "$root/include/plugrl.h")
patch=$(sed -n 's/^#define PLUGRL_VERSION_PATCH \([0-9]*\)$/\1/p' "$root/include/plugrl.h")
if [[ $major == 0 ]]; then soname=libplugrl.so.0.$minor; else soname=libplugrl.so.$major; fi
lib=$tmp/prefix/lib
got=$(readelf -d "$lib/libplugrl.so.$major.$minor.$patch" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
[[ $got == "$soname" ]] || { echo "FAIL: libplugrl.so.$major.$minor.$patch has the SONAME [$got], want $soname" >&2; exit 1; }
[[ $(readlink "$lib/$soname") == "libplugrl.so.$major.$minor.$patch" && $(readlink "$lib/libplugrl.so") == "$soname" ]] || {
  echo "FAIL: installed links: $(cd "$lib" && ls -l libplugrl.so*)" >&2
  exit 1
}
echo "SONAME $soname, libplugrl.so -> $soname -> libplugrl.so.$major.$minor.$patch"
# Full RELRO: a read-only GOT after load (GNU_RELRO and BIND_NOW), and a
# stack that is not executable.
readelf -lW "$lib/$soname" | grep -q GNU_RELRO || { echo "FAIL: $soname has no GNU_RELRO segment" >&2; exit 1; }
readelf -d "$lib/$soname" | grep -Eq '\(BIND_NOW\)|\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' || {
  echo "FAIL: $soname is not linked with -z now (partial RELRO): $(readelf -d "$lib/$soname" | grep FLAGS)" >&2
  exit 1
}
if readelf -lW "$lib/$soname" | grep GNU_STACK | grep -q RWE; then
  echo "FAIL: $soname asks for an executable stack" >&2
  exit 1
fi
echo "$soname: full RELRO, no executable stack"

needs_soname() {
  if ! readelf -d "$1" | grep -q "(NEEDED).*\[${soname//./\\.}\]"; then
    echo "FAIL: $1 does not depend on $soname:" >&2
    readelf -d "$1" | grep NEEDED >&2
    exit 1
  fi
}

echo "== a prefix with characters sed treats specially"
# build.sh writes the prefix into plugrl.pc with sed, where & is the match
# (prefix=/opt/r@PREFIX@d for /opt/r&d).
odd="$tmp/r&d|x\\y"
PLUGRL_NO_BUILD=1 "$root/build.sh" install "$odd" >/dev/null
got=$(PKG_CONFIG_PATH="$odd/lib/pkgconfig" pkg-config --variable=prefix plugrl)
[[ $got == "$odd" ]] || { echo "FAIL: plugrl.pc of $odd says prefix=$got" >&2; exit 1; }
rm -rf "$odd"
echo "plugrl.pc of $odd: prefix=$got"

echo "== pkg-config"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
version=$(pkg-config --modversion plugrl)
flags=$(pkg-config --cflags --libs plugrl)
libdir=$(pkg-config --variable=libdir plugrl)
echo "plugrl $version: $flags"
[[ $libdir == "$tmp/prefix/lib" ]] || { echo "FAIL: libdir is $libdir" >&2; exit 1; }
supp=$(pkg-config --variable=valgrind_suppressions plugrl)
[[ $supp == "$tmp/prefix/share/plugrl/valgrind.supp" && -f $supp ]] || {
  echo "FAIL: valgrind_suppressions is $supp, not the installed file" >&2
  exit 1
}
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror -pedantic "$tmp/src/main.c" $flags -Wl,-rpath,"$libdir" -o "$tmp/main_pc"
needs_soname "$tmp/main_pc"
"$tmp/main_pc"

# The README's C example, as a user copies it: it must build as C99
# without a warning and run a whole run against the reference server
# (its URL swapped for the server's port).
awk '/^## The C API in one example/ { on = 1 } on && /^```c$/ { code = 1; next } code && /^```$/ { exit } code' \
  "$root/README.md" >"$tmp/src/readme.c"
grep -q plugrl_runner_act "$tmp/src/readme.c" || { echo "FAIL: no C example found in README.md" >&2; exit 1; }
: >"$tmp/serve.out" # see wait_url
"$root/build/bin/plugrl" serve --addr 127.0.0.1:0 --policy random --horizon 4 --action-dim 7 --stop-after 40 \
  --quiet >"$tmp/serve.out" 2>&1 &
spid=$!
url=$(wait_url "$tmp/serve.out" "$spid") || { cat "$tmp/serve.out" >&2; exit 1; }
sed -i "s|ws://127.0.0.1:8000|$url|" "$tmp/src/readme.c"
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror -pedantic "$tmp/src/readme.c" $flags -Wl,-rpath,"$libdir" -o "$tmp/readme_c"
timeout 60 "$tmp/readme_c" || { echo "FAIL: the README's C example exited $?" >&2; exit 1; }
wait "$spid" || true
spid=
grep -q "40 exchanges" "$tmp/serve.out" || { cat "$tmp/serve.out" >&2; echo "FAIL: the README's C example did not run the server's 40 exchanges" >&2; exit 1; }
echo "README.md's C example: builds as C99, runs the server's 40 exchanges to its stop"

echo "== find_package(plugrl), after moving the prefix"
mv "$tmp/prefix" "$tmp/moved"
unset PKG_CONFIG_PATH
cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/moved" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_COMPILER="$cxx" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; exit 1; }
grep 'found plugrl' "$tmp/cmake.log"
grep -q "valgrind suppressions $tmp/moved/share/plugrl/valgrind.supp" "$tmp/cmake.log" || {
  echo "FAIL: plugrl_VALGRIND_SUPPRESSIONS does not follow the moved prefix" >&2
  exit 1
}
cmake --build "$tmp/build" -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; exit 1; }
needs_soname "$tmp/build/main_c"
"$tmp/build/main_c"
"$tmp/build/main_cpp"
echo "== which versions find_package(plugrl VERSION) takes"
# 0.x: the same minor version; a range: any version inside it.
mkdir -p "$tmp/ver"
for req in "0.2 yes" "0 yes" "0.2.0 yes" "0.0...0.2 yes" "0.2...0.4 yes" "0.0...<0.3 yes" \
  "0.1 no" "0.3 no" "1.0 no" "0.2.1 no" "0.0...<0.2 no" "0.3...0.4 no"; do
  # shellcheck disable=SC2086
  set -- $req
  cat >"$tmp/ver/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.19)
project(plugrl_version_check NONE)
find_package(plugrl $1 CONFIG QUIET)
message(STATUS "plugrl_FOUND=[\${plugrl_FOUND}]")
CMAKE
  rm -rf "$tmp/ver/build"
  found=$(cmake -S "$tmp/ver" -B "$tmp/ver/build" -DCMAKE_PREFIX_PATH="$tmp/moved" 2>&1 | sed -n 's/.*plugrl_FOUND=\[\(.*\)\].*/\1/p')
  if [[ $2 == yes && $found != 1 ]] || [[ $2 == no && $found == 1 ]]; then
    echo "FAIL: find_package(plugrl $1) found=[$found], want $2" >&2
    exit 1
  fi
  echo "find_package(plugrl $1): found=[$found]"
done
# The request the package's own comment shows is one it takes.
req=$(sed -n 's/^#   find_package(plugrl \([0-9.]*\) CONFIG REQUIRED)$/\1/p' "$tmp/moved/lib/cmake/plugrl/plugrlConfig.cmake")
sed -i "s/^find_package(plugrl .*/find_package(plugrl $req CONFIG QUIET)/" "$tmp/ver/CMakeLists.txt"
found=$(cmake -S "$tmp/ver" -B "$tmp/ver/build-doc" -DCMAKE_PREFIX_PATH="$tmp/moved" 2>&1 | sed -n 's/.*plugrl_FOUND=\[\(.*\)\].*/\1/p')
[[ -n $req && $found == 1 ]] || { echo "FAIL: plugrlConfig.cmake's example find_package(plugrl $req) found=[$found]" >&2; exit 1; }
echo "plugrlConfig.cmake's example, find_package(plugrl $req): found=[$found]"
# A project built for another processor skips this tree (a robot's
# cross-built prefix and this machine's can both be on the search path).
sed -i 's/^find_package(plugrl .*/find_package(plugrl CONFIG QUIET)/' "$tmp/ver/CMakeLists.txt"
found=$(cmake -S "$tmp/ver" -B "$tmp/ver/build-arm" -DCMAKE_PREFIX_PATH="$tmp/moved" -DCMAKE_SYSTEM_NAME=Linux \
  -DCMAKE_SYSTEM_PROCESSOR=riscv64 2>&1 | sed -n 's/.*plugrl_FOUND=\[\(.*\)\].*/\1/p')
if [[ $found == 1 ]]; then
  echo "FAIL: a project for riscv64 found the $(uname -m) tree" >&2
  exit 1
fi
echo "find_package(plugrl) for riscv64: found=[$found]"
echo "PASS: the installed tree works with pkg-config and with find_package(plugrl)"
