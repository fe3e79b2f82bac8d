// Unit tests of the ROS-free part of plugrl_env_node (env_core.hpp).
#include "plugrl_ros2/env_core.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
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

TEST(Sources, TextAloneAndHugeShapesAreRefused) {
  SourceSpec text;
  text.name = "instruction";
  text.topic = "instruction";
  text.kind = SourceKind::Text;
  std::vector<SourceSpec> only_text{text};
  EXPECT_NE(normalize_sources(only_text).find("at least one array"), std::string::npos);
  std::vector<SourceSpec> with_state{joint("q", SourceKind::JointPosition, {"a"}), text};
  EXPECT_EQ(normalize_sources(with_state), "");

  SourceSpec big;
  big.name = "big";
  big.topic = "big";
  big.kind = SourceKind::Float64Array;
  big.shape = {int64_t{1} << 40, int64_t{1} << 40};  // a product that overflows int64_t
  std::vector<SourceSpec> huge{big};
  EXPECT_NE(normalize_sources(huge).find("more than"), std::string::npos);
  huge[0].shape = {kMaxSourceElements};
  EXPECT_EQ(normalize_sources(huge), "");
}

TEST(Parameters, DefaultsAndTheExampleAreAccepted) {
  NumericParameters p;
  EXPECT_EQ(check_parameters(p), "");
  p.control_rate_hz = 0;  // lockstep
  p.action_clip = {-1, 1};
  p.stats_period_s = 0;
  p.max_reconnects = -1;
  EXPECT_EQ(check_parameters(p), "");
  EXPECT_EQ(seconds_to_duration(0.02), std::chrono::duration_cast<Duration>(20ms));
  EXPECT_EQ(seconds_to_duration(-1), Duration::zero());
  EXPECT_EQ(seconds_to_duration(std::nan("")), Duration::zero());
}

// Each of these reached a conversion or a wait the node could not make
// (review): a NaN or huge double into a count of nanoseconds (undefined),
// a rate so high the timer's period is 0, a reset timeout of 0 that asks
// again at every wake, a clip that inverts every command.
TEST(Parameters, EachUnusableValueIsNamed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::function<void(NumericParameters &)> set;
    const char *name;
  };
  const std::vector<Case> cases{
      {[&](NumericParameters &p) { p.control_rate_hz = nan; }, "control_rate_hz"},
      {[&](NumericParameters &p) { p.control_rate_hz = inf; }, "control_rate_hz"},
      {[](NumericParameters &p) { p.control_rate_hz = 1e5; }, "control_rate_hz"},
      {[](NumericParameters &p) { p.control_rate_hz = 1e-300; }, "control_rate_hz"},
      {[](NumericParameters &p) { p.control_rate_hz = -50; }, "control_rate_hz"},  // was lockstep
      {[](NumericParameters &p) { p.control_rate_hz = -1e-3; }, "control_rate_hz"},  // any negative
      {[](NumericParameters &p) { p.max_obs_age_s = 0; }, "max_obs_age_s"},
      {[](NumericParameters &p) { p.max_obs_age_s = -0.5; }, "max_obs_age_s"},
      {[&](NumericParameters &p) { p.max_obs_age_s = nan; }, "max_obs_age_s"},
      {[](NumericParameters &p) { p.max_obs_age_s = 1e300; }, "max_obs_age_s"},
      {[](NumericParameters &p) { p.reset_timeout_s = 0; }, "reset_timeout_s"},
      {[](NumericParameters &p) { p.reset_timeout_s = 1e-10; }, "reset_timeout_s"},  // 0 ns once converted
      {[](NumericParameters &p) { p.max_obs_age_s = 1e-4; }, "max_obs_age_s"},
      {[&](NumericParameters &p) { p.reset_timeout_s = inf; }, "reset_timeout_s"},
      {[&](NumericParameters &p) { p.stats_period_s = nan; }, "stats_period_s"},
      {[](NumericParameters &p) { p.stats_period_s = 1e-9; }, "stats_period_s"},
      {[](NumericParameters &p) { p.trajectory_dt_s = 1e20; }, "trajectory_dt_s"},
      {[](NumericParameters &p) { p.trajectory_dt_s = 1e-12; }, "trajectory_dt_s"},
      {[&](NumericParameters &p) { p.action_scale = nan; }, "action_scale"},
      {[](NumericParameters &p) { p.action_clip = {1, -1}; }, "action_clip"},
      {[&](NumericParameters &p) { p.action_clip = {nan, 1}; }, "action_clip"},
      {[](NumericParameters &p) { p.action_clip = {1}; }, "action_clip"},
      {[](NumericParameters &p) { p.connect_timeout_ms = int64_t{1} << 32; }, "connect_timeout_ms"},
      {[](NumericParameters &p) { p.receive_timeout_ms = -5; }, "receive_timeout_ms"},
      {[](NumericParameters &p) { p.close_timeout_ms = int64_t{3} << 31; }, "close_timeout_ms"},
      {[](NumericParameters &p) { p.max_reconnects = -2; }, "max_reconnects"},
      {[](NumericParameters &p) { p.dead_peer_timeout_ms = -2; }, "dead_peer_timeout_ms"},
      {[](NumericParameters &p) { p.dead_peer_timeout_ms = 1999; }, "dead_peer_timeout_ms"},
      {[](NumericParameters &p) { p.dead_peer_timeout_ms = int64_t{1} << 31; }, "dead_peer_timeout_ms"},
      {[](NumericParameters &p) { p.open_wait_ms = -2; }, "open_wait_ms"},
      {[](NumericParameters &p) { p.open_wait_ms = int64_t{1} << 31; }, "open_wait_ms"},
      {[](NumericParameters &p) { p.max_episodes = -1; }, "max_episodes"},
  };
  for (std::size_t i = 0; i < cases.size(); i++) {
    NumericParameters p;
    cases[i].set(p);
    const std::string why = check_parameters(p);
    EXPECT_EQ(why.rfind(cases[i].name, 0), 0u) << "case " << i << ": " << why;
    EXPECT_NE(why.find("want"), std::string::npos) << "case " << i << ": " << why;
  }
}

// The timer mode steps at the control rate and at no other: the node's
// loop used to wake the controller every 100 ms without a tick too, so a
// 5 Hz node stepped at 10 Hz (review), and a reset's answer stepped at once.
TEST(Wakeups, TimerModeWakesOnlyOnTicks) {
  Wakeups w(Mode::Timer);
  w.data();
  w.reset_answered();
  std::promise<bool> woke;
  std::thread waiter([&] { woke.set_value(w.wait()); });
  auto f = woke.get_future();
  // Data and a reset answer are not ticks: the wait goes on until one.
  EXPECT_EQ(f.wait_for(50ms), std::future_status::timeout);
  w.tick();
  EXPECT_TRUE(f.get());
  waiter.join();

  // Ticks that come while the runner is busy are taken as one.
  w.tick();
  w.tick();
  w.tick();
  EXPECT_TRUE(w.wait());
  std::promise<bool> second;
  std::thread waiter2([&] { second.set_value(w.wait()); });
  auto g = second.get_future();
  EXPECT_EQ(g.wait_for(50ms), std::future_status::timeout);
  w.stop();
  EXPECT_FALSE(g.get());
  waiter2.join();
  EXPECT_FALSE(w.wait());  // and every wait after a stop
}

