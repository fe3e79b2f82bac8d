// plugrl_env_node - a ROS 2 node that makes a robot a PlugRL env client.
//
// It subscribes to the robot's observation topics (sensor_msgs/JointState
// fields, sensor_msgs/Image, std_msgs/Float64MultiArray, std_msgs/String),
// its reward and terminated/truncated topics; gathers the latest values into
// an observation; gets each step's action from plugrl::Runner on a thread of
// its own (the executor is never blocked by the network); publishes each
// env's command (std_msgs/Float64MultiArray, optionally the rest of the
// env's action chunk as a trajectory_msgs/JointTrajectory); calls a
// std_srvs/Trigger reset service when an episode ends. Stale or missing observations make it publish a safe
// hold action instead of acting on old data. Everything is set by parameters
// (config/cartpole.yaml is an example) and topic remapping. N envs: one
// namespace per env (env_namespaces), each with the same topics.
//
// The decisions are in the ROS-free env_core.hpp (unit-tested without ROS);
// this file moves messages in and out and owns the threads.
//
// Shutdown: Ctrl-C reaches rclcpp's signal handler, which shuts the context
// down; our on-shutdown callback interrupts the runner at once (an infer
// that waits for the server returns within milliseconds), the runner thread
// ends, and the client is closed (close frame 1000 when the connection is
// still up). plugrl_fix_signal_handlers() gives rclcpp's handlers the
// SA_ONSTACK flag the Go runtime inside libplugrl needs.
#include "plugrl_ros2/env_core.hpp"

#include <plugrl.hpp>

#include <rclcpp/rclcpp.hpp>
#include <sensor_msgs/msg/image.hpp>
#include <sensor_msgs/msg/joint_state.hpp>
#include <std_msgs/msg/bool.hpp>
#include <std_msgs/msg/float64.hpp>
#include <std_msgs/msg/float64_multi_array.hpp>
#include <std_msgs/msg/string.hpp>
#include <std_srvs/srv/trigger.hpp>
#include <trajectory_msgs/msg/joint_trajectory.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace plugrl_ros2 {

class EnvNode : public rclcpp::Node {
 public:
  explicit EnvNode(const rclcpp::NodeOptions &options = rclcpp::NodeOptions())
      : rclcpp::Node("plugrl_env_node", options) {
    read_parameters();
    make_interfaces();
  }

  ~EnvNode() override { stop(); }

  // Starts the runner thread and hooks shutdown; call once, after
  // construction (it needs shared_from_this).
  void start() {
    std::weak_ptr<EnvNode> weak = std::static_pointer_cast<EnvNode>(shared_from_this());
    // Before the context shuts down (Ctrl-C: rclcpp's signal handler),
    // while the publishers still work: the final hold, then the stop.
    shutdown_handle_ = get_node_base_interface()->get_context()->add_pre_shutdown_callback([weak] {
      if (auto self = weak.lock()) {
        self->final_hold("shutting down");
        self->request_stop();
      }
    });
    runner_thread_ = std::thread([this] { runner_main(); });
  }

  // Publishes every commanded env's hold, and nothing after it
  // (Controller::final_hold). Any thread; idempotent.
  void final_hold(const std::string &why) {
    std::lock_guard<std::mutex> lock(controller_mu_);
    if (!controller_) return;
    try {
      controller_->final_hold(why);
    } catch (const std::exception &e) {
      RCLCPP_ERROR(get_logger(), "cannot publish the final hold: %s", e.what());
    }
  }

  // Ends the runner thread at once: its blocked call (an infer waiting for
  // the server) is interrupted. Async with respect to the thread; stop()
  // waits for it. Any thread.
  void request_stop() {
    stop_.store(true);
    // The handles are tokens the library looks up, never addresses it
    // reads: interrupting one that was freed meanwhile is harmless.
    if (plugrl_runner *r = runner_handle_.load()) plugrl_runner_interrupt(r);
    if (plugrl_client *c = client_handle_.load()) {
      plugrl_interrupt(c);
    } else if (connecting_.load()) {
      // Still connecting: plugrl::Client has no handle to give out until
      // plugrl_open returns. This node is its process's only libplugrl
      // user (its own executable), so interrupting every client of the
      // process ends exactly that connect. Not once the client is closing
      // (its handle is gone then too): interrupt_all also ends close's
      // wait for the server's close answer (plugrl.h, plugrl_close), and
      // main's stop() after a Ctrl-C came just then (review).
      plugrl::interrupt_all();
    }
    wakeups_->stop();
  }

  // request_stop(), then waits for the runner thread, which closes the
  // connection. Idempotent.
  void stop() {
    request_stop();
    if (runner_thread_.joinable()) runner_thread_.join();
    if (shutdown_handle_) {
      get_node_base_interface()->get_context()->remove_pre_shutdown_callback(*shutdown_handle_);
      shutdown_handle_.reset();
    }
  }

  int exit_code() const { return exit_code_.load(); }

 private:
  // ---------------------------------------------------------------- parameters

