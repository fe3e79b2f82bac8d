#!/usr/bin/env bash
# The step ledger, through the C ABI, against real peers:
#
#   ledger.sh BIN_DIR CONFORMANCE
#
# 1. The C probe client records a ledger per connection run of
#    plugrl-conformance --probe --scenario all (with and without
#    reuse-feedback-obs): every ledger audits clean, without a note.
# 2. The MuJoCo cartpole records a ledger against `plugrl serve --policy
#    cem --episode-log`: it audits clean, and `plugrl ledger compare` finds
#    the server's per-episode record equal to the ledger's.
# 3. A full-level ledger of the cartpole holds terminal states where it
#    says terminated and a reset's state where an episode begins
#    (cartpole_ledger_check.py, which fails the same dump edited to hold
#    either fault), and exports per-env trajectories that
#    numpy loads, with one row per chunk fed back.
# 4. The cartpole killed with SIGKILL mid-run leaves a ledger that reads
#    back (summary says how it ended) and audits clean.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BIN_DIR CONFORMANCE" >&2
  exit 2
fi
bin=$1
checker=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
plugrl=$bin/plugrl
tmp=$(mktemp -d)
spid=
cpid=
cleanup() {
  for p in $spid $cpid; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

audit_clean() { # LEDGER
  local out
  if ! out=$("$plugrl" ledger audit "$1"); then
    echo "$out" >&2
    echo "FAIL: $1 does not audit clean" >&2
    exit 1
  fi
  # Its verdict too, not only its exit status (which a broken audit could
  # get wrong while it listed the violations).
  if ! grep -q '^clean: ' <<<"$out"; then
    echo "$out" >&2
    echo "FAIL: $1: the audit does not say clean" >&2
    exit 1
  fi
  # Notes are likely faults that may be right; our own clients have none.
  if grep -q '^note:' <<<"$out"; then
    echo "$out" >&2
    echo "FAIL: $1 audits with notes" >&2
    exit 1
  fi
}

# 1. The probe client under the checker.
for features in none reuse-feedback-obs; do
  dir=$tmp/probe-$features
  mkdir -p "$dir"
  extra=()
  [[ $features != none ]] && extra=(--features "$features")
  # conformance.sh: the checker's verdict, and another port when the one
  # picked was taken before the checker bound it (as sanitizers.sh runs it
  # with ledgers).
  PLUGRL_LEDGER=$dir "$here/conformance.sh" "$checker" "$bin/plugrl_probe_client_c" "${extra[@]}" \
    >"$tmp/checker.out" 2>&1 || { cat "$tmp/checker.out"; echo "FAIL: the checker failed" >&2; exit 1; }
  n=0 episodes=0
  for f in "$dir"/*.ledger; do
    audit_clean "$f"
    n=$((n + 1))
    episodes=$((episodes + $("$plugrl" ledger episodes "$f" | tail -n +2 | wc -l)))
  done
  if [[ $n -eq 0 || $episodes -eq 0 ]]; then
    echo "FAIL: the probe runs ($features) left $n ledgers with $episodes episodes" >&2
    exit 1
  fi
  echo "probe client under the checker ($features): $n ledgers, $episodes episodes, all audit clean"
done

# start_server LOG: `plugrl serve --policy cem` with an episode log; sets url.
start_server() {
  : >"$tmp/server.out" # see wait_url
  "$plugrl" serve --addr 127.0.0.1:0 --policy cem --horizon 1 --action-dim 1 --action-dtype float64 --quiet \
    --seed 1 --episode-log "$1" >"$tmp/server.out" 2>"$tmp/server.err" &
  spid=$!
  url=$(wait_url "$tmp/server.out" "$spid") || { cat "$tmp/server.err" >&2; exit 1; }
}
stop_server() {
  kill "$spid" && wait "$spid" || true
  spid=
}
cartpole=("$bin/plugrl_mujoco_cartpole" --envs 8 --seed 1 --quiet)
# A build where MuJoCo was not found has no cartpole (CMakeLists.txt): the
# test is reported skipped, with what it did run.
if [[ ! -x ${cartpole[0]} ]]; then
  echo "SKIPPED: ledger.sh: ${cartpole[0]} was not built (MuJoCo not found): parts 2-4 left out; part 1 passed"
  exit 0
fi

# 2. The cartpole: audit and compare with the server's own record.
start_server "$tmp/server-episodes.csv"
PLUGRL_LEDGER=$tmp/cartpole.ledger "${cartpole[@]}" --episodes 120 --url "$url" >/dev/null
stop_server
audit_clean "$tmp/cartpole.ledger"
"$plugrl" ledger summary "$tmp/cartpole.ledger"
if ! "$plugrl" ledger compare "$tmp/cartpole.ledger" "$tmp/server-episodes.csv"; then
  echo "FAIL: the ledger's episodes are not the server's" >&2
  exit 1
fi

# 3. A full ledger becomes a dataset.
start_server "$tmp/server-full.csv"
PLUGRL_LEDGER=$tmp/full.ledger PLUGRL_LEDGER_LEVEL=full "${cartpole[@]}" --episodes 24 --url "$url" >/dev/null
stop_server
audit_clean "$tmp/full.ledger"
# What the env sent is the cartpole's: terminal states where it says
# terminated, a reset's state where an episode begins.
"$plugrl" ledger dump "$tmp/full.ledger" --arrays >"$tmp/full.jsonl"
/usr/bin/python3 "$here/cartpole_ledger_check.py" --min-ends 5 <"$tmp/full.jsonl"
# The check fails on the two faults it is there for, made by editing the
# same dump: a terminated feedback that carries the state of the step
# before the end, and a new episode's first infer that carries the ended
# episode's last state.
for fault in stale-terminal stale-start; do
  /usr/bin/python3 - "$fault" "$tmp/full.jsonl" >"$tmp/$fault.jsonl" <<'PY'
import json, sys
fault, dump = sys.argv[1:]
last = {}  # env -> the row of the last observation sent for it
ended = {}  # env -> its terminal row, until its next infer
done = False
for line in open(dump):
    r = json.loads(line)
    if not done and r.get("k") == "send" and "obs" in r:
        s = r["obs"]["states"]["qpos"]
        width = len(s["values"]) // s["shape"][0]
        envs = r.get("env_indices") or list(range(s["shape"][0]))
        for i, env in enumerate(envs):
            row = slice(i * width, (i + 1) * width)
            if fault == "stale-terminal" and r["type"] == "feedback" and (r.get("terminated") or [])[i:i + 1] == [True]:
                s["values"][row] = last[env]
                done = True
                break
            if fault == "stale-start" and r["type"] == "infer" and env in ended:
                s["values"][row] = ended[env]
                done = True
                break
            if r["type"] == "feedback" and (r.get("terminated") or [])[i:i + 1] == [True]:
                ended[env] = s["values"][row]
            elif r["type"] == "infer":
                ended.pop(env, None)
            last[env] = s["values"][row]
        line = json.dumps(r) + "\n"
    sys.stdout.write(line)
assert done, f"no place in the dump for the fault {fault}"
PY
  if /usr/bin/python3 "$here/cartpole_ledger_check.py" <"$tmp/$fault.jsonl" >"$tmp/$fault.out" 2>&1; then
    cat "$tmp/$fault.out"
    echo "FAIL: cartpole_ledger_check.py passes a dump with the fault $fault" >&2
    exit 1
  fi
  want="not a terminal state"
  [[ $fault == stale-start ]] && want="not a reset's state"
  grep -q "$want" "$tmp/$fault.out" || { cat "$tmp/$fault.out"; echo "FAIL: the check of $fault does not say \"$want\"" >&2; exit 1; }
  echo "cartpole_ledger_check.py fails the dump edited to hold $fault: $(grep -m1 violation: "$tmp/$fault.out")"
done
"$plugrl" ledger export "$tmp/full.ledger" --npz "$tmp/npz"
episodes=$("$plugrl" ledger episodes "$tmp/full.ledger" | tail -n +2 | wc -l)
/usr/bin/python3 - "$tmp/npz" "$episodes" <<'PY'  # Debian's, with python3-numpy (build.sh installs it)
import glob, os, sys
import numpy as np
d = sys.argv[1]
envs = sorted({os.path.basename(p).split("_")[0] for p in glob.glob(os.path.join(d, "*.npy"))})
assert len(envs) == 8, envs
rows = ended = 0
for e in envs:
    r = np.load(os.path.join(d, e + "_reward.npy"))
    a = np.load(os.path.join(d, e + "_action.npy"))
    t = np.load(os.path.join(d, e + "_terminated.npy"))
    obs = [np.load(p) for p in sorted(glob.glob(os.path.join(d, e + "_states.*.npy")))]
    assert obs and all(o.shape[0] == len(r) for o in obs), (e, [o.shape for o in obs], r.shape)
    assert a.shape == (len(r), 1, 1) and t.dtype == np.bool_ and t.shape == r.shape, (a.shape, t.dtype)
    tr = np.load(os.path.join(d, e + "_truncated.npy"))
    ended += int((t | tr).sum())
    rows += len(r)
assert ended == int(sys.argv[2]), (ended, sys.argv[2])
print(f"export: {len(envs)} envs, {rows} transitions, {ended} episode ends (as the ledger's episode log), numpy loads every file")
PY

# 4. Killed mid-run, its writer placed on a CPU of its own
# (PLUGRL_LEDGER_CPUS): while it runs, exactly one of its threads may run
# only there.
start_server "$tmp/server-killed.csv"
writer_cpu=$(grep Cpus_allowed_list /proc/self/status | grep -o '[0-9]*$')
PLUGRL_LEDGER=$tmp/killed.ledger PLUGRL_LEDGER_CPUS=$writer_cpu "${cartpole[@]}" --episodes 1000000 --url "$url" >/dev/null &
cpid=$!
for _ in $(seq 200); do
  [[ $(stat -c %s "$tmp/killed.ledger" 2>/dev/null || echo 0) -gt 20000 ]] && break
  sleep 0.05
done
all_cpus=$(grep Cpus_allowed_list "/proc/$cpid/status" | awk '{print $2}')
pinned=$({ grep -h Cpus_allowed_list /proc/"$cpid"/task/*/status 2>/dev/null || true; } | awk -v c="$writer_cpu" '$2 == c' | wc -l)
if [[ $all_cpus == "$writer_cpu" ]]; then
  echo "PLUGRL_LEDGER_CPUS=$writer_cpu: not checked, the process has no other CPU"
elif [[ $pinned != 1 ]]; then
  echo "FAIL: with PLUGRL_LEDGER_CPUS=$writer_cpu, $pinned threads run on CPU $writer_cpu only; want 1 (the writer)" >&2
  exit 1
else
  echo "PLUGRL_LEDGER_CPUS=$writer_cpu: the writer's thread runs there alone (the process: $all_cpus)"
fi
kill -9 "$cpid"
wait "$cpid" 2>/dev/null || true
cpid=
stop_server
"$plugrl" ledger summary "$tmp/killed.ledger" | tee "$tmp/killed.txt"
grep -Eq "TRUNCATED|no end record" "$tmp/killed.txt" || { echo "FAIL: a killed run's ledger says it closed" >&2; exit 1; }
grep -Eq "exchanges: [1-9]" "$tmp/killed.txt" || { echo "FAIL: no exchange read back from the killed run" >&2; exit 1; }
audit_clean "$tmp/killed.ledger"
echo "PASS: ledgers audit clean, match the server's episodes, export, and survive kill -9"
