// cartpole_sim.cpp - see include/plugrl_ros2/cartpole_sim.hpp.
#include "plugrl_ros2/cartpole_sim.hpp"

#include "cartpole_model.hpp"  // examples/cpp: the demo's model and rules

#include <cmath>
#include <stdexcept>

namespace plugrl_ros2 {

using namespace plugrl_cartpole;

struct CartpoleSim::Impl {
  int64_t max_steps;
  std::unique_ptr<mjModel, ModelDeleter> model;
  struct Env {
    std::unique_ptr<mjData, DataDeleter> data;
    Rng rng;
    int64_t t = 0;
    bool terminated = false, truncated = false;
  };
  std::vector<Env> envs;
};

CartpoleSim::CartpoleSim(std::size_t num_envs, int64_t max_steps, uint64_t seed) : impl_(std::make_unique<Impl>()) {
  impl_->max_steps = max_steps;
  impl_->model = load_model();
  const mjModel *m = impl_->model.get();
  if (m->nq != 2 || m->nv != 2 || m->nu != 1) throw std::runtime_error("the cartpole model is not 2 dof, 1 actuator");
  impl_->envs.resize(num_envs);
  for (std::size_t i = 0; i < num_envs; i++) {
    auto &e = impl_->envs[i];
    e.data.reset(mj_makeData(m));
    if (!e.data) throw std::runtime_error("mj_makeData failed");
    // One stream per env: seed and env index through splitmix64's mixer.
    e.rng = Rng{seed * 0x9e3779b97f4a7c15ULL + 0xbf58476d1ce4e5b9ULL * (i + 1)};
    reset(i);
  }
}

CartpoleSim::~CartpoleSim() = default;

CartpoleSim::Step CartpoleSim::step(std::size_t env, double u) {
  Impl::Env &e = impl_->envs.at(env);
  if (e.terminated || e.truncated) return Step{0.0, e.terminated, e.truncated};
  mjData *d = e.data.get();
  d->ctrl[0] = std::isfinite(u) ? u : 0.0;  // MuJoCo clamps to ctrlrange
  mj_step(impl_->model.get(), d);
  e.t++;
  const bool fallen = !(std::fabs(d->qpos[1]) <= kMaxAngle && std::fabs(d->qpos[0]) <= kMaxX);
  e.terminated = fallen;
  e.truncated = !fallen && e.t >= impl_->max_steps;
  return Step{fallen ? 0.0 : 1.0, e.terminated, e.truncated};
}

void CartpoleSim::reset(std::size_t env) {
  Impl::Env &e = impl_->envs.at(env);
  mjData *d = e.data.get();
  mj_resetData(impl_->model.get(), d);
  for (int j = 0; j < 2; j++) {
    d->qpos[j] = e.rng.uniform(-kResetNoise, kResetNoise);
    d->qvel[j] = e.rng.uniform(-kResetNoise, kResetNoise);
  }
  mj_forward(impl_->model.get(), d);
  e.t = 0;
  e.terminated = e.truncated = false;
}

std::size_t CartpoleSim::size() const noexcept { return impl_->envs.size(); }
bool CartpoleSim::done(std::size_t env) const {
  const auto &e = impl_->envs.at(env);
  return e.terminated || e.truncated;
}
int64_t CartpoleSim::steps(std::size_t env) const { return impl_->envs.at(env).t; }
double CartpoleSim::qpos(std::size_t env, int j) const { return impl_->envs.at(env).data->qpos[j]; }
double CartpoleSim::qvel(std::size_t env, int j) const { return impl_->envs.at(env).data->qvel[j]; }
double CartpoleSim::force(std::size_t env) const {
  // The actuator's force on the slider: ctrl (clamped) times the gear.
  return impl_->envs.at(env).data->actuator_force[0];
}
const char *CartpoleSim::joint_name(int j) { return j == 0 ? "slider" : "hinge"; }

}  // namespace plugrl_ros2