TEST(Wakeups, LockstepWakesOnDataAnswersAndRecheck) {
  Wakeups w(Mode::Lockstep, 1h);
  w.data();
  EXPECT_TRUE(w.wait());
  w.reset_answered();
  EXPECT_TRUE(w.wait());
  w.tick();  // lockstep has no timer: a stray tick changes nothing
  std::promise<bool> woke;
  std::thread waiter([&] { woke.set_value(w.wait()); });
  auto f = woke.get_future();
  EXPECT_EQ(f.wait_for(50ms), std::future_status::timeout);
  w.data();
  EXPECT_TRUE(f.get());
  waiter.join();

  // Without news, a lockstep wait still returns after recheck (a late
  // step's hold is decided there).
  Wakeups quick(Mode::Lockstep, 5ms);
  EXPECT_TRUE(quick.wait());
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

// The step's final observation is the env's state from its first done
// flag on (Signals::ended_at): a later flag, in the same drain or the
// next (a robot that repeats its flags until reset), must not move it, or
// the report waits for a state after each repeat. A false flag is no end:
// counted as one, every step whose flags came before its state waited
// for a state after them.
TEST(Inputs, EndedAtIsTheFirstTrueFlag) {
  InputState shared(cartpole_sources(), 1), mine;
  const TimePoint t = Clock::now();
  shared.put_terminated(0, false, t);
  shared.put_truncated(0, false, t);
  shared.drain_into(mine);
  EXPECT_FALSE(mine.signals(0).ended_at) << "a false flag is no end";
  shared.put_terminated(0, true, t + 1ms);
  shared.drain_into(mine);
  shared.put_terminated(0, true, t + 2ms);
  shared.put_truncated(0, true, t + 3ms);
  shared.drain_into(mine);
  ASSERT_TRUE(mine.signals(0).ended_at);
  EXPECT_EQ(*mine.signals(0).ended_at, t + 1ms);
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

// A state counts as coming with a signal at t when it arrived at or after
// t, or up to the skew before t and nearer to t than to the state before
// it: what the executor handed over in the same batch as the signal, not
// the last state of a robot that publishes faster than the skew.
TEST(Readiness, StateSinceASignal) {
  InputState in(cartpole_sources(), 1);
  const TimePoint t = Clock::now();
  auto put = [&](TimePoint at) {
    in.put_joint_state(0, 0, {"slider", "hinge"}, {0, 0}, {0, 0}, {}, at);
    in.put_joint_state(1, 0, {"slider", "hinge"}, {0, 0}, {0, 0}, {}, at);
  };
  EXPECT_FALSE(state_since(in, 0, t, 2ms));  // nothing yet
  put(t - 50us);  // the first state: nothing before it to be nearer to
  EXPECT_TRUE(state_since(in, 0, t, 2ms));
  EXPECT_FALSE(state_since(in, 0, t, 0ms));
  EXPECT_FALSE(state_since(in, 0, t + 3ms, 2ms));  // past the skew
  // A 1 kHz robot: states 1 ms apart, the flag just before the next one.
  put(t + 950us);
  EXPECT_TRUE(state_since(in, 0, t + 950us, 2ms));   // at the signal
  EXPECT_TRUE(state_since(in, 0, t + 1ms, 2ms));     // handled 50 us ahead of it
  EXPECT_FALSE(state_since(in, 0, t + 1950us, 2ms));  // a period ahead: the one before
  EXPECT_FALSE(state_since(in, 0, t + 1500us, 2ms));  // halfway: not nearer to the signal
  EXPECT_TRUE(state_since(in, 0, t + 1400us, 2ms));
  ASSERT_TRUE(in.received_before(0, 0));
  EXPECT_EQ(*in.received_before(0, 0), t - 50us);
  // Only a source whose value counts makes the state count.
  in.put_joint_state(0, 0, {"slider", "hinge"}, {0, 0}, {0, 0}, {}, t + 2ms);
  EXPECT_FALSE(state_since(in, 0, t + 2ms, 2ms));  // qvel's last is a period ahead
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

// trajectory_dt_s (or the control period) may be up to 10^6 s, and a
// chunk has up to H steps, H from the server, bounded by the message cap
// only: point 9224's time overflowed int64 nanoseconds (undefined; it came
// out negative). It saturates (rclcpp saturates it again into the
// message's int32 seconds).
TEST(Commands, TrajectoryTimesSaturate) {
  CommandBook book(1, HoldMode::Zeros);
  const std::size_t steps = 10000;
  std::vector<double> chunk(steps, 0.1);
  const Duration period = seconds_to_duration(kMaxParameterSeconds);
  auto points = trajectory_points(chunk.data(), steps, 1, period, book);
  EXPECT_EQ(points[0].time_from_start, period);
  for (std::size_t k = 1; k < steps; k++)
    ASSERT_GE(points[k].time_from_start, points[k - 1].time_from_start) << "point " << k;
  EXPECT_EQ(points.back().time_from_start, Duration::max());
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

// Every value of an observation's qpos ([n, 2] float64).
std::vector<double> qpos_values(const plugrl::Observation &obs) {
  const plugrl_array *q = find_state(obs.c(), "qpos");
  const auto *v = static_cast<const double *>(q->data);
  return std::vector<double>(v, v + q->shape[0] * q->shape[1]);
}

// A controller's configuration: n envs, ticked by mode, max_obs_age as given.
Controller::Config config(std::size_t n, Mode mode, Duration max_obs_age = std::chrono::milliseconds(500)) {
  Controller::Config cfg;
  cfg.num_envs = n;
  cfg.mode = mode;
  cfg.max_obs_age = max_obs_age;
  return cfg;
}

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
    std::vector<double> qpos;  // every env's row, in order
  };
  std::vector<Report> reports;
  int acts = 0;
  std::vector<double> acted_qpos0;  // env 0's qpos[0] in each act's observation
  std::vector<std::vector<double>> acted_qpos;  // every env's qpos row in each act's
  int warnings = 0, errors = 0;
  Duration act_delay{0};  // how long act blocks, as a slow server makes it
  std::function<void()> in_act;  // runs inside act (a test's own blocking)

  std::vector<SourceSpec> sources;

  explicit Harness(std::size_t n, std::vector<SourceSpec> srcs = cartpole_sources())
      : shared(srcs, n), sources(std::move(srcs)) {}

  Controller make(Controller::Config cfg, HoldMode hold = HoldMode::Zeros) {
    Controller::Hooks h;
    h.snapshot = [this](InputState &dst) { shared.drain_into(dst); };
    h.act = [this](const plugrl::Observation &obs, std::vector<double> &out) {
      acts++;
      acted_qpos0.push_back(static_cast<const double *>(find_state(obs.c(), "qpos")->data)[0]);
      acted_qpos.push_back(qpos_values(obs));
      if (act_delay > Duration::zero()) std::this_thread::sleep_for(act_delay);
      if (in_act) in_act();
      if (stopped) return false;
      out = actions.empty() ? std::vector<double>(shared.num_envs(), 0.0) : actions.front();
      if (!actions.empty()) actions.pop_front();
      return true;
    };
    h.report = [this](const plugrl::Observation &obs, const std::vector<double> &r, const std::vector<uint8_t> &te,
                      const std::vector<uint8_t> &tr, const std::vector<uint8_t> &) {
      const plugrl_array *q = find_state(obs.c(), "qpos");
      reports.push_back({r, te, tr, static_cast<const double *>(q->data)[0], qpos_values(obs)});
      return !stopped;
    };
    h.publish = [this](std::size_t env, const std::vector<double> &c, bool hold) {
      published.push_back({env, c, hold});
    };
    h.request_reset = [this](std::size_t env) { resets.push_back(env); };
    h.on_episode = [this](const EpisodeRecord &e) { episodes.push_back(e); };
    h.log = [this](Controller::Level level, const std::string &) {
      if (level == Controller::Level::Warn) warnings++;
      if (level == Controller::Level::Error) errors++;
    };
    return Controller(cfg, InputState(sources, shared.num_envs()),
                      CommandBook(shared.num_envs(), hold), h);
  }

  void state(std::size_t env, double x, TimePoint t) {
    shared.put_joint_state(0, env, {"slider", "hinge"}, {x, 0}, {0, 0}, {}, t);
    shared.put_joint_state(1, env, {"slider", "hinge"}, {x, 0}, {0, 0}, {}, t);
  }
  // Every env's state x at t, and the controller's first act on them.
  void start(Controller &c, TimePoint t, double x = 0.1) {
    for (std::size_t i = 0; i < shared.num_envs(); i++) state(i, x, t);
    ASSERT_EQ(c.wake(t), Controller::Result::Stepped);
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
  Controller::Config cfg = config(2, Mode::Timer, 100ms);
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
  Controller::Config cfg = config(1, Mode::Timer, 50ms);
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

// An act that waits for a slow server used to publish nothing until it
// returned: the robot kept the last command for as long as the server
// took (review). The control timer's hold_if_blocked holds once the
// observation went stale, at every tick, while act waits.
TEST(Controller, TimerModeHoldsWhileActWaits) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 100ms);
  Controller c = h.make(cfg, HoldMode::Zeros);
  TimePoint t = Clock::now();
  h.state(0, 0.1, t);
  h.state(1, 0.1, t);
  h.actions.push_back({0.5, -0.5});
  ASSERT_EQ(c.wake(t), Controller::Result::Stepped);
  EXPECT_FALSE(c.hold_if_blocked(t + 1h));  // no act waits
  h.published.clear();

  // The next act blocks until the test lets it go.
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  h.in_act = [&] {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  const TimePoint t2 = Clock::now();
  h.state(0, 0.2, t2);
  h.state(1, 0.2, t2 - 20ms);  // the oldest value decides
  h.actions.push_back({0.6, -0.6});
  std::future<Controller::Result> result = std::async(std::launch::async, [&] { return c.wake(t2); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  EXPECT_FALSE(c.hold_if_blocked(t2 + 70ms));  // fresh still (80 ms old)
  EXPECT_TRUE(h.published.empty());
  EXPECT_TRUE(c.hold_if_blocked(t2 + 90ms));  // 110 ms old: stale
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_TRUE(h.published[0].hold && h.published[1].hold);
  EXPECT_EQ(h.published[0].command, (std::vector<double>{0.0}));
  EXPECT_TRUE(c.hold_if_blocked(t2 + 100ms));  // and at every tick after
  EXPECT_EQ(h.published.size(), 4u);
  EXPECT_EQ(c.holds(), 2u);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  // Its action is for the observation the timer held for: held too, never
  // published after the holds (the runner thread's own clock, from the
  // wake's time, would have called it fresh).
  EXPECT_EQ(result.get(), Controller::Result::Waiting);
  EXPECT_EQ(h.published.size(), 6u);
  for (const auto &p : h.published) EXPECT_TRUE(p.hold);
  EXPECT_EQ(c.phase(), Controller::Phase::Report);
  EXPECT_FALSE(c.hold_if_blocked(t2 + 1h));  // act is done: the runner thread decides again
  h.in_act = nullptr;
  // The next wake reports the step and acts on a fresh observation.
  h.state(0, 0.3, Clock::now());
  h.state(1, 0.3, Clock::now());
  h.actions.push_back({0.7, -0.7});
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  EXPECT_FALSE(h.published.back().hold);
  EXPECT_EQ(h.published.back().command, (std::vector<double>{-0.7}));

  // Lockstep never holds from the timer: there a command is a step.
  Harness l(1);
  cfg.num_envs = 1;
  cfg.mode = Mode::Lockstep;
  Controller d = l.make(cfg);
  l.state(0, 0, Clock::now() - 1h);
  ASSERT_EQ(d.wake(Clock::now()), Controller::Result::Stepped);
  EXPECT_FALSE(d.hold_if_blocked(Clock::now() + 1h));
}

// An act that fails at once (a server that errs on every infer, a
// connection that cannot come back: max_reconnects -1, or reconnects that
// fail faster than max_obs_age) brings no action, and the node retries at
// the next tick. The step's command had stood meanwhile, for as long as
// the failures went on (review: a killed server left a robot on its last
// action for good). Timer mode holds at each tick that gets no action;
// lockstep, where a command is a step, does not.
TEST(Controller, TimerModeHoldsWhenActFails) {
  Harness h(2);
  Controller c = h.make(config(2, Mode::Timer, 500ms), HoldMode::Zeros);
  TimePoint t = Clock::now();
  h.state(0, 0.1, t);
  h.state(1, 0.1, t);
  h.actions.push_back({0.5, -0.5});
  ASSERT_EQ(c.wake(t), Controller::Result::Stepped);
  h.published.clear();

  h.in_act = [] { throw plugrl::Error(PLUGRL_CONNECT_FAILED, "the connection ended and reconnecting is disabled"); };
  for (int tick = 1; tick <= 3; tick++) {
    const TimePoint ti = t + tick * 50ms;  // every observation fresh
    h.state(0, 0.1, ti);
    h.state(1, 0.1, ti);
    EXPECT_THROW(c.wake(ti), plugrl::Error);
    ASSERT_EQ(h.published.size(), 2u * tick) << "tick " << tick;
    EXPECT_TRUE(h.published.back().hold);
    EXPECT_EQ(h.published.back().command, (std::vector<double>{0.0}));
  }
  EXPECT_EQ(c.phase(), Controller::Phase::Act);  // the next tick asks again
  // The server is back: the next tick acts.
  h.in_act = nullptr;
  h.actions.push_back({0.7, -0.7});
  h.state(0, 0.1, t + 200ms);
  h.state(1, 0.1, t + 200ms);
  EXPECT_EQ(c.wake(t + 200ms), Controller::Result::Stepped);
  EXPECT_FALSE(h.published.back().hold);

  Harness l(1);
  Controller d = l.make(config(1, Mode::Lockstep), HoldMode::Zeros);
  l.state(0, 0, Clock::now());
  ASSERT_EQ(d.wake(Clock::now()), Controller::Result::Stepped);
  l.published.clear();
  l.step(0, 0, 0, false, false);
  l.in_act = [] { throw plugrl::Error(PLUGRL_SERVER_ERROR, "server error"); };
  EXPECT_THROW(d.wake(Clock::now()), plugrl::Error);
  EXPECT_TRUE(l.published.empty());
}

// The node calls wake(Clock::now()), and the snapshot (the node's mutex,
// image copies) takes a while before act asks. The control timer, on its
// own clock, held once the observation went stale while act waited; the
// action that came back right after was still published, after that hold,
// when the runner's check (from the wake's now) saw the observation fresh
// (review). An action never follows the timer's hold for its observation.
TEST(Controller, TimerModeNoActionAfterTheTimersHold) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Timer, 50ms);
  Controller::Hooks hooks;
  bool slow_snapshot = false;
  hooks.snapshot = [&](InputState &dst) {
    if (slow_snapshot) std::this_thread::sleep_for(10ms);
    h.shared.drain_into(dst);
  };
  Controller *self = nullptr;
  TimePoint stale_at{};
  int acts = 0;
  hooks.act = [&](const plugrl::Observation &, std::vector<double> &a) {
    if (++acts == 2) {
      // The server answers 1 ms after the observation went stale; the
      // control timer ticked in between.
      std::this_thread::sleep_until(stale_at + 1ms);
      EXPECT_TRUE(self->hold_if_blocked(Clock::now()));
    }
    a.assign(1, 0.5);
    return true;
  };
  hooks.report = [](const plugrl::Observation &, const std::vector<double> &, const std::vector<uint8_t> &,
                    const std::vector<uint8_t> &, const std::vector<uint8_t> &) { return true; };
  std::vector<bool> holds;
  hooks.publish = [&](std::size_t, const std::vector<double> &, bool hold) { holds.push_back(hold); };
  hooks.request_reset = [](std::size_t) {};
  Controller c(cfg, InputState(cartpole_sources(), 1), CommandBook(1, HoldMode::Zeros), hooks);
  self = &c;
  h.state(0, 0.1, Clock::now());
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  const TimePoint t1 = Clock::now();
  h.state(0, 0.2, t1);
  stale_at = t1 + 50ms;
  slow_snapshot = true;
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);
  EXPECT_EQ(c.phase(), Controller::Phase::Report);  // the step is reported at the next tick
  ASSERT_GE(holds.size(), 2u);
  EXPECT_FALSE(holds[0]);
  for (std::size_t i = 1; i < holds.size(); i++) EXPECT_TRUE(holds[i]) << "publication " << i;
}

// plugrl.h: a report can wait too (a send to a server that does not read,
// a reconnect). The control timer holds while it waits, as it does for an
// act (review), and the act after it waits for the next tick and a new
// snapshot instead of acting on the one the timer found stale.
TEST(Controller, TimerModeHoldsWhileReportWaits) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Timer, 100ms);
  Controller::Hooks hooks;
  hooks.snapshot = [&](InputState &dst) { h.shared.drain_into(dst); };
  hooks.act = [](const plugrl::Observation &, std::vector<double> &a) {
    a.assign(1, 0.5);
    return true;
  };
  std::mutex mu;
  std::condition_variable cv;
  bool block = false, entered = false, release = false;
  int reports = 0;
  hooks.report = [&](const plugrl::Observation &, const std::vector<double> &, const std::vector<uint8_t> &,
                     const std::vector<uint8_t> &, const std::vector<uint8_t> &) {
    reports++;
    std::unique_lock<std::mutex> lock(mu);
    if (!block) return true;
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return true;
  };
  std::vector<bool> holds;
  std::mutex pub_mu;
  hooks.publish = [&](std::size_t, const std::vector<double> &, bool hold) {
    std::lock_guard<std::mutex> lock(pub_mu);
    holds.push_back(hold);
  };
  hooks.request_reset = [](std::size_t) {};
  Controller c(cfg, InputState(cartpole_sources(), 1), CommandBook(1, HoldMode::Zeros), hooks);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.2, t);
  block = true;
  std::future<Controller::Result> result = std::async(std::launch::async, [&] { return c.wake(t + 1ms); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  EXPECT_FALSE(c.hold_if_blocked(t + 50ms));
  EXPECT_TRUE(c.hold_if_blocked(t + 150ms));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    block = false;
  }
  cv.notify_all();
  EXPECT_EQ(result.get(), Controller::Result::Waiting);  // reported, no act on the stale snapshot
  EXPECT_EQ(reports, 1);
  EXPECT_EQ(c.phase(), Controller::Phase::Act);
  ASSERT_EQ(holds.size(), 2u);
  EXPECT_FALSE(holds[0]);
  EXPECT_TRUE(holds[1]);
  // The next tick acts on a fresh observation.
  h.state(0, 0.3, Clock::now());
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  EXPECT_FALSE(holds.back());
}

