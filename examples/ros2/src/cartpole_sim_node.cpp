// cartpole_sim_node - a simulated robot for plugrl_env_node: N MuJoCo
// cartpoles (the C++ demo's model and rules, examples/cpp/cartpole_model.hpp).
//
// Per cartpole i, in namespace <env_prefix><i> (e.g. cart_0/):
//   publishes  joint_states  sensor_msgs/JointState  slider and hinge:
//                            position, velocity, effort (the actuator's force)
//              reward        std_msgs/Float64  1 while the pole is up
//              terminated    std_msgs/Bool     the pole fell / the cart left the track
//              truncated     std_msgs/Bool     max_steps reached (the episode lasted)
//   subscribes effort        std_msgs/Float64MultiArray  data[0]: the push in [-1, 1]
//   offers     reset         std_srvs/Trigger  a new episode for that cartpole
//
// step_on_command (default): each effort message steps its cartpole once
// (0.01 s) and then publishes reward, terminated, truncated and the joint
// state: a lockstep env whose speed is the controller's, deterministic for
// a seed. Otherwise a wall timer at rate_hz steps every cartpole with its
// latest effort, as a real robot runs. A cartpole whose episode ended stays
// still until reset; on command it answers with its terminal state and
// flags, on a clock it publishes nothing.
// The joint state is also republished every idle_publish_s while nothing
// happens, so a controller started late gets its first observation.
// reset_delay_s > 0 makes each reset take that long, as a robot homing
// does: the service answers when it is done, a request that comes
// meanwhile runs after it (as a real service queues requests), and effort
// commands that come meanwhile are ignored. Both are counted and logged
// as warnings, with a total at exit: a controller should do neither.
// reset_restarts N > 0 makes the first N reset requests crash the reset
// service: it goes away unanswered and comes back 0.5 s later, as a
// respawned reset server does; the controller has to ask again.
#include "plugrl_ros2/cartpole_sim.hpp"

#include <rclcpp/rclcpp.hpp>
#include <sensor_msgs/msg/joint_state.hpp>
#include <std_msgs/msg/bool.hpp>
#include <std_msgs/msg/float64.hpp>
#include <std_msgs/msg/float64_multi_array.hpp>
#include <std_srvs/srv/trigger.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace plugrl_ros2 {

