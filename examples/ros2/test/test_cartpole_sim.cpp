// Unit tests of the simulator's physics (cartpole_sim.hpp), without ROS.
#include "plugrl_ros2/cartpole_sim.hpp"

#include <gtest/gtest.h>

#include <cmath>

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