  void read_parameters() {
    url_ = declare_parameter<std::string>("url", "ws://127.0.0.1:8000");
    api_key_ = declare_parameter<std::string>("api_key", "");
    num_.connect_timeout_ms = declare_parameter<int64_t>("connect_timeout_ms", 5000);
    num_.receive_timeout_ms = declare_parameter<int64_t>("receive_timeout_ms", 30000);
    num_.close_timeout_ms = declare_parameter<int64_t>("close_timeout_ms", 50);
    num_.max_reconnects = declare_parameter<int64_t>("max_reconnects", 5);
    num_.dead_peer_timeout_ms = declare_parameter<int64_t>("dead_peer_timeout_ms", 0);
    num_.open_wait_ms = declare_parameter<int64_t>("open_wait_ms", -1);

    num_.control_rate_hz = declare_parameter<double>("control_rate_hz", 50.0);
    num_.max_obs_age_s = declare_parameter<double>("max_obs_age_s", 0.5);
    num_.reset_timeout_s = declare_parameter<double>("reset_timeout_s", 5.0);
    qos_best_effort_ = declare_parameter<bool>("qos_best_effort", false);

    namespaces_ = declare_parameter<std::vector<std::string>>("env_namespaces", std::vector<std::string>{""});
    if (namespaces_.empty()) namespaces_ = {""};

    auto names = declare_parameter<std::vector<std::string>>("observation.names",
                                                             std::vector<std::string>{"qpos", "qvel"});
    for (const auto &name : names) {
      SourceSpec s;
      s.name = name;
      const std::string p = "observation." + name + ".";
      s.topic = declare_parameter<std::string>(p + "topic", "joint_states");
      const std::string type = declare_parameter<std::string>(p + "type", "joint_position");
      auto kind = parse_source_kind(type);
      if (!kind)
        throw std::invalid_argument(p + "type is \"" + type +
                                    "\"; want joint_position, joint_velocity, joint_effort, float64_array, "
                                    "image or text");
      s.kind = *kind;
      s.joints = declare_parameter<std::vector<std::string>>(p + "joints", std::vector<std::string>{});
      s.shape = declare_parameter<std::vector<int64_t>>(p + "shape", std::vector<int64_t>{});
      sources_.push_back(std::move(s));
    }
    const std::string why = normalize_sources(sources_);
    if (!why.empty()) throw std::invalid_argument(why);

    reward_topic_ = declare_parameter<std::string>("reward_topic", "reward");
    terminated_topic_ = declare_parameter<std::string>("terminated_topic", "terminated");
    truncated_topic_ = declare_parameter<std::string>("truncated_topic", "truncated");
    action_topic_ = declare_parameter<std::string>("action_topic", "action");
    reset_service_ = declare_parameter<std::string>("reset_service", "reset");

    publish_trajectory_ = declare_parameter<bool>("publish_trajectory", false);
    trajectory_topic_ = declare_parameter<std::string>("trajectory_topic", "action_trajectory");
    trajectory_joints_ = declare_parameter<std::vector<std::string>>("trajectory_joints", std::vector<std::string>{});
    trajectory_field_ = declare_parameter<std::string>("trajectory_field", "positions");
    if (trajectory_field_ != "positions" && trajectory_field_ != "velocities" &&
        trajectory_field_ != "accelerations" && trajectory_field_ != "effort")
      throw std::invalid_argument("trajectory_field is \"" + trajectory_field_ +
                                  "\"; want positions, velocities, accelerations or effort");
    num_.trajectory_dt_s = declare_parameter<double>("trajectory_dt_s", 0.0);

    const std::string hold = declare_parameter<std::string>("hold_action", "zeros");
    auto mode = parse_hold_mode(hold);
    if (!mode) throw std::invalid_argument("hold_action is \"" + hold + "\"; want zeros or last");
    hold_mode_ = *mode;
    num_.action_scale = declare_parameter<double>("action_scale", 1.0);
    num_.action_clip = declare_parameter<std::vector<double>>("action_clip", std::vector<double>{});

    num_.max_episodes = declare_parameter<int64_t>("max_episodes", 0);
    episode_csv_ = declare_parameter<std::string>("episode_csv", "");
    log_episodes_ = declare_parameter<bool>("log_episodes", true);
    shutdown_on_stop_ = declare_parameter<bool>("shutdown_on_stop", true);
    num_.stats_period_s = declare_parameter<double>("stats_period_s", 1.0);

    // Every number is checked before any becomes a period, a timeout or a
    // library option (env_core: check_parameters).
    const std::string bad = check_parameters(num_);
    if (!bad.empty()) throw std::invalid_argument(bad);

    lockstep_ = num_.control_rate_hz <= 0;
    wakeups_ = std::make_unique<Wakeups>(lockstep_ ? Mode::Lockstep : Mode::Timer);
  }

  // ---------------------------------------------------------------- ROS interfaces

