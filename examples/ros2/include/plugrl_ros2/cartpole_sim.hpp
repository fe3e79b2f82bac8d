// cartpole_sim.hpp - N MuJoCo cartpoles, without ROS: the physics of
// cartpole_sim_node, with the model and rules of the C++ demo
// (examples/cpp/cartpole_model.hpp), unit-tested in test/test_cartpole_sim.cpp.
#ifndef PLUGRL_ROS2_CARTPOLE_SIM_HPP
#define PLUGRL_ROS2_CARTPOLE_SIM_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace plugrl_ros2 {

class CartpoleSim {
 public:
  // num_envs cartpoles whose episodes are truncated after max_steps steps;
  // env i's resets draw from a generator seeded by (seed, i), so an env's
  // start states do not depend on the order its resets come in.
  CartpoleSim(std::size_t num_envs, int64_t max_steps, uint64_t seed);
  ~CartpoleSim();
  CartpoleSim(const CartpoleSim &) = delete;
  CartpoleSim &operator=(const CartpoleSim &) = delete;

  struct Step {
    double reward;  // 1 while the pole is up after the step, else 0
    bool terminated;
    bool truncated;
  };
  // One 0.01 s step of env i with control u in [-1, 1] (clamped; a
  // non-finite u counts as 0). An env whose episode ended does not move
  // until reset: it answers with reward 0 and its done flags again.
  Step step(std::size_t env, double u);
  // A new episode for env: every coordinate uniform in [-0.05, 0.05].
  void reset(std::size_t env);

  std::size_t size() const noexcept;
  bool done(std::size_t env) const;
  int64_t steps(std::size_t env) const;
  // [cart position m, pole angle rad] and their rates; the last force (N).
  double qpos(std::size_t env, int j) const;
  double qvel(std::size_t env, int j) const;
  double force(std::size_t env) const;
  // The joint names of the model, in qpos order.
  static const char *joint_name(int j);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugrl_ros2

#endif  // PLUGRL_ROS2_CARTPOLE_SIM_HPP
