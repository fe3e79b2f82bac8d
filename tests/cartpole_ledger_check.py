#!/usr/bin/env python3
"""Checks what a cartpole env client sent, from its full ledger's dump.

    plugrl ledger dump FILE --arrays | cartpole_ledger_check.py [--min-ends N]
        [--state NAME --x-index I --angle-index J --max-angle RAD]

Reads the JSON lines of `plugrl ledger dump --arrays` of a run of
cartpoles and checks, for every env, against the rules that end an
episode (the cart past 2.4 m, the pole past --max-angle). The defaults fit
the MuJoCo cartpole (examples/cpp/cartpole_model.hpp, which the ROS 2
simulator uses too): a state `qpos` of [slider, hinge] per env, 0.2 rad;
the Rust one (examples/rust, plugrl_examples::cartpole) has `x` of [x,
x_dot, theta, theta_dot] and 12 degrees. It checks that

- every feedback that says `terminated` carries the terminal state: the
  pole past the angle or the cart past 2.4 m, not a state from before the
  step that ended it;
- the first observation sent for an env after its episode ended is a
  state of the new episode: both joints within 0.1 of rest (a reset puts
  them within 0.05), not the ended episode's last state.

Exits 1, naming the records, on any violation, or when fewer than N
episodes (default 1) ended by termination; 0 otherwise, with a summary.
"""
import argparse
import json
import sys

MAX_X = 2.4  # m: past this the cart has left the track
REST = 0.1  # a new episode's state is within this of rest


def rows(record, name):
    """The record's env indices and each env's row of the named state: in an
    infer with reuse (SPEC 10.1), only the rows not reused, which are all
    the observation holds (none, when every row is reused)."""
    state = record["obs"]["states"][name]
    values, shape = state["values"], state["shape"]
    envs = record.get("env_indices") or list(range(shape[0]))
    reuse = record.get("reuse")
    if reuse:
        envs = [env for env, r in zip(envs, reuse) if not r]
    if shape[0] == 0:
        return []
    width = len(values) // shape[0]
    return [(env, values[i * width:(i + 1) * width]) for i, env in enumerate(envs)]


def reused(record):
    """The envs whose observation an infer reuses (SPEC 10.1)."""
    reuse = record.get("reuse") or []
    return [env for env, r in zip(record.get("env_indices") or [], reuse) if r]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--min-ends", type=int, default=1,
                        help="fail unless at least this many episodes ended by termination")
    parser.add_argument("--state", default="qpos", help="the observation's state holding x and the angle")
    parser.add_argument("--x-index", type=int, default=0, help="the cart's position in a row of --state")
    parser.add_argument("--angle-index", type=int, default=1, help="the pole's angle in a row of --state")
    parser.add_argument("--max-angle", type=float, default=0.2, help="rad: past this the pole has fallen")
    args = parser.parse_args()

    def pose(row):
        return row[args.x_index], row[args.angle_index]

    violations = []
    terminal_ok = 0
    starts_ok = 0
    ended = set()  # envs whose episode ended and whose next observation is not seen yet
    for line in sys.stdin:
        record = json.loads(line)
        if record.get("k") != "send" or "obs" not in record:
            continue
        kind = record.get("type")
        if kind == "infer":
            for env in reused(record):
                if env in ended:
                    violations.append(f"record {record['seq']}: env {env}'s first infer of an episode reuses "
                                      f"the terminal observation (SPEC 10.1), not a reset's state")
                    ended.discard(env)
            for env, row in rows(record, args.state):
                x, angle = pose(row)
                if env not in ended:
                    continue
                ended.discard(env)
                if abs(x) > REST or abs(angle) > REST:
                    violations.append(f"record {record['seq']}: env {env}'s first observation of an episode is "
                                      f"x={x:.3f}, angle={angle:.3f}, not a reset's state (within {REST})")
                else:
                    starts_ok += 1
        elif kind == "feedback":
            terminated = record.get("terminated") or []
            truncated = record.get("truncated") or []
            for i, (env, row) in enumerate(rows(record, args.state)):
                x, angle = pose(row)
                done_t = i < len(terminated) and terminated[i]
                done_u = i < len(truncated) and truncated[i]
                if done_t:
                    if abs(angle) > args.max_angle or abs(x) > MAX_X:
                        terminal_ok += 1
                    else:
                        violations.append(f"record {record['seq']}: env {env} terminated with x={x:.3f}, "
                                          f"angle={angle:.3f}: not a terminal state (a state before the end?)")
                if done_t or done_u:
                    ended.add(env)

    for v in violations[:20]:
        print("violation:", v, file=sys.stderr)
    if len(violations) > 20:
        print(f"... and {len(violations) - 20} more", file=sys.stderr)
    print(f"{terminal_ok} terminated feedbacks carry a terminal state; "
          f"{starts_ok} episodes began on a reset's state; {len(violations)} violation(s)")
    if violations:
        return 1
    if terminal_ok < args.min_ends:
        print(f"want at least {args.min_ends} terminated episodes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
