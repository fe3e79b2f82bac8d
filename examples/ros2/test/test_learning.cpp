// The node's whole pipeline without ROS: the Controller on a real
// plugrl::Runner against `plugrl serve`, with the cartpole simulator
// standing in for the robot on the other side of the topics (each command
// steps a cartpole; its state, reward and flags come back as messages
// would, stamped after the command). The cartpole must learn as through
// ROS: cem's last 40 episodes at least 3 x its first 40 and 5 x random.
//
// Needs PLUGRL_SERVER_BIN (the `plugrl` command; tests/ros2.sh sets it);
// skipped without it.
#include "plugrl_ros2/cartpole_sim.hpp"
#include "plugrl_ros2/env_core.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <string>
#include <vector>

extern char **environ;

using namespace plugrl_ros2;

namespace {

// `plugrl serve` on a free port, stopped at the end of the scope.
class Server {
 public:
  Server(const std::string &bin, const std::string &policy, int horizon = 1) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<std::string> args{bin,           "serve",         "--addr", "127.0.0.1:0", "--policy", policy,
                                  "--horizon",   std::to_string(horizon), "--action-dim", "1", "--action-dtype", "float64",
                                  "--seed",      "1",             "--quiet"};
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    // The first line of its stdout names the URL.
    FILE *out = fdopen(fds[0], "r");
    char line[512] = "";
    if (out && fgets(line, sizeof line, out)) {
      std::string s(line);
      auto at = s.find("ws://");
      if (at != std::string::npos) url_ = s.substr(at, s.find_first_of(" \n", at) - at);
    }
    out_ = out;
  }
  ~Server() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (out_) fclose(out_);
  }
  const std::string &url() const { return url_; }

 private:
  pid_t pid_ = -1;
  FILE *out_ = nullptr;
  std::string url_;
};

std::vector<SourceSpec> sources() {
  SourceSpec qpos, qvel;
  qpos.name = "qpos";
  qpos.topic = "joint_states";
  qpos.kind = SourceKind::JointPosition;
  qpos.joints = {"slider", "hinge"};
  qvel = qpos;
  qvel.name = "qvel";
  qvel.kind = SourceKind::JointVelocity;
  std::vector<SourceSpec> v{qpos, qvel};
  normalize_sources(v);
  return v;
}

// What the trajectories of a run looked like (run with a Trajectories*).
struct Trajectories {
  uint64_t published = 0;      // trajectories after an action
  std::size_t max_points = 0;  // the most points in one
  std::map<std::size_t, uint64_t> by_points;  // points -> trajectories
  // Steps whose command was not the previous trajectory's second point
  // although that trajectory had one and the env's episode went on.
  uint64_t mismatches = 0;
  uint64_t checked = 0;  // steps compared so
  uint64_t first_not_command = 0;  // trajectories whose point 0 is not the command
};

