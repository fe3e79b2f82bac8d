// env_core.hpp - the part of plugrl_env_node that needs no ROS.
//
// plugrl_env_node turns a robot's topics into PlugRL env-client traffic.
// Everything it decides - which topic values form an observation, when a
// value is too old to send, which command each env gets at a tick and what
// it holds instead, when an episode ended and when its reset is complete -
// lives here, in plain C++17 over plugrl.hpp, so that it builds and is
// unit-tested (test/test_env_core.cpp) on machines without rclcpp. The node
// (src/plugrl_env_node.cpp) only moves ROS messages in and out.
//
// Threads: the node's subscription callbacks write an InputState under the
// node's mutex; the runner thread drains it into the Controller's own copy
// (Controller::Hooks::snapshot) and works on that copy without a lock, so a
// blocked infer never holds up the executor.
#ifndef PLUGRL_ROS2_ENV_CORE_HPP
#define PLUGRL_ROS2_ENV_CORE_HPP

#include <plugrl.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace plugrl_ros2 {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;

// ---------------------------------------------------------------- parameters

// The node's numeric parameters, as read (config/cartpole.yaml documents
// each).
struct NumericParameters {
  double control_rate_hz = 50;  // > 0: a control timer at this rate; 0: lockstep
  double max_obs_age_s = 0.5;
  double reset_timeout_s = 5;
  double stats_period_s = 1;    // <= 0: no ~/stats
  double trajectory_dt_s = 0;   // <= 0: the control period
  double action_scale = 1;
  std::vector<double> action_clip;  // [] or [min, max]
  int64_t connect_timeout_ms = 5000, receive_timeout_ms = 30000, close_timeout_ms = 50;
  int64_t max_reconnects = 5;
  int64_t dead_peer_timeout_ms = 0;  // 0: the library's (20000); -1: off; else >= 2000
  int64_t open_wait_ms = -1;         // -1: wait for the server until it answers; 0: one attempt
  int64_t max_episodes = 0;
};

// "" when every value can be used, else what is wrong with the first one
// that cannot: its name, its value and what it takes. The node refuses to
// start on it, so that no value reaches a conversion that is undefined
// for it (a NaN or 1e300 seconds into a count of nanoseconds, 5e9 ms into
// an int32_t) or a wait that never ends (a reset timeout of 0).
std::string check_parameters(const NumericParameters &p);

// s seconds as a Duration: zero for s <= 0 (or NaN), at most
// kMaxParameterSeconds.
Duration seconds_to_duration(double s);
// The longest time any parameter may give, in seconds (11.6 days), and the
// shortest positive one (a millisecond).
constexpr double kMaxParameterSeconds = 1e6;
constexpr double kMinParameterSeconds = 1e-3;

// ---------------------------------------------------------------- sources

// What an observation source reads from its topic.
enum class SourceKind {
  JointPosition,  // sensor_msgs/JointState position, of the named joints
  JointVelocity,  // ... velocity
  JointEffort,    // ... effort
  Float64Array,   // std_msgs/Float64MultiArray data
  Image,          // sensor_msgs/Image, 8-bit, as u8 [H, W, C]
  Text,           // std_msgs/String: the observation's text (one per env)
};

// "joint_position", "joint_velocity", "joint_effort", "float64_array",
// "image", "text" -> the kind; anything else -> nullopt.
std::optional<SourceKind> parse_source_kind(const std::string &name);
const char *source_kind_name(SourceKind kind);
// Whether the kind reads sensor_msgs/JointState.
bool is_joint_kind(SourceKind kind);

// One observation source: an array (or the text) of the observation, fed
// by one topic per env.
struct SourceSpec {
  std::string name;   // the array's name in the observation, e.g. "qpos"
  std::string topic;  // relative topic name, e.g. "joint_states"
  SourceKind kind = SourceKind::Float64Array;
  // Joint kinds: the joints to take, in this order. Empty: the first
  // shape[0] entries of the message, in its order.
  std::vector<std::string> joints;
  // Per env: [d] (or [d0, d1, ...]) for states, [height, width, channels]
  // for images; empty for text. Joint kinds with joints set may leave it
  // empty: it is then [joints.size()].
  std::vector<int64_t> shape;

