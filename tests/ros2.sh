#!/usr/bin/env bash
# The ROS 2 package examples/ros2 (plugrl_ros2), built the way a ROS
# developer builds it: colcon, against an installed libplugrl.
#
#   ros2.sh REPO_ROOT
#
# installs what ./build.sh built (without rebuilding) into a temporary
# prefix, then runs `colcon build` and `colcon test` of plugrl_ros2 against
# it (find_package(plugrl) through plugrl_DIR). Without rclcpp (no ROS 2
# install sourced) the package builds its ROS-free libraries and their
# gtests only, and says that the nodes are skipped; that is what runs on a
# machine with Debian's ament-cmake and colcon alone.
#
# Where rclcpp is found (a sourced ROS 2 install: Humble or Jazzy), the
# nodes are built too, and more tests run them (tests/ros2_nodes.sh):
# a MuJoCo cartpole learning through DDS (cartpole_sim_node +
# plugrl_env_node + `plugrl serve --policy cem`, compared with --policy
# random), the JointTrajectory of the rest of each chunk (H = 4), the
# timer mode, and a shutdown test (SIGINT while an infer waits, 20 runs).
#
# Prints a SKIPPED line and exits 0 only when colcon is not installed.
# PLUGRL_ROS2_KEEP=DIR keeps the workspace and logs in DIR.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 REPO_ROOT" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
here=$root/tests
build=$root/build

if ! command -v colcon >/dev/null; then
  echo "SKIPPED: ros2.sh: colcon is not installed (Debian: colcon, python3-colcon-cmake, python3-colcon-ros)"
  exit 0
fi
for f in "$build/lib/libplugrl.so" "$build/bin/plugrl"; do
  if [[ ! -e $f ]]; then
    echo "$0: $f does not exist; build libplugrl first (./build.sh)" >&2
    exit 1
  fi
done

if [[ -n ${PLUGRL_ROS2_KEEP:-} ]]; then
  tmp=$PLUGRL_ROS2_KEEP
  rm -rf "$tmp"
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi

# step LABEL COMMAND...: runs COMMAND, then says how long it took.
step() {
  local label=$1 start=$SECONDS
  shift
  printf '==> %s\n' "$*"
  "$@"
  printf '==> %s: %d s\n' "$label" $((SECONDS - start))
}

echo "== install libplugrl into $tmp/prefix"
PLUGRL_NO_BUILD=1 "$root/build.sh" install "$tmp/prefix" >/dev/null

# ament_cmake runs Python scripts that import ament_package; Debian installs
# it for /usr/bin/python3, which a python3 earlier on PATH (pyenv, a venv)
# may not see.
python=
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c 'import ament_package' 2>/dev/null; then
    python=$(command -v "$py")
    break
  fi
done
[[ -n $python ]] || {
  echo "$0: no python3 can import ament_package (Debian: ament-cmake)" >&2
  exit 1
}

if [[ -n ${AMENT_PREFIX_PATH:-} ]]; then
  echo "a ROS 2 install is sourced (ROS_DISTRO=${ROS_DISTRO:-?}, AMENT_PREFIX_PATH=$AMENT_PREFIX_PATH)"
else
  echo "no ROS 2 install is sourced: expect the nodes to be skipped"
fi

cd "$tmp"
colcon_args=(--base-paths "$root/examples/ros2" --build-base "$tmp/build" --install-base "$tmp/install")
step "colcon build" colcon --log-base "$tmp/log" build "${colcon_args[@]}" --parallel-workers 1 \
  --event-handlers console_cohesion+ \
  --cmake-args -Dplugrl_DIR="$tmp/prefix/lib/cmake/plugrl" -DPython3_EXECUTABLE="$python" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS=-Werror
# test_learning runs the controller against this `plugrl serve`.
export PLUGRL_SERVER_BIN=$build/bin/plugrl
step "colcon test" colcon --log-base "$tmp/log" test "${colcon_args[@]}" --event-handlers console_cohesion+ \
  --ctest-args --output-on-failure
# colcon test exits 0 even when a test fails; test-result does not.
colcon --log-base "$tmp/log" test-result --test-result-base "$tmp/build" --verbose

nodes=$tmp/install/plugrl_ros2/lib/plugrl_ros2
if [[ ! -x $nodes/plugrl_env_node ]]; then
  grep -h 'plugrl_ros2: .*SKIPPED' "$tmp/log/latest_build/plugrl_ros2/stdout_stderr.log" | sort -u || true
  echo "PASS: plugrl_ros2 builds and its ROS-free tests pass; the nodes were skipped (no rclcpp)"
  exit 0
fi
if [[ ! -x $nodes/cartpole_sim_node ]]; then
  # Without MuJoCo (Ubuntu 22.04 does not package it) there is no
  # simulator, so the nodes' tests, which learn through it, are skipped;
  # with it, a missing simulator is a fault.
  if ! echo '#include <mujoco/mujoco.h>' | c++ -x c++ -E - >/dev/null 2>&1; then
    echo "SKIPPED: ros2.sh: plugrl_ros2 builds and its tests pass, but c++ finds no <mujoco/mujoco.h> (Debian: libmujoco-dev), so cartpole_sim_node was not built and the nodes' tests are left out"
    exit 0
  fi
  echo "FAIL: plugrl_env_node was built but cartpole_sim_node was not, with MuJoCo installed" >&2
  exit 1
fi
"$here/ros2_nodes.sh" "$build/bin" "$nodes" "$root/examples/plot_returns.py" "$tmp/build/plugrl_ros2/trajectory_probe"
echo "PASS: plugrl_ros2 builds, its tests pass, and its nodes learn and shut down"
