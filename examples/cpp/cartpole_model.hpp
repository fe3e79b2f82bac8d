// cartpole_model.hpp - the MuJoCo cartpole of the C++ demo
// (mujoco_cartpole.cpp) and of the ROS 2 simulator (examples/ros2,
// cartpole_sim_node): one model, one set of rules, one seeded generator, so
// that the two learn the same task.
//
// A cart on a frictionless slider with a 1 m pole on a hinge, one actuator
// pushing the cart with up to 10 N (control in [-1, 1], clamped by MuJoCo),
// 0.01 s per step. The pole has fallen past kMaxAngle rad, the cart has
// left the track past kMaxX m; a reset puts every coordinate at a random
// value in [-kResetNoise, kResetNoise].
#ifndef PLUGRL_CARTPOLE_MODEL_HPP
#define PLUGRL_CARTPOLE_MODEL_HPP

#include <mujoco/mujoco.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace plugrl_cartpole {

// The model. MuJoCo 2.2 loads only from files, so it is handed over as a
// file of a virtual file system.
constexpr const char *kModel = R"(<mujoco model="cartpole">
  <compiler angle="radian"/>
  <option timestep="0.01" gravity="0 0 -9.81"/>
  <default>
    <geom contype="0" conaffinity="0"/>
  </default>
  <worldbody>
    <body name="cart">
      <joint name="slider" type="slide" axis="1 0 0"/>
      <geom name="cart" type="box" size="0.2 0.15 0.1" mass="1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom name="pole" type="capsule" fromto="0 0 0 0 0 1" size="0.045" mass="0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="slider" gear="10" ctrllimited="true" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
)";

constexpr double kMaxAngle = 0.2;  // rad: past this the pole has fallen
constexpr double kMaxX = 2.4;      // m: past this the cart has left the track
constexpr double kResetNoise = 0.05;

// splitmix64: a small seeded generator whose sequence is the same
// everywhere (std:: distributions are not).
struct Rng {
  uint64_t s;
  double uniform(double lo, double hi) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

struct ModelDeleter {
  void operator()(mjModel *m) const { mj_deleteModel(m); }
};
struct DataDeleter {
  void operator()(mjData *d) const { mj_deleteData(d); }
};

// Loads kModel through a virtual file system.
inline std::unique_ptr<mjModel, ModelDeleter> load_model() {
  auto vfs = std::make_unique<mjVFS>();  // large: keep it off the stack
  mj_defaultVFS(vfs.get());
  const char *name = "cartpole.xml";
  const int size = static_cast<int>(std::strlen(kModel));
  if (mj_makeEmptyFileVFS(vfs.get(), name, size) != 0) throw std::runtime_error("mj_makeEmptyFileVFS failed");
  int f = mj_findFileVFS(vfs.get(), name);
  std::memcpy(vfs->filedata[f], kModel, static_cast<std::size_t>(size));
  char err[1000] = "";
  mjModel *m = mj_loadXML(name, vfs.get(), err, sizeof err);
  mj_deleteVFS(vfs.get());
  if (!m) throw std::runtime_error(std::string("mj_loadXML: ") + err);
  return std::unique_ptr<mjModel, ModelDeleter>(m);
}

}  // namespace plugrl_cartpole

#endif  // PLUGRL_CARTPOLE_MODEL_HPP