  // Elements per env: the product of shape (0 for text).
  std::size_t elements() const;
  // Whether the source is context rather than a measurement: a text (an
  // instruction) is published when it changes, not at the robot's rate,
  // so its latest value is used however old, it is not waited for after
  // a reset or a done flag, and it is no answer to a lockstep command. A
  // text published once had made every tick stale after max_obs_age
  // (timer) and no lockstep step complete (review).
  bool is_context() const noexcept { return kind == SourceKind::Text; }
};

// Fills in derived shapes and checks a list of sources: "" when they are
// usable, else what is wrong (for the node to log and refuse to start).
// At least one source must be an array (a text goes beside arrays), and
// no source may have more than kMaxSourceElements elements per env.
std::string normalize_sources(std::vector<SourceSpec> &sources);
constexpr int64_t kMaxSourceElements = int64_t{1} << 30;

// topic for env namespace ns: "ns/topic", or topic when ns is empty.
std::string env_topic(const std::string &ns, const std::string &topic);

// ---------------------------------------------------------------- inputs

// The latest value of every (source, env), the reward and done flags that
// arrived since they were last drained, and reset answers. Not thread-safe
// itself: the node guards its instance with a mutex.
class InputState {
 public:
  InputState() = default;
  InputState(std::vector<SourceSpec> sources, std::size_t num_envs);

  std::size_t num_envs() const noexcept { return num_envs_; }
  std::size_t num_sources() const noexcept { return sources_.size(); }
  const SourceSpec &source(std::size_t i) const { return sources_.at(i); }

  // Each put_* stores env's row of source src and stamps it with t. They
  // return "" or, when the message does not fit the source (a joint
  // missing, a wrong size or encoding), why; the row is then unchanged.
  std::string put_joint_state(std::size_t src, std::size_t env, const std::vector<std::string> &names,
                              const std::vector<double> &position, const std::vector<double> &velocity,
                              const std::vector<double> &effort, TimePoint t);
  std::string put_array(std::size_t src, std::size_t env, const double *data, std::size_t count, TimePoint t);
  std::string put_image(std::size_t src, std::size_t env, uint32_t height, uint32_t width,
                        const std::string &encoding, uint32_t step, const uint8_t *data, std::size_t size,
                        TimePoint t);
  std::string put_text(std::size_t src, std::size_t env, std::string text, TimePoint t);

  // Reward and done topics: rewards add up, a true flag stays set, until
  // drained into a Controller's copy; each stamps its arrival.
  void add_reward(std::size_t env, double reward, TimePoint t);
  void put_terminated(std::size_t env, bool value, TimePoint t);
  void put_truncated(std::size_t env, bool value, TimePoint t);
  // An answer of env's reset service.
  void put_reset_answer(std::size_t env, bool success, TimePoint t);

  // When (source, env) last got a value; nullopt: never.
  std::optional<TimePoint> received(std::size_t src, std::size_t env) const;
  // When (source, env) got the value before its last; nullopt: fewer
  // than two so far.
  std::optional<TimePoint> received_before(std::size_t src, std::size_t env) const;
  // How many values (source, env) has got, ever.
  uint64_t arrivals(std::size_t src, std::size_t env) const;

  // Copies every row and time into dst (whose sources and envs must match,
  // or dst is made a copy), and moves the rewards, done flags and reset
  // answers into it: dst accumulates them, this state starts from zero.
  void drain_into(InputState &dst);

  // Copies env's row of every source, and its arrival time and count,
  // from src (of the same sources and envs); the signals are untouched.
  void copy_row(const InputState &src, std::size_t env);

  // Describes this state's arrays (over its own buffers) in obs.
  void describe(plugrl::Observation &obs) const;

