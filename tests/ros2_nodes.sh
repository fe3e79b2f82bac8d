#!/usr/bin/env bash
# plugrl_ros2's nodes for real (called by tests/ros2.sh where rclcpp is
# found; needs a sourced ROS 2):
#
#   ros2_nodes.sh PLUGRL_BIN_DIR NODES_DIR PLOT_RETURNS_PY TRAJECTORY_PROBE
#
# 1. Learning through DDS: cartpole_sim_node (8 MuJoCo cartpoles, a step
#    per command, seed 1) and plugrl_env_node (lockstep) against `plugrl
#    serve --policy random` for 200 episodes, then `--policy cem --seed 1`
#    for 320: passes when cem's last 40 episodes' mean return is at least 3
#    times its first 40's and 5 times the random policy's (as
#    tests/cartpole_learns.sh asks of the C++ demo).
# 1b. A node started before its server: plugrl_env_node (open_wait_ms -1,
#    its default) against a port where `plugrl serve` starts 2 s later
#    must log its waiting, then connect and run 20 episodes.
# 2. Action chunks: the same against `plugrl serve --policy cem --horizon
#    4` for 40 episodes, with trajectory_probe (test/trajectory_probe.cpp,
#    from the build tree) on env 0's JointTrajectory topic: the node must
#    publish trajectories of 4 points at a chunk's first step (the rest of
#    the chunk after that: 3, 2, 1), point k due at (k + 1) x 0.01 s, each
#    trajectory's second point the next one's first, and the last one the
#    final hold (frame_id "hold") when max_episodes ends the run; its full
#    ledger must pass check_ledger (below).
# 3. The timer mode: the simulator on its own 100 Hz clock, the node
#    ticking at 100 Hz, 40 episodes against cem, with H = 1 and with
#    H = 4: the node must end them
#    (envs ending at the same last step may add a few) and exit 0, and
#    its full ledger must pass check_ledger: a clean audit, terminal
#    states where it said terminated and a reset's state where an episode
#    began (cartpole_ledger_check.py).
#    Then at 5 Hz against plugrl-hostile slow-action --slow-every 5 for
#    9 s: the node must step at 5 Hz at most, hold at its ticks while an
#    infer waits 3 s, and end (SIGINT) with its final hold.
# 4. Slow resets: a robot whose reset outlasts reset_timeout_s is asked
#    once per episode end and not commanded while it resets; one whose
#    reset server crashes with the request and is back within
#    reset_timeout_s is asked again; and
#    configurations refused at start (a negative control_rate_hz, two envs
#    on one command topic), naming the parameter.
# 5. Shutdown: 20 times, plugrl_env_node against a server that never
#    answers (plugrl-hostile slow-action), SIGINT once its infer waits; and
#    5 times in the middle of training against `plugrl serve --policy cem`.
#    In each run the node must stop (rclcpp's signal handler to its client
#    closed, from its log) within 100 ms and the process exit 0 within 1 s;
#    in training, after publishing its final hold.
# ROS_DOMAIN_ID is chosen per run so that parallel runs do not meet.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 4 ]]; then
  echo "usage: $0 PLUGRL_BIN_DIR NODES_DIR PLOT_RETURNS_PY TRAJECTORY_PROBE" >&2
  exit 2
fi
bin=$1 nodes=$2 plot=$3 probe=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  [[ -n ${PLUGRL_ROS2_KEEP:-} ]] || rm -rf "$tmp"
}
trap cleanup EXIT
[[ -z ${PLUGRL_ROS2_KEEP:-} ]] || echo "logs: $tmp"

export ROS_DOMAIN_ID=${ROS_DOMAIN_ID_FOR_TEST:-$((100 + $$ % 100))}
export ROS_LOCALHOST_ONLY=1
export RCUTILS_COLORIZED_OUTPUT=0