  void make_interfaces() {
    const std::size_t n = namespaces_.size();
    shared_ = InputState(sources_, n);
    rclcpp::QoS obs_qos = qos_best_effort_ ? rclcpp::QoS(rclcpp::SensorDataQoS()) : rclcpp::QoS(10);
    rclcpp::QoS qos(10);

    // One subscription per (topic, env), feeding every source on it.
    std::map<std::string, std::vector<std::size_t>> by_topic;
    for (std::size_t s = 0; s < sources_.size(); s++) by_topic[sources_[s].topic].push_back(s);
    for (const auto &entry : by_topic) {
      const std::string &topic = entry.first;
      const std::vector<std::size_t> srcs = entry.second;  // a copy each lambda can capture
      const SourceKind kind = sources_[srcs[0]].kind;
      for (std::size_t s : srcs)
        if (is_joint_kind(sources_[s].kind) != is_joint_kind(kind) ||
            (!is_joint_kind(kind) && sources_[s].kind != kind))
          throw std::invalid_argument("topic \"" + topic + "\" feeds sources of different message types");
      for (std::size_t env = 0; env < n; env++) {
        const std::string name = env_topic(namespaces_[env], topic);
        if (is_joint_kind(kind)) {
          subs_.push_back(create_subscription<sensor_msgs::msg::JointState>(
              name, obs_qos, [this, env, srcs, name](std::shared_ptr<const sensor_msgs::msg::JointState> m) {
                const TimePoint t = Clock::now();
                std::lock_guard<std::mutex> lock(mu_);
                for (std::size_t s : srcs)
                  complain(name, shared_.put_joint_state(s, env, m->name, m->position, m->velocity, m->effort, t));
                notify_data();
              }));
        } else if (kind == SourceKind::Float64Array) {
          subs_.push_back(create_subscription<std_msgs::msg::Float64MultiArray>(
              name, obs_qos, [this, env, srcs, name](std::shared_ptr<const std_msgs::msg::Float64MultiArray> m) {
                const TimePoint t = Clock::now();
                std::lock_guard<std::mutex> lock(mu_);
                for (std::size_t s : srcs) complain(name, shared_.put_array(s, env, m->data.data(), m->data.size(), t));
                notify_data();
              }));
        } else if (kind == SourceKind::Image) {
          subs_.push_back(create_subscription<sensor_msgs::msg::Image>(
              name, obs_qos, [this, env, srcs, name](std::shared_ptr<const sensor_msgs::msg::Image> m) {
                const TimePoint t = Clock::now();
                std::lock_guard<std::mutex> lock(mu_);
                for (std::size_t s : srcs)
                  complain(name, shared_.put_image(s, env, m->height, m->width, m->encoding, m->step, m->data.data(),
                                                   m->data.size(), t));
                notify_data();
              }));
        } else {
          subs_.push_back(create_subscription<std_msgs::msg::String>(
              name, obs_qos, [this, env, srcs, name](std::shared_ptr<const std_msgs::msg::String> m) {
                const TimePoint t = Clock::now();
                std::lock_guard<std::mutex> lock(mu_);
                for (std::size_t s : srcs) complain(name, shared_.put_text(s, env, m->data, t));
                notify_data();
              }));
        }
      }
    }

    for (std::size_t env = 0; env < n; env++) {
      const std::string &ns = namespaces_[env];
      if (!reward_topic_.empty())
        subs_.push_back(create_subscription<std_msgs::msg::Float64>(
            env_topic(ns, reward_topic_), qos, [this, env](std::shared_ptr<const std_msgs::msg::Float64> m) {
              std::lock_guard<std::mutex> lock(mu_);
              shared_.add_reward(env, m->data, Clock::now());
              notify_data();
            }));
      if (!terminated_topic_.empty())
        subs_.push_back(create_subscription<std_msgs::msg::Bool>(
            env_topic(ns, terminated_topic_), qos, [this, env](std::shared_ptr<const std_msgs::msg::Bool> m) {
              std::lock_guard<std::mutex> lock(mu_);
              shared_.put_terminated(env, m->data, Clock::now());
              notify_data();
            }));
      if (!truncated_topic_.empty())
        subs_.push_back(create_subscription<std_msgs::msg::Bool>(
            env_topic(ns, truncated_topic_), qos, [this, env](std::shared_ptr<const std_msgs::msg::Bool> m) {
              std::lock_guard<std::mutex> lock(mu_);
              shared_.put_truncated(env, m->data, Clock::now());
              notify_data();
            }));
      action_pubs_.push_back(create_publisher<std_msgs::msg::Float64MultiArray>(env_topic(ns, action_topic_), qos));
      if (publish_trajectory_)
        trajectory_pubs_.push_back(
            create_publisher<trajectory_msgs::msg::JointTrajectory>(env_topic(ns, trajectory_topic_), qos));
      if (!reset_service_.empty())
        reset_clients_.push_back(create_client<std_srvs::srv::Trigger>(env_topic(ns, reset_service_)));
    }

    // Two envs whose commands go to one topic are one robot getting two
    // actions a step, each for an observation of its own (review:
    // env_namespaces [a, "a/"] published two different commands on
    // /a/action at every tick). A listed namespace twice, "ns" and "ns/",
    // "" and "/", or a remap are refused here, by the resolved names.
    for (std::size_t i = 0; i < n; i++)
      for (std::size_t j = 0; j < i; j++)
        if (std::string(action_pubs_[i]->get_topic_name()) == action_pubs_[j]->get_topic_name())
          throw std::invalid_argument("env_namespaces: envs " + std::to_string(j) + " (\"" + namespaces_[j] +
                                      "\") and " + std::to_string(i) + " (\"" + namespaces_[i] +
                                      "\") both publish their commands on " + action_pubs_[i]->get_topic_name() +
                                      "; each env needs topics of its own");
    reset_seq_ = std::make_unique<std::atomic<uint64_t>[]>(n);
    reset_answered_ = std::make_unique<std::atomic<uint64_t>[]>(n);
    reset_pending_.assign(n, std::nullopt);
    reset_was_ready_.assign(n, false);
    reset_declined_.assign(n, 0);
    reset_lost_ = std::make_unique<std::atomic<bool>[]>(n);
    if (!reset_clients_.empty())
      reset_watch_timer_ = create_wall_timer(std::chrono::milliseconds(50), [this] { watch_resets(); });
    stats_pub_ = create_publisher<std_msgs::msg::String>("~/stats", qos);
    if (num_.stats_period_s > 0)
      stats_timer_ = create_wall_timer(seconds_to_duration(num_.stats_period_s), [this] { publish_stats(); });
    if (!lockstep_)
      control_timer_ = create_wall_timer(seconds_to_duration(1.0 / num_.control_rate_hz), [this] {
        // The tick wakes the runner thread; ticks that come while it is
        // busy (an infer waiting) are taken as one when it is done. Until
        // then the tick itself holds, once the observation the infer is
        // for has gone stale.
        wakeups_->tick();
        std::lock_guard<std::mutex> lock(controller_mu_);
        if (!controller_) return;
        try {
          controller_->hold_if_blocked(Clock::now());
        } catch (const std::exception &e) {
          RCLCPP_ERROR_THROTTLE(get_logger(), log_clock_, 1000, "cannot publish the hold: %s", e.what());
        }
      });

    // Every namespace, so that a robot missing from the list shows at once.
    std::string spaces;
    for (const auto &ns : namespaces_) spaces += (spaces.empty() ? "namespaces \"" : ", \"") + ns + "\"";
    if (namespaces_.size() == 1 && namespaces_[0].empty()) spaces = "no namespace";
    RCLCPP_INFO(get_logger(), "%zu env(s) (%s), %zu observation source(s), %s, server %s", n, spaces.c_str(),
                sources_.size(),
                lockstep_ ? "lockstep (a step when every env's data has come)"
                          : ("control timer at " + std::to_string(num_.control_rate_hz) + " Hz").c_str(),
                url_.c_str());
  }