  // Per-env step signals as drained so far.
  struct Signals {
    double reward = 0;           // sum since last taken
    uint64_t rewards = 0;        // messages summed
    uint64_t terminated_msgs = 0, truncated_msgs = 0;  // messages since last taken
    bool terminated = false;     // latched
    bool truncated = false;      // latched
    std::optional<TimePoint> reward_at, terminated_at, truncated_at;  // last arrival
    uint64_t reset_answers = 0;  // reset answers ever received
    bool reset_ok = false;       // the last answer's success
    // When the first true done flag since last taken came: the step's
    // final observation is the env's state from then on.
    std::optional<TimePoint> ended_at;
    std::optional<TimePoint> reset_answer_at;  // the last reset answer's arrival

    // Forgets what was summed and latched for a step (the reward, the
    // message counts, the done flags), once it is reported or belongs to
    // no step; the reset answers stay.
    void clear_step() {
      reward = 0;
      rewards = terminated_msgs = truncated_msgs = 0;
      terminated = truncated = false;
      ended_at.reset();
    }
  };
  Signals &signals(std::size_t env) { return signals_.at(env); }
  const Signals &signals(std::size_t env) const { return signals_.at(env); }

 private:
  struct Row {
    std::optional<TimePoint> at, before;  // the last two arrivals
    uint64_t arrivals = 0;
  };
  // Records a value's arrival at t in (src, env)'s row.
  void stamp(std::size_t src, std::size_t env, TimePoint t);
  std::vector<SourceSpec> sources_;
  std::size_t num_envs_ = 0;
  std::vector<std::vector<double>> f64_;   // per source: [n, elements] (states)
  std::vector<std::vector<uint8_t>> u8_;   // per source: [n, elements] (images)
  std::vector<std::vector<std::string>> text_;  // per source: [n] (text)
  std::vector<std::vector<Row>> rows_;     // per source: [n]
  std::vector<Signals> signals_;           // [n]
};

// ---------------------------------------------------------------- readiness

// Whether every source of env but a context source has a value that
// arrived at or after t, or came with a signal that arrived at t: up to
// skew before it, and nearer to t than to the value before it (a source
// that publishes every period P has its value before the signal about P
// ahead, and does not count however small skew is against P).
bool state_since(const InputState &in, std::size_t env, TimePoint t, Duration skew = Duration::zero());

// Whether env's observation can be used at time now: every source has a
// value, and every one but a context source (SourceSpec::is_context) is
// no older than max_age and (when newer_than is set) arrived after
// newer_than. "" when ready, else why not, naming the source.
std::string obs_readiness(const InputState &in, std::size_t env, TimePoint now, Duration max_age,
                          std::optional<TimePoint> newer_than);

// Lockstep: whether env's step after a command sent at `since` is complete:
// its observation and each step signal the node subscribes to (reward,
// terminated, truncated; the flags say which) arrived after since.
std::string step_readiness(const InputState &in, std::size_t env, TimePoint since, bool reward_topic,
                           bool terminated_topic, bool truncated_topic);

// ---------------------------------------------------------------- commands

enum class HoldMode { Zeros, Last };
std::optional<HoldMode> parse_hold_mode(const std::string &name);

// Per-env commands: splits a step's actions into one command per env
// (scaled, clipped), remembers the last one sent, and gives the safe hold.
class CommandBook {
 public:
  CommandBook(std::size_t num_envs, HoldMode hold, double scale = 1.0, std::optional<double> lo = std::nullopt,
              std::optional<double> hi = std::nullopt);

  // actions holds num_envs * k values (env i's at i * k); sets each env's
  // command and returns k, or 0 when the size is not a multiple of num_envs.
  std::size_t set_from_actions(const std::vector<double> &actions);
  const std::vector<double> &command(std::size_t env) const { return commands_.at(env); }
  // What env holds when its observation is stale: zeros (of the last
  // command's size) or the last command. Empty before any command.
  std::vector<double> hold(std::size_t env) const;
  bool has_command(std::size_t env) const { return sent_.at(env); }
  // Applies scale and the clip to one value.
  double shape_value(double v) const;