envs=8
ns=$(seq -s, -f 'cart_%g' 0 $((envs - 1)))
cat >"$tmp/params.yaml" <<YAML
plugrl_env_node:
  ros__parameters:
    control_rate_hz: 0.0
    max_obs_age_s: 2.0
    env_namespaces: [$ns]
    observation:
      names: [qpos, qvel]
      qpos: {topic: joint_states, type: joint_position, joints: [slider, hinge]}
      qvel: {topic: joint_states, type: joint_velocity, joints: [slider, hinge]}
    action_topic: effort
    action_clip: [-1.0, 1.0]
    publish_trajectory: true
    trajectory_joints: [slider]
    trajectory_field: effort
    log_episodes: false
cartpole_sim_node:
  ros__parameters:
    num_envs: $envs
    seed: 1
    max_steps: 500
    step_on_command: true
YAML

# start_sim LOG: cartpole_sim_node in the background; sets sim_pid.
start_sim() {
  "$nodes/cartpole_sim_node" --ros-args --params-file "$tmp/params.yaml" >"$1" 2>&1 &
  sim_pid=$!
  pids+=("$sim_pid")
}

stop() { # PID: SIGINT, then wait
  kill -INT "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# start_serve LOG POLICY HORIZON: `plugrl serve` (one float64 action, seed
# 1) in the background, its output in LOG; sets server (its pid, also in
# pids) and url, in the caller's scope when the caller declared them local.
start_serve() {
  local log=$1
  : >"$log" # see wait_url
  "$bin/plugrl" serve --addr 127.0.0.1:0 --policy "$2" --horizon "$3" --action-dim 1 --action-dtype float64 \
    --seed 1 --quiet >"$log" 2>&1 &
  server=$!
  pids+=("$server")
  url=$(wait_url "$log" "$server") || {
    echo "FAIL: plugrl serve printed no URL: $(cat "$log")" >&2
    exit 1
  }
}

# start_hostile NAME ARGS...: plugrl-hostile ARGS in the background, its
# output in $tmp/NAME.out and $tmp/NAME.err; sets hostile (its pid, also
# in pids) and url, in the caller's scope when the caller declared them
# local.
start_hostile() {
  local name=$1
  shift
  : >"$tmp/$name.out" # see wait_url
  "$bin/plugrl-hostile" "$@" </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" &
  hostile=$!
  pids+=("$hostile")
  url=$(wait_url "$tmp/$name.out" "$hostile") || {
    echo "FAIL: plugrl-hostile printed no URL: $(cat "$tmp/$name.err")" >&2
    exit 1
  }
}

# check_ledger WHAT LEDGER MIN_ENDS: what the node sent, from its full
# ledger: a clean `plugrl ledger audit` (among its rules SPEC 5.4: an
# env's next infer sends the state its feedback sent), and
# cartpole_ledger_check.py: terminal states where it said terminated
# (the simulator publishes its flags before the state), a reset's state
# where an episode began, at least MIN_ENDS terminations.
check_ledger() {
  local what=$1 ledger=$2 min_ends=$3
  if ! "$bin/plugrl" ledger audit "$ledger" >"$ledger.audit"; then
    echo "FAIL: $what: the node's ledger does not audit clean:" >&2
    head -n 20 "$ledger.audit" >&2
    exit 1
  fi
  if ! "$bin/plugrl" ledger dump "$ledger" --arrays |
    /usr/bin/python3 "$here/cartpole_ledger_check.py" --min-ends "$min_ends"; then
    echo "FAIL: $what: the node sent the wrong states at episode ends or starts" >&2
    exit 1
  fi
}

# learn POLICY EPISODES CSV
learn() {
  local policy=$1 episodes=$2 csv=$3 url server rc=0 start=$SECONDS
  start_serve "$tmp/$policy-serve.log" "$policy" 1
  start_sim "$tmp/$policy-sim.log"
  timeout -s INT -k 5 600 "$nodes/plugrl_env_node" --ros-args --params-file "$tmp/params.yaml" \
    -p "url:=$url" -p "max_episodes:=$episodes" -p "episode_csv:=$csv" >"$tmp/$policy-env.log" 2>&1 || rc=$?
  stop "$sim_pid"
  stop "$server"
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: plugrl_env_node ($policy) exited $rc; its log:" >&2
    tail -n 40 "$tmp/$policy-env.log" >&2
    echo "---- cartpole_sim_node" >&2
    tail -n 10 "$tmp/$policy-sim.log" >&2
    exit 1
  fi
  echo "$policy: $(($(wc -l <"$csv") - 1)) episodes through DDS in $((SECONDS - start)) s"
  grep -E 'connected:|reconnect|holding' "$tmp/$policy-env.log" | head -n 5 | sed 's/^/    /'
}

echo "== learning through ROS 2: $envs cartpoles, cartpole_sim_node + plugrl_env_node (ROS_DOMAIN_ID=$ROS_DOMAIN_ID)"
learn random 200 "$tmp/random.csv"
learn cem 320 "$tmp/cem.csv"
python3 "$plot" "$tmp/cem.csv" --random "$tmp/random.csv" --window 40 \
  --require-gain 3 --require-ratio 5 --out "$tmp/returns.svg" \
  --title "MuJoCo cartpole through ROS 2 (plugrl_env_node, $envs envs) learning with plugrl serve --policy cem"
echo "PASS: the cartpole learns through ROS 2"

# late_server: the node first, the server 2 s later (1b. above).
late_server() {
  local port url server rc=0 start=$SECONDS log=$tmp/late-env.log csv=$tmp/late.csv
  port=$("$here/free_port.sh")
  url=ws://127.0.0.1:$port
  start_sim "$tmp/late-sim.log"
  timeout -s INT -k 5 120 "$nodes/plugrl_env_node" --ros-args --params-file "$tmp/params.yaml" \
    -p "url:=$url" -p max_episodes:=20 -p "episode_csv:=$csv" >"$log" 2>&1 &
  local node=$!
  pids+=("$node")
  sleep 2
  "$bin/plugrl" serve --addr "127.0.0.1:$port" --policy random --horizon 1 --action-dim 1 --action-dtype float64 \
    --seed 1 --quiet >"$tmp/late-serve.log" 2>&1 &
  server=$!
  pids+=("$server")
  wait "$node" || rc=$?
  stop "$sim_pid"
  stop "$server"
  if [[ $rc -ne 0 ]] || ! grep -q 'waiting for the server' "$log" || [[ $(($(wc -l <"$csv") - 1)) -lt 20 ]]; then
    echo "FAIL: plugrl_env_node started 2 s before its server exited $rc; want it to wait (logging so), then run 20 episodes; its log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  echo "started 2 s before its server: $(grep -c 'waiting for the server' "$log") attempts logged, then $(($(wc -l <"$csv") - 1)) episodes in $((SECONDS - start)) s"
}

echo "== a node started before its server (open_wait_ms -1)"
late_server
echo "PASS: a node started before its server waits for it, then runs"

# chunks EPISODES: H = 4 in lockstep, trajectory_probe listening to env 0's
# trajectories (see 2. above).
chunks() {
  local episodes=$1 url server rc=0 start=$SECONDS line
  start_serve "$tmp/chunk-serve.log" cem 4
  "$probe" --ros-args -r trajectory:=/cart_0/action_trajectory >"$tmp/probe.log" 2>&1 &
  local probe_pid=$!
  pids+=("$probe_pid")
  start_sim "$tmp/chunk-sim.log"
  PLUGRL_LEDGER=$tmp/chunk.ledger PLUGRL_LEDGER_LEVEL=full timeout -s INT -k 5 300 "$nodes/plugrl_env_node" \
    --ros-args --params-file "$tmp/params.yaml" \
    -p "url:=$url" -p "max_episodes:=$episodes" -p "episode_csv:=$tmp/chunk.csv" >"$tmp/chunk-env.log" 2>&1 || rc=$?
  stop "$sim_pid"
  stop "$server"
  stop "$probe_pid"
  line=$(grep '^trajectory_probe:' "$tmp/probe.log" || true)
  if [[ $rc -ne 0 || -z $line ]]; then
    echo "FAIL: chunks: plugrl_env_node exited $rc; probe: ${line:-no summary}; the node's log:" >&2
    tail -n 30 "$tmp/chunk-env.log" >&2
    cat "$tmp/probe.log" >&2
    exit 1
  fi
  echo "H = 4: $(($(wc -l <"$tmp/chunk.csv") - 1)) episodes in $((SECONDS - start)) s; env 0's trajectories seen over DDS:"
  echo "    $line"
  grep -E 'publishing each env' "$tmp/chunk-env.log" | head -n 1 | sed 's/^/    /'
  # Points 4 seen, nothing above, no bad times, the chain checked and whole.
  if ! awk '{
        for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+:[0-9]+;?$/) { split($i, a, ":"); if (a[1] + 0 > max) max = a[1] + 0 }
        if (match($0, /bad times [0-9]+/)) bad = substr($0, RSTART + 10, RLENGTH - 10) + 0
        if (match($0, /chained [0-9]+/)) ch = substr($0, RSTART + 8, RLENGTH - 8) + 0
        if (match($0, /differ [0-9]+/)) df = substr($0, RSTART + 7, RLENGTH - 7) + 0
        if ($0 ~ /last a hold yes/) lh = 1
      } END { exit !(max == 4 && bad == 0 && ch > 0 && df == 0 && lh) }' <<<"$line"; then
    echo "FAIL: the JointTrajectory is not the rest of the chunk (want up to 4 points, none more, good times, chained, and the final hold last)" >&2
    exit 1
  fi
  check_ledger "chunks" "$tmp/chunk.ledger" 10
  echo "PASS: with H = 4 the JointTrajectory holds the rest of each chunk, and the run ends with a hold"
}