  // Seconds between trajectory points: trajectory_dt_s, else the control
  // period (0.01 s in lockstep).
  double trajectory_dt_seconds() const {
    return num_.trajectory_dt_s > 0 ? num_.trajectory_dt_s : (lockstep_ ? 0.01 : 1.0 / num_.control_rate_hz);
  }

  // A message that did not fit its source: warn, at most every 2 s.
  // Each topic has its own throttle: one for all let a topic refused
  // every message hide another's warnings (review).
  void complain(const std::string &topic, const std::string &why) {
    if (why.empty()) return;
    const TimePoint now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(complain_mu_);
      auto last = last_complaint_.find(topic);
      if (last != last_complaint_.end() && now - last->second < std::chrono::seconds(2)) return;
      last_complaint_[topic] = now;  // one entry per subscribed topic
    }
    RCLCPP_WARN(get_logger(), "%s: %s (message ignored)", topic.c_str(), why.c_str());
  }

  // In lockstep, data is what wakes the runner thread (Wakeups).
  void notify_data() { wakeups_->data(); }

  // ---------------------------------------------------------------- output

  void publish_command(std::size_t env, const std::vector<double> &command, bool hold) {
    std_msgs::msg::Float64MultiArray msg;
    msg.layout.dim.resize(1);
    msg.layout.dim[0].label = hold ? "hold" : "action";
    msg.layout.dim[0].size = static_cast<uint32_t>(command.size());
    msg.layout.dim[0].stride = static_cast<uint32_t>(command.size());
    msg.data = command;
    action_pubs_[env]->publish(msg);
  }

  // The points the controller built: after an action, the rest of env's
  // chunk from this step (plugrl::Runner::chunk), one point per step; for
  // a hold, the hold alone.
  void publish_trajectory(std::size_t env, const std::vector<TrajectoryPoint> &points, bool hold) {
    trajectory_msgs::msg::JointTrajectory msg;
    msg.header.stamp = now();
    // A hold's one point looks like a chunk's last step: the frame_id
    // tells a listener which it is (trajectory controllers ignore it).
    if (hold) msg.header.frame_id = "hold";
    const std::size_t k = points.empty() ? 0 : points[0].values.size();
    for (std::size_t j = 0; j < k; j++)
      msg.joint_names.push_back(j < trajectory_joints_.size() ? trajectory_joints_[j] : "a" + std::to_string(j));
    msg.points.reserve(points.size());
    for (const TrajectoryPoint &p : points) {
      trajectory_msgs::msg::JointTrajectoryPoint point;
      if (trajectory_field_ == "positions") point.positions = p.values;
      else if (trajectory_field_ == "velocities") point.velocities = p.values;
      else if (trajectory_field_ == "accelerations") point.accelerations = p.values;
      else point.effort = p.values;
      point.time_from_start = rclcpp::Duration(std::chrono::duration_cast<std::chrono::nanoseconds>(p.time_from_start));
      msg.points.push_back(std::move(point));
    }
    trajectory_pubs_[env]->publish(msg);
  }

  void request_reset(std::size_t env) {
    if (reset_clients_.empty()) {
      // No reset service: the robot starts its next episode by itself.
      std::lock_guard<std::mutex> lock(mu_);
      shared_.put_reset_answer(env, true, Clock::now());
      wakeups_->reset_answered();
      return;
    }
    auto &client = reset_clients_[env];
    const bool ready = client->service_is_ready();
    // A request the service had when it was sent, still unanswered while
    // the service is up, is a reset still running: a service queues
    // requests, so asking again reset the robot a second time, and the
    // first answer came as that second reset began, with the node acting
    // on the robot all through it (review: 8 s of actions during a reset
    // of 8 s, with reset_timeout_s 5). Asked again only when the request
    // may have been lost: the service was not there when it went out (DDS
    // drops it), was gone for a while since (watch_resets: a reset server
    // that crashed and was restarted lost it, and the robot would wait for
    // ever), or is not there now.
    const bool unanswered = reset_answered_[env].load() != reset_seq_[env].load();
    const bool lost = reset_lost_[env].load();
    if (unanswered && reset_was_ready_[env] && ready && !lost) {
      // Once per request: env_core asks every reset_timeout_s.
      if (reset_declined_[env] != reset_seq_[env].load())
        RCLCPP_WARN(get_logger(),
                    "the reset of env %zu is still running (%s has its request): not asking again, which would reset "
                    "the robot twice; set reset_timeout_s above the slowest reset",
                    env, client->get_service_name());
      reset_declined_[env] = reset_seq_[env].load();
      return;
    }
    if (!ready)
      RCLCPP_WARN_THROTTLE(get_logger(), log_clock_, 2000, "reset service %s is not available (yet)",
                           client->get_service_name());
    if (unanswered && reset_pending_[env])
      RCLCPP_WARN(get_logger(), "asking env %zu's reset again: %s", env,
                  !ready                   ? "the service is gone"
                  : reset_was_ready_[env] ? "the service went away and came back since the last request went out"
                                          : "the service was not there when the last request went out");
    // Only the answer to the latest request counts: the earlier one is
    // dropped from the client (unanswered, it stayed there for good), and
    // an answer to it already on its way is ignored.
    if (reset_pending_[env]) client->remove_pending_request(*reset_pending_[env]);
    // The new request's number first: watch_resets then looks at it, and a
    // look at the old one can no longer set the flag cleared here.
    const uint64_t seq = ++reset_seq_[env];
    reset_lost_[env].store(false);
    reset_was_ready_[env] = ready;
    auto request = std::make_shared<std_srvs::srv::Trigger::Request>();
    // The client keeps the request until its answer runs the callback.
    auto pending = client->async_send_request(request, [this, env, seq](rclcpp::Client<std_srvs::srv::Trigger>::SharedFuture future) {
      if (reset_seq_[env].load() != seq) return;  // asked again since
      reset_answered_[env].store(seq);
      bool ok = false;
      std::string message;
      try {
        auto response = future.get();
        ok = response->success;
        message = response->message;
      } catch (const std::exception &e) {
        message = e.what();
      }
      if (!ok) RCLCPP_ERROR(get_logger(), "reset of env %zu failed: %s", env, message.c_str());
      {
        std::lock_guard<std::mutex> lock(mu_);
        shared_.put_reset_answer(env, ok, Clock::now());
      }
      wakeups_->reset_answered();
    });
    reset_pending_[env] = pending.request_id;
  }

  // Every 50 ms, for each env whose reset is unanswered: a service seen
  // gone meanwhile lost the request (a reset server that crashed and came
  // back within reset_timeout_s looked up at both of request_reset's
  // looks). Only unanswered envs are looked at, so this costs nothing
  // between resets.
  void watch_resets() {
    for (std::size_t env = 0; env < reset_clients_.size(); env++)
      if (reset_answered_[env].load() != reset_seq_[env].load() && !reset_lost_[env].load() &&
          !reset_clients_[env]->service_is_ready())
        reset_lost_[env].store(true);
  }

  void publish_stats() {
    plugrl_statistics st{};
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      if (!runner_) return;
      try {
        st = runner_->stats();
      } catch (const plugrl::Error &) {
        return;
      }
    }
    std_msgs::msg::String msg;
    msg.data = stats_json(st, episodes_.load(), holds_.load(), phase_name_.load());
    stats_pub_->publish(msg);
  }

  // ---------------------------------------------------------------- the runner thread

  void log_from_library(int level, const char *message) {
    switch (level) {
      case PLUGRL_LOG_DEBUG: RCLCPP_DEBUG(get_logger(), "libplugrl: %s", message); break;
      case PLUGRL_LOG_INFO: RCLCPP_INFO(get_logger(), "libplugrl: %s", message); break;
      case PLUGRL_LOG_WARN: RCLCPP_WARN(get_logger(), "libplugrl: %s", message); break;
      default: RCLCPP_ERROR(get_logger(), "libplugrl: %s", message); break;
    }
  }

  void runner_main() {
    int rc = 0;
    try {
      rc = run();
    } catch (const plugrl::Error &e) {
      if (stop_.load() && e.status() == PLUGRL_INTERRUPTED) {
        rc = 0;
      } else {
        RCLCPP_ERROR(get_logger(), "%s", e.what());
        rc = 1;
      }
    } catch (const std::exception &e) {
      RCLCPP_ERROR(get_logger(), "%s", e.what());
      rc = 1;
    }
    exit_code_.store(rc);
    // The run is over by itself (server stop, max_episodes, an error): end
    // the process's spin unless asked to stay.
    if (!stop_.load() && (shutdown_on_stop_ || rc != 0) && rclcpp::ok()) rclcpp::shutdown();
  }

  int run() {
    const std::size_t n = namespaces_.size();
    plugrl::Options options(url_);
    if (!api_key_.empty()) options.api_key(api_key_);
    options.connect_timeout_ms(static_cast<int32_t>(num_.connect_timeout_ms))
        .metadata_timeout_ms(static_cast<int32_t>(num_.connect_timeout_ms))
        .receive_timeout_ms(static_cast<int32_t>(num_.receive_timeout_ms))
        .close_timeout_ms(static_cast<int32_t>(num_.close_timeout_ms))
        .max_reconnects(static_cast<int32_t>(num_.max_reconnects))
        .dead_peer_timeout_ms(static_cast<int32_t>(num_.dead_peer_timeout_ms))
        .open_wait_ms(static_cast<int32_t>(num_.open_wait_ms))
        .log([this](int level, const char *message) { log_from_library(level, message); });

    RCLCPP_INFO(get_logger(), "connecting to %s", url_.c_str());
    // A stop while this connects ends it at once (request_stop:
    // plugrl_interrupt_all), and the constructor throws PLUGRL_INTERRUPTED.
    plugrl::Client client(options);
    client_handle_.store(client.handle());
    connecting_.store(false);  // after the handle: request_stop sees one or the other
    if (stop_.load()) return 0;
    RCLCPP_INFO(get_logger(), "connected: server %s, algorithm %s, policy %s, action_horizon %lld, action_dim %lld",
                client.metadata_string("server").value_or("?").c_str(),
                client.metadata_string("algorithm").value_or("?").c_str(),
                client.metadata_string("policy").value_or("?").c_str(),
                static_cast<long long>(client.action_horizon().value_or(0)),
                static_cast<long long>(client.action_dim().value_or(0)));
    if (publish_trajectory_)
      RCLCPP_INFO(get_logger(), "publishing each env's trajectory on %s: the rest of its chunk (action_horizon %lld "
                                "points at most, %.3f s apart)",
                  trajectory_pubs_.empty() ? "?" : trajectory_pubs_[0]->get_topic_name(),
                  static_cast<long long>(client.action_horizon().value_or(1)), trajectory_dt_seconds());

    wait_for_peers();
    int rc = 0;
    {
      plugrl::Runner runner(client, n);
      runner_handle_.store(runner.handle());
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        runner_ = &runner;
      }
      // Unpublished on every way out, a throw from control_loop included:
      // the stats timer must never reach a destroyed Runner.
      struct Unpublish {
        EnvNode *node;
        ~Unpublish() {
          {
            std::lock_guard<std::mutex> lock(node->stats_mu_);
            node->runner_ = nullptr;
          }
          node->runner_handle_.store(nullptr);
        }
      } unpublish{this};
      rc = control_loop(runner);
    }
    // Close frame 1000 (SPEC 7.5), when the connection is still up.
    client_handle_.store(nullptr);
    client.close();
    RCLCPP_INFO(get_logger(), "client closed");
    return rc;
  }

  // A message published before DDS has matched its reader is lost (the
  // topics are volatile): wait until every command topic has a subscriber
  // and every subscribed topic a publisher, then a little longer for the
  // other side's matching to finish; after 5 s go on, and say what is
  // missing.
  void wait_for_peers() {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!stop_.load()) {
      std::string missing;
      for (const auto &pub : action_pubs_)
        if (pub->get_subscription_count() == 0) missing += std::string(" ") + pub->get_topic_name();
      for (const auto &sub : subs_)
        if (sub->get_publisher_count() == 0) missing += std::string(" ") + sub->get_topic_name();
      if (missing.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return;
      }
      if (Clock::now() > deadline) {
        RCLCPP_WARN(get_logger(), "no peer yet on:%s; going on", missing.c_str());
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  int control_loop(plugrl::Runner &runner) {
    const std::size_t n = namespaces_.size();
    std::ofstream csv;
    if (!episode_csv_.empty()) {
      csv.open(episode_csv_, std::ios::out | std::ios::trunc);
      if (!csv) throw std::runtime_error("cannot write episode_csv " + episode_csv_);
      csv << episode_csv_header() << "\n" << std::flush;
    }

    Controller::Config cfg;
    cfg.num_envs = n;
    cfg.mode = lockstep_ ? Mode::Lockstep : Mode::Timer;
    cfg.max_obs_age = seconds_to_duration(num_.max_obs_age_s);
    cfg.reset_timeout = seconds_to_duration(num_.reset_timeout_s);
    cfg.reward_topic = !reward_topic_.empty();
    cfg.terminated_topic = !terminated_topic_.empty();
    cfg.truncated_topic = !truncated_topic_.empty();
    cfg.reset_service = !reset_service_.empty();
    cfg.max_episodes = num_.max_episodes;
    cfg.trajectory_period = seconds_to_duration(trajectory_dt_seconds());
    // A done flag and the state it came with (or a reset's answer and the
    // reset's state): every source refreshes within max_obs_age_s (a
    // camera slower than the control rate too), and a tick passes anyway.
    if (!lockstep_)
      cfg.state_after_signal_wait =
          std::max(seconds_to_duration(1.0 / num_.control_rate_hz), seconds_to_duration(num_.max_obs_age_s));

    Controller::Hooks hooks;
    hooks.snapshot = [this](InputState &dst) {
      std::lock_guard<std::mutex> lock(mu_);
      shared_.drain_into(dst);
    };
    bool first_act = true;
    hooks.act = [&](const plugrl::Observation &obs, std::vector<double> &actions) {
      if (first_act) {
        RCLCPP_INFO(get_logger(), "first observation complete: asking the server for actions");
        first_act = false;
      }
      return runner.act(obs, actions);
    };
    hooks.report = [&](const plugrl::Observation &obs, const std::vector<double> &rewards,
                       const std::vector<uint8_t> &terminated, const std::vector<uint8_t> &truncated,
                       const std::vector<uint8_t> &success) {
      return runner.report(obs, rewards, terminated, truncated, success);
    };
    hooks.publish = [this](std::size_t env, const std::vector<double> &command, bool hold) {
      publish_command(env, command, hold);
    };
    if (publish_trajectory_) {
      hooks.publish_trajectory = [this](std::size_t env, const std::vector<TrajectoryPoint> &points, bool hold) {
        publish_trajectory(env, points, hold);
      };
      // Between act and report, on this thread: the rest of env's chunk.
      hooks.chunk = [&runner](std::size_t env, std::vector<double> &chunk) {
        return runner.chunk(static_cast<int64_t>(env), chunk);
      };
    }
    hooks.request_reset = [this](std::size_t env) { request_reset(env); };
    hooks.on_episode = [&](const EpisodeRecord &e) {
      if (csv.is_open()) csv << episode_csv_line(e) << "\n" << std::flush;
      if (log_episodes_)
        RCLCPP_INFO(get_logger(), "episode %lld (env %zu): return %g, length %lld%s", static_cast<long long>(e.number),
                    e.env, e.episode_return, static_cast<long long>(e.length), e.success ? ", success" : "");
    };
    hooks.log = [this](Controller::Level level, const std::string &message) {
      switch (level) {
        case Controller::Level::Debug: RCLCPP_DEBUG(get_logger(), "%s", message.c_str()); break;
        case Controller::Level::Info: RCLCPP_INFO(get_logger(), "%s", message.c_str()); break;
        case Controller::Level::Warn: RCLCPP_WARN(get_logger(), "%s", message.c_str()); break;
        case Controller::Level::Error: RCLCPP_ERROR(get_logger(), "%s", message.c_str()); break;
      }
    };
    const bool clip = num_.action_clip.size() == 2;
    CommandBook book(n, hold_mode_, num_.action_scale, clip ? std::optional<double>(num_.action_clip[0]) : std::nullopt,
                     clip ? std::optional<double>(num_.action_clip[1]) : std::nullopt);
    Controller controller(cfg, InputState(sources_, n), std::move(book), std::move(hooks));
    // Published for the control timer (hold_if_blocked) and the shutdown
    // (final_hold) until it goes out of scope; on every way out of here
    // (a server stop, max_episodes, a throw) the robot gets its final hold.
    struct Publish {
      EnvNode *node;
      Controller *controller;
      Publish(EnvNode *n, Controller *c) : node(n), controller(c) {
        std::lock_guard<std::mutex> lock(node->controller_mu_);
        node->controller_ = controller;
      }
      ~Publish() {
        node->final_hold("the run is over");
        std::lock_guard<std::mutex> lock(node->controller_mu_);
        node->controller_ = nullptr;
      }
    } publish{this, &controller};

    uint64_t reconnects_seen = 0;
    // Timer mode: a wake per control tick. Lockstep: per piece of data,
    // and every 10 ms, to hold a step whose data is late (Wakeups).
    while (wakeups_->wait() && !stop_.load()) {
      Controller::Result result = Controller::Result::Waiting;
      try {
        result = controller.wake(Clock::now());
      } catch (const plugrl::Error &e) {
        if (stop_.load()) break;  // interrupted for the shutdown
        // The runner rides through reconnects by itself; what comes here
        // (a timeout, a server error) is logged, and the next tick retries.
        RCLCPP_ERROR_THROTTLE(get_logger(), log_clock_, 1000, "plugrl: %s; retrying", e.what());
      }
      episodes_.store(controller.episodes());
      holds_.store(controller.holds());
      phase_name_.store(controller.phase_name());

      const plugrl_statistics st = runner.stats();
      if (st.reconnects != reconnects_seen) {
        RCLCPP_WARN(get_logger(),
                    "reconnected to the server (%llu in all: %llu resync, %llu feedback timeout, %llu own timeout, "
                    "%llu lost, %llu other); %llu feedback rows dropped so far",
                    static_cast<unsigned long long>(st.reconnects),
                    static_cast<unsigned long long>(st.reconnects_resync),
                    static_cast<unsigned long long>(st.reconnects_feedback_timeout),
                    static_cast<unsigned long long>(st.reconnects_timeout),
                    static_cast<unsigned long long>(st.reconnects_lost),
                    static_cast<unsigned long long>(st.reconnects_other),
                    static_cast<unsigned long long>(st.feedback_rows_dropped));
        reconnects_seen = st.reconnects;
      }
      if (result == Controller::Result::Stopped) {
        RCLCPP_INFO(get_logger(), "the server stopped the run (plugrl-server-stop) after %lld episodes",
                    static_cast<long long>(controller.episodes()));
        break;
      }
      if (result == Controller::Result::Finished) {
        RCLCPP_INFO(get_logger(), "max_episodes (%lld) episodes done", static_cast<long long>(num_.max_episodes));
        break;
      }
    }
    if (stop_.load()) RCLCPP_INFO(get_logger(), "shutting down: runner stopped");
    try {
      publish_stats();  // the final counts (a no-op once the context is shut down)
    } catch (const std::exception &) {
    }
    return 0;
  }

  // Parameters.
  std::string url_, api_key_;
  NumericParameters num_;  // every number, as check_parameters passed it
  bool qos_best_effort_ = false, publish_trajectory_ = false, log_episodes_ = true, shutdown_on_stop_ = true;
  bool lockstep_ = false;
  std::vector<std::string> namespaces_, trajectory_joints_;
  std::vector<SourceSpec> sources_;
  std::string reward_topic_, terminated_topic_, truncated_topic_, action_topic_, reset_service_;
  std::string trajectory_topic_, trajectory_field_, episode_csv_;
  HoldMode hold_mode_ = HoldMode::Zeros;

  // Written by the executor's callbacks, drained by the runner thread.
  std::mutex mu_;
  InputState shared_;
  // What wakes the runner thread (made once the mode is known).
  std::unique_ptr<Wakeups> wakeups_;
  // The runner thread's controller while control_loop runs, for the
  // control timer and the shutdown.
  std::mutex controller_mu_;
  Controller *controller_ = nullptr;  // under controller_mu_

  // The runner thread, and what other threads may touch of it.
  std::thread runner_thread_;
  std::atomic<bool> stop_{false};
  std::atomic<plugrl_client *> client_handle_{nullptr};
  std::atomic<bool> connecting_{true};  // until plugrl_open returned
  std::atomic<plugrl_runner *> runner_handle_{nullptr};
  std::atomic<int> exit_code_{0};
  std::atomic<int64_t> episodes_{0};
  std::atomic<uint64_t> holds_{0};
  std::atomic<const char *> phase_name_{"connecting"};
  std::mutex stats_mu_;
  plugrl::Runner *runner_ = nullptr;  // under stats_mu_

  std::vector<rclcpp::SubscriptionBase::SharedPtr> subs_;
  std::vector<rclcpp::Publisher<std_msgs::msg::Float64MultiArray>::SharedPtr> action_pubs_;
  std::vector<rclcpp::Publisher<trajectory_msgs::msg::JointTrajectory>::SharedPtr> trajectory_pubs_;
  std::vector<rclcpp::Client<std_srvs::srv::Trigger>::SharedPtr> reset_clients_;
  // Per env: the number of the latest reset request (its answer is the
  // one that counts) and of the latest answered (written by the answer's
  // callback); the latest request's id, and whether the service was up
  // when it went out (runner thread only).
  std::unique_ptr<std::atomic<uint64_t>[]> reset_seq_, reset_answered_;
  std::vector<std::optional<int64_t>> reset_pending_;
  std::vector<bool> reset_was_ready_;
  // The last request the node declined to repeat (request_reset: the
  // runner thread only), so that it says so once per request.
  std::vector<uint64_t> reset_declined_;
  // Per env: the service was seen gone while the request was unanswered
  // (written by watch_resets on the executor, cleared at each request).
  std::unique_ptr<std::atomic<bool>[]> reset_lost_;
  rclcpp::TimerBase::SharedPtr reset_watch_timer_;
  rclcpp::Publisher<std_msgs::msg::String>::SharedPtr stats_pub_;
  rclcpp::TimerBase::SharedPtr stats_timer_, control_timer_;
  // The throttled warnings' clock: steady, as every other time of the
  // node. With use_sim_time the node's clock (get_clock()) stands at 0
  // until /clock comes, and stands still while a simulator is paused:
  // rcutils' throttle then logged nothing at all (review: not one
  // "message ignored" in 8 s of refused messages).
  rclcpp::Clock log_clock_{RCL_STEADY_TIME};
  std::mutex complain_mu_;  // guards last_complaint_ (complain)
  std::map<std::string, TimePoint> last_complaint_;
  std::optional<rclcpp::PreShutdownCallbackHandle> shutdown_handle_;
};

}  // namespace plugrl_ros2

int main(int argc, char **argv) {
  rclcpp::init(argc, argv);
  // rclcpp::init installed SIGINT/SIGTERM handlers without SA_ONSTACK; the
  // Go runtime in libplugrl needs it (plugrl.h, PROCESS FACTS).
  const int fixed = plugrl_fix_signal_handlers();
  int rc = 0;
  try {
    auto node = std::make_shared<plugrl_ros2::EnvNode>();
    RCLCPP_INFO(node->get_logger(), "libplugrl %s; plugrl_fix_signal_handlers() gave %d handler(s) SA_ONSTACK",
                plugrl::version().c_str(), fixed);
    node->start();
    rclcpp::executors::SingleThreadedExecutor executor;
    executor.add_node(node);
    executor.spin();  // until Ctrl-C, or the run ends (rclcpp::shutdown)
    node->stop();
    rc = node->exit_code();
  } catch (const std::exception &e) {
    RCLCPP_FATAL(rclcpp::get_logger("plugrl_env_node"), "%s", e.what());
    rc = 1;
  }
  if (rclcpp::ok()) rclcpp::shutdown();
  return rc;
}