// A robot whose episode ended may stop sending its state until its reset
// (cartpole_sim_node on a clock does). The step that ended it is reported
// with the last state, however old, and the reset asked for; the other
// envs are not held for it (review: with max_obs_age shorter than such a
// robot's silence, the node held every env for good).
TEST(Controller, TimerModeReportsAnEndedEnvWhoseRobotWentQuiet) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 100ms);
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 5ms);  // env 0's terminal state, then silence
  h.shared.put_terminated(0, true, t + 5ms);
  h.state(1, 0.2, t + 300ms);  // env 1 goes on
  EXPECT_EQ(c.wake(t + 300ms), Controller::Result::Waiting);  // its end taken; waits for the reset
  EXPECT_EQ(h.resets, (std::vector<std::size_t>{0}));
  EXPECT_EQ(c.phase(), Controller::Phase::Reset);
  h.shared.put_reset_answer(0, true, t + 310ms);
  h.state(0, 0.0, t + 311ms);
  h.state(1, 0.3, t + 311ms);
  EXPECT_EQ(c.wake(t + 320ms), Controller::Result::Stepped);  // reported, then acted
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 0.9);  // the terminal state, kept through the reset
  EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{1, 0}));
  // A quiet env that did not end is still stale: it holds.
  Harness g(1);
  cfg.num_envs = 1;
  Controller d = g.make(cfg);
  g.state(0, 0.1, t);
  ASSERT_EQ(d.wake(t), Controller::Result::Stepped);
  g.published.clear();
  EXPECT_EQ(d.wake(t + 300ms), Controller::Result::Waiting);
  EXPECT_TRUE(g.reports.empty());
  ASSERT_EQ(g.published.size(), 1u);
  EXPECT_TRUE(g.published[0].hold);
}