 private:
  HoldMode hold_;
  double scale_;
  std::optional<double> lo_, hi_;
  std::vector<std::vector<double>> commands_;
  std::vector<bool> sent_;
};

// One point of a trajectory of a chunk: step k's values, due at
// (k + 1) * period after the chunk's start (point 0 is the step being
// commanded now, reached at the end of this control period).
struct TrajectoryPoint {
  std::vector<double> values;
  Duration time_from_start;
};
// The points of env's part of a chunk: `steps` steps of step_size values,
// env's step k at chunk[k * step_size ...] (scaled and clipped by book).
// What plugrl::Runner::chunk gives between act and report is such a part:
// the step act gave, then the rest of the env's chunk.
std::vector<TrajectoryPoint> trajectory_points(const double *chunk, std::size_t steps, std::size_t step_size,
                                               Duration period, const CommandBook &book);
// A trajectory of one command already scaled and clipped (a hold, or a
// step whose chunk could not be read): one point at period.
std::vector<TrajectoryPoint> single_point(const std::vector<double> &command, Duration period);

// ---------------------------------------------------------------- episodes

struct EpisodeRecord {
  int64_t number;  // 1, 2, ... over all envs
  std::size_t env;
  double seconds;  // since the controller started
  double episode_return;
  int64_t length;
  bool success;  // truncated, not terminated: it lasted
};
// The CSV of examples/plot_returns.py: episode,env,seconds,return,length,success.
const char *episode_csv_header();
std::string episode_csv_line(const EpisodeRecord &e);

// The live statistics as one JSON object (the node's ~/stats topic).
std::string stats_json(const plugrl_statistics &st, int64_t episodes, uint64_t holds, const char *phase);

// ---------------------------------------------------------------- controller

// How ticks come.
enum class Mode {
  Timer,     // a control timer: the robot publishes at its own rate; each
             // tick uses the latest values that are fresh enough
  Lockstep,  // each command makes the env take one step and publish its
             // observation, reward and done flags once (a simulator); a
             // step is complete when all have arrived after the command
};

// What wakes the runner thread. The executor's callbacks report what
// happened (a control tick, data, a reset's answer) and a stop; the runner
// thread waits here between two Controller::wake calls. Thread-safe.
//
// Timer mode steps at the control timer's rate and at no other: data and
// reset answers are taken by the next tick, and ticks that come while the
// runner thread is busy (an infer waiting) are taken as one when it is
// done. Lockstep steps when data or a reset's answer comes, and at least
// every `recheck` so that a step whose data is late gets its hold.
class Wakeups {
 public:
  explicit Wakeups(Mode mode, Duration recheck = std::chrono::milliseconds(10));

  void tick();            // the control timer fired (timer mode)
  void data();            // an observation or a step signal came
  void reset_answered();  // a reset service answered
  void stop();            // end: every wait returns false, now and later

  // Blocks until the controller should wake (true) or stop() was called
  // (false).
  bool wait();

 private:
  const Mode mode_;
  const Duration recheck_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false, stopped_ = false;
  void wake_locked();
};

