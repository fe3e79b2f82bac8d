// Unit tests of the ROS-free part of plugrl_env_node (env_core.hpp).
#include "plugrl_ros2/env_core.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace plugrl_ros2;
using namespace std::chrono_literals;

namespace {

SourceSpec joint(const std::string &name, SourceKind kind, std::vector<std::string> joints) {
  SourceSpec s;
  s.name = name;
  s.topic = "joint_states";
  s.kind = kind;
  s.joints = std::move(joints);
  return s;
}

std::vector<SourceSpec> cartpole_sources() {
  std::vector<SourceSpec> v{joint("qpos", SourceKind::JointPosition, {"slider", "hinge"}),
                            joint("qvel", SourceKind::JointVelocity, {"slider", "hinge"})};
  EXPECT_EQ(normalize_sources(v), "");
  return v;
}

// The arrays an Observation describes, by name.
const plugrl_array *find_state(const plugrl_observation *o, const std::string &name) {
  for (std::size_t i = 0; i < o->num_states; i++)
    if (name == o->states[i].name) return &o->states[i];
  return nullptr;
}

}  // namespace

TEST(Sources, ParseKinds) {
  for (const char *k : {"joint_position", "joint_velocity", "joint_effort", "float64_array", "image", "text"}) {
    auto kind = parse_source_kind(k);
    ASSERT_TRUE(kind) << k;
    EXPECT_STREQ(source_kind_name(*kind), k);
  }
  EXPECT_FALSE(parse_source_kind("jointstate"));
  EXPECT_TRUE(is_joint_kind(SourceKind::JointEffort));
  EXPECT_FALSE(is_joint_kind(SourceKind::Image));
}