echo "== action chunks: H = 4, the JointTrajectory of the rest of each chunk"
chunks 40

# timer_mode EPISODES HORIZON: the real-robot mode through DDS:
# cartpole_sim_node stepping every cartpole at 100 Hz on its own clock (the
# latest effort held), plugrl_env_node ticking at 100 Hz, against `plugrl
# serve --policy cem --horizon HORIZON`. Passes when EPISODES episodes (a
# few more when envs end at the same last step) end, the node exits 0 and
# its ledger passes check_ledger; says how often it held.
timer_mode() {
  local episodes=$1 horizon=$2 url server rc=0 start=$SECONDS
  local name=timer-h$horizon
  start_serve "$tmp/$name-serve.log" cem "$horizon"
  "$nodes/cartpole_sim_node" --ros-args --params-file "$tmp/params.yaml" -p step_on_command:=false \
    -p rate_hz:=100.0 >"$tmp/$name-sim.log" 2>&1 &
  sim_pid=$!
  pids+=("$sim_pid")
  PLUGRL_LEDGER=$tmp/$name.ledger PLUGRL_LEDGER_LEVEL=full timeout -s INT -k 5 300 "$nodes/plugrl_env_node" \
    --ros-args --params-file "$tmp/params.yaml" \
    -p "url:=$url" -p control_rate_hz:=100.0 -p max_obs_age_s:=0.1 -p "max_episodes:=$episodes" \
    -p "episode_csv:=$tmp/$name.csv" >"$tmp/$name-env.log" 2>&1 || rc=$?
  stop "$sim_pid"
  stop "$server"
  check_ledger "timer mode, H = $horizon" "$tmp/$name.ledger" 10
  local got=$(($(wc -l <"$tmp/$name.csv") - 1))
  # Envs that end at the same step all count: the last step may pass
  # max_episodes by a few.
  if [[ $rc -ne 0 || $got -lt $episodes ]]; then
    echo "FAIL: timer mode, H = $horizon: plugrl_env_node exited $rc after $got of $episodes episodes; its log:" >&2
    tail -n 30 "$tmp/$name-env.log" >&2
    exit 1
  fi
  echo "timer mode, H = $horizon: $got episodes at 100 Hz in $((SECONDS - start)) s, mean return" \
    "$(awk -F, 'NR>1{s+=$4;n++} END{printf "%.1f", s/n}' "$tmp/$name.csv");" \
    "$(grep -c 'holding the safe action' "$tmp/$name-env.log" || true) hold warning(s)"
  echo "PASS: the timer mode runs through DDS (H = $horizon)"
}

