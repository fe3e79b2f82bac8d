// Unit tests of the simulator's physics (cartpole_sim.hpp), without ROS.
#include "plugrl_ros2/cartpole_sim.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using plugrl_ros2::CartpoleSim;

TEST(CartpoleSim, ResetStatesAreSmallAndSeeded) {
  CartpoleSim a(3, 500, 7), b(3, 500, 7), c(3, 500, 8);
  for (std::size_t i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) {
      EXPECT_LE(std::fabs(a.qpos(i, j)), 0.05);
      EXPECT_LE(std::fabs(a.qvel(i, j)), 0.05);
      EXPECT_EQ(a.qpos(i, j), b.qpos(i, j));
    }
  EXPECT_NE(a.qpos(0, 0), c.qpos(0, 0));
  EXPECT_NE(a.qpos(0, 0), a.qpos(1, 0));  // each env its own stream
  EXPECT_STREQ(CartpoleSim::joint_name(0), "slider");
  EXPECT_STREQ(CartpoleSim::joint_name(1), "hinge");
}

TEST(CartpoleSim, PushingOneWayDropsThePoleAndTheEnvWaitsForAReset) {
  CartpoleSim sim(1, 500, 1);
  int steps = 0;
  CartpoleSim::Step s{};
  while (steps < 500) {
    s = sim.step(0, 1.0);
    steps++;
    if (s.terminated) break;
  }
  EXPECT_TRUE(s.terminated);
  EXPECT_EQ(s.reward, 0.0);
  EXPECT_LT(steps, 200);
  EXPECT_TRUE(sim.done(0));
  EXPECT_GT(std::fabs(sim.force(0)), 0.0);
  // A done env does not move until reset.
  const double x = sim.qpos(0, 0);
  CartpoleSim::Step again = sim.step(0, 1.0);
  EXPECT_TRUE(again.terminated);
  EXPECT_EQ(sim.qpos(0, 0), x);
  EXPECT_EQ(sim.steps(0), steps);
  sim.reset(0);
  EXPECT_FALSE(sim.done(0));
  EXPECT_EQ(sim.steps(0), 0);
}

TEST(CartpoleSim, TruncatedAtMaxSteps) {
  CartpoleSim sim(1, 3, 1);
  EXPECT_EQ(sim.step(0, 0).reward, 1.0);
  EXPECT_FALSE(sim.step(0, 0).truncated);
  CartpoleSim::Step s = sim.step(0, std::nan(""));
  EXPECT_TRUE(s.truncated);
  EXPECT_FALSE(s.terminated);
  EXPECT_EQ(s.reward, 1.0);
}

// A truncated env, like a terminated one, does not move until reset: the
// robot's last state is the episode's final observation, however many
// commands (holds) come while its reset is on the way.
TEST(CartpoleSim, ATruncatedEnvWaitsForAReset) {
  CartpoleSim sim(1, 2, 1);
  sim.step(0, 0.5);
  ASSERT_TRUE(sim.step(0, 0.5).truncated);
  const double x = sim.qpos(0, 0), v = sim.qvel(0, 0);
  const CartpoleSim::Step again = sim.step(0, 1.0);
  EXPECT_TRUE(again.truncated);
  EXPECT_EQ(again.reward, 0.0);
  EXPECT_EQ(sim.qpos(0, 0), x);
  EXPECT_EQ(sim.qvel(0, 0), v);
  EXPECT_EQ(sim.steps(0), 2);
}

// An episode that ends by the pole falling on its last allowed step is
// terminated, not truncated: success (truncated and not terminated) would
// otherwise count a fall as an episode that lasted.
TEST(CartpoleSim, AFallOnTheLastStepIsNotATruncation) {
  int64_t fall = 0;
  {
    CartpoleSim sim(1, 500, 1);
    while (fall < 500 && !sim.step(0, 1.0).terminated) fall++;
    fall++;  // the step that fell
  }
  ASSERT_LT(fall, 200);
  CartpoleSim sim(1, fall, 1);  // the same start: the fall is the last step
  CartpoleSim::Step s{};
  for (int64_t k = 0; k < fall; k++) s = sim.step(0, 1.0);
  EXPECT_TRUE(s.terminated);
  EXPECT_FALSE(s.truncated);
}

// A non-finite command is no push: it moves the cart as 0 does, and never
// reaches MuJoCo (whose state a NaN control would poison).
TEST(CartpoleSim, ANonFiniteCommandIsZero) {
  CartpoleSim a(1, 500, 3), b(1, 500, 3);
  for (int k = 0; k < 5; k++) {
    a.step(0, std::nan(""));
    b.step(0, 0.0);
  }
  a.step(0, std::numeric_limits<double>::infinity());
  b.step(0, 0.0);
  for (int j = 0; j < 2; j++) {
    EXPECT_EQ(a.qpos(0, j), b.qpos(0, j));
    EXPECT_EQ(a.qvel(0, j), b.qvel(0, j));
  }
}