// A lockstep simulator without a reset service starts its next episode by
// itself and sends nothing before the next command: the node waited for an
// observation newer than its (self-answered) reset request for good
// (review). It goes on at once; with a service it still waits.
TEST(Controller, LockstepWithoutAResetServiceGoesOnAtOnce) {
  for (bool service : {false, true}) {
    Harness h(1);
    Controller::Config cfg = config(1, Mode::Lockstep);
    cfg.reset_service = service;
    Controller c = h.make(cfg);
    h.state(0, 0, Clock::now());
    ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
    h.step(0, 0.5, 1, true, false);  // the episode ends; the env resets itself
    EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting) << service;  // reported; reset asked
    ASSERT_EQ(h.resets.size(), 1u);
    h.shared.put_reset_answer(0, true, Clock::now());  // the node's own answer when there is no service
    const Controller::Result r = c.wake(Clock::now());
    if (service) {
      EXPECT_EQ(r, Controller::Result::Waiting);  // waits for the state the reset brings
      h.state(0, 0, Clock::now());
      EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
    } else {
      EXPECT_EQ(r, Controller::Result::Stepped);  // the next episode's first step, at once
    }
    EXPECT_EQ(h.episodes.size(), 1u);
  }
}

// A run that ended (the server stopped it, max_episodes, an error, a
// shutdown) used to leave the last action standing (review): final_hold
// publishes every env's hold once and closes the controller's output.
TEST(Controller, FinalHoldIsTheLastCommand) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 1s);
  Controller c = h.make(cfg, HoldMode::Zeros);
  c.final_hold("before any command");  // nothing to hold yet
  EXPECT_TRUE(h.published.empty());

  Harness g(2);
  Controller d = g.make(cfg, HoldMode::Zeros);
  g.state(0, 0.1, Clock::now());
  g.state(1, 0.1, Clock::now());
  g.actions.push_back({0.5, -0.5});
  ASSERT_EQ(d.wake(Clock::now()), Controller::Result::Stepped);
  g.published.clear();
  d.final_hold("the server stopped the run");
  ASSERT_EQ(g.published.size(), 2u);
  for (const auto &p : g.published) {
    EXPECT_TRUE(p.hold);
    EXPECT_EQ(p.command, (std::vector<double>{0.0}));
  }
  d.final_hold("again");  // idempotent
  EXPECT_EQ(g.published.size(), 2u);

  // An act that was waiting when the run ended brings an action: not sent.
  g.state(0, 0.2, Clock::now());
  g.state(1, 0.2, Clock::now());
  g.actions.push_back({0.9, 0.9});
  EXPECT_EQ(d.wake(Clock::now()), Controller::Result::Waiting);
  EXPECT_EQ(g.published.size(), 2u);
  EXPECT_EQ(d.wake(Clock::now() + 1h), Controller::Result::Waiting);  // nor a hold
  EXPECT_EQ(g.published.size(), 2u);
}

// After the final hold (a shutdown: the pre-shutdown callback runs it
// while the runner thread may still be in a report) the robot is sent
// nothing more: no reset either, which moves a robot as an action does
// (review: the report of a step that ended an episode still asked for
// its reset, and the reset phase asked again after reset_timeout).
TEST(Controller, NoResetIsAskedForAfterTheFinalHold) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 1s);
  cfg.reset_timeout = 50ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 5ms);
  h.state(1, 0.2, t + 5ms);
  h.shared.put_terminated(0, true, t + 5ms);
  c.final_hold("shutting down");  // while the report is on its way
  h.published.clear();
  c.wake(t + 10ms);
  EXPECT_EQ(h.reports.size(), 1u);  // the server still gets its feedback
  EXPECT_TRUE(h.resets.empty()) << "a reset was asked for after the final hold";

  // A reset asked for before the final hold is not asked again after it.
  Harness g(1);
  cfg.num_envs = 1;
  Controller d = g.make(cfg);
  g.state(0, 0.1, t);
  ASSERT_EQ(d.wake(t), Controller::Result::Stepped);
  g.state(0, 0.9, t + 5ms);
  g.shared.put_terminated(0, true, t + 5ms);
  d.wake(t + 10ms);
  ASSERT_EQ(g.resets, (std::vector<std::size_t>{0}));
  d.final_hold("shutting down");
  std::this_thread::sleep_for(60ms);  // past reset_timeout
  d.wake(Clock::now());
  EXPECT_EQ(g.resets, (std::vector<std::size_t>{0})) << "the reset was asked again after the final hold";
  EXPECT_TRUE(h.published.empty());
}

// A reconnect to a server of another action width (review): the commands
// changed width silently; one of another width than the first is held.
TEST(Controller, AnActionOfAnotherWidthIsHeld) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 1s);
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0.1, Clock::now());
  h.state(1, 0.1, Clock::now());
  h.actions.push_back({0.5, -0.5});
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  h.published.clear();
  h.actions.push_back({0.1, 0.2, 0.3, 0.4});  // 2 values per env now
  const TimePoint t = Clock::now();
  EXPECT_EQ(c.wake(t), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 2u);
  for (const auto &p : h.published) {
    EXPECT_TRUE(p.hold);
    EXPECT_EQ(p.command, (std::vector<double>{0.0}));
  }
  EXPECT_EQ(c.phase(), Controller::Phase::Report);
  EXPECT_EQ(h.errors, 1);

  // Each such step holds; the error is said at most once a second (review:
  // a lockstep env stepping on each hold made thousands of lines a second).
  for (auto dt : {10ms, 20ms, 1100ms}) {
    h.state(0, 0.1, t + dt);
    h.state(1, 0.1, t + dt);
    h.actions.push_back({0.1, 0.2, 0.3, 0.4});
    EXPECT_EQ(c.wake(t + dt), Controller::Result::Waiting);  // reports, then holds the next
  }
  EXPECT_EQ(h.errors, 2);
  EXPECT_TRUE(h.published.back().hold);
}

// In lockstep the hold of an action of another width stands in for the
// step's command: one command, so one answer completes the step (review:
// it was counted twice, and each such step waited max_obs_age and was
// then taken as "an answer lost", with a warning).
TEST(Controller, LockstepTheHoldOfAnotherWidthIsOneCommand) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Lockstep, 10s);
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0, Clock::now());
  h.actions = {{0.5}, {0.1, 0.2}, {0.6}};
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);  // 0.5
  h.step(0, 1.0, 1, false, false);
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);  // reported; 2 wide: held
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_TRUE(h.published[1].hold);
  ASSERT_EQ(h.reports.size(), 1u);
  h.step(0, 2.0, 1, false, false);  // the env's answer to the hold
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);  // reported, acted: 0.6
  ASSERT_EQ(h.reports.size(), 2u);
  EXPECT_EQ(h.reports[1].qpos0, 2.0);
  EXPECT_EQ(h.published.back().command, (std::vector<double>{0.6}));
  EXPECT_EQ(h.warnings, 0);
}

TEST(Controller, LockstepEpisodeEndResetsAndWaitsForTheResetState) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Lockstep, 10s);
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
  Controller::Config cfg = config(1, Mode::Lockstep, 50ms);
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
  Controller::Config cfg = config(1, Mode::Lockstep);
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
  Controller::Config cfg = config(1, Mode::Lockstep);
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

  // The run's last step: the run is over whatever became of its feedback
  // (review: the failure was rethrown first, and the node, which retries
  // after a plugrl::Error, acted past max_episodes). The error is logged.
  cfg.max_episodes = 1;
  int errors = 0;
  hooks.log = [&](Controller::Level level, const std::string &) { errors += level == Controller::Level::Error; };
  Controller d(cfg, InputState(cartpole_sources(), 1), CommandBook(1, HoldMode::Zeros), hooks);
  h.state(0, 0, Clock::now());
  ASSERT_EQ(d.wake(Clock::now()), Controller::Result::Stepped);
  h.step(0, 0, 0, true, false);
  EXPECT_EQ(d.wake(Clock::now()), Controller::Result::Finished);
  EXPECT_EQ(d.episodes(), 1);
  EXPECT_EQ(errors, 1);
}

TEST(Controller, LockstepAnswerBeforeTheLastCommandIsOutCounts) {
  // Over DDS env 0 may answer while env 1's command is still being
  // published: its answer must count for this step.
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Lockstep, 10s);
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

// One step slower than max_obs_age got a hold, and the env (a simulator:
// a step per command) stepped on the hold too. The old rule, data newer
// than the command, took the step's own answer, acted, and took the
// hold's answer for the next command's: every later observation was one
// command off, for good (review). Counting answers keeps them aligned.
TEST(Controller, LockstepOneSlowStepDoesNotShiftLaterSteps) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Lockstep, 50ms);
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0, Clock::now());
  h.actions = {{0.1}, {0.2}, {0.3}, {0.4}};
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);  // command 0.1
  // The env is slow: a wake 60 ms later holds, and the env will step on it.
  EXPECT_EQ(c.wake(Clock::now() + 60ms), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_TRUE(h.published[1].hold);

  h.step(0, 1.0, 1, false, false);  // its answer to 0.1
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);  // the hold's is owed too
  EXPECT_TRUE(h.reports.empty());
  h.step(0, 2.0, 1, false, false);  // its answer to the hold
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);  // reported, acted: 0.2
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 2.0);
  EXPECT_EQ(h.reports[0].rewards, (std::vector<double>{2}));  // both steps' rewards

  // From here each answer is its own command's.
  for (double x : {3.0, 4.0}) {
    h.step(0, x, 1, false, false);
    EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
    EXPECT_EQ(h.reports.back().qpos0, x);
    EXPECT_EQ(h.reports.back().rewards, (std::vector<double>{1}));
  }
  std::vector<double> commands;
  for (const auto &p : h.published) commands.push_back(p.hold ? -1 : p.command[0]);
  EXPECT_EQ(commands, (std::vector<double>{0.1, -1, 0.2, 0.3, 0.4}));
}