echo "== timer mode (a robot on its own clock)"
timer_mode 40 1
timer_mode 40 4

# timer_stall: the timer mode at 5 Hz against a server that answers every
# 5th infer after 3 s (plugrl-hostile slow-action --slow-every 5), for
# 9 s, then SIGINT; trajectory_probe on env 0's trajectories. Passes when
# the node steps at the control rate and no faster, holds at its ticks
# while an infer waits (a run of at least 8 holds in a row: the
# observation goes stale 0.3 s into a 3 s wait), and ends with its final
# hold. (A cartpole on a clock whose episode ended sends its state only
# every 0.5-1 s until its reset: the node reports such a step with its
# last state, however old, so that this does not hold the others.) Every
# 5th infer stalls, not every 10th: at 5 Hz the cartpoles end an episode
# every few steps, each end holds every env for a tick while it resets,
# and the 10th infer could come too late in the 9 s for a run of 8.
timer_stall() {
  local hostile line rc=0 url
  start_hostile stall-hostile --scenario slow-action --action-delay 3s --slow-every 5 -h 1 -d 1
  "$probe" --ros-args -r trajectory:=/cart_0/action_trajectory >"$tmp/stall-probe.log" 2>&1 &
  local probe_pid=$!
  pids+=("$probe_pid")
  "$nodes/cartpole_sim_node" --ros-args --params-file "$tmp/params.yaml" -p step_on_command:=false \
    -p rate_hz:=100.0 >"$tmp/stall-sim.log" 2>&1 &
  sim_pid=$!
  pids+=("$sim_pid")
  timeout --preserve-status -s INT -k 5 9 "$nodes/plugrl_env_node" --ros-args --params-file "$tmp/params.yaml" \
    -p "url:=$url" -p control_rate_hz:=5.0 -p max_obs_age_s:=0.3 -p receive_timeout_ms:=10000 \
    >"$tmp/stall-env.log" 2>&1 || rc=$?
  stop "$sim_pid"
  stop "$hostile"
  stop "$probe_pid"
  line=$(grep '^trajectory_probe:' "$tmp/stall-probe.log" || true)
  echo "    $line"
  # timeout's SIGINT is the node's Ctrl-C: it exits 0.
  if [[ $rc -ne 0 || -z $line ]] || ! awk '{
        n = $2 + 0
        if (match($0, /longest run [0-9]+/)) run = substr($0, RSTART + 12, RLENGTH - 12) + 0
        if (match($0, /span [0-9.]+/)) span = substr($0, RSTART + 5, RLENGTH - 5) + 0
        if ($0 ~ /last a hold yes/) lh = 1
      } END { exit !(span > 5 && n <= 5.5 * span && run >= 8 && lh) }' <<<"$line"; then
    echo "FAIL: timer stall: node exit $rc; want at most 5 actions a second, a run of 8 holds or more while the" \
      "server stalls, the final hold last; the node's log:" >&2
    tail -n 30 "$tmp/stall-env.log" >&2
    exit 1
  fi
  echo "PASS: at 5 Hz the node steps at its ticks, holds while the server stalls, and ends with a hold"
}