class CartpoleSimNode : public rclcpp::Node {
 public:
  explicit CartpoleSimNode(const rclcpp::NodeOptions &options = rclcpp::NodeOptions())
      : rclcpp::Node("cartpole_sim_node", options) {
    const int64_t n = declare_parameter<int64_t>("num_envs", 8);
    const std::string prefix = declare_parameter<std::string>("env_prefix", "cart_");
    const int64_t seed = declare_parameter<int64_t>("seed", 1);
    const int64_t max_steps = declare_parameter<int64_t>("max_steps", 500);
    step_on_command_ = declare_parameter<bool>("step_on_command", true);
    const double rate_hz = declare_parameter<double>("rate_hz", 100.0);
    const double idle_s = declare_parameter<double>("idle_publish_s", 0.5);
    reset_delay_s_ = declare_parameter<double>("reset_delay_s", 0.0);
    const int64_t restarts = declare_parameter<int64_t>("reset_restarts", 0);
    if (restarts < 0) throw std::invalid_argument("reset_restarts must be >= 0");
    restarts_left_ = static_cast<uint64_t>(restarts);
    if (!(reset_delay_s_ >= 0 && reset_delay_s_ <= 3600))
      throw std::invalid_argument("reset_delay_s must be in [0, 3600]");
    if (n < 1 || n > 4096) throw std::invalid_argument("num_envs must be in [1, 4096]");
    if (max_steps < 1) throw std::invalid_argument("max_steps must be >= 1");

    sim_ = std::make_unique<CartpoleSim>(static_cast<std::size_t>(n), max_steps, static_cast<uint64_t>(seed));
    envs_.resize(static_cast<std::size_t>(n));
    rclcpp::QoS qos(10);
    for (std::size_t i = 0; i < envs_.size(); i++) {
      const std::string ns = prefix.empty() && n == 1 ? "" : prefix + std::to_string(i) + "/";
      Env &e = envs_[i];
      e.joint_states = create_publisher<sensor_msgs::msg::JointState>(ns + "joint_states", qos);
      e.reward = create_publisher<std_msgs::msg::Float64>(ns + "reward", qos);
      e.terminated = create_publisher<std_msgs::msg::Bool>(ns + "terminated", qos);
      e.truncated = create_publisher<std_msgs::msg::Bool>(ns + "truncated", qos);
      e.effort = create_subscription<std_msgs::msg::Float64MultiArray>(
          ns + "effort", qos, [this, i](std::shared_ptr<const std_msgs::msg::Float64MultiArray> m) {
            on_effort(i, m->data.empty() ? 0.0 : m->data[0]);
          });
      e.ns = ns;
      make_reset_service(i);
    }
    if (!step_on_command_) {
      if (rate_hz <= 0) throw std::invalid_argument("rate_hz must be > 0 without step_on_command");
      step_timer_ = create_wall_timer(std::chrono::nanoseconds(static_cast<int64_t>(1e9 / rate_hz)),
                                      [this] { step_all(); });
    }
    if (idle_s > 0)
      idle_timer_ = create_wall_timer(std::chrono::nanoseconds(static_cast<int64_t>(idle_s * 1e9)), [this, idle_s] {
        const auto now = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < envs_.size(); i++)
          if (envs_[i].resets_waiting.empty() && now - envs_[i].last_publish > std::chrono::duration<double>(idle_s))
            publish_state(i);
      });
    for (std::size_t i = 0; i < envs_.size(); i++) publish_state(i);
    RCLCPP_INFO(get_logger(), "%lld MuJoCo cartpoles (%s), episodes of at most %lld steps, seed %lld",
                static_cast<long long>(n), step_on_command_ ? "a step per effort command" : "stepped by a timer",
                static_cast<long long>(max_steps), static_cast<long long>(seed));
  }

 private:
  struct Env {
    rclcpp::Publisher<sensor_msgs::msg::JointState>::SharedPtr joint_states;
    rclcpp::Publisher<std_msgs::msg::Float64>::SharedPtr reward;
    rclcpp::Publisher<std_msgs::msg::Bool>::SharedPtr terminated, truncated;
    rclcpp::Subscription<std_msgs::msg::Float64MultiArray>::SharedPtr effort;
    rclcpp::Service<std_srvs::srv::Trigger>::SharedPtr reset;
    double command = 0;
    std::chrono::steady_clock::time_point last_publish{};
    std::deque<rmw_request_id_t> resets_waiting;  // the first one is running
    rclcpp::TimerBase::SharedPtr homing, restart;
    std::string ns;
  };

  // The answer is deferred (sent by finish_reset), so that a reset can
  // take reset_delay_s without blocking the other cartpoles.
  void make_reset_service(std::size_t i) {
    envs_[i].reset = create_service<std_srvs::srv::Trigger>(
        envs_[i].ns + "reset", [this, i](std::shared_ptr<rmw_request_id_t> header,
                                         std::shared_ptr<std_srvs::srv::Trigger::Request>) { on_reset(i, *header); });
  }

  // A reset request: at once without reset_delay_s, else after it,
  // behind the resets that cartpole still has to do; or, while
  // reset_restarts lasts, the service's crash.
  void on_reset(std::size_t i, const rmw_request_id_t &header) {
    Env &e = envs_[i];
    if (restarts_left_ > 0 && e.resets_waiting.empty()) {
      restarts_left_--;
      resets_lost_++;
      RCLCPP_WARN(get_logger(), "cartpole %zu: its reset service crashes with the request (back in 0.5 s)", i);
      // Not from inside the service's own callback: a timer takes it down.
      e.restart = create_wall_timer(std::chrono::milliseconds(1), [this, i] {
        Env &env = envs_[i];
        env.restart->cancel();
        env.reset.reset();
        env.restart = create_wall_timer(std::chrono::milliseconds(500), [this, i] {
          envs_[i].restart->cancel();
          make_reset_service(i);
        });
      });
      return;
    }
    e.resets_waiting.push_back(header);
    resets_++;
    if (e.resets_waiting.size() > 1) {
      resets_overlapping_++;
      RCLCPP_WARN(get_logger(), "cartpole %zu: a reset requested while its reset runs (%zu queued)", i,
                  e.resets_waiting.size());
      return;
    }
    start_reset(i);
  }

  // Runs the oldest waiting reset of cartpole i: at once without
  // reset_delay_s, else after it (homing).
  void start_reset(std::size_t i) {
    if (reset_delay_s_ == 0) return finish_reset(i);
    envs_[i].homing = create_wall_timer(std::chrono::duration<double>(reset_delay_s_), [this, i] {
      envs_[i].homing->cancel();
      finish_reset(i);
    });
  }

  // Resets cartpole i, answers the oldest request and starts on the next.
  void finish_reset(std::size_t i) {
    Env &e = envs_[i];
    sim_->reset(i);
    publish_state(i);
    std_srvs::srv::Trigger::Response response;
    response.success = true;
    response.message = "cartpole " + std::to_string(i) + " reset";
    e.reset->send_response(e.resets_waiting.front(), response);
    e.resets_waiting.pop_front();
    if (!e.resets_waiting.empty()) start_reset(i);
  }

  void on_effort(std::size_t i, double u) {
    if (!envs_[i].resets_waiting.empty()) {
      commands_while_resetting_++;
      RCLCPP_WARN_THROTTLE(get_logger(), *get_clock(), 1000,
                           "cartpole %zu: an effort command while its reset runs (ignored; %llu in all)", i,
                           static_cast<unsigned long long>(commands_while_resetting_));
      return;
    }
    envs_[i].command = u;
    if (step_on_command_) step_one(i);
  }

  // On a clock, a cartpole whose episode ended publishes nothing until its
  // reset: its done flags, sent on and on, could reach the controller
  // after the reset (the topics are not ordered with the reset's answer)
  // and end the new episode at once.
  void step_all() {
    for (std::size_t i = 0; i < envs_.size(); i++)
      if (!sim_->done(i)) step_one(i);
  }

  // Steps cartpole i with its command and publishes the step: the signals
  // first, the joint state last.
  void step_one(std::size_t i) {
    const CartpoleSim::Step s = sim_->step(i, envs_[i].command);
    std_msgs::msg::Float64 reward;
    reward.data = s.reward;
    envs_[i].reward->publish(reward);
    std_msgs::msg::Bool flag;
    flag.data = s.terminated;
    envs_[i].terminated->publish(flag);
    flag.data = s.truncated;
    envs_[i].truncated->publish(flag);
    publish_state(i);
  }

  void publish_state(std::size_t i) {
    sensor_msgs::msg::JointState js;
    js.header.stamp = now();
    js.name = {CartpoleSim::joint_name(0), CartpoleSim::joint_name(1)};
    js.position = {sim_->qpos(i, 0), sim_->qpos(i, 1)};
    js.velocity = {sim_->qvel(i, 0), sim_->qvel(i, 1)};
    js.effort = {sim_->force(i), 0.0};
    envs_[i].joint_states->publish(js);
    envs_[i].last_publish = std::chrono::steady_clock::now();
  }

  bool step_on_command_ = true;
  double reset_delay_s_ = 0;
  uint64_t resets_ = 0, resets_overlapping_ = 0, commands_while_resetting_ = 0;
  uint64_t restarts_left_ = 0, resets_lost_ = 0;

 public:
  // For the log at exit: what tests/ros2_nodes.sh checks of a controller.
  std::string totals() const {
    return std::to_string(resets_) + " reset request(s), " + std::to_string(resets_overlapping_) +
           " while a reset ran, " + std::to_string(commands_while_resetting_) +
           " effort command(s) while a reset ran, " + std::to_string(resets_lost_) + " lost in a restart";
  }

 private:
  std::unique_ptr<CartpoleSim> sim_;
  std::vector<Env> envs_;
  rclcpp::TimerBase::SharedPtr step_timer_, idle_timer_;
};

}  // namespace plugrl_ros2

int main(int argc, char **argv) {
  rclcpp::init(argc, argv);
  int rc = 0;
  try {
    auto node = std::make_shared<plugrl_ros2::CartpoleSimNode>();
    rclcpp::spin(node);
    // stderr, as rclcpp's logging may be shut down by now.
    std::fprintf(stderr, "cartpole_sim_node: %s\n", node->totals().c_str());
  } catch (const std::exception &e) {
    RCLCPP_FATAL(rclcpp::get_logger("cartpole_sim_node"), "%s", e.what());
    rc = 1;
  }
  if (rclcpp::ok()) rclcpp::shutdown();
  return rc;
}