// A command lost on the way (a dropped message): the env steps only on
// the hold. One max_obs_age after the hold, with an answer from every
// env, the step is taken with the latest data, not held for ever.
TEST(Controller, LockstepALostCommandIsRecovered) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Lockstep, 50ms);
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0, Clock::now());
  h.actions = {{0.1}, {0.2}};
  const TimePoint t = Clock::now();
  ASSERT_EQ(c.wake(t), Controller::Result::Stepped);  // 0.1: lost
  EXPECT_EQ(c.wake(t + 60ms), Controller::Result::Waiting);  // hold
  h.step(0, 5.0, 1, false, false);  // the answer to the hold
  EXPECT_EQ(c.wake(t + 70ms), Controller::Result::Waiting);  // maybe 0.1's answer is still coming
  EXPECT_EQ(h.published.size(), 2u);  // no second hold yet
  EXPECT_EQ(c.wake(t + 115ms), Controller::Result::Stepped);  // max_obs_age after the hold
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 5.0);
  EXPECT_EQ(h.published.back().command, (std::vector<double>{0.2}));

  // With no answer at all, it holds again (once per max_obs_age).
  const std::size_t before = h.published.size();
  const TimePoint u = Clock::now();
  EXPECT_EQ(c.wake(u + 60ms), Controller::Result::Waiting);
  EXPECT_EQ(h.published.size(), before + 1);
  EXPECT_EQ(c.wake(u + 70ms), Controller::Result::Waiting);
  EXPECT_EQ(h.published.size(), before + 1);
}

// A step slower than max_obs_age, whose answer comes just before the
// lost-answer rule would give up on the hold's: that rule takes the rest
// as lost only when nothing more came for max_obs_age (README). Measured
// from the hold instead, it took the step 10 ms after its answer, and the
// hold's answer, 10 ms later, for the next command's: every later
// observation one command off (review).
TEST(Controller, LockstepASlowAnswerIsNotTakenForALostOne) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Lockstep, 200ms);
  Controller c = h.make(cfg, HoldMode::Zeros);
  auto step_at = [&](double x, TimePoint t) {
    h.state(0, x, t);
    h.shared.add_reward(0, 1, t);
    h.shared.put_terminated(0, false, t);
    h.shared.put_truncated(0, false, t);
  };
  h.state(0, 0, Clock::now());
  h.actions = {{0.1}, {0.2}, {0.3}, {0.4}};
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);  // 0.1
  const TimePoint held = Clock::now() + 250ms;
  EXPECT_EQ(c.wake(held), Controller::Result::Waiting);  // no answer: a hold
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_TRUE(h.published[1].hold);
  step_at(1.0, held + 190ms);  // the slow answer to 0.1
  EXPECT_EQ(c.wake(held + 190ms), Controller::Result::Waiting);
  // max_obs_age after the hold, but only 10 ms after an answer.
  EXPECT_EQ(c.wake(held + 200ms), Controller::Result::Waiting);
  step_at(2.0, held + 210ms);  // the answer to the hold
  EXPECT_EQ(c.wake(held + 210ms), Controller::Result::Stepped);  // acted: 0.2
  for (double x : {3.0, 4.0}) {
    step_at(x, Clock::now());
    EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  }
  std::vector<double> seen;
  for (const auto &r : h.reports) seen.push_back(r.qpos0);
  EXPECT_EQ(seen, (std::vector<double>{2.0, 3.0, 4.0}));
  EXPECT_EQ(h.warnings, 1);  // the hold's

  // A command lost for good is still recovered, max_obs_age after the
  // last answer.
  Harness l(1);
  Controller d = l.make(cfg, HoldMode::Zeros);
  l.state(0, 0, Clock::now());
  l.actions = {{0.1}, {0.2}};
  ASSERT_EQ(d.wake(Clock::now()), Controller::Result::Stepped);  // 0.1: lost
  const TimePoint t = Clock::now() + 250ms;
  EXPECT_EQ(d.wake(t), Controller::Result::Waiting);  // a hold
  l.state(0, 5.0, t + 190ms);  // its answer
  l.shared.add_reward(0, 1, t + 190ms);
  l.shared.put_terminated(0, false, t + 190ms);
  l.shared.put_truncated(0, false, t + 190ms);
  EXPECT_EQ(d.wake(t + 380ms), Controller::Result::Waiting);
  EXPECT_EQ(d.wake(t + 391ms), Controller::Result::Stepped);
  ASSERT_EQ(l.reports.size(), 1u);
  EXPECT_EQ(l.reports[0].qpos0, 5.0);
}

// A simulator that republishes its state while it idles
// (cartpole_sim_node's idle_publish_s, 0.5 s by default, under
// max_obs_age_s 1.0 in cartpole.yaml and 2.0 in tests/ros2_nodes.sh):
// when a step's reward was lost, the lost-answer rule waited for
// max_obs_age without any message, which the republished states never
// gave, and no hold went out either (every env had answered once): the
// run stopped for good (review). A message on a topic that is already
// ahead of the env's answers is not an answer still coming.
TEST(Controller, LockstepALostRewardIsRecoveredDespiteIdleRepublishes) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Lockstep, 100ms);
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0, Clock::now());
  h.actions = {{0.1}, {0.2}};
  const TimePoint t = Clock::now();
  ASSERT_EQ(c.wake(t), Controller::Result::Stepped);  // 0.1
  // Its answer, but the reward is lost on the way.
  h.state(0, 1.0, t + 10ms);
  h.shared.put_terminated(0, false, t + 10ms);
  h.shared.put_truncated(0, false, t + 10ms);
  EXPECT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);
  EXPECT_EQ(c.wake(t + 110ms), Controller::Result::Waiting);  // no reward: a hold
  ASSERT_EQ(h.published.size(), 2u);
  ASSERT_TRUE(h.published[1].hold);
  // The hold's whole answer.
  h.state(0, 2.0, t + 120ms);
  h.shared.add_reward(0, 1, t + 120ms);
  h.shared.put_terminated(0, false, t + 120ms);
  h.shared.put_truncated(0, false, t + 120ms);
  // Then the simulator idles, republishing its state every 40 ms.
  bool stepped = false;
  for (int k = 1; k <= 25 && !stepped; k++) {
    const TimePoint at = t + 120ms + k * 40ms;
    h.state(0, 2.0, at);
    stepped = c.wake(at) == Controller::Result::Stepped;
  }
  EXPECT_TRUE(stepped) << "the step was never reported: 1 s of idle republishes";
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 2.0);
  EXPECT_EQ(h.published.back().command, (std::vector<double>{0.2}));
}

// The same for a robot that repeats its done flags while it idles (a
// status publisher on its own clock): a flag topic that is already ahead
// of the env's answers brings none, however often it repeats.
TEST(Controller, LockstepALostRewardIsRecoveredDespiteRepeatedFlags) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Lockstep, 100ms);
  Controller c = h.make(cfg, HoldMode::Zeros);
  h.state(0, 0, Clock::now());
  h.actions = {{0.1}, {0.2}};
  const TimePoint t = Clock::now();
  ASSERT_EQ(c.wake(t), Controller::Result::Stepped);  // 0.1
  h.state(0, 1.0, t + 10ms);  // its answer, but the reward is lost
  h.shared.put_terminated(0, false, t + 10ms);
  h.shared.put_truncated(0, false, t + 10ms);
  EXPECT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);
  EXPECT_EQ(c.wake(t + 110ms), Controller::Result::Waiting);  // no reward: a hold
  ASSERT_EQ(h.published.size(), 2u);
  ASSERT_TRUE(h.published[1].hold);
  h.step(0, 2.0, 1, false, false);  // the hold's whole answer
  const TimePoint answered = Clock::now();
  bool stepped = false;
  for (int k = 1; k <= 25 && !stepped; k++) {
    const TimePoint at = answered + k * 40ms;
    h.shared.put_terminated(0, false, at);
    h.shared.put_truncated(0, false, at);
    stepped = c.wake(at) == Controller::Result::Stepped;
  }
  EXPECT_TRUE(stepped) << "the step was never reported: 1 s of repeated flags";
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 2.0);
}

