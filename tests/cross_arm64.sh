#!/usr/bin/env bash
# libplugrl on 64-bit ARM (a Jetson, a Raspberry Pi 4/5 on a 64-bit OS),
# built on this machine and run under user-mode emulation:
#
#   cross_arm64.sh REPO_ROOT CONFORMANCE
#
# builds the library and every C/C++ program for arm64
# (PLUGRL_CROSS=aarch64-linux-gnu ./build.sh, into
# build-aarch64-linux-gnu/), then runs under qemu-aarch64, against this
# machine's servers (build/bin: ./build.sh first):
#   - the Go core's tests, built for arm64 (among them the NEON masking
#     and digest loops of core/maskcopy, against hash/adler32 and
#     gobwas/ws);
#   - the C and C++ probe clients under the protocol checker;
#   - misuse, threads, the C++ wrapper's tests and signals;
#   - the hostile-server cases, but for those that measure time, memory
#     or CPU (emulation makes those figures the emulator's): rlimit (qemu
#     does not bound the guest's mmap by RLIMIT_AS), interrupt-latency and
#     interrupt-signal (the first reconnect's code is translated on the
#     way, which takes longer than the 500 ms the case allows), tokens (4.2
#     million opens: a minute emulated), idle-cpu; and tests/c/churn.c
#     for the same reason (its resident memory is qemu's: it grew 211 MB
#     once, over threads that came and went, and then stayed flat); and
#     vanish, vanish-unacked and vanish-idle: qemu-user answers
#     getsockopt(TCP_INFO) with 4 bytes, so the library cannot weigh the
#     server's silence there and falls back, as documented, to the
#     kernel's keepalive (vanish: 9.3 s under a 2 s bound) or, with data in
#     flight, the receive timeout. struct tcp_info's fields it reads have
#     the same offsets on arm64 (fixed-width types only).
# Skipped with a message where the cross compilers or qemu-user are not
# installed.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 REPO_ROOT CONFORMANCE" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
checker=$2
sysroot=/usr/aarch64-linux-gnu
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64 "$sysroot/include/stdio.h"; do
  if ! command -v "$tool" >/dev/null && [[ ! -e $tool ]]; then
    echo "SKIPPED: cross_arm64.sh: $tool is not installed (Debian: gcc-aarch64-linux-gnu" \
      "g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
    exit 0
  fi
done
native=$root/build/bin
# shellcheck source=tests/lib.sh
. "$root/tests/lib.sh"
require_built "$native" plugrl plugrl-hostile
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== PLUGRL_CROSS=aarch64-linux-gnu ./build.sh"
if ! PLUGRL_CROSS=aarch64-linux-gnu "$root/build.sh" >"$tmp/build.log" 2>&1; then
  cat "$tmp/build.log" >&2
  exit 1
fi
arm=$root/build-aarch64-linux-gnu
readelf -h "$arm/lib/libplugrl.so" | grep -q 'Machine:.*AArch64' || {
  echo "FAIL: $arm/lib/libplugrl.so is not an arm64 library: $(readelf -h "$arm/lib/libplugrl.so" | grep Machine)" >&2
  exit 1
}

# Each arm64 program behind a script of the same name that runs it under
# qemu, so that the test scripts run it as they run any program; the
# servers beside them are this machine's. PLUGRL_TEST_SELF names the
# script to a program that runs a second copy of itself (misuse's other
# process): its /proc/self/exe is the arm64 file, which this machine
# cannot exec without qemu.
bin=$tmp/bin
mkdir -p "$bin"
for exe in "$arm"/bin/*; do
  name=$(basename "$exe")
  printf '#!/bin/sh\nexec env QEMU_LD_PREFIX=%s PLUGRL_TEST_SELF=%s qemu-aarch64 "%s" "$@"\n' "$sysroot" "$bin/$name" "$exe" >"$bin/$name"
  chmod +x "$bin/$name"
done
ln -sfn "$native/plugrl-hostile" "$bin/plugrl-hostile"
server=$native/plugrl

failed=()
run() {
  local name=$1
  shift
  echo "== $name"
  if ! "$@"; then
    failed+=("$name")
  fi
}

# Two packages at a time, as build.sh's race run: 106 s at -p 1, 60-85 s at
# -p 2 (four runs, all passing).
go_tests() {
  (cd "$root" && GOARCH=arm64 CGO_ENABLED=0 go test -exec qemu-aarch64 -count=1 -p 2 \
    -skip 'TestKilled|TestExchangeAllocs|TestRunnerStepAllocs|TestFileSizeLimit|TestConformance|TestIdleClientSleeps' ./core/... ./internal/...)
}
# Skipped there: the tests that start a copy of their own binary
# (TestKilled, TestExchangeAllocs, TestRunnerStepAllocs,
# TestFileSizeLimit), or build and start a client (TestConformance):
# without binfmt_misc the kernel cannot start an arm64 program, and the C
# ABI's runs below cover the same ground. And
# TestIdleClientSleeps, for the reason idle-cpu is skipped below: it
# measures CPU, which under qemu is the emulator's (8 idle clients 4.9-9.3
# ms a second in one CI run, against the 4 ms it allows natively, where
# the native run of the Go tests keeps checking it).
run "go test (arm64) ./core/... ./internal/..." go_tests

for client in plugrl_probe_client_c plugrl_probe_client; do
  run "conformance $client" "$root/tests/conformance.sh" "$checker" "$bin/$client"
  run "conformance $client reuse-feedback-obs float64" "$root/tests/conformance.sh" "$checker" "$bin/$client" \
    --features reuse-feedback-obs --action-dtype float64
done

run misuse "$root/tests/run_with_server.sh" "$server" --action-dim 2 --features reuse-feedback-obs -- "$bin/misuse"
run threads "$root/tests/run_with_server.sh" "$server" --action-dim 3 --horizon 4 --features reuse-feedback-obs --policy probe \
  -- "$bin/threads"
run hpp "$root/tests/run_with_server.sh" "$server" --action-dim 3 --horizon 4 --action-dtype float64 \
  --features reuse-feedback-obs --policy probe --stop-after 40 -- "$bin/hpp_test"
run signals "$root/tests/signals.sh" "$server" "$bin/signals" 5

if list=$(hostile_cases "$bin/hostile" rlimit interrupt-latency interrupt-signal tokens idle-cpu vanish vanish-unacked vanish-idle); then
  mapfile -t cases <<<"$list"
  # The garble cases with fewer draws (HOSTILE_SHORT), as under the
  # sanitizers: emulated, each draw costs several times its native time.
  # Deadlines within 1 s of their bound, as under the sanitizers
  # (no-metadata: 762 ms against 300 in one run); CTest hostile holds the
  # 250 ms natively.
  HOSTILE_SHORT=1 HOSTILE_OVERSHOOT_LIMIT_MS=1000 run "hostile (${#cases[@]} cases)" "$root/tests/hostile.sh" "$bin" "${cases[@]}"
else
  failed+=(hostile)
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'FAIL: arm64 under qemu: %s\n' "${failed[*]}" >&2
  exit 1
fi
echo "PASS: libplugrl for arm64, under qemu-aarch64: the Go core's tests, the checker, misuse, threads, hpp," \
  "signals and ${#cases[@]} hostile cases"