// The runner thread's loop body: each wake() looks at the drained inputs
// and does what can be done now - report a finished step, ask for resets,
// wait for them, act and publish - or publishes the hold commands.
class Controller {
 public:
  struct Config {
    std::size_t num_envs = 1;
    Mode mode = Mode::Timer;
    // Timer: an observation older than this is stale. Lockstep: a step
    // whose data has not come this long after its command (or its last
    // hold) is stale, and gets a hold; the env steps on every hold too,
    // and the step is complete when it has answered them all, or when,
    // this long after the last, every env has answered at least one (the
    // rest were lost).
    Duration max_obs_age = std::chrono::milliseconds(500);
    // A reset not answered this long after its request is asked again.
    Duration reset_timeout = std::chrono::seconds(5);
    bool reward_topic = true, terminated_topic = true, truncated_topic = true;
    // Whether the env has a reset service. Without one it starts its next
    // episode by itself; in lockstep the controller then acts on the
    // latest observation at once instead of waiting for a newer one.
    bool reset_service = true;
    int64_t max_episodes = 0;  // 0: no limit
    // Time between two points of a published trajectory (the control
    // period; Hooks::publish_trajectory).
    Duration trajectory_period = std::chrono::milliseconds(10);
    // Timer mode: how long after an env's done flag, or after its reset's
    // answer, the controller waits for a state of the env that came after
    // it (the node: max_obs_age_s, at least a control period). A robot may
    // publish its flags before the state that ended the episode
    // (cartpole_sim_node does), a camera may be slower than the control
    // rate, and a reset's answer can overtake the state the reset
    // brought: a tick between the two reported the state before the
    // terminal one as the episode's final observation, or began the next
    // episode on the last one's state. A robot that goes quiet at its end
    // is reported with its last state once this has passed; until then
    // the step's commands stand (nothing is stale), or the envs hold (a
    // reset).
    Duration state_after_signal_wait = std::chrono::milliseconds(20);
    // How much earlier than its signal a state may have arrived and still
    // count as coming with it. Messages that arrive together are handed
    // to the node's callbacks in the executor's order, not the order they
    // were sent: rclcpp takes subscriptions (the state first, as the node
    // subscribes to it first) before service answers, so the state a
    // simulator sent after its flags, or before its reset's answer, is
    // stamped a few microseconds earlier. Without this every episode end
    // and every reset waited the whole state_after_signal_wait. A state
    // nearer to the value before it than to the signal does not count
    // (state_since): a robot publishing at 1 kHz has the state before its
    // terminal one about 1 ms ahead of the flag, within this skew.
    Duration signal_skew = std::chrono::milliseconds(2);
    // Timer mode: the longest the report of a step that ended episodes
    // waits for their resets, from the action it answers. The server
    // closes a connection whose feedback has not come 60 s after its
    // action (SPEC 7.3), and the feedback goes with it (SPEC 7.6): a slow
    // reset (a real robot's, one that fails until someone sees to it, one
    // never answered) lost the step, terminal transition and all. Past
    // this the step is reported, the others with their states of that
    // moment (the next infer may then send newer ones), and the resets
    // are waited for with no feedback owed.
    Duration max_report_delay = std::chrono::seconds(30);
  };
  enum class Level { Debug, Info, Warn, Error };
  struct Hooks {
    // Drains the node's shared InputState into dst (under the node's lock).
    std::function<void(InputState &dst)> snapshot;
    // plugrl::Runner::act / report; false: the server stopped the run.
    std::function<bool(const plugrl::Observation &, std::vector<double> &)> act;
    std::function<bool(const plugrl::Observation &, const std::vector<double> &, const std::vector<uint8_t> &,
                       const std::vector<uint8_t> &, const std::vector<uint8_t> &)>
        report;
    // Publishes env's command; hold: it is the safe hold, not an action.
    std::function<void(std::size_t env, const std::vector<double> &command, bool hold)> publish;
    // Optional: env's trajectory, published right after its command.
    // Unset: no trajectories are built. After an action the points are
    // the rest of env's chunk from this step (Hooks::chunk), one point per
    // step; for a hold, or without Hooks::chunk, the command alone.
    std::function<void(std::size_t env, const std::vector<TrajectoryPoint> &points, bool hold)>
        publish_trajectory;
    // Optional: plugrl::Runner::chunk - the rest of env's chunk from the
    // step the last act gave it, steps x step_size values, step after step;
    // returns the steps. Called between act and report (before the step's
    // commands go out), only when publish_trajectory is set. When it throws
    // (plugrl::Error) or its size is off, a warning is logged and the
    // trajectory is the command alone.
    std::function<int64_t(std::size_t env, std::vector<double> &chunk)> chunk;
    // Sends env's reset request (asynchronously: the answer comes through
    // InputState::put_reset_answer). Never after final_hold; called with
    // the controller's output lock held, as publish is.
    std::function<void(std::size_t env)> request_reset;
    std::function<void(const EpisodeRecord &)> on_episode;
    std::function<void(Level, const std::string &)> log;
  };
  enum class Result {
    Waiting,   // nothing to do yet (maybe holding)
    Stepped,   // an action was published
    Stopped,   // the server stopped the run
    Finished,  // max_episodes episodes have ended
  };
  enum class Phase { Act, Report, Reset };