// An episode is a success when it lasted: truncated and not terminated.
// A robot may send both flags at one step (a fall on the last allowed
// step): that is a fall, not a success, in the report and the CSV.
TEST(Controller, LockstepBothFlagsAreNoSuccess) {
  Harness h(1);
  Controller c = h.make(config(1, Mode::Lockstep));
  h.state(0, 0, Clock::now());
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  h.step(0, 0.9, 0, true, true);
  EXPECT_EQ(c.wake(Clock::now()), Controller::Result::Waiting);  // reported; reset asked
  ASSERT_EQ(h.episodes.size(), 1u);
  EXPECT_FALSE(h.episodes[0].success);
  h.shared.put_reset_answer(0, true, Clock::now());
  h.state(0, 0, Clock::now());
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  h.step(0, 0.1, 1, false, true);  // truncated alone: it lasted
  c.wake(Clock::now());
  ASSERT_EQ(h.episodes.size(), 2u);
  EXPECT_TRUE(h.episodes[1].success);
}

TEST(Controller, TimerModeHoldsWhileAnEnvResetsWithoutWarning) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 1s);
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

// An env's episode can end while the node is not acting (its robot
// holding while another env resets, or while a stale observation or a
// waiting server holds every env): a robot that then goes quiet until its
// reset (as the README allows) left the act waiting for a fresh state of
// it that never comes, holding every env for good; its end was never
// reported, its reset never asked for (review). Its last state is used
// however old, as in the report, and the step after reports its end.
TEST(Controller, TimerModeAnEnvThatEndedWhileHoldingIsNotWaitedForEver) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 100ms);
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 5ms);  // env 0 ends: reported, its reset asked for
  h.shared.put_terminated(0, true, t + 5ms);
  h.state(1, 0.2, t + 5ms);
  ASSERT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);
  ASSERT_EQ(h.resets, (std::vector<std::size_t>{0}));
  // While env 0 resets, env 1 (holding) ends too, and goes quiet.
  h.state(1, 0.7, t + 20ms);
  h.shared.put_truncated(1, true, t + 20ms);
  // Env 0's reset is done 300 ms later.
  h.shared.put_reset_answer(0, true, t + 300ms);
  h.state(0, 0.0, t + 300ms);
  for (int tick = 0; tick < 5; tick++) {
    h.state(0, 0.0, t + 300ms + tick * 10ms);
    c.wake(t + 300ms + tick * 10ms);
  }
  ASSERT_EQ(h.resets, (std::vector<std::size_t>{0, 1})) << "env 1's end was never taken";
  // The step is reported once both have reset, with both ends.
  EXPECT_TRUE(h.reports.empty());
  h.shared.put_reset_answer(1, true, t + 350ms);
  h.state(0, 0.0, t + 351ms);
  h.state(1, 0.0, t + 351ms);
  EXPECT_EQ(c.wake(t + 360ms), Controller::Result::Stepped);
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(h.reports[0].truncated, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(h.reports[0].qpos0, 0.9);
  EXPECT_EQ(h.episodes.size(), 2u);
}

// cartpole_sim_node publishes a step's done flags before its state: a
// tick that drained the flags and not yet the state reported the state
// before the terminal one as the episode's final observation (review).
// The report waits for a state that came with or after the flag, up to
// state_after_signal_wait, publishing nothing meanwhile (the step's
// commands stand: nothing is stale); a robot that goes quiet at its end
// (one that publishes its state first, then a monitor's flag) is reported
// with its last state once the wait is over.
TEST(Controller, TimerModeReportsTheStateThatCameWithTheDoneFlag) {
  for (bool quiet : {false, true}) {
    Harness h(2);
    Controller::Config cfg = config(2, Mode::Timer, 1s);
    cfg.state_after_signal_wait = 20ms;
    Controller c = h.make(cfg);
    const TimePoint t = Clock::now();
    h.start(c, t);
    h.state(0, 0.5, t + 2ms);  // env 0's step before the last
    h.state(1, 0.2, t + 2ms);
    h.shared.put_terminated(0, true, t + 5ms);  // the flag; its state is still on its way
    h.published.clear();
    EXPECT_EQ(c.wake(t + 10ms), Controller::Result::Waiting) << quiet;
    EXPECT_TRUE(h.reports.empty()) << quiet;
    EXPECT_TRUE(h.published.empty()) << quiet;  // no hold: the observation is fresh
    if (!quiet) h.state(0, 0.9, t + 12ms);  // the terminal state
    const TimePoint next = quiet ? t + 30ms : t + 20ms;
    EXPECT_EQ(c.wake(next), Controller::Result::Waiting) << quiet;  // its end taken; env 0 resets
    EXPECT_EQ(h.resets, (std::vector<std::size_t>{0})) << quiet;
    h.shared.put_reset_answer(0, true, next + 1ms);
    h.state(0, 0.0, next + 2ms);
    h.state(1, 0.3, next + 2ms);
    EXPECT_EQ(c.wake(next + 10ms), Controller::Result::Stepped) << quiet;  // reported, then acted
    ASSERT_EQ(h.reports.size(), 1u) << quiet;
    EXPECT_EQ(h.reports[0].qpos0, quiet ? 0.5 : 0.9) << quiet;
    EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{1, 0})) << quiet;
    EXPECT_EQ(h.warnings, 0) << quiet;
  }
}

// The robot moves on while an env resets. A step that ended an episode
// used to be reported at once, and the next infer, after the reset, sent
// the other envs' newer states: the feedback's next state was not the
// state the next action was chosen on (`plugrl ledger audit`, SPEC 5.4,
// flagged every other env at every reset of the ROS 2 timer-mode run).
// The step is now reported after the reset, with the ended env's
// terminal state and the others' states of that moment, which the infer
// right after it sends too.
TEST(Controller, TimerModeFeedbackAndNextInferAgreeAcrossAReset) {
  Harness h(3);
  Controller::Config cfg = config(3, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 5ms;
  Controller c = h.make(cfg);
  TimePoint t = Clock::now();
  h.start(c, t);
  t += 10ms;
  h.state(0, 0.9, t);  // env 0's terminal state
  h.shared.put_terminated(0, true, t);
  h.state(1, 0.2, t);
  h.state(2, 0.3, t);
  ASSERT_EQ(c.wake(t + 1ms), Controller::Result::Waiting);  // env 0 resets; all hold
  for (int tick = 1; tick <= 5; tick++) {  // envs 1 and 2 move on under the hold
    h.state(1, 0.2 + 0.01 * tick, t + tick * 10ms);
    h.state(2, 0.3 + 0.01 * tick, t + tick * 10ms);
    ASSERT_EQ(c.wake(t + tick * 10ms + 1ms), Controller::Result::Waiting) << tick;
  }
  EXPECT_TRUE(h.reports.empty());
  t += 60ms;
  h.shared.put_reset_answer(0, true, t);
  h.state(0, 0.0, t + 1ms);
  h.state(1, 0.27, t + 1ms);
  h.state(2, 0.37, t + 1ms);
  ASSERT_EQ(c.wake(t + 10ms), Controller::Result::Stepped);
  ASSERT_EQ(h.reports.size(), 1u);
  ASSERT_EQ(h.acted_qpos.size(), 2u);
  const std::vector<double> &fed = h.reports[0].qpos, &acted = h.acted_qpos[1];
  EXPECT_EQ(fed[0], 0.9);    // env 0: its terminal state
  EXPECT_EQ(acted[0], 0.0);  // then the reset's
  EXPECT_EQ(fed[2], 0.27);   // env 1: the state the next action is chosen on
  EXPECT_EQ(acted[2], 0.27);
  EXPECT_EQ(fed[4], 0.37);   // env 2 too
  EXPECT_EQ(acted[4], 0.37);
  EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(h.episodes.size(), 1u);
  EXPECT_EQ(h.warnings, 0);
}

// rclcpp hands the node a batch of messages in its own order: the state
// a simulator sent after its flags (or before its reset's answer) is
// taken first, and stamped microseconds before its signal. Such a state
// counts as coming with the signal (signal_skew); waiting for a newer one
// cost every episode end and every reset a whole control period (at 5 Hz
// the ros2_nodes.sh stall run made 3 actions in 9 s).
TEST(Controller, TimerModeAStateHandledJustBeforeItsSignalCounts) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 200ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 10ms);  // the terminal state, handled first
  h.shared.put_terminated(0, true, t + 10ms + 50us);
  ASSERT_EQ(c.wake(t + 11ms), Controller::Result::Waiting);  // no wait for a later state: the reset is asked
  ASSERT_EQ(h.resets.size(), 1u);
  const TimePoint answered = t + 300ms;
  h.state(0, 0.0, answered - 50us);  // the reset's state, handled before the answer
  h.shared.put_reset_answer(0, true, answered);
  ASSERT_EQ(c.wake(answered + 1ms), Controller::Result::Stepped);
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 0.9);
  EXPECT_EQ(h.acted_qpos0.back(), 0.0);
}

