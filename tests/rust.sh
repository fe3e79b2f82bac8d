#!/usr/bin/env bash
# The Rust crates of examples/rust against the libplugrl built in build/:
#
#   rust.sh REPO_ROOT
#
# runs, in examples/rust, `cargo fmt --check`, `cargo clippy --all-targets
# -- -D warnings` and `cargo test` (unit tests, doctests, the Rust probe
# client under plugrl-conformance four times, the cartpole learning test),
# then checks the Rust cartpole's full step ledger (ledger_check below) and
# the Rust probe client on SIGINT and SIGTERM (tests/probe_signals.sh).
# The build goes to build/rust-target (cached between runs, out of the
# source tree), two jobs at a time. plugrl-sys finds the library through
# build/lib/pkgconfig/plugrl.pc; the tests find `plugrl` in build/bin.
#
# Prints a SKIPPED line and exits 0 only when cargo is not installed; any
# other problem (no build/, no clippy or rustfmt; a protocol checker that is
# there but cannot run) fails. Without a checker the conformance runs are
# skipped, with a line saying so.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 1 ]]; then
  echo "usage: $0 REPO_ROOT" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
build=$root/build
ws=$root/examples/rust

# rustup installs cargo in ~/.cargo/bin, which a non-login shell may lack.
if ! command -v cargo >/dev/null && [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/cargo ]]; then
  PATH=${CARGO_HOME:-$HOME/.cargo}/bin:$PATH
fi
if ! command -v cargo >/dev/null; then
  echo "SKIPPED: rust.sh: cargo is not installed"
  exit 0
fi
for f in "$build/lib/libplugrl.so" "$build/lib/pkgconfig/plugrl.pc" "$build/bin/plugrl"; do
  if [[ ! -e $f ]]; then
    echo "$0: $f does not exist; build libplugrl first (./build.sh)" >&2
    exit 1
  fi
done

export PKG_CONFIG_PATH=$build/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PLUGRL_BIN_DIR=$build/bin
export CARGO_TARGET_DIR=$build/rust-target
export CARGO_BUILD_JOBS=2 # the CI machine has 2 cores
# The protocol checker, where CMake looks for it (CTest passes its
# PLUGRL_CONFORMANCE). When it is there, the Rust probe client's four runs
# under it must be made: a test that skipped them (python3 without
# websockets, msgpack or numpy) would pass, and this script with it,
# having checked nothing. When it is not, they are skipped, as CTest
# skips the C and C++ ones, and said so here.
export PLUGRL_CONFORMANCE=${PLUGRL_CONFORMANCE:-$root/../shared/conformance/plugrl-conformance}
if [[ -f $PLUGRL_CONFORMANCE ]]; then
  export PLUGRL_CONFORMANCE_REQUIRED=1
else
  echo "rust.sh: no protocol checker at $PLUGRL_CONFORMANCE: the Rust probe client's conformance runs are skipped"
fi
# The tests' own parallelism: the checker runs and the learning test each
# start a server and a client.
export RUST_TEST_THREADS=2
cd "$ws"

step() {
  printf '==> %s\n' "$*"
  local start=$SECONDS
  "$@"
  printf '==> %s: %d s\n' "${*:1:2}" $((SECONDS - start))
}

# --locked: the committed Cargo.lock is used as is, never updated.
step cargo fmt --check
step cargo clippy --locked --workspace --all-targets -j 2 -- -D warnings
step cargo test --locked --workspace -j 2

# What the Rust cartpole sent, from its full step ledger: a clean audit,
# terminal states where it said terminated and a reset's state where an
# episode began (tests/cartpole_ledger_check.py with the Rust cartpole's
# state `x` = [x, x_dot, theta, theta_dot] and its 12 degrees).
ledger_check() {
  local tmp server url rc=0
  tmp=$(mktemp -d)
  : >"$tmp/serve.out" # see wait_url
  "$build/bin/plugrl" serve --addr 127.0.0.1:0 --policy cem --horizon 1 --action-dim 1 --action-dtype float64 \
    --seed 1 --quiet >"$tmp/serve.out" 2>&1 &
  server=$!
  url=$(wait_url "$tmp/serve.out" "$server") || { cat "$tmp/serve.out" >&2; kill "$server"; return 1; }
  PLUGRL_LEDGER=$tmp/rust.ledger PLUGRL_LEDGER_LEVEL=full \
    "$CARGO_TARGET_DIR/debug/cartpole" --envs 8 --episodes 40 --seed 1 --quiet --url "$url" >/dev/null || rc=$?
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  if [[ $rc -eq 0 ]] && ! { "$build/bin/plugrl" ledger audit "$tmp/rust.ledger" >"$tmp/audit.txt" &&
    grep -q '^clean: ' "$tmp/audit.txt"; }; then
    head -n 20 "$tmp/audit.txt" >&2
    rc=1
  fi
  if [[ $rc -eq 0 ]] && ! "$build/bin/plugrl" ledger dump "$tmp/rust.ledger" --arrays |
    /usr/bin/python3 "$root/tests/cartpole_ledger_check.py" --min-ends 10 \
      --state x --x-index 0 --angle-index 2 --max-angle 0.20943951023931953; then
    rc=1
  fi
  rm -rf "$tmp"
  [[ $rc -eq 0 ]] || { echo "FAIL: the Rust cartpole's ledger" >&2; return 1; }
  echo "PASS: the Rust cartpole's full ledger audits clean, with terminal and reset states where they belong"
}
step ledger_check
step "$root/tests/probe_signals.sh" "$build/bin/plugrl" "$build/bin/plugrl-hostile" "$CARGO_TARGET_DIR/debug/probe_client"