TEST(Sources, NormalizeDerivesShapesAndRefusesNonsense) {
  auto v = cartpole_sources();
  EXPECT_EQ(v[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(v[0].elements(), 2u);

  std::vector<SourceSpec> none;
  EXPECT_NE(normalize_sources(none), "");

  std::vector<SourceSpec> twice{joint("q", SourceKind::JointPosition, {"a"}), joint("q", SourceKind::JointEffort, {"a"})};
  EXPECT_NE(normalize_sources(twice).find("twice"), std::string::npos);

  std::vector<SourceSpec> no_joints{joint("q", SourceKind::JointPosition, {})};
  EXPECT_NE(normalize_sources(no_joints), "");

  SourceSpec img;
  img.name = "camera";
  img.topic = "image";
  img.kind = SourceKind::Image;
  img.shape = {4, 4, 2};
  std::vector<SourceSpec> bad_img{img};
  EXPECT_NE(normalize_sources(bad_img).find("channels"), std::string::npos);

  SourceSpec text;
  text.name = "instruction";
  text.topic = "instruction";
  text.kind = SourceKind::Text;
  SourceSpec text2 = text;
  text2.name = "other";
  std::vector<SourceSpec> two_texts{text, text2};
  EXPECT_NE(normalize_sources(two_texts).find("text"), std::string::npos);
}

TEST(Sources, EnvTopic) {
  EXPECT_EQ(env_topic("", "joint_states"), "joint_states");
  EXPECT_EQ(env_topic("cart_1", "joint_states"), "cart_1/joint_states");
  EXPECT_EQ(env_topic("/robot/", "joint_states"), "/robot/joint_states");
}

TEST(Inputs, JointStateTakesNamedJointsInOrder) {
  InputState in(cartpole_sources(), 2);
  const TimePoint t = Clock::now();
  // The message lists the joints in another order, with an extra one.
  EXPECT_EQ(in.put_joint_state(0, 1, {"hinge", "wheel", "slider"}, {0.1, 9, 0.5}, {1, 9, 5}, {}, t), "");
  EXPECT_EQ(in.put_joint_state(1, 1, {"hinge", "wheel", "slider"}, {0.1, 9, 0.5}, {1, 9, 5}, {}, t), "");
  plugrl::Observation obs;
  in.describe(obs);
  const plugrl_array *qpos = find_state(obs.c(), "qpos");
  ASSERT_NE(qpos, nullptr);
  ASSERT_EQ(qpos->ndim, 2);
  EXPECT_EQ(qpos->shape[0], 2);
  EXPECT_EQ(qpos->shape[1], 2);
  const double *q = static_cast<const double *>(qpos->data);
  EXPECT_EQ(q[2], 0.5);  // env 1: slider, hinge
  EXPECT_EQ(q[3], 0.1);
  const double *v = static_cast<const double *>(find_state(obs.c(), "qvel")->data);
  EXPECT_EQ(v[2], 5);
  EXPECT_EQ(v[3], 1);
  EXPECT_TRUE(in.received(0, 1));
  EXPECT_FALSE(in.received(0, 0));
}

TEST(Inputs, RefusedMessagesChangeNothing) {
  InputState in(cartpole_sources(), 1);
  const TimePoint t = Clock::now();
  ASSERT_EQ(in.put_joint_state(0, 0, {"slider", "hinge"}, {1, 2}, {}, {}, t), "");
  EXPECT_NE(in.put_joint_state(0, 0, {"slider"}, {7}, {}, {}, t + 1s).find("hinge"), std::string::npos);
  // The velocity source gets a message without velocities.
  EXPECT_NE(in.put_joint_state(1, 0, {"slider", "hinge"}, {1, 2}, {}, {}, t), "");
  EXPECT_EQ(*in.received(0, 0), t);
  EXPECT_FALSE(in.received(1, 0));
  plugrl::Observation obs;
  in.describe(obs);
  EXPECT_EQ(static_cast<const double *>(find_state(obs.c(), "qpos")->data)[0], 1);
}

TEST(Inputs, ArraysImagesAndText) {
  SourceSpec arr;
  arr.name = "ft";
  arr.topic = "wrench";
  arr.kind = SourceKind::Float64Array;
  arr.shape = {2, 3};
  SourceSpec img;
  img.name = "camera";
  img.topic = "image";
  img.kind = SourceKind::Image;
  img.shape = {2, 3, 3};
  SourceSpec text;
  text.name = "instruction";
  text.topic = "instruction";
  text.kind = SourceKind::Text;
  std::vector<SourceSpec> v{arr, img, text};
  ASSERT_EQ(normalize_sources(v), "");
  InputState in(v, 2);
  const TimePoint t = Clock::now();

  std::vector<double> six{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(in.put_array(0, 1, six.data(), 6, t), "");
  EXPECT_NE(in.put_array(0, 1, six.data(), 5, t), "");

  // Rows padded to a step of 12 bytes: the padding is dropped.
  std::vector<uint8_t> pixels(2 * 12, 0xee);
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 9; x++) pixels[y * 12 + x] = static_cast<uint8_t>(10 * y + x);
  EXPECT_EQ(in.put_image(1, 0, 2, 3, "rgb8", 12, pixels.data(), pixels.size(), t), "");
  EXPECT_NE(in.put_image(1, 0, 2, 3, "mono8", 3, pixels.data(), pixels.size(), t).find("encoding"),
            std::string::npos);
  EXPECT_NE(in.put_image(1, 0, 3, 3, "rgb8", 9, pixels.data(), pixels.size(), t), "");
  EXPECT_NE(in.put_image(1, 0, 2, 3, "rgb8", 12, pixels.data(), 20, t).find("short"), std::string::npos);
  EXPECT_EQ(in.put_text(2, 1, "balance the pole", t), "");

  plugrl::Observation obs;
  in.describe(obs);
  const plugrl_observation *o = obs.c();
  ASSERT_EQ(o->num_images, 1u);
  EXPECT_EQ(o->images[0].ndim, 4);
  EXPECT_EQ(o->images[0].shape[3], 3);
  const uint8_t *im = static_cast<const uint8_t *>(o->images[0].data);
  EXPECT_EQ(im[8], 8);
  EXPECT_EQ(im[9], 10);  // row 1 follows row 0 without the padding
  const plugrl_array *ft = find_state(o, "ft");
  ASSERT_NE(ft, nullptr);
  EXPECT_EQ(ft->ndim, 3);
  EXPECT_EQ(static_cast<const double *>(ft->data)[6], 1);
  ASSERT_NE(o->text, nullptr);
  EXPECT_STREQ(o->text[0], "");
  EXPECT_STREQ(o->text[1], "balance the pole");
}

TEST(Inputs, DrainMovesSignalsAndCopiesRows) {
  InputState shared(cartpole_sources(), 2), mine;
  const TimePoint t = Clock::now();
  shared.add_reward(0, 1.0, t);
  shared.add_reward(0, 0.5, t + 1ms);
  shared.put_terminated(0, true, t);
  shared.put_terminated(0, false, t + 2ms);  // a later false does not clear it
  shared.put_joint_state(0, 0, {"slider", "hinge"}, {3, 4}, {}, {}, t);
  shared.drain_into(mine);
  EXPECT_EQ(mine.signals(0).reward, 1.5);
  EXPECT_EQ(mine.signals(0).rewards, 2u);
  EXPECT_TRUE(mine.signals(0).terminated);
  EXPECT_EQ(*mine.signals(0).terminated_at, t + 2ms);
  EXPECT_EQ(*mine.received(0, 0), t);
  EXPECT_EQ(shared.signals(0).reward, 0);
  EXPECT_FALSE(shared.signals(0).terminated);

  // A second drain adds to what was not taken yet; times without news stay.
  shared.add_reward(0, 2.0, t + 3ms);
  shared.put_reset_answer(1, true, t);
  shared.drain_into(mine);
  EXPECT_EQ(mine.signals(0).reward, 3.5);
  EXPECT_EQ(*mine.signals(0).terminated_at, t + 2ms);
  EXPECT_EQ(mine.signals(1).reset_answers, 1u);
  EXPECT_TRUE(mine.signals(1).reset_ok);
}

TEST(Readiness, MissingStaleAndNewer) {
  InputState in(cartpole_sources(), 1);
  const TimePoint t = Clock::now();
  EXPECT_NE(obs_readiness(in, 0, t, 100ms, std::nullopt).find("no qpos"), std::string::npos);
  in.put_joint_state(0, 0, {"slider", "hinge"}, {0, 0}, {0, 0}, {}, t);
  in.put_joint_state(1, 0, {"slider", "hinge"}, {0, 0}, {0, 0}, {}, t);
  EXPECT_EQ(obs_readiness(in, 0, t + 50ms, 100ms, std::nullopt), "");
  EXPECT_NE(obs_readiness(in, 0, t + 150ms, 100ms, std::nullopt).find("old"), std::string::npos);
  EXPECT_NE(obs_readiness(in, 0, t + 50ms, 100ms, t).find("new"), std::string::npos);

  // Lockstep: the observation and every step signal after the command.
  EXPECT_NE(step_readiness(in, 0, t - 1ms, true, true, true).find("reward"), std::string::npos);
  in.add_reward(0, 1, t);
  in.put_terminated(0, false, t);
  EXPECT_NE(step_readiness(in, 0, t - 1ms, true, true, true).find("truncated"), std::string::npos);
  EXPECT_EQ(step_readiness(in, 0, t - 1ms, true, true, false), "");
  in.put_truncated(0, false, t);
  EXPECT_EQ(step_readiness(in, 0, t - 1ms, true, true, true), "");
  EXPECT_NE(step_readiness(in, 0, t, true, true, true), "");
}

TEST(Commands, SplitScaleClipAndHold) {
  EXPECT_EQ(parse_hold_mode("zeros"), HoldMode::Zeros);
  EXPECT_EQ(parse_hold_mode("last"), HoldMode::Last);
  EXPECT_FALSE(parse_hold_mode("freeze"));

  CommandBook zeros(2, HoldMode::Zeros, 2.0, -1.0, 1.0);
  EXPECT_TRUE(zeros.hold(0).empty());  // nothing commanded: nothing to hold
  EXPECT_FALSE(zeros.has_command(0));
  EXPECT_EQ(zeros.set_from_actions({0.25, 0.1, 0.75, std::nan("")}), 2u);
  EXPECT_EQ(zeros.command(0), (std::vector<double>{0.5, 0.2}));
  EXPECT_EQ(zeros.command(1), (std::vector<double>{1.0, 0.0}));  // clipped; NaN -> 0
  EXPECT_EQ(zeros.hold(1), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(zeros.set_from_actions({1, 2, 3}), 0u);  // not a multiple of the envs

  CommandBook last(1, HoldMode::Last);
  last.set_from_actions({0.3});
  EXPECT_EQ(last.hold(0), (std::vector<double>{0.3}));
}

TEST(Commands, TrajectoryOfAChunk) {
  CommandBook book(1, HoldMode::Zeros, 1.0, std::nullopt, 0.5);
  const double chunk[] = {0.1, 0.2, 0.3, 0.4, 0.9, 0.0};  // 3 steps of 2
  auto points = trajectory_points(chunk, 3, 2, 20ms, book);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].values, (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(points[2].values, (std::vector<double>{0.5, 0.0}));
  EXPECT_EQ(points[0].time_from_start, std::chrono::duration_cast<Duration>(20ms));
  EXPECT_EQ(points[2].time_from_start, std::chrono::duration_cast<Duration>(60ms));
}

TEST(Episodes, CsvAndStats) {
  EXPECT_STREQ(episode_csv_header(), "episode,env,seconds,return,length,success");
  EXPECT_EQ(episode_csv_line({3, 1, 2.5, 42.0, 42, true}), "3,1,2.500,42,42,1");
  plugrl_statistics st{};
  st.exchanges = 7;
  st.env_steps = 70;
  std::string j = stats_json(st, 2, 1, "act");
  EXPECT_NE(j.find("\"exchanges\":7"), std::string::npos);
  EXPECT_NE(j.find("\"env_steps\":70"), std::string::npos);
  EXPECT_NE(j.find("\"episodes\":2"), std::string::npos);
  EXPECT_NE(j.find("\"phase\":\"act\""), std::string::npos);
  EXPECT_EQ(j.front(), '{');
  EXPECT_EQ(j.back(), '}');
}

// ---------------------------------------------------------------- controller

namespace {

// A fake runner and robot around a Controller: records what it publishes,
// answers act with a queue of actions.
struct Harness {
  InputState shared;
  std::deque<std::vector<double>> actions;
  bool stopped = false;
  struct Published {
    std::size_t env;
    std::vector<double> command;
    bool hold;
  };
  std::vector<Published> published;
  std::vector<std::size_t> resets;
  std::vector<EpisodeRecord> episodes;
  struct Report {
    std::vector<double> rewards;
    std::vector<uint8_t> terminated, truncated;
    double qpos0;
  };
  std::vector<Report> reports;
  int acts = 0;
  int warnings = 0;
  Duration act_delay{0};  // how long act blocks, as a slow server makes it

  explicit Harness(std::size_t n) : shared(cartpole_sources(), n) {}

  Controller make(Controller::Config cfg, HoldMode hold = HoldMode::Zeros) {
    Controller::Hooks h;
    h.snapshot = [this](InputState &dst) { shared.drain_into(dst); };
    h.act = [this](const plugrl::Observation &, std::vector<double> &out) {
      acts++;
      if (act_delay > Duration::zero()) std::this_thread::sleep_for(act_delay);
      if (stopped) return false;
      out = actions.empty() ? std::vector<double>(shared.num_envs(), 0.0) : actions.front();
      if (!actions.empty()) actions.pop_front();
      return true;
    };
    h.report = [this](const plugrl::Observation &obs, const std::vector<double> &r, const std::vector<uint8_t> &te,
                      const std::vector<uint8_t> &tr, const std::vector<uint8_t> &) {
      const plugrl_array *q = find_state(obs.c(), "qpos");
      reports.push_back({r, te, tr, static_cast<const double *>(q->data)[0]});
      return !stopped;
    };
    h.publish = [this](std::size_t env, const std::vector<double> &c, bool hold) {
      published.push_back({env, c, hold});
    };
    h.request_reset = [this](std::size_t env) { resets.push_back(env); };
    h.on_episode = [this](const EpisodeRecord &e) { episodes.push_back(e); };
    h.log = [this](Controller::Level level, const std::string &) {
      if (level == Controller::Level::Warn) warnings++;
    };
    return Controller(cfg, InputState(cartpole_sources(), shared.num_envs()),
                      CommandBook(shared.num_envs(), hold), h);
  }

  void state(std::size_t env, double x, TimePoint t) {
    shared.put_joint_state(0, env, {"slider", "hinge"}, {x, 0}, {0, 0}, {}, t);
    shared.put_joint_state(1, env, {"slider", "hinge"}, {x, 0}, {0, 0}, {}, t);
  }
  // A lockstep env's answer to a command: state, reward, flags.
  void step(std::size_t env, double x, double reward, bool term, bool trunc) {
    const TimePoint t = Clock::now();
    state(env, x, t);
    shared.add_reward(env, reward, t);
    shared.put_terminated(env, term, t);
    shared.put_truncated(env, trunc, t);
  }
};

}  // namespace

TEST(Controller, TimerModeActsReportsAndHoldsWhenStale) {
  Harness h(2);
  Controller::Config cfg;
  cfg.num_envs = 2;
  cfg.mode = Mode::Timer;
  cfg.max_obs_age = 100ms;
  Controller c = h.make(cfg);

  TimePoint t = Clock::now();
  // No observation yet: nothing to act on, nothing commanded to hold.
  EXPECT_EQ(c.wake(t), Controller::Result::Waiting);
  EXPECT_TRUE(h.published.empty());

  h.state(0, 0.1, t);
  h.state(1, 0.2, t);
  h.actions.push_back({0.5, -0.5});
  EXPECT_EQ(c.wake(t + 1ms), Controller::Result::Stepped);
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_EQ(h.published[1].command, (std::vector<double>{-0.5}));
  EXPECT_FALSE(h.published[1].hold);
  EXPECT_EQ(c.phase(), Controller::Phase::Report);

  // The next tick: rewards that came in between are reported, then it acts.
  h.shared.add_reward(0, 1, t + 5ms);
  h.shared.add_reward(0, 1, t + 6ms);
  h.state(0, 0.3, t + 8ms);
  h.state(1, 0.4, t + 8ms);
  EXPECT_EQ(c.wake(t + 10ms), Controller::Result::Stepped);
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].rewards, (std::vector<double>{2, 0}));
  EXPECT_EQ(h.reports[0].qpos0, 0.3);
  EXPECT_EQ(h.acts, 2);

  // Then the robot goes quiet: a tick 200 ms later holds (zeros), does not report.
  h.published.clear();
  EXPECT_EQ(c.wake(t + 210ms), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_TRUE(h.published[0].hold);
  EXPECT_EQ(h.published[0].command, (std::vector<double>{0.0}));
  EXPECT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(c.holds(), 1u);
}

// An act that blocks past max_obs_age (a slow server) brings an action for
// an observation that went stale meanwhile: the timer mode holds instead
// of publishing it (it published it, however late: found by review), and
// reports the step at the next tick.
TEST(Controller, TimerModeHoldsAnActionThatCameTooLate) {
  Harness h(1);
  Controller::Config cfg;
  cfg.num_envs = 1;
  cfg.mode = Mode::Timer;
  cfg.max_obs_age = 50ms;
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0.2, Clock::now());
  h.actions.push_back({0.7});
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);  // commanded 0.7
  h.published.clear();

  h.state(0, 0.3, Clock::now());
  h.act_delay = 120ms;  // the server answers after the observation went stale
  h.actions.push_back({0.9});
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 1u);
  EXPECT_TRUE(h.published[0].hold);
  EXPECT_EQ(h.published[0].command, (std::vector<double>{0.0}));
  EXPECT_EQ(c.phase(), Controller::Phase::Report);
  EXPECT_EQ(h.reports.size(), 1u);

  // The next tick reports the step, then acts on a fresh observation.
  h.act_delay = Duration::zero();
  h.state(0, 0.4, Clock::now());
  h.published.clear();
  h.actions.push_back({0.5});
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  EXPECT_EQ(h.reports.size(), 2u);
  ASSERT_EQ(h.published.size(), 1u);
  EXPECT_FALSE(h.published[0].hold);
  EXPECT_EQ(h.published[0].command, (std::vector<double>{0.5}));
}