// A robot that publishes faster than signal_skew (1 kHz here) has its
// state before the terminal one about a period ahead of the flag, within
// the skew: a tick between the flag and the terminal state reported that
// state as the episode's final observation. It does not count: it is
// nearer to the state before it than to the flag. The same holds for a
// reset's answer and the state before the reset's.
TEST(Controller, TimerModeAFastRobotsStateBeforeItsSignalDoesNotCount) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 100ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  TimePoint at = t;
  for (int i = 1; i <= 20; i++) h.state(0, 0.01 * i, at += 1ms);  // 0.20 the last before the end
  h.shared.put_terminated(0, true, at + 950us);  // the flag, its state 50 us behind it
  ASSERT_EQ(c.wake(at + 960us), Controller::Result::Waiting);
  EXPECT_TRUE(h.reports.empty());
  EXPECT_TRUE(h.resets.empty()) << "the end was taken on the state before the terminal one";
  h.state(0, 0.9, at + 1ms);  // the terminal state
  ASSERT_EQ(c.wake(at + 20ms), Controller::Result::Waiting);
  ASSERT_EQ(h.resets.size(), 1u);
  TimePoint answered = at + 300ms;
  for (at = at + 200ms; at < answered; at += 1ms) h.state(0, 0.95, at);  // the ended pose, at 1 kHz
  h.shared.put_reset_answer(0, true, answered);  // its state 50 us behind it
  EXPECT_EQ(c.wake(answered + 10us), Controller::Result::Waiting);
  h.state(0, 0.0, answered + 50us);  // the reset's state
  ASSERT_EQ(c.wake(answered + 20ms), Controller::Result::Stepped);
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 0.9);
  EXPECT_EQ(h.acted_qpos0.back(), 0.0);
  EXPECT_EQ(h.warnings, 0);
}

// Timer mode, max_episodes: envs that end at the run's last step need no
// reset, whichever of them reaches the limit. The ends were counted env
// by env, so an env before the one that reached max_episodes had its
// reset asked although the run finished at that step: the robot was sent
// into a reset (a motion) after the run was over.
TEST(Controller, TimerModeTheRunsLastStepAsksNoReset) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 1s);
  cfg.max_episodes = 2;
  cfg.state_after_signal_wait = 5ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 10ms);
  h.state(1, 0.8, t + 10ms);
  h.shared.put_terminated(0, true, t + 10ms);
  h.shared.put_terminated(1, true, t + 10ms);
  EXPECT_EQ(c.wake(t + 11ms), Controller::Result::Finished);
  EXPECT_EQ(c.episodes(), 2);
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{1, 1}));
  EXPECT_TRUE(h.resets.empty()) << "a reset was asked at the run's last step";
}

// SPEC 7.3: the server closes a connection whose feedback has not come
// 60 s after its action, and the feedback is lost (SPEC 7.6). Timer mode
// holds a step that ended an episode until the resets are done; a reset
// that takes long (a real robot's, one that fails until someone sees to
// it, one that is never answered) must not keep the step's feedback past
// that: it is reported by max_report_delay (30 s), and the resets are
// then waited for without a report owed.
TEST(Controller, TimerModeASlowResetDoesNotHoldTheFeedbackPastTheServersTimeout) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 5ms;
  cfg.reset_timeout = 5s;
  Controller c = h.make(cfg);
  TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 10ms);  // env 0's terminal state
  h.state(1, 0.2, t + 10ms);
  h.shared.put_terminated(0, true, t + 10ms);
  ASSERT_EQ(c.wake(t + 11ms), Controller::Result::Waiting);
  ASSERT_EQ(h.resets.size(), 1u);
  // The reset is never answered; the robot publishes all along.
  for (int s = 1; s <= 40; s++) {
    const TimePoint now = t + std::chrono::seconds(s);
    h.state(0, 0.9, now - 1ms);
    h.state(1, 0.2 + 0.001 * s, now - 1ms);
    EXPECT_NE(c.wake(now), Controller::Result::Stepped) << s;  // holding while env 0 resets
  }
  ASSERT_EQ(h.reports.size(), 1u) << "the step's feedback was still owed 40 s after its action";
  EXPECT_EQ(h.reports[0].qpos0, 0.9);  // env 0's terminal state
  EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(h.episodes.size(), 1u);
  EXPECT_EQ(c.phase(), Controller::Phase::Reset);
  EXPECT_EQ(h.acts, 1);
  // Reported, the step's commands no longer stand: every env holds until
  // the reset is done, as before the report.
  h.published.clear();
  h.state(0, 0.9, t + 40s + 500ms);
  h.state(1, 0.25, t + 40s + 500ms);
  EXPECT_EQ(c.wake(t + 40s + 500ms), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 2u) << "no hold while env 0 resets, after the report";
  EXPECT_TRUE(h.published[0].hold);
  EXPECT_TRUE(h.published[1].hold);
  // The reset completes: the next act follows, with no second report.
  const TimePoint answered = t + 41s;
  h.shared.put_reset_answer(0, true, answered);
  h.state(0, 0.0, answered + 1ms);
  h.state(1, 0.3, answered + 1ms);
  EXPECT_EQ(c.wake(answered + 10ms), Controller::Result::Stepped);
  EXPECT_EQ(h.acts, 2);
  EXPECT_EQ(h.acted_qpos0.back(), 0.0);
  EXPECT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.episodes.size(), 1u);
}

// While one env resets every env holds at each tick; a tick that waited
// for another env's state after its done flag published nothing (review).
TEST(Controller, TimerModeHoldsWhileAnotherEndWaitsForItsState) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 50ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 5ms);
  h.shared.put_terminated(0, true, t + 5ms);
  h.state(1, 0.2, t + 5ms);
  ASSERT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);  // env 0 resets
  ASSERT_EQ(c.phase(), Controller::Phase::Reset);
  h.shared.put_truncated(1, true, t + 15ms);  // env 1 ends; its state still on its way
  h.published.clear();
  EXPECT_EQ(c.wake(t + 20ms), Controller::Result::Waiting);
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_TRUE(h.published[0].hold);
  EXPECT_TRUE(h.published[1].hold);
  EXPECT_EQ(h.warnings, 0);
}

// A robot on a clock publishes all along: a state sent after the reset
// request but before the reset, or a reset's answer that overtakes the
// reset's own state, began the next episode on the last one's state
// (review). The first act waits for a state that came after the answer,
// up to state_after_signal_wait, then takes the newest one after the
// request.
TEST(Controller, TimerModeTheNextEpisodeStartsOnTheResetsState) {
  for (bool late_state : {true, false}) {
    Harness h(1);
    Controller::Config cfg = config(1, Mode::Timer, 1s);
    cfg.state_after_signal_wait = 20ms;
    Controller c = h.make(cfg);
    const TimePoint t = Clock::now();
    h.start(c, t);
    h.state(0, 0.9, t + 5ms);
    h.shared.put_terminated(0, true, t + 5ms);
    ASSERT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);  // reported; reset asked
    ASSERT_EQ(h.resets.size(), 1u);
    const TimePoint answered = t + 300ms;  // after the request, which went out at about t
    h.state(0, 0.95, answered - 5ms);       // still the ended episode's pose
    h.shared.put_reset_answer(0, true, answered);
    h.reports.clear();
    EXPECT_EQ(c.wake(answered + 1ms), Controller::Result::Waiting) << late_state;
    EXPECT_EQ(h.acts, 1) << late_state;
    if (late_state) h.state(0, 0.0, answered + 2ms);  // the reset's state
    ASSERT_EQ(c.wake(answered + 25ms), Controller::Result::Stepped) << late_state;
    EXPECT_EQ(h.acts, 2) << late_state;
    EXPECT_EQ(h.acted_qpos0.back(), late_state ? 0.0 : 0.95) << late_state;
  }
}

// A reset request the robot never answers (lost on the way, a service
// that was down) is asked again after reset_timeout, and not before:
// without it the envs held for good. Each end asks for one reset.
TEST(Controller, TimerModeAnUnansweredResetIsAskedAgainAfterTheTimeout) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 5ms;
  cfg.reset_timeout = 2s;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();  // the request goes out at about t
  h.start(c, t);
  h.state(0, 0.9, t + 5ms);
  h.shared.put_terminated(0, true, t + 5ms);
  ASSERT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);
  ASSERT_EQ(h.resets, (std::vector<std::size_t>{0}));
  h.state(0, 0.9, t + 1s);  // the robot publishes all along
  EXPECT_EQ(c.wake(t + 1s), Controller::Result::Waiting);
  EXPECT_EQ(h.resets.size(), 1u) << "asked again before reset_timeout";
  h.state(0, 0.9, t + 3s);
  EXPECT_EQ(c.wake(t + 3s), Controller::Result::Waiting);
  EXPECT_EQ(h.resets, (std::vector<std::size_t>{0, 0})) << "an unanswered reset was never asked again";
  EXPECT_EQ(h.warnings, 1);
  // The second request is answered: the step is reported, the run goes on.
  h.shared.put_reset_answer(0, true, t + 3s + 100ms);
  h.state(0, 0.0, t + 3s + 101ms);
  EXPECT_EQ(c.wake(t + 3s + 110ms), Controller::Result::Stepped);
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].qpos0, 0.9);
  EXPECT_EQ(h.acted_qpos0.back(), 0.0);
  EXPECT_EQ(h.resets.size(), 2u);
}

// A reset that fails (its service says so) is asked again, but at most
// once a second: a robot whose reset fails at once was otherwise sent a
// request at every tick.
TEST(Controller, TimerModeAFailedResetIsAskedAgainOnceASecond) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 5ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();  // the request goes out at about t
  h.start(c, t);
  h.state(0, 0.9, t + 5ms);
  h.shared.put_terminated(0, true, t + 5ms);
  ASSERT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);
  ASSERT_EQ(h.resets.size(), 1u);
  h.shared.put_reset_answer(0, false, t + 50ms);
  for (int tick = 0; tick < 5; tick++) {
    h.state(0, 0.9, t + 60ms + tick * 10ms);
    EXPECT_EQ(c.wake(t + 60ms + tick * 10ms), Controller::Result::Waiting);
  }
  EXPECT_EQ(h.resets.size(), 1u) << "a failed reset was asked again in a tight loop";
  EXPECT_EQ(h.acts, 1);
  h.state(0, 0.9, t + 3s);
  EXPECT_EQ(c.wake(t + 3s), Controller::Result::Waiting);
  EXPECT_EQ(h.resets.size(), 2u);
  EXPECT_EQ(h.errors, 1);
  EXPECT_EQ(h.acts, 1);
}