  Controller(Config config, InputState inputs, CommandBook book, Hooks hooks);

  // One wake of the runner thread at time now. Throws what act and report
  // throw (plugrl::Error); the phase is then as it was before the call
  // (act: in timer mode every env holds first, as for a stale
  // observation) or moves on as if the step was reported (report: the
  // runner has counted it; feedback it could not send is dropped, SPEC
  // 7.6).
  // Runner thread only; the other members below say where they may be
  // called from.
  Result wake(TimePoint now);

  // Timer mode, from the control timer's thread while wake() may be
  // blocked in Hooks::act (a slow server, a reconnect): once the
  // observation being acted on has gone stale (older than max_obs_age),
  // publishes every env's hold, as a tick of the runner thread would, and
  // returns true; the action that act then brings is not published (the
  // step is reported at the next wake, as for an action that came late). Does nothing (false) when no act is waiting, before the
  // observation goes stale, or in lockstep (where a command is a step of
  // the env). Any thread; thread-safe with wake().
  bool hold_if_blocked(TimePoint now);
  // (Hooks::report is covered the same way: a report that waits on the
  // server gets the timer's holds, and the act after it judges its
  // observation at the time it asks.)

  // The run is over (a server stop, max_episodes, an error, a shutdown):
  // publishes every commanded env's hold once more, and from then on
  // publishes nothing - an action that a blocked act brings afterwards is
  // not sent. Idempotent; any thread; thread-safe with wake(). Throws what
  // Hooks::publish throws.
  void final_hold(const std::string &why);

  // Runner thread (or after it ended) only, but for holds().
  Phase phase() const noexcept { return phase_; }
  const char *phase_name() const noexcept;
  int64_t episodes() const noexcept { return episodes_; }
  uint64_t holds() const noexcept { return holds_.load(); }  // any thread
  const InputState &inputs() const noexcept { return in_; }
  const CommandBook &commands() const noexcept { return book_; }
  // The trajectory last published to env (empty before the first, or
  // without Hooks::publish_trajectory).
  const std::vector<TrajectoryPoint> &trajectory(std::size_t env) const { return trajectories_.at(env); }

 private:
  // Publishes every env's hold (those that ever got a command), at most
  // once per tick (timer) or per max_obs_age (lockstep); logs why (a
  // warning, or for an expected hold such as a reset's, at debug level).
  // Takes out_mu_.
  void hold_all(TimePoint now, const std::string &why, bool expected = false);
  // hold_all's body; out_mu_ held.
  void hold_all_locked(TimePoint now, const std::string &why, bool expected);
  // Publishes the hold and its trajectory to every env that ever got a
  // command (counted as a command in flight in lockstep's Report phase);
  // false when there was none. out_mu_ held.
  bool publish_holds_locked();
  // Holds instead of publishing the action act just gave (see hold_all):
  // the runner took the step, so its report is owed at the next wake.
  Result hold_step(TimePoint now, const std::string &why, bool expected = false);
  // out_mu_ held.
  void warn_throttled(TimePoint now, const std::string &msg);
  // How old env's observation may be to act on or report: max_obs_age
  // (timer), but unbounded in lockstep and for an env whose episode ended.
  Duration max_age(std::size_t env) const;
  // Timer mode: takes env's end out of the running step - its terminal
  // state (the rows as they are now), its reward and flags - to be
  // reported after its reset, and asks for the reset (unless the run
  // finishes with this end).
  void capture_end(std::size_t env, bool ask);
  // Asks for env's reset and counts its answers from now.
  void begin_reset(std::size_t env);
  // Whether every env asked to reset has (holding the rest meanwhile is
  // the caller's); why not in why. Asks again for a failed or unanswered
  // reset.
  bool resets_complete(TimePoint now, std::string &why);
  Result do_act(TimePoint now);
  Result do_report(TimePoint now);
  // Lockstep: whether the step's answers have all come (holding when they
  // are late); see the .cpp.
  bool lockstep_step_complete(TimePoint now);
  // Before a step's command (or the hold standing in for it) goes out:
  // stamps it and the arrivals its answers are counted from. out_mu_ held.
  void begin_step_locked();
  // Around a hook that can wait on the server (act, report): what
  // hold_if_blocked needs, set and cleared under out_mu_; end_wait says
  // whether the timer held meanwhile.
  void begin_wait(TimePoint asked);
  bool end_wait();
  // Lockstep: the answers env has given since the step's command: the
  // fewest messages any of its topics brought since.
  uint64_t answers(std::size_t env) const;
  bool resets_done(TimePoint now);
  // Hooks::request_reset, unless final_hold ran; takes out_mu_.
  void ask_reset(std::size_t env);
  // After an action: env's trajectory from its chunk (Hooks::chunk), or
  // the command alone when there is no chunk to read (a warning, at most
  // once a second).
  void build_trajectory(std::size_t env, TimePoint now);