// A reconnect to a server of another action width (review): the commands
// changed width silently; one of another width than the first is held.
TEST(Controller, AnActionOfAnotherWidthIsHeld) {
  Harness h(2);
  Controller::Config cfg;
  cfg.num_envs = 2;
  cfg.mode = Mode::Timer;
  cfg.max_obs_age = 1s;
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0.1, Clock::now());
  h.state(1, 0.1, Clock::now());
  h.actions.push_back({0.5, -0.5});
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  h.published.clear();
  h.actions.push_back({0.1, 0.2, 0.3, 0.4});  // 2 values per env now
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 2u);
  for (const auto &p : h.published) {
    EXPECT_TRUE(p.hold);
    EXPECT_EQ(p.command, (std::vector<double>{0.0}));
  }
  EXPECT_EQ(c.phase(), Controller::Phase::Report);
}

TEST(Controller, LockstepEpisodeEndResetsAndWaitsForTheResetState) {
  Harness h(2);
  Controller::Config cfg;
  cfg.num_envs = 2;
  cfg.mode = Mode::Lockstep;
  cfg.max_obs_age = 10s;
  Controller c = h.make(cfg);

  h.state(0, 0, Clock::now());
  h.state(1, 0, Clock::now());
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  // Half a step's data: not complete.
  h.step(0, 0.1, 1, false, false);
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);
  EXPECT_TRUE(h.reports.empty());
  // Env 1 ends its episode.
  h.step(1, 0.2, 0, true, false);
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);  // reported, now resetting
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(h.resets, (std::vector<std::size_t>{1}));
  ASSERT_EQ(h.episodes.size(), 1u);
  EXPECT_EQ(h.episodes[0].env, 1u);
  EXPECT_EQ(h.episodes[0].length, 1);
  EXPECT_FALSE(h.episodes[0].success);
  EXPECT_EQ(c.phase(), Controller::Phase::Reset);

  // The answer alone is not enough: the reset state must come too.
  h.shared.put_reset_answer(1, true, Clock::now());
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);
  h.state(1, 0.01, Clock::now());
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  EXPECT_EQ(h.acts, 2);
  EXPECT_EQ(c.phase(), Controller::Phase::Report);

  // The next step's reward starts from zero for env 1.
  h.step(0, 0.1, 1, false, false);
  h.step(1, 0.1, 1, false, true);
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);
  ASSERT_EQ(h.reports.size(), 2u);
  EXPECT_EQ(h.reports[1].rewards, (std::vector<double>{1, 1}));
  ASSERT_EQ(h.episodes.size(), 2u);
  EXPECT_TRUE(h.episodes[1].success);
  EXPECT_EQ(h.episodes[1].episode_return, 1);
}