echo "== timer mode against a server that stalls now and then"
timer_stall

# reset_run NAME SIM_PARAM RESET_TIMEOUT EPISODES: lockstep against `plugrl
# serve --policy random`, cartpole_sim_node with -p SIM_PARAM, the node
# with reset_timeout_s RESET_TIMEOUT and a full ledger, for EPISODES
# episodes (60 s at most); sets rc (the node's exit status), took (s) and
# totals (what the simulator counted: resets, resets asked while one ran,
# effort commands while one ran, requests lost in a restart). Logs and the
# ledger are $tmp/NAME-*.
reset_run() {
  local name=$1 sim_param=$2 reset_timeout=$3 episodes=$4 url server start=$SECONDS
  rc=0
  start_serve "$tmp/$name-serve.log" random 1
  "$nodes/cartpole_sim_node" --ros-args --params-file "$tmp/params.yaml" -p "$sim_param" \
    >"$tmp/$name-sim.log" 2>&1 &
  sim_pid=$!
  pids+=("$sim_pid")
  PLUGRL_LEDGER=$tmp/$name.ledger PLUGRL_LEDGER_LEVEL=full timeout -s INT -k 5 60 "$nodes/plugrl_env_node" \
    --ros-args --params-file "$tmp/params.yaml" -p "url:=$url" -p "reset_timeout_s:=$reset_timeout" \
    -p "max_episodes:=$episodes" -p "episode_csv:=$tmp/$name.csv" >"$tmp/$name-env.log" 2>&1 || rc=$?
  stop "$sim_pid"
  stop "$server"
  took=$((SECONDS - start))
  totals=$(sed -n 's/^cartpole_sim_node: //p' "$tmp/$name-sim.log")
}