  Config cfg_;
  InputState in_;
  CommandBook book_;
  Hooks hooks_;
  Phase phase_ = Phase::Act;
  plugrl::Observation obs_;
  std::vector<double> actions_, rewards_, chunk_;
  std::vector<std::vector<TrajectoryPoint>> trajectories_;  // [n]: the last published
  std::vector<uint8_t> terminated_, truncated_, success_;
  TimePoint start_;
  std::optional<TimePoint> command_at_;  // the last step's command's publication
  // Lockstep: per env, the commands it got since (and with) the step's
  // own; each source's arrivals then [src][env]; the last publication.
  std::vector<uint64_t> in_flight_;
  std::vector<std::vector<uint64_t>> arrivals_at_command_;
  TimePoint last_publication_;
  std::optional<TimePoint> last_hold_, last_warn_, last_width_error_;
  // The command width of the first action: the robot's controllers were
  // set up for it, and one of another width (a reconnect to a server of
  // another action_dim) is held, never published.
  std::optional<std::size_t> width_;
  // Per env: the running episode, and its reset request.
  std::vector<double> ep_return_;
  std::vector<int64_t> ep_length_;
  std::vector<bool> resetting_;
  // Timer mode: the step's report waits for the resets of the envs whose
  // episode ended in it, so that every other env's observation in the
  // feedback is the one the next infer sends (SPEC 5.4; the robot moves
  // on while an env resets, and a feedback sent at the end had been
  // followed by an infer of newer states: `plugrl ledger audit` flagged
  // every env at every reset). Per env: whether its end is captured, and
  // its terminal rows, reward and flags.
  std::vector<bool> ended_;
  InputState end_rows_, report_rows_;
  std::vector<double> end_reward_;
  std::vector<uint8_t> end_terminated_, end_truncated_;
  std::vector<TimePoint> reset_sent_;
  std::vector<uint64_t> answers_at_request_;
  // When the last act's action came (Config::max_report_delay).
  std::optional<TimePoint> acted_at_;
  int64_t episodes_ = 0;
  std::atomic<uint64_t> holds_{0};

  // Guards what hold_if_blocked and final_hold, on other threads, share
  // with the runner thread: book_, trajectories_, last_hold_, last_warn_,
  // the fields below, and every publication.
  std::mutex out_mu_;
  // While wake() waits in Hooks::act or Hooks::report: when the
  // observation it is for goes stale, and when the wait began.
  std::optional<TimePoint> stale_at_;
  TimePoint wait_since_;
  bool held_while_waiting_ = false;  // hold_if_blocked held during this wait
  bool closed_ = false;  // final_hold ran: publish nothing more
};

}  // namespace plugrl_ros2

#endif  // PLUGRL_ROS2_ENV_CORE_HPP