// Runs `episodes` episodes of n cartpoles through a Controller against a
// server of policy with action horizon `horizon`; returns each episode's
// return, in order. With traj, the controller also builds each env's
// trajectory from plugrl::Runner::chunk, and traj says what they held.
std::vector<double> run(const std::string &bin, const std::string &policy, std::size_t n, int64_t episodes,
                        int horizon = 1, Trajectories *traj = nullptr) {
  Server server(bin, policy, horizon);
  EXPECT_FALSE(server.url().empty()) << "plugrl serve printed no URL";
  if (server.url().empty()) return {};
  plugrl::Client client(plugrl::Options(server.url()).receive_timeout_ms(30000));
  plugrl::Runner runner(client, n);

  CartpoleSim sim(n, 500, 1);
  InputState robot(sources(), n);  // what the "topics" carry
  std::vector<std::size_t> stepped, reset;
  std::vector<double> commands(n, 0.0);
  auto publish_state = [&](std::size_t i) {
    const TimePoint t = Clock::now();
    const std::vector<std::string> names{"slider", "hinge"};
    const std::vector<double> q{sim.qpos(i, 0), sim.qpos(i, 1)}, v{sim.qvel(i, 0), sim.qvel(i, 1)};
    robot.put_joint_state(0, i, names, q, v, {}, t);
    robot.put_joint_state(1, i, names, q, v, {}, t);
  };
  for (std::size_t i = 0; i < n; i++) publish_state(i);

  std::vector<double> returns;
  Controller::Config cfg;
  cfg.num_envs = n;
  cfg.mode = Mode::Lockstep;
  cfg.max_episodes = episodes;
  Controller::Hooks hooks;
  hooks.snapshot = [&](InputState &dst) { robot.drain_into(dst); };
  hooks.act = [&](const plugrl::Observation &obs, std::vector<double> &a) { return runner.act(obs, a); };
  hooks.report = [&](const plugrl::Observation &obs, const std::vector<double> &r, const std::vector<uint8_t> &te,
                     const std::vector<uint8_t> &tr, const std::vector<uint8_t> &su) {
    return runner.report(obs, r, te, tr, su);
  };
  hooks.publish = [&](std::size_t env, const std::vector<double> &c, bool hold) {
    EXPECT_FALSE(hold) << "a lockstep env that answers at once is never stale";
    commands[env] = c.empty() ? 0.0 : c[0];
    stepped.push_back(env);
  };
  // Per env: the last action trajectory, and whether an episode ended since.
  std::vector<std::vector<TrajectoryPoint>> last_traj(n);
  std::vector<bool> ended(n, false);
  if (traj) {
    hooks.chunk = [&](std::size_t env, std::vector<double> &chunk) {
      return runner.chunk(static_cast<int64_t>(env), chunk);
    };
    hooks.publish_trajectory = [&](std::size_t env, const std::vector<TrajectoryPoint> &p, bool hold) {
      if (hold) return;
      traj->published++;
      traj->by_points[p.size()]++;
      traj->max_points = std::max(traj->max_points, p.size());
      // Published right after env's command (commands[env]).
      if (p.empty() || p[0].values.size() != 1 || p[0].values[0] != commands[env]) traj->first_not_command++;
      // The previous trajectory foretold this command.
      if (!ended[env] && last_traj[env].size() >= 2) {
        traj->checked++;
        if (last_traj[env][1].values != p[0].values) traj->mismatches++;
      }
      last_traj[env] = p;
      ended[env] = false;
    };
  }
  hooks.request_reset = [&](std::size_t env) {
    ended[env] = true;
    reset.push_back(env);
  };
  hooks.on_episode = [&](const EpisodeRecord &e) { returns.push_back(e.episode_return); };
  Controller controller(cfg, InputState(sources(), n), CommandBook(n, HoldMode::Zeros, 1.0, -1.0, 1.0), hooks);

  for (long wakes = 0; wakes < 10000000; wakes++) {
    Controller::Result r = controller.wake(Clock::now());
    if (r == Controller::Result::Finished || r == Controller::Result::Stopped) break;
    // The robot answers after the node's call returned, as over DDS.
    for (std::size_t i : stepped) {
      CartpoleSim::Step s = sim.step(i, commands[i]);
      const TimePoint t = Clock::now();
      robot.add_reward(i, s.reward, t);
      robot.put_terminated(i, s.terminated, t);
      robot.put_truncated(i, s.truncated, t);
      publish_state(i);
    }
    stepped.clear();
    for (std::size_t i : reset) {
      sim.reset(i);
      publish_state(i);
      robot.put_reset_answer(i, true, Clock::now());
    }
    reset.clear();
  }
  EXPECT_EQ(static_cast<int64_t>(returns.size()), episodes);
  return returns;
}

double mean(const std::vector<double> &v, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; i++) s += v[i];
  return to > from ? s / static_cast<double>(to - from) : 0;
}

}  // namespace

TEST(Learning, CartpoleLearnsThroughTheController) {
  const char *bin = std::getenv("PLUGRL_SERVER_BIN");
  if (!bin || !*bin) GTEST_SKIP() << "PLUGRL_SERVER_BIN (the plugrl command) is not set";
  const std::vector<double> random = run(bin, "random", 8, 200);
  const std::vector<double> cem = run(bin, "cem", 8, 320);
  ASSERT_EQ(random.size(), 200u);
  ASSERT_EQ(cem.size(), 320u);
  const double r = mean(random, 0, random.size());
  const double first = mean(cem, 0, 40), last = mean(cem, cem.size() - 40, cem.size());
  std::printf("random policy: mean return %.1f over %zu episodes; cem: first 40 %.1f, last 40 %.1f (%.1f x random)\n",
              r, random.size(), first, last, last / r);
  EXPECT_GE(last, 3 * first);
  EXPECT_GE(last, 5 * r);
}

// Action chunks of H = 4: each action's trajectory is the rest of the
// env's chunk (plugrl::Runner::chunk between act and report): 4 points at
// a chunk's first step, then 3, 2, 1; and its second point is the command
// the env gets at the next step.
TEST(Learning, TrajectoryIsTheRestOfEachChunk) {
  const char *bin = std::getenv("PLUGRL_SERVER_BIN");
  if (!bin || !*bin) GTEST_SKIP() << "PLUGRL_SERVER_BIN (the plugrl command) is not set";
  Trajectories t;
  const std::vector<double> cem = run(bin, "cem", 8, 40, 4, &t);
  ASSERT_EQ(cem.size(), 40u);
  std::printf("H = 4: %llu trajectories; by points:", static_cast<unsigned long long>(t.published));
  for (const auto &e : t.by_points) std::printf(" %zu: %llu", e.first, static_cast<unsigned long long>(e.second));
  std::printf("; %llu next commands checked against the trajectory, %llu differ\n",
              static_cast<unsigned long long>(t.checked), static_cast<unsigned long long>(t.mismatches));
  EXPECT_EQ(t.max_points, 4u);
  EXPECT_GT(t.by_points[4], 0u);
  EXPECT_GT(t.by_points[2], 0u);
  EXPECT_EQ(t.by_points.count(0), 0u);
  EXPECT_EQ(t.by_points.count(5), 0u);
  EXPECT_EQ(t.first_not_command, 0u);
  EXPECT_GT(t.checked, 1000u);
  EXPECT_EQ(t.mismatches, 0u);
}