# reset_failed NAME WHY: the failure of a reset_run, with both logs' ends.
reset_failed() {
  echo "FAIL: $2; the node's log:" >&2
  tail -n 30 "$tmp/$1-env.log" >&2
  echo "---- cartpole_sim_node" >&2
  tail -n 10 "$tmp/$1-sim.log" >&2
  exit 1
}

# Slow resets: a robot whose reset takes longer than the node's
# reset_timeout_s (resets of 1 s, reset_timeout_s 0.3), for 12 episodes.
# The node must not ask a reset again while the service has its request
# (that reset the robot twice), must not command a cart while it resets,
# must say why it waits, and its full ledger must pass check_ledger (a
# reset's state where each episode began).
echo "== a robot whose reset outlasts reset_timeout_s"
reset_run slowreset reset_delay_s:=1.0 0.3 12
echo "slow resets: node exit $rc in $took s; the simulator saw: ${totals:-no totals}"
if [[ $rc -ne 0 || -z $totals ]] || ! awk '{ exit !($1 + 0 >= 6 && $4 + 0 == 0 && $8 + 0 == 0) }' <<<"$totals"; then
  reset_failed slowreset "slow resets: want the node to exit 0 after 6 or more resets (12 episodes; the run's last \
episodes end without one, several at once), none asked while one ran, no effort command to a cart while it reset"
fi
grep -q 'is still running' "$tmp/slowreset-env.log" ||
  reset_failed slowreset "slow resets: the node never said that a reset slower than reset_timeout_s was still running"
check_ledger "slow resets" "$tmp/slowreset.ledger" 1
echo "PASS: a reset slower than reset_timeout_s is asked once, and the cart is left alone while it runs"

# A reset server that crashes with the request and is back 0.5 s later
# (twice), the node with reset_timeout_s 1: it must see that the service
# went away and came back, ask again, and go on to 8 episodes with a clean
# ledger; before, it took the service's being up at both of its looks for
# a reset still running, and waited for ever.
echo "== a reset server that crashes with the request and comes back"
reset_run restart reset_restarts:=2 1.0 8
echo "reset server restarts: node exit $rc in $took s; the simulator saw: ${totals:-no totals}"
if [[ $rc -ne 0 || $totals != *", 2 lost in a restart"* ]] || ! grep -q 'went away and came back' "$tmp/restart-env.log"; then
  reset_failed restart "reset server restarts: want the node to ask again after each of 2 lost requests and end its \
8 episodes (exit 0)"
fi
check_ledger "reset server restarts" "$tmp/restart.ledger" 1
echo "PASS: a reset lost with a restarted reset server is asked again"