TEST(Controller, LockstepHoldsOnlyAfterMaxObsAge) {
  Harness h(1);
  Controller::Config cfg;
  cfg.num_envs = 1;
  cfg.mode = Mode::Lockstep;
  cfg.max_obs_age = 50ms;
  Controller c = h.make(cfg, HoldMode::Last);
  h.state(0, 0, Clock::now());
  h.actions.push_back({0.7});
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  h.published.clear();
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);
  EXPECT_TRUE(h.published.empty());
  EXPECT_EQ(c.wake(Clock::now() + 60ms), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 1u);
  EXPECT_TRUE(h.published[0].hold);
  EXPECT_EQ(h.published[0].command, (std::vector<double>{0.7}));
}

TEST(Controller, MaxEpisodesFinishesAndStopIsPassedOn) {
  Harness h(1);
  Controller::Config cfg;
  cfg.num_envs = 1;
  cfg.mode = Mode::Lockstep;
  cfg.max_episodes = 1;
  Controller c = h.make(cfg);
  h.state(0, 0, Clock::now());
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  h.step(0, 0, 1, false, true);
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Finished);
  EXPECT_TRUE(h.resets.empty());  // finished: no reset asked for
  EXPECT_EQ(c.episodes(), 1);

  Harness s(1);
  Controller d = s.make(cfg);
  s.state(0, 0, Clock::now());
  s.stopped = true;
  EXPECT_EQ(d.wake(Clock::now()), Controller::Result::Stopped);
}