// A robot may repeat its done flags until it is reset (cartpole_sim
// answers a done env with its flags again). Those that come while the env
// resets belong to the ended episode: the first step of the next one must
// not report them again, as a second, one-step episode (and a second
// reset).
TEST(Controller, TimerModeFlagsRepeatedDuringAResetEndNoNewEpisode) {
  Harness h(1);
  Controller::Config cfg = config(1, Mode::Timer, 1s);
  cfg.state_after_signal_wait = 5ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.9, t + 5ms);
  h.shared.put_terminated(0, true, t + 5ms);
  ASSERT_EQ(c.wake(t + 10ms), Controller::Result::Waiting);
  ASSERT_EQ(h.resets.size(), 1u);
  h.shared.put_terminated(0, true, t + 20ms);  // repeated while it resets
  h.shared.add_reward(0, 0, t + 20ms);
  h.state(0, 0.9, t + 20ms);
  h.shared.put_reset_answer(0, true, t + 30ms);
  h.state(0, 0.0, t + 31ms);
  ASSERT_EQ(c.wake(t + 40ms), Controller::Result::Stepped);  // reported, then acts
  ASSERT_EQ(h.reports.size(), 1u);
  EXPECT_EQ(h.reports[0].terminated, (std::vector<uint8_t>{1}));
  // The next episode's first step.
  h.state(0, 0.01, t + 50ms);
  h.shared.add_reward(0, 1, t + 50ms);
  h.shared.put_terminated(0, false, t + 50ms);
  EXPECT_EQ(c.wake(t + 60ms), Controller::Result::Stepped);
  ASSERT_EQ(h.reports.size(), 2u);
  EXPECT_EQ(h.reports[1].terminated, (std::vector<uint8_t>{0}));
  EXPECT_EQ(h.reports[1].rewards, (std::vector<double>{1}));
  EXPECT_EQ(h.episodes.size(), 1u);
  EXPECT_EQ(h.resets.size(), 1u);
}

// An env's done flag can come while the node holds in the Act phase (here:
// the server's call failed) from a robot that then goes quiet until its
// reset. The act takes its last state however old, and the step after
// reports the end and asks for the reset; judged stale, it held every env
// for good, its reset never asked for.
TEST(Controller, TimerModeAnEnvThatEndedBeforeTheActIsNotWaitedFor) {
  Harness h(2);
  Controller::Config cfg = config(2, Mode::Timer, 100ms);
  cfg.state_after_signal_wait = 5ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  h.start(c, t);
  h.state(0, 0.1, t + 8ms);
  h.state(1, 0.1, t + 8ms);
  h.in_act = [] { throw plugrl::Error(PLUGRL_SERVER_ERROR, "server error"); };
  EXPECT_THROW(c.wake(t + 10ms), plugrl::Error);  // reported; no action
  ASSERT_EQ(c.phase(), Controller::Phase::Act);
  h.in_act = nullptr;
  h.state(0, 0.9, t + 20ms);  // env 0 ends and goes quiet
  h.shared.put_terminated(0, true, t + 20ms);
  h.state(1, 0.2, t + 300ms);
  EXPECT_EQ(c.wake(t + 300ms), Controller::Result::Stepped) << "held for env 0's state, which never comes";
  h.state(1, 0.3, t + 310ms);
  EXPECT_EQ(c.wake(t + 320ms), Controller::Result::Waiting);  // the end is taken; env 0 resets
  EXPECT_EQ(h.resets, (std::vector<std::size_t>{0}));
}

namespace {

// The cartpole's sources and an instruction (source 2).
std::vector<SourceSpec> sources_with_text() {
  std::vector<SourceSpec> v = cartpole_sources();
  SourceSpec text;
  text.name = "instruction";
  text.topic = "instruction";
  text.kind = SourceKind::Text;
  v.push_back(text);
  EXPECT_EQ(normalize_sources(v), "");
  return v;
}

}  // namespace

// An instruction is published when it changes, not at the robot's rate
// (the README's arm example has one): published once, it made every tick
// stale after max_obs_age, holding for good (review). It is context: its
// latest value is used however old, and a reset or a done flag does not
// wait for a new one.
TEST(Controller, TimerModeAnInstructionPublishedOnceIsNeverStale) {
  Harness h(1, sources_with_text());
  Controller::Config cfg = config(1, Mode::Timer, 100ms);
  cfg.state_after_signal_wait = 20ms;
  Controller c = h.make(cfg);
  const TimePoint t = Clock::now();
  ASSERT_EQ(h.shared.put_text(2, 0, "balance the pole", t), "");
  for (int tick = 0; tick < 50; tick++) {  // 500 ms of 10 ms ticks
    h.state(0, 0.01 * tick, t + tick * 10ms);
    ASSERT_EQ(c.wake(t + tick * 10ms), Controller::Result::Stepped) << tick;
  }
  EXPECT_EQ(c.holds(), 0u);
  // An episode ends and resets; the instruction stays what it was.
  const TimePoint end = t + 500ms;
  h.state(0, 0.9, end);
  h.shared.put_terminated(0, true, end);
  ASSERT_EQ(c.wake(end + 1ms), Controller::Result::Waiting);  // reported at once: the state is there
  ASSERT_EQ(h.resets.size(), 1u);
  h.shared.put_reset_answer(0, true, end + 5ms);
  h.state(0, 0.0, end + 6ms);
  ASSERT_EQ(c.wake(end + 10ms), Controller::Result::Stepped);
  EXPECT_EQ(h.acted_qpos0.back(), 0.0);
  EXPECT_EQ(h.episodes.size(), 1u);
  EXPECT_EQ(h.warnings, 0);
}

// In lockstep an instruction published once is no answer to a command:
// the step is complete when the state and the signals have answered it
// (a text published once had left every step waiting, then holding).
TEST(Controller, LockstepAnInstructionIsNoAnswer) {
  Harness h(1, sources_with_text());
  Controller c = h.make(config(1, Mode::Lockstep, 50ms));
  ASSERT_EQ(h.shared.put_text(2, 0, "balance the pole", Clock::now()), "");
  h.state(0, 0, Clock::now());
  ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped);
  for (int k = 1; k <= 20; k++) {
    h.step(0, 0.01 * k, 1, false, false);
    ASSERT_EQ(c.wake(Clock::now()), Controller::Result::Stepped) << k;
  }
  EXPECT_EQ(h.reports.size(), 20u);
  EXPECT_EQ(c.holds(), 0u);
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
  Controller::Config cfg = config(2, Mode::Lockstep, 10s);
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
  Controller::Config cfg = config(1, Mode::Lockstep);
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
  Controller::Config cfg = config(1, Mode::Timer, 100ms);
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

// With hold: zeros, a hold's trajectory is zeros too: a trajectory
// controller that follows the trajectory topic must stop with the
// command topic, not go on with the last action.
TEST(Controller, AZerosHoldsTrajectoryIsZeros) {
  ChunkHarness c(1, 1, {{0.5, 0.6, 0.7, 0.8}});
  Controller::Config cfg = config(1, Mode::Timer, 100ms);
  cfg.trajectory_period = 10ms;
  Controller ctl = c.make(cfg, true, CommandBook(1, HoldMode::Zeros));
  const TimePoint t = Clock::now();
  c.h.state(0, 0, t);
  ASSERT_EQ(ctl.wake(t), Controller::Result::Stepped);
  c.trajectories.clear();
  EXPECT_EQ(ctl.wake(t + 500ms), Controller::Result::Waiting);  // stale: hold
  ASSERT_EQ(c.trajectories.size(), 1u);
  EXPECT_TRUE(c.trajectories[0].hold);
  ASSERT_EQ(c.trajectories[0].points.size(), 1u);
  EXPECT_EQ(c.trajectories[0].points[0].values, (std::vector<double>{0.0}));
  EXPECT_EQ(ctl.trajectory(0)[0].values, (std::vector<double>{0.0}));
}

TEST(Controller, TrajectoryWithoutAChunkIsTheCommand) {
  // No chunk hook (or one that fails): the command alone, and a warning
  // when reading the chunk failed.
  {
    ChunkHarness c(1, 1, {{0.5, 0.6}});
    Controller::Config cfg = config(1, Mode::Lockstep);
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
    Controller::Config cfg = config(1, Mode::Lockstep);
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
    Controller::Config cfg = config(1, Mode::Lockstep);
    Controller ctl = c.make(cfg);
    c.h.state(0, 0, Clock::now());
    ASSERT_EQ(ctl.wake(Clock::now()), Controller::Result::Stepped);
    ASSERT_EQ(ctl.trajectory(0).size(), 1u);
    EXPECT_EQ(ctl.trajectory(0)[0].values, (std::vector<double>{0.5, 0.6}));
    EXPECT_EQ(c.warnings, 1);
  }
}