# refused WHAT PATTERN ARGS...: plugrl_env_node with the shared params and
# ARGS must exit non-zero within 20 s, its log matching PATTERN (what was
# wrong), without connecting.
refused() {
  local what=$1 pattern=$2 rc=0
  shift 2
  timeout -s INT -k 5 20 "$nodes/plugrl_env_node" --ros-args --params-file "$tmp/params.yaml" \
    -p url:=ws://127.0.0.1:9/ "$@" >"$tmp/refused.log" 2>&1 || rc=$?
  if [[ $rc -eq 0 || $rc -eq 124 ]] || ! grep -qE "$pattern" "$tmp/refused.log" ||
    grep -q 'connecting to' "$tmp/refused.log"; then
    echo "FAIL: $what: want a refusal at start naming it (/$pattern/), got exit $rc:" >&2
    tail -n 10 "$tmp/refused.log" >&2
    exit 1
  fi
  echo "refused at start: $what: $(grep -m1 -E "$pattern" "$tmp/refused.log" | sed 's/^.*\] //')"
}

echo "== configurations refused at start"
refused "a negative control_rate_hz" 'control_rate_hz' -p control_rate_hz:=-5.0
refused "two envs commanding one topic" 'env_namespaces: envs' -p 'env_namespaces:=[cart_0, cart_0]'
# The same topic written two ways (relative and absolute): only the
# resolved names tell, which the check compares.
refused "two envs commanding one topic, written two ways" 'env_namespaces: envs' \
  -p 'env_namespaces:=[cart_0, /cart_0]'
echo "PASS: bad configurations are refused before connecting, naming the parameter"

times=()
stops=()
fails=0
runs=0

# start_node LOG URL PATTERN WHAT [ARGS...]: starts plugrl_env_node against
# URL with the shared params and ARGS (node gets its pid), and waits until
# its log shows PATTERN; fails the test if the node exits or 20 s pass first.
start_node() {
  local log=$1 url=$2 pattern=$3 what=$4 waited=0
  shift 4
  "$nodes/plugrl_env_node" --ros-args --params-file "$tmp/params.yaml" -p "url:=$url" "$@" >"$log" 2>&1 &
  node=$!
  pids+=("$node")
  until grep -qs "$pattern" "$log"; do
    sleep 0.05
    waited=$((waited + 1))
    if [[ $waited -gt 400 ]] || ! kill -0 "$node" 2>/dev/null; then
      echo "FAIL: plugrl_env_node never $what; its log:" >&2
      cat "$log" >&2
      exit 1
    fi
  done
}

# interrupt_node: SIGINT to $node and wait for it (a hung node is killed
# after 5 s, and fails); sets rc (its exit status) and took (in s).
interrupt_node() {
  local t0 t1 watchdog
  t0=$(date +%s.%N)
  kill -INT "$node"
  rc=0
  (sleep 5 && kill -KILL "$node" 2>/dev/null) &
  watchdog=$!
  wait "$node" || rc=$?
  t1=$(date +%s.%N)
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  took=$(awk "BEGIN{printf \"%.3f\", $t1-$t0}")
}

# sigint_run LABEL URL DELAY [HOLD]: starts plugrl_env_node against URL,
# waits until it asks for its first action, then DELAY s more, sends SIGINT
# and checks that the node stopped (rclcpp's signal handler to its client
# closed, from its log) within 100 ms and the process exited 0 within 1 s;
# with HOLD, also that it published its final hold before the context
# shut down.
sigint_run() {
  local label=$1 url=$2 delay=$3 hold=${4:-} log stop_ms verdict
  runs=$((runs + 1))
  log=$tmp/shutdown-$runs.log
  start_node "$log" "$url" 'asking the server for actions' "asked for actions ($label)" -p receive_timeout_ms:=120000
  sleep "$delay"
  interrupt_node
  # The rest of the exit is rclcpp and DDS tearing down.
  stop_ms=$(awk -F'[][]' '/signal_handler/ {s=$4} /client closed/ {c=$4} END{if (s && c) printf "%.1f", (c-s)*1000; else print "?"}' "$log")
  verdict=ok
  if [[ -n $hold ]] && ! grep -q 'final hold published: shutting down' "$log"; then
    verdict="FAIL (no final hold)"
    fails=$((fails + 1))
    tail -n 15 "$log" | sed 's/^/    /'
  elif [[ $rc -ne 0 || $stop_ms == "?" ]] || awk "BEGIN{exit !($took > 1.0 || $stop_ms > 100)}"; then
    verdict="FAIL"
    fails=$((fails + 1))
    tail -n 15 "$log" | sed 's/^/    /'
  fi
  echo "$label: SIGINT -> node stopped in ${stop_ms} ms, process exited $rc in ${took} s: $verdict"
  if [[ $stop_ms != "?" ]]; then
    times+=("$took")
    stops+=("$stop_ms")
  fi
}