TEST(Controller, AReportThatThrowsStillCountsTheStep) {
  Harness h(1);
  Controller::Config cfg;
  cfg.num_envs = 1;
  cfg.mode = Mode::Lockstep;
  Controller::Hooks hooks;
  hooks.snapshot = [&](InputState &dst) { h.shared.drain_into(dst); };
  hooks.act = [](const plugrl::Observation &, std::vector<double> &a) {
    a.assign(1, 0.0);
    return true;
  };
  hooks.report = [](const plugrl::Observation &, const std::vector<double> &, const std::vector<uint8_t> &,
                    const std::vector<uint8_t> &, const std::vector<uint8_t> &) -> bool {
    throw plugrl::Error(PLUGRL_TIMEOUT, "send timed out");
  };
  std::vector<std::size_t> resets;
  hooks.publish = [](std::size_t, const std::vector<double> &, bool) {};
  hooks.request_reset = [&](std::size_t env) { resets.push_back(env); };
  Controller c(cfg, InputState(cartpole_sources(), 1), CommandBook(1, HoldMode::Zeros), hooks);
  h.state(0, 0, Clock::now());
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  h.step(0, 0, 0, true, false);
  EXPECT_THROW(c.wake(Clock::now()), plugrl::Error);
  EXPECT_EQ(c.episodes(), 1);
  EXPECT_EQ(resets.size(), 1u);
  EXPECT_EQ(c.phase(), Controller::Phase::Reset);
}

TEST(Controller, LockstepAnswerBeforeTheLastCommandIsOutCounts) {
  // Over DDS env 0 may answer while env 1's command is still being
  // published: its answer must count for this step.
  Harness h(2);
  Controller::Config cfg;
  cfg.num_envs = 2;
  cfg.mode = Mode::Lockstep;
  cfg.max_obs_age = 10s;
  Controller::Hooks hooks;
  hooks.snapshot = [&](InputState &dst) { h.shared.drain_into(dst); };
  hooks.act = [](const plugrl::Observation &, std::vector<double> &a) {
    a.assign(2, 0.0);
    return true;
  };
  int reports = 0;
  hooks.report = [&](const plugrl::Observation &, const std::vector<double> &, const std::vector<uint8_t> &,
                     const std::vector<uint8_t> &, const std::vector<uint8_t> &) {
    reports++;
    return true;
  };
  hooks.publish = [&](std::size_t env, const std::vector<double> &, bool) {
    h.step(env, 0.1, 1, false, false);  // the env answers at once
  };
  hooks.request_reset = [](std::size_t) {};
  Controller c(cfg, InputState(cartpole_sources(), 2), CommandBook(2, HoldMode::Zeros), hooks);
  h.state(0, 0, Clock::now());
  h.state(1, 0, Clock::now());
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);  // reported, and acted again
  EXPECT_EQ(reports, 1);
}

TEST(Controller, TimerModeHoldsWhileAnEnvResetsWithoutWarning) {
  Harness h(2);
  Controller::Config cfg;
  cfg.num_envs = 2;
  cfg.mode = Mode::Timer;
  cfg.max_obs_age = 1s;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.state(0, 0, t);
  h.state(1, 0, t);
  ASSERT_EQ(c.wake(t), Controller::Result::Stepped);
  h.state(0, 0.1, t + 10ms);
  h.state(1, 0.1, t + 10ms);
  h.shared.put_terminated(1, true, t + 10ms);
  EXPECT_EQ(c.wake(t + 20ms), Controller::Result::Waiting);  // reported; env 1 resets
  EXPECT_EQ(h.resets, (std::vector<std::size_t>{1}));
  h.published.clear();
  EXPECT_EQ(c.wake(t + 30ms), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 2u);  // both envs hold until the reset is done
  EXPECT_TRUE(h.published[0].hold);
  EXPECT_TRUE(h.published[1].hold);
  EXPECT_EQ(c.holds(), 2u);  // at the report's wake and at this one
  EXPECT_EQ(h.warnings, 0);  // holding for a reset is the normal course
}

// ---------------------------------------------------------------- trajectories

namespace {

// A controller of n envs whose act gives env i the chunk rows[i] (k values
// a step) step after step, as plugrl::Runner does: act hands out the
// current step, chunk the rest of the chunk from it. Records what happens
// in order.
struct ChunkHarness {
  Harness h;
  std::size_t k;
  std::vector<std::vector<double>> rows;  // per env: steps x k values
  std::size_t at = 0;                     // the current step
  bool acted = false;
  std::vector<std::string> events;
  struct Traj {
    std::size_t env;
    std::vector<TrajectoryPoint> points;
    bool hold;
  };
  std::vector<Traj> trajectories;
  std::function<int64_t(std::size_t, std::vector<double> &)> chunk;  // default: the rest of rows
  int warnings = 0;