summary() { # WHAT: the figures of the runs so far, then start afresh
  printf '%s\n' "${stops[@]}" | sort -n | awk -v w="$1" '{t[NR]=$1} END{printf "%s: node stop (signal handler to client closed), %d runs: min %.1f ms, median %.1f ms, max %.1f ms\n", w, NR, t[1], (NR%2 ? t[(NR+1)/2] : (t[NR/2]+t[NR/2+1])/2), t[NR]}'
  printf '%s\n' "${times[@]}" | sort -n | awk -v w="$1" '{t[NR]=$1} END{printf "%s: process exit after SIGINT, %d runs: min %.3f s, median %.3f s, max %.3f s\n", w, NR, t[1], (NR%2 ? t[(NR+1)/2] : (t[NR/2]+t[NR/2+1])/2), t[NR]}'
  times=()
  stops=()
}

echo "== shutdown: SIGINT while an infer waits (plugrl-hostile slow-action), 20 runs: stop within 100 ms, exit 0 within 1 s"
start_hostile hostile --scenario slow-action --action-delay 60s -h 1 -d 1 -v
start_sim "$tmp/shutdown-sim.log"
for i in $(seq 20); do
  sigint_run "run $i (infer waiting)" "$url" 0.3 # the infer is sent and waits for the server
done
summary "infer waiting"
stop "$hostile"
# Each interrupted infer told the server with 1000 (SPEC 7.5) before the
# connection went: plugrl-hostile prints its counts as it stops.
conns=$(sed -n 's/.*Connections:\([0-9]*\).*/\1/p' "$tmp/hostile.err" | tail -n 1)
frames=$(sed -n 's/.*CloseFrames:\([0-9]*\).*/\1/p' "$tmp/hostile.err" | tail -n 1)
echo "   the server saw $conns connections and $frames close frames"
if [[ -z $conns || -z $frames || $conns -lt 20 || $frames -lt $conns ]]; then
  tail -n 3 "$tmp/hostile.err" >&2
  echo "FAIL: an interrupted infer's connection ended without the client's close frame (1000)" >&2
  exit 1
fi

echo "== shutdown: SIGINT while the node connects (plugrl-hostile no-metadata, connect_timeout_ms 30 s), 3 runs: exit 0 within 1 s"
start_hostile hostile-nm --scenario no-metadata
for i in 1 2 3; do
  log=$tmp/connecting-$i.log
  start_node "$log" "$url" 'connecting to' "started connecting" -p connect_timeout_ms:=30000
  sleep 0.3 # into the wait for metadata that never comes
  interrupt_node
  echo "run $i (connecting): SIGINT -> process exited $rc in $took s"
  if [[ $rc -ne 0 ]] || awk "BEGIN{exit !($took > 1.0)}"; then
    tail -n 15 "$log" | sed 's/^/    /' >&2
    echo "FAIL: a node stopped while connecting did not exit 0 within 1 s" >&2
    exit 1
  fi
done
stop "$hostile"

echo "== shutdown: SIGINT in the middle of training (plugrl serve --policy cem), 5 runs, each ending with a final hold"
start_serve "$tmp/sigint-serve.log" cem 1
for i in $(seq 5); do
  sigint_run "run $i (training)" "$url" "0.$((3 + i))" hold
done
summary "training"
stop "$server"
stop "$sim_pid"

if [[ $fails -ne 0 ]]; then
  echo "FAIL: $fails of $runs shutdowns failed" >&2
  exit 1
fi
echo "PASS: on SIGINT plugrl_env_node stops within 100 ms and exits 0 within 1 s, $runs of $runs runs"