  ChunkHarness(std::size_t n, std::size_t k_, std::vector<std::vector<double>> rows_)
      : h(n), k(k_), rows(std::move(rows_)) {
    chunk = [this](std::size_t env, std::vector<double> &out) -> int64_t {
      if (!acted) throw plugrl::Error(PLUGRL_OUT_OF_ORDER, "chunk outside act and report");
      out.assign(rows[env].begin() + static_cast<std::ptrdiff_t>(at * k), rows[env].end());
      return static_cast<int64_t>(out.size() / k);
    };
  }

  // book: by default, hold the last command, no scale or clip.
  Controller make(Controller::Config cfg, bool with_chunk = true, std::optional<CommandBook> book = std::nullopt) {
    const std::size_t n = h.shared.num_envs();
    if (!book) book.emplace(n, HoldMode::Last);
    Controller::Hooks hooks;
    hooks.snapshot = [this](InputState &dst) { h.shared.drain_into(dst); };
    hooks.act = [this, n](const plugrl::Observation &, std::vector<double> &out) {
      events.push_back("act");
      out.clear();
      for (std::size_t i = 0; i < n; i++)
        out.insert(out.end(), rows[i].begin() + static_cast<std::ptrdiff_t>(at * k),
                   rows[i].begin() + static_cast<std::ptrdiff_t>((at + 1) * k));
      acted = true;
      return true;
    };
    hooks.report = [this](const plugrl::Observation &, const std::vector<double> &, const std::vector<uint8_t> &,
                          const std::vector<uint8_t> &, const std::vector<uint8_t> &) {
      events.push_back("report");
      acted = false;
      at++;
      return true;
    };
    hooks.publish = [this](std::size_t env, const std::vector<double> &, bool hold) {
      events.push_back((hold ? "hold" : "publish") + std::to_string(env));
    };
    hooks.publish_trajectory = [this](std::size_t env, const std::vector<TrajectoryPoint> &p, bool hold) {
      events.push_back("trajectory" + std::to_string(env));
      trajectories.push_back({env, p, hold});
    };
    if (with_chunk)
      hooks.chunk = [this](std::size_t env, std::vector<double> &out) {
        events.push_back("chunk" + std::to_string(env));
        return chunk(env, out);
      };
    hooks.request_reset = [](std::size_t) {};
    hooks.log = [this](Controller::Level level, const std::string &) {
      if (level == Controller::Level::Warn) warnings++;
    };
    return Controller(cfg, InputState(cartpole_sources(), n), std::move(*book), hooks);
  }
};

std::vector<double> values_at(const std::vector<TrajectoryPoint> &p, std::size_t i) { return p.at(i).values; }

}  // namespace

TEST(Controller, TrajectoryIsTheRestOfTheChunk) {
  // Two envs, chunks of 3 steps of 2 values.
  ChunkHarness c(2, 2, {{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {-0.1, -0.2, -0.3, -0.4, -0.5, -0.6}});
  Controller::Config cfg;
  cfg.num_envs = 2;
  cfg.mode = Mode::Lockstep;
  cfg.max_obs_age = 10s;
  cfg.trajectory_period = 20ms;
  Controller ctl = c.make(cfg);
  c.h.state(0, 0, Clock::now());
  c.h.state(1, 0, Clock::now());
  ASSERT_EQ(ctl.wake(Clock::now()), Controller::Result::Stepped);
  // The chunks are read between act and report, before any command goes
  // out; each env's trajectory follows its command.
  EXPECT_EQ(c.events, (std::vector<std::string>{"act", "chunk0", "chunk1", "publish0", "trajectory0", "publish1",
                                                 "trajectory1"}));
  ASSERT_EQ(c.trajectories.size(), 2u);
  const auto &p0 = c.trajectories[0].points;
  ASSERT_EQ(p0.size(), 3u);  // the whole chunk: this step and the two after it
  EXPECT_FALSE(c.trajectories[0].hold);
  EXPECT_EQ(values_at(p0, 0), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(values_at(p0, 0), ctl.commands().command(0));  // point 0 is the command
  EXPECT_EQ(values_at(p0, 2), (std::vector<double>{0.5, 0.6}));
  EXPECT_EQ(p0[0].time_from_start, std::chrono::duration_cast<Duration>(20ms));
  EXPECT_EQ(p0[1].time_from_start, std::chrono::duration_cast<Duration>(40ms));
  EXPECT_EQ(p0[2].time_from_start, std::chrono::duration_cast<Duration>(60ms));
  EXPECT_EQ(c.trajectories[1].env, 1u);
  EXPECT_EQ(values_at(c.trajectories[1].points, 1), (std::vector<double>{-0.3, -0.4}));
  EXPECT_EQ(ctl.trajectory(1).size(), 3u);

  // The next step: two points left, the first of them the new command.
  c.h.step(0, 0.1, 1, false, false);
  c.h.step(1, 0.1, 1, false, false);
  c.trajectories.clear();
  ASSERT_EQ(ctl.wake(Clock::now()), Controller::Result::Stepped);
  ASSERT_EQ(c.trajectories.size(), 2u);
  ASSERT_EQ(c.trajectories[0].points.size(), 2u);
  EXPECT_EQ(values_at(c.trajectories[0].points, 0), (std::vector<double>{0.3, 0.4}));
  EXPECT_EQ(c.trajectories[0].points[1].time_from_start, std::chrono::duration_cast<Duration>(40ms));
  EXPECT_EQ(c.warnings, 0);
}

TEST(Controller, TrajectoryPointsAreScaledAndClippedLikeTheCommand) {
  ChunkHarness c(1, 1, {{0.2, 0.9, -3.0}});
  Controller::Config cfg;
  cfg.num_envs = 1;
  cfg.mode = Mode::Lockstep;
  Controller ctl = c.make(cfg, true, CommandBook(1, HoldMode::Zeros, 2.0, -1.0, 1.0));
  c.h.state(0, 0, Clock::now());
  ASSERT_EQ(ctl.wake(Clock::now()), Controller::Result::Stepped);
  ASSERT_EQ(ctl.trajectory(0).size(), 3u);
  EXPECT_EQ(ctl.trajectory(0)[0].values, (std::vector<double>{0.4}));
  EXPECT_EQ(ctl.trajectory(0)[0].values, ctl.commands().command(0));
  EXPECT_EQ(ctl.trajectory(0)[1].values, (std::vector<double>{1.0}));
  EXPECT_EQ(ctl.trajectory(0)[2].values, (std::vector<double>{-1.0}));
}

TEST(Controller, AHoldsTrajectoryIsTheHoldAlone) {
  ChunkHarness c(1, 1, {{0.5, 0.6, 0.7, 0.8}});
  Controller::Config cfg;
  cfg.num_envs = 1;
  cfg.mode = Mode::Timer;
  cfg.max_obs_age = 100ms;
  cfg.trajectory_period = 10ms;
  Controller ctl = c.make(cfg);  // hold: last
  const TimePoint t = Clock::now();
  c.h.state(0, 0, t);
  ASSERT_EQ(ctl.wake(t), Controller::Result::Stepped);
  ASSERT_EQ(c.trajectories.back().points.size(), 4u);
  c.trajectories.clear();
  EXPECT_EQ(ctl.wake(t + 500ms), Controller::Result::Waiting);  // stale: hold
  ASSERT_EQ(c.trajectories.size(), 1u);
  EXPECT_TRUE(c.trajectories[0].hold);
  ASSERT_EQ(c.trajectories[0].points.size(), 1u);
  EXPECT_EQ(c.trajectories[0].points[0].values, (std::vector<double>{0.5}));
  EXPECT_EQ(c.trajectories[0].points[0].time_from_start, std::chrono::duration_cast<Duration>(10ms));
}

TEST(Controller, TrajectoryWithoutAChunkIsTheCommand) {
  // No chunk hook (or one that fails): the command alone, and a warning
  // when reading the chunk failed.
  {
    ChunkHarness c(1, 1, {{0.5, 0.6}});
    Controller::Config cfg;
    cfg.num_envs = 1;
    cfg.mode = Mode::Lockstep;
    Controller ctl = c.make(cfg, false);
    c.h.state(0, 0, Clock::now());
    ASSERT_EQ(ctl.wake(Clock::now()), Controller::Result::Stepped);
    ASSERT_EQ(ctl.trajectory(0).size(), 1u);
    EXPECT_EQ(ctl.trajectory(0)[0].values, (std::vector<double>{0.5}));
    EXPECT_EQ(c.warnings, 0);
  }
  {
    ChunkHarness c(1, 1, {{0.5, 0.6}});
    c.chunk = [](std::size_t, std::vector<double> &) -> int64_t {
      throw plugrl::Error(PLUGRL_OUT_OF_ORDER, "not now");
    };
    Controller::Config cfg;
    cfg.num_envs = 1;
    cfg.mode = Mode::Lockstep;
    Controller ctl = c.make(cfg);
    c.h.state(0, 0, Clock::now());
    ASSERT_EQ(ctl.wake(Clock::now()), Controller::Result::Stepped);  // the step goes on
    ASSERT_EQ(ctl.trajectory(0).size(), 1u);
    EXPECT_EQ(c.warnings, 1);
  }
  {
    ChunkHarness c(1, 2, {{0.5, 0.6, 0.7, 0.8}});
    c.chunk = [](std::size_t, std::vector<double> &out) -> int64_t {
      out.assign(3, 0.0);  // not steps x step_size
      return 2;
    };
    Controller::Config cfg;
    cfg.num_envs = 1;
    cfg.mode = Mode::Lockstep;
    Controller ctl = c.make(cfg);
    c.h.state(0, 0, Clock::now());
    ASSERT_EQ(ctl.wake(Clock::now()), Controller::Result::Stepped);
    ASSERT_EQ(ctl.trajectory(0).size(), 1u);
    EXPECT_EQ(ctl.trajectory(0)[0].values, (std::vector<double>{0.5, 0.6}));
    EXPECT_EQ(c.warnings, 1);
  }
}
