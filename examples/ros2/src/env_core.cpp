// env_core.cpp - see include/plugrl_ros2/env_core.hpp.
#include "plugrl_ros2/env_core.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace plugrl_ros2 {

namespace {

std::string seconds_str(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", std::chrono::duration<double>(d).count());
  return buf;
}

// Channels of an 8-bit sensor_msgs/Image encoding; 0 for any other.
int channels_of(const std::string &encoding) {
  if (encoding == "mono8" || encoding == "8UC1") return 1;
  if (encoding == "rgb8" || encoding == "bgr8" || encoding == "8UC3") return 3;
  if (encoding == "rgba8" || encoding == "bgra8" || encoding == "8UC4") return 4;
  return 0;
}

}  // namespace

// ---------------------------------------------------------------- parameters

namespace {

std::string number_str(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "" when s seconds is a time the node can wait: finite, in (0,
// kMaxParameterSeconds] (or 0 too when zero_ok).
std::string check_seconds(const char *name, double s, bool zero_ok) {
  // A time that must be positive is at least kMinParameterSeconds: 1e-10 s
  // passed a "> 0" check and became 0 ns (review).
  if (std::isfinite(s) && s <= kMaxParameterSeconds && (s >= kMinParameterSeconds || (zero_ok && s == 0))) return "";
  return std::string(name) + " is " + number_str(s) + "; want a number of seconds from " +
         number_str(kMinParameterSeconds) + (zero_ok ? " (or 0)" : "") + " to " + number_str(kMaxParameterSeconds);
}

// "" when v fits the int32_t field it is passed to, from lo up.
std::string check_int32(const char *name, int64_t v, int64_t lo, const char *what) {
  if (v >= lo && v <= INT32_MAX) return "";
  return std::string(name) + " is " + std::to_string(v) + "; want " + what + ", from " + std::to_string(lo) +
         " to " + std::to_string(INT32_MAX);
}

}  // namespace

std::string check_parameters(const NumericParameters &p) {
  std::string why;
  // A negative rate is no rate: it had made a real robot's node lockstep,
  // waiting for every topic to answer each command (review).
  if (!std::isfinite(p.control_rate_hz) || p.control_rate_hz < 0)
    return "control_rate_hz is " + number_str(p.control_rate_hz) + "; want a rate in Hz, or 0 for lockstep";
  // A rate's period must be a time too: at most 10 kHz (0.1 ms), at
  // least one tick per kMaxParameterSeconds.
  if (p.control_rate_hz > 0 && (p.control_rate_hz > 1e4 || 1.0 / p.control_rate_hz > kMaxParameterSeconds))
    return "control_rate_hz is " + number_str(p.control_rate_hz) + "; want at most 10000 Hz and at least " +
           number_str(1.0 / kMaxParameterSeconds) + " Hz, or 0 for lockstep";
  if (!(why = check_seconds("max_obs_age_s", p.max_obs_age_s, false)).empty()) return why;
  if (!(why = check_seconds("reset_timeout_s", p.reset_timeout_s, false)).empty()) return why;
  if (!std::isfinite(p.stats_period_s) || p.stats_period_s > kMaxParameterSeconds)
    return "stats_period_s is " + number_str(p.stats_period_s) + "; want seconds, at most " +
           number_str(kMaxParameterSeconds) + " (or <= 0: no ~/stats)";
  if (p.stats_period_s > 0 && p.stats_period_s < 1e-3)
    return "stats_period_s is " + number_str(p.stats_period_s) + "; want at least 0.001 s (or <= 0: no ~/stats)";
  if (!std::isfinite(p.trajectory_dt_s) || p.trajectory_dt_s > kMaxParameterSeconds ||
      (p.trajectory_dt_s > 0 && p.trajectory_dt_s < 1e-6))
    return "trajectory_dt_s is " + number_str(p.trajectory_dt_s) + "; want seconds, from 1e-06 to " +
           number_str(kMaxParameterSeconds) + " (or 0: the control period)";
  if (!std::isfinite(p.action_scale)) return "action_scale is " + number_str(p.action_scale) + "; want a finite number";
  if (!p.action_clip.empty()) {
    if (p.action_clip.size() != 2)
      return "action_clip has " + std::to_string(p.action_clip.size()) + " values; want [min, max] or []";
    const double lo = p.action_clip[0], hi = p.action_clip[1];
    if (std::isnan(lo) || std::isnan(hi) || lo > hi)
      return "action_clip is [" + number_str(lo) + ", " + number_str(hi) + "]; want [min, max] with min <= max";
  }
  if (!(why = check_int32("connect_timeout_ms", p.connect_timeout_ms, 0, "milliseconds (0: the library's default)"))
           .empty())
    return why;
  if (!(why = check_int32("receive_timeout_ms", p.receive_timeout_ms, 0, "milliseconds (0: the library's default)"))
           .empty())
    return why;
  if (!(why = check_int32("close_timeout_ms", p.close_timeout_ms, 0, "milliseconds (0: the library's default)"))
           .empty())
    return why;
  if (!(why = check_int32("max_reconnects", p.max_reconnects, -1, "attempts (-1: never reconnect)")).empty())
    return why;
  if (!(why = check_int32("dead_peer_timeout_ms", p.dead_peer_timeout_ms, -1,
                          "milliseconds >= 2000 (0: the library's default, -1: off)"))
           .empty())
    return why;
  if (!(why = check_int32("open_wait_ms", p.open_wait_ms, -1,
                          "milliseconds (0: one attempt, -1: until the server answers)"))
           .empty())
    return why;
  if (p.dead_peer_timeout_ms > 0 && p.dead_peer_timeout_ms < 2000)
    return "dead_peer_timeout_ms is " + std::to_string(p.dead_peer_timeout_ms) +
           "; want milliseconds >= 2000 (keepalive probes go at most once a second, and each needs time to be "
           "answered), 0 for the library's default or -1 for off";
  if (p.max_episodes < 0)
    return "max_episodes is " + std::to_string(p.max_episodes) + "; want a count >= 0 (0: no limit)";
  return "";
}

Duration seconds_to_duration(double s) {
  if (!(s > 0)) return Duration::zero();  // NaN too
  if (s >= kMaxParameterSeconds) s = kMaxParameterSeconds;
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

// ---------------------------------------------------------------- sources

std::optional<SourceKind> parse_source_kind(const std::string &name) {
  if (name == "joint_position") return SourceKind::JointPosition;
  if (name == "joint_velocity") return SourceKind::JointVelocity;
  if (name == "joint_effort") return SourceKind::JointEffort;
  if (name == "float64_array") return SourceKind::Float64Array;
  if (name == "image") return SourceKind::Image;
  if (name == "text") return SourceKind::Text;
  return std::nullopt;
}

const char *source_kind_name(SourceKind kind) {
  switch (kind) {
    case SourceKind::JointPosition: return "joint_position";
    case SourceKind::JointVelocity: return "joint_velocity";
    case SourceKind::JointEffort: return "joint_effort";
    case SourceKind::Float64Array: return "float64_array";
    case SourceKind::Image: return "image";
    case SourceKind::Text: return "text";
  }
  return "?";
}

bool is_joint_kind(SourceKind kind) {
  return kind == SourceKind::JointPosition || kind == SourceKind::JointVelocity || kind == SourceKind::JointEffort;
}

std::size_t SourceSpec::elements() const {
  if (kind == SourceKind::Text) return 0;
  std::size_t n = 1;
  for (int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::string normalize_sources(std::vector<SourceSpec> &sources) {
  if (sources.empty()) return "no observation sources (set observation.names)";
  std::set<std::string> names;
  int texts = 0;
  for (auto &s : sources) {
    const std::string what = "observation \"" + s.name + "\" (" + source_kind_name(s.kind) + ")";
    if (s.name.empty()) return "an observation source has an empty name";
    if (!names.insert(s.name).second) return "observation \"" + s.name + "\" is listed twice";
    if (s.topic.empty()) return what + " has no topic";
    for (int64_t d : s.shape)
      if (d <= 0) return what + " has a shape with a dimension <= 0";
    // Each env's row is allocated at start: a shape must be one the robot
    // can send, not one whose product overflows.
    int64_t product = 1;
    for (int64_t d : s.shape) {
      if (d > kMaxSourceElements / product)
        return what + " has a shape of more than " + std::to_string(kMaxSourceElements) + " elements per env";
      product *= d;
    }
    switch (s.kind) {
      case SourceKind::JointPosition:
      case SourceKind::JointVelocity:
      case SourceKind::JointEffort:
        if (s.shape.empty() && !s.joints.empty()) s.shape = {static_cast<int64_t>(s.joints.size())};
        if (s.shape.empty()) return what + " needs joints (or a size)";
        if (!s.joints.empty() && s.elements() != s.joints.size())
          return what + " has " + std::to_string(s.joints.size()) + " joints but a shape of " +
                 std::to_string(s.elements()) + " elements";
        break;
      case SourceKind::Float64Array:
        if (s.shape.empty()) return what + " needs a shape (or a size)";
        break;
      case SourceKind::Image:
        if (s.shape.size() != 3) return what + " needs a shape [height, width, channels]";
        if (s.shape[2] != 1 && s.shape[2] != 3 && s.shape[2] != 4) return what + " needs 1, 3 or 4 channels";
        break;
      case SourceKind::Text:
        if (!s.shape.empty()) return what + " takes no shape";
        if (++texts > 1) return "more than one text source: an observation has one text per env";
        break;
    }
  }
  if (texts == static_cast<int>(sources.size()))
    return "the only observation source is text: an observation needs at least one array (a state or an image) "
           "beside its text";
  return "";
}

std::string env_topic(const std::string &ns, const std::string &topic) {
  if (ns.empty()) return topic;
  if (ns.back() == '/') return ns + topic;
  return ns + "/" + topic;
}

// ---------------------------------------------------------------- inputs

InputState::InputState(std::vector<SourceSpec> sources, std::size_t num_envs)
    : sources_(std::move(sources)), num_envs_(num_envs) {
  const std::size_t m = sources_.size();
  f64_.resize(m);
  u8_.resize(m);
  text_.resize(m);
  rows_.resize(m);
  for (std::size_t s = 0; s < m; s++) {
    const std::size_t e = sources_[s].elements();
    switch (sources_[s].kind) {
      case SourceKind::Image: u8_[s].assign(num_envs * e, 0); break;
      case SourceKind::Text: text_[s].assign(num_envs, std::string()); break;
      default: f64_[s].assign(num_envs * e, 0.0); break;
    }
    rows_[s].assign(num_envs, Row{});
  }
  signals_.assign(num_envs, Signals{});
}

std::string InputState::put_joint_state(std::size_t src, std::size_t env, const std::vector<std::string> &names,
                                        const std::vector<double> &position, const std::vector<double> &velocity,
                                        const std::vector<double> &effort, TimePoint t) {
  const SourceSpec &s = sources_.at(src);
  const std::vector<double> *values = &position;
  const char *field = "position";
  if (s.kind == SourceKind::JointVelocity) {
    values = &velocity;
    field = "velocity";
  } else if (s.kind == SourceKind::JointEffort) {
    values = &effort;
    field = "effort";
  } else if (s.kind != SourceKind::JointPosition) {
    return "observation \"" + s.name + "\" is not a joint source";
  }
  const std::size_t e = s.elements();
  double *row = f64_[src].data() + env * e;
  if (s.joints.empty()) {
    if (values->size() < e)
      return "JointState has " + std::to_string(values->size()) + " " + field + " values; \"" + s.name + "\" needs " +
             std::to_string(e);
    std::copy(values->begin(), values->begin() + static_cast<std::ptrdiff_t>(e), row);
  } else {
    // Check every joint first, so that a refused message changes nothing.
    std::vector<std::size_t> at(e);
    for (std::size_t j = 0; j < e; j++) {
      auto it = std::find(names.begin(), names.end(), s.joints[j]);
      if (it == names.end()) return "JointState has no joint \"" + s.joints[j] + "\" (for \"" + s.name + "\")";
      at[j] = static_cast<std::size_t>(it - names.begin());
      if (at[j] >= values->size())
        return std::string("JointState has no ") + field + " for joint \"" + s.joints[j] + "\"";
    }
    for (std::size_t j = 0; j < e; j++) row[j] = (*values)[at[j]];
  }
  stamp(src, env, t);
  return "";
}

std::string InputState::put_array(std::size_t src, std::size_t env, const double *data, std::size_t count,
                                  TimePoint t) {
  const SourceSpec &s = sources_.at(src);
  const std::size_t e = s.elements();
  if (s.kind != SourceKind::Float64Array) return "observation \"" + s.name + "\" is not a float64_array source";
  if (count != e)
    return "Float64MultiArray has " + std::to_string(count) + " values; \"" + s.name + "\" needs " +
           std::to_string(e);
  std::copy(data, data + count, f64_[src].data() + env * e);
  stamp(src, env, t);
  return "";
}

std::string InputState::put_image(std::size_t src, std::size_t env, uint32_t height, uint32_t width,
                                  const std::string &encoding, uint32_t step, const uint8_t *data, std::size_t size,
                                  TimePoint t) {
  const SourceSpec &s = sources_.at(src);
  if (s.kind != SourceKind::Image) return "observation \"" + s.name + "\" is not an image source";
  const auto h = static_cast<std::size_t>(s.shape[0]), w = static_cast<std::size_t>(s.shape[1]),
             c = static_cast<std::size_t>(s.shape[2]);
  if (height != h || width != w)
    return "image is " + std::to_string(height) + "x" + std::to_string(width) + "; \"" + s.name + "\" needs " +
           std::to_string(h) + "x" + std::to_string(w);
  if (static_cast<std::size_t>(channels_of(encoding)) != c)
    return "image encoding \"" + encoding + "\" does not give " + std::to_string(c) + " 8-bit channels";
  const std::size_t row_bytes = w * c;
  if (step < row_bytes || size < (h - 1) * static_cast<std::size_t>(step) + row_bytes)
    return "image data (" + std::to_string(size) + " bytes, step " + std::to_string(step) + ") is too short";
  uint8_t *out = u8_[src].data() + env * h * row_bytes;
  for (std::size_t y = 0; y < h; y++)  // rows may be padded: copy each
    std::copy(data + y * step, data + y * step + row_bytes, out + y * row_bytes);
  stamp(src, env, t);
  return "";
}

std::string InputState::put_text(std::size_t src, std::size_t env, std::string text, TimePoint t) {
  const SourceSpec &s = sources_.at(src);
  if (s.kind != SourceKind::Text) return "observation \"" + s.name + "\" is not a text source";
  text_[src][env] = std::move(text);
  stamp(src, env, t);
  return "";
}

void InputState::add_reward(std::size_t env, double reward, TimePoint t) {
  Signals &s = signals_.at(env);
  s.reward += reward;
  s.rewards++;
  s.reward_at = t;
}

void InputState::put_terminated(std::size_t env, bool value, TimePoint t) {
  Signals &s = signals_.at(env);
  s.terminated = s.terminated || value;
  if (value && !s.ended_at) s.ended_at = t;
  s.terminated_at = t;
  s.terminated_msgs++;
}

void InputState::put_truncated(std::size_t env, bool value, TimePoint t) {
  Signals &s = signals_.at(env);
  s.truncated = s.truncated || value;
  if (value && !s.ended_at) s.ended_at = t;
  s.truncated_at = t;
  s.truncated_msgs++;
}

void InputState::put_reset_answer(std::size_t env, bool success, TimePoint t) {
  Signals &s = signals_.at(env);
  s.reset_answers++;
  s.reset_ok = success;
  s.reset_answer_at = t;
}

std::optional<TimePoint> InputState::received(std::size_t src, std::size_t env) const {
  return rows_.at(src).at(env).at;
}

std::optional<TimePoint> InputState::received_before(std::size_t src, std::size_t env) const {
  return rows_.at(src).at(env).before;
}

uint64_t InputState::arrivals(std::size_t src, std::size_t env) const { return rows_.at(src).at(env).arrivals; }

void InputState::stamp(std::size_t src, std::size_t env, TimePoint t) {
  Row &row = rows_[src][env];
  row.before = row.at;
  row.at = t;
  row.arrivals++;
}

void InputState::drain_into(InputState &dst) {
  if (dst.sources_.size() != sources_.size() || dst.num_envs_ != num_envs_) {
    dst = InputState(sources_, num_envs_);
  }
  // The vectors keep their size, so dst's buffers stay where they are
  // (an Observation describing them stays valid).
  for (std::size_t s = 0; s < sources_.size(); s++) {
    std::copy(f64_[s].begin(), f64_[s].end(), dst.f64_[s].begin());
    std::copy(u8_[s].begin(), u8_[s].end(), dst.u8_[s].begin());
    for (std::size_t i = 0; i < text_[s].size(); i++) dst.text_[s][i] = text_[s][i];
    dst.rows_[s] = rows_[s];
  }
  for (std::size_t i = 0; i < num_envs_; i++) {
    Signals &from = signals_[i];
    Signals &to = dst.signals_[i];
    to.reward += from.reward;
    to.rewards += from.rewards;
    to.terminated_msgs += from.terminated_msgs;
    to.truncated_msgs += from.truncated_msgs;
    to.terminated = to.terminated || from.terminated;
    to.truncated = to.truncated || from.truncated;
    if (from.reward_at) to.reward_at = from.reward_at;
    if (from.terminated_at) to.terminated_at = from.terminated_at;
    if (from.truncated_at) to.truncated_at = from.truncated_at;
    if (from.ended_at && !to.ended_at) to.ended_at = from.ended_at;  // the first flag counts
    if (from.reset_answers) {
      to.reset_answers += from.reset_answers;
      to.reset_ok = from.reset_ok;
      to.reset_answer_at = from.reset_answer_at;
    }
    from = Signals{};
  }
}

void InputState::copy_row(const InputState &src, std::size_t env) {
  if (src.sources_.size() != sources_.size() || src.num_envs_ != num_envs_ || env >= num_envs_)
    throw std::invalid_argument("InputState::copy_row: another shape of inputs");
  for (std::size_t s = 0; s < sources_.size(); s++) {
    const std::size_t e = sources_[s].elements();
    if (!f64_[s].empty())
      std::copy_n(src.f64_[s].begin() + static_cast<std::ptrdiff_t>(env * e), e,
                  f64_[s].begin() + static_cast<std::ptrdiff_t>(env * e));
    if (!u8_[s].empty())
      std::copy_n(src.u8_[s].begin() + static_cast<std::ptrdiff_t>(env * e), e,
                  u8_[s].begin() + static_cast<std::ptrdiff_t>(env * e));
    if (!text_[s].empty()) text_[s][env] = src.text_[s][env];
    rows_[s][env] = src.rows_[s][env];
  }
}

void InputState::describe(plugrl::Observation &obs) const {
  const auto n = static_cast<int64_t>(num_envs_);
  for (std::size_t s = 0; s < sources_.size(); s++) {
    const SourceSpec &spec = sources_[s];
    std::vector<int64_t> shape{n};
    shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
    switch (spec.kind) {
      case SourceKind::Image: obs.image(spec.name, u8_[s].data(), std::move(shape)); break;
      case SourceKind::Text: obs.text(text_[s]); break;
      default: obs.state(spec.name, f64_[s].data(), std::move(shape)); break;
    }
  }
}

// ---------------------------------------------------------------- readiness

bool state_since(const InputState &in, std::size_t env, TimePoint t, Duration skew) {
  for (std::size_t s = 0; s < in.num_sources(); s++) {
    if (in.source(s).is_context()) continue;
    auto at = in.received(s, env);
    if (!at) return false;
    if (*at >= t) continue;
    const Duration lead = t - *at;
    if (lead > skew) return false;
    // Closer to the signal than to the value before it: a source that
    // publishes faster than skew puts its last value before the signal
    // a period ahead of it, and only a value handled in the same batch
    // as the signal comes this close.
    auto before = in.received_before(s, env);
    if (before && lead * 2 >= *at - *before) return false;
  }
  return true;
}

std::string obs_readiness(const InputState &in, std::size_t env, TimePoint now, Duration max_age,
                          std::optional<TimePoint> newer_than) {
  for (std::size_t s = 0; s < in.num_sources(); s++) {
    const SourceSpec &spec = in.source(s);
    auto at = in.received(s, env);
    if (!at) return "no " + spec.name + " yet (topic " + spec.topic + ")";
    if (spec.is_context()) continue;
    if (now - *at > max_age)
      return spec.name + " is " + seconds_str(now - *at) + " old (max_obs_age " + seconds_str(max_age) + ")";
    if (newer_than && *at <= *newer_than) return "waiting for a new " + spec.name;
  }
  return "";
}

std::string step_readiness(const InputState &in, std::size_t env, TimePoint since, bool reward_topic,
                           bool terminated_topic, bool truncated_topic) {
  std::string why = obs_readiness(in, env, since, Duration::max(), since);
  if (!why.empty()) return why;
  const InputState::Signals &s = in.signals(env);
  if (reward_topic && !(s.reward_at && *s.reward_at > since)) return "waiting for the reward";
  if (terminated_topic && !(s.terminated_at && *s.terminated_at > since)) return "waiting for terminated";
  if (truncated_topic && !(s.truncated_at && *s.truncated_at > since)) return "waiting for truncated";
  return "";
}

// ---------------------------------------------------------------- commands

std::optional<HoldMode> parse_hold_mode(const std::string &name) {
  if (name == "zeros") return HoldMode::Zeros;
  if (name == "last") return HoldMode::Last;
  return std::nullopt;
}

CommandBook::CommandBook(std::size_t num_envs, HoldMode hold, double scale, std::optional<double> lo,
                         std::optional<double> hi)
    : hold_(hold), scale_(scale), lo_(lo), hi_(hi), commands_(num_envs), sent_(num_envs, false) {}

double CommandBook::shape_value(double v) const {
  v *= scale_;
  if (!std::isfinite(v)) v = 0;  // never pass a NaN on to a robot
  if (lo_) v = std::max(v, *lo_);
  if (hi_) v = std::min(v, *hi_);
  return v;
}

std::size_t CommandBook::set_from_actions(const std::vector<double> &actions) {
  const std::size_t n = commands_.size();
  if (n == 0 || actions.empty() || actions.size() % n != 0) return 0;
  const std::size_t k = actions.size() / n;
  for (std::size_t i = 0; i < n; i++) {
    commands_[i].resize(k);
    for (std::size_t j = 0; j < k; j++) commands_[i][j] = shape_value(actions[i * k + j]);
    sent_[i] = true;
  }
  return k;
}

std::vector<double> CommandBook::hold(std::size_t env) const {
  if (!sent_.at(env)) return {};
  if (hold_ == HoldMode::Last) return commands_[env];
  return std::vector<double>(commands_[env].size(), 0.0);
}

std::vector<TrajectoryPoint> trajectory_points(const double *chunk, std::size_t steps, std::size_t step_size,
                                               Duration period, const CommandBook &book) {
  std::vector<TrajectoryPoint> points(steps);
  for (std::size_t k = 0; k < steps; k++) {
    points[k].values.resize(step_size);
    for (std::size_t j = 0; j < step_size; j++) points[k].values[j] = book.shape_value(chunk[k * step_size + j]);
    // A chunk may have millions of steps (H is the server's word, bounded
    // only by the message cap) and a period up to kMaxParameterSeconds:
    // (k + 1) x period saturates rather than overflow (undefined).
    const auto k1 = static_cast<Duration::rep>(k + 1);
    points[k].time_from_start = period.count() > 0 && k1 > Duration::max().count() / period.count()
                                    ? Duration::max()
                                    : period * k1;
  }
  return points;
}

std::vector<TrajectoryPoint> single_point(const std::vector<double> &command, Duration period) {
  return {TrajectoryPoint{command, period}};
}

// ---------------------------------------------------------------- episodes

const char *episode_csv_header() { return "episode,env,seconds,return,length,success"; }

std::string episode_csv_line(const EpisodeRecord &e) {
  char line[192];
  std::snprintf(line, sizeof line, "%lld,%zu,%.3f,%.17g,%lld,%d", static_cast<long long>(e.number), e.env, e.seconds,
                e.episode_return, static_cast<long long>(e.length), e.success ? 1 : 0);
  return line;
}

std::string stats_json(const plugrl_statistics &st, int64_t episodes, uint64_t holds, const char *phase) {
  std::ostringstream o;
  o << "{\"exchanges\":" << st.exchanges << ",\"feedbacks\":" << st.feedbacks << ",\"bytes_sent\":" << st.bytes_sent
    << ",\"bytes_received\":" << st.bytes_received << ",\"reconnects\":" << st.reconnects
    << ",\"feedback_rows_dropped\":" << st.feedback_rows_dropped << ",\"interrupts\":" << st.interrupts
    << ",\"rtt_last_us\":" << st.rtt_last_us << ",\"rtt_p50_us\":" << st.rtt_p50_us
    << ",\"rtt_p99_us\":" << st.rtt_p99_us << ",\"rtt_max_us\":" << st.rtt_max_us
    << ",\"env_steps\":" << st.env_steps << ",\"episodes\":" << episodes << ",\"holds\":" << holds
    << ",\"phase\":\"" << phase << "\"}";
  return o.str();
}

// ---------------------------------------------------------------- wakeups

Wakeups::Wakeups(Mode mode, Duration recheck) : mode_(mode), recheck_(recheck) {}

void Wakeups::wake_locked() {
  pending_ = true;
  cv_.notify_one();
}

void Wakeups::tick() {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ == Mode::Timer) wake_locked();
}

void Wakeups::data() {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ == Mode::Lockstep) wake_locked();
}

void Wakeups::reset_answered() {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ == Mode::Lockstep) wake_locked();
}

void Wakeups::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  cv_.notify_all();
}

bool Wakeups::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (mode_ == Mode::Lockstep) {
    cv_.wait_for(lock, recheck_, [this] { return pending_ || stopped_; });
  } else {
    cv_.wait(lock, [this] { return pending_ || stopped_; });
  }
  pending_ = false;
  return !stopped_;
}

// ---------------------------------------------------------------- controller

Controller::Controller(Config config, InputState inputs, CommandBook book, Hooks hooks)
    : cfg_(config), in_(std::move(inputs)), book_(std::move(book)), hooks_(std::move(hooks)), start_(Clock::now()) {
  const std::size_t n = cfg_.num_envs;
  if (in_.num_envs() != n) throw std::invalid_argument("Controller: inputs for another number of envs");
  rewards_.assign(n, 0.0);
  terminated_.assign(n, 0);
  truncated_.assign(n, 0);
  success_.assign(n, 0);
  ep_return_.assign(n, 0.0);
  ep_length_.assign(n, 0);
  resetting_.assign(n, false);
  ended_.assign(n, false);
  end_rows_ = in_;
  report_rows_ = in_;
  end_reward_.assign(n, 0.0);
  end_terminated_.assign(n, 0);
  end_truncated_.assign(n, 0);
  reset_sent_.assign(n, TimePoint{});
  answers_at_request_.assign(n, 0);
  trajectories_.assign(n, {});
  in_flight_.assign(n, 0);
  arrivals_at_command_.assign(in_.num_sources(), std::vector<uint64_t>(n, 0));
}

void Controller::begin_step_locked() {
  // Stamped before the first publication: an env may answer (over DDS, on
  // another thread) before the last env's command is out, and its answer
  // must count as newer than its command.
  command_at_ = Clock::now();
  last_publication_ = *command_at_;
  last_hold_.reset();  // a lockstep hold is timed from this command on
  in_flight_.assign(cfg_.num_envs, 1);
  for (std::size_t src = 0; src < in_.num_sources(); src++)
    for (std::size_t i = 0; i < cfg_.num_envs; i++) arrivals_at_command_[src][i] = in_.arrivals(src, i);
}

uint64_t Controller::answers(std::size_t env) const {
  uint64_t a = UINT64_MAX;
  for (std::size_t src = 0; src < in_.num_sources(); src++)
    if (!in_.source(src).is_context()) a = std::min(a, in_.arrivals(src, env) - arrivals_at_command_[src][env]);
  const InputState::Signals &s = in_.signals(env);
  if (cfg_.reward_topic) a = std::min(a, s.rewards);
  if (cfg_.terminated_topic) a = std::min(a, s.terminated_msgs);
  if (cfg_.truncated_topic) a = std::min(a, s.truncated_msgs);
  return a;
}

const char *Controller::phase_name() const noexcept {
  switch (phase_) {
    case Phase::Act: return "act";
    case Phase::Report: return "report";
    case Phase::Reset: return "reset";
  }
  return "?";
}

void Controller::warn_throttled(TimePoint now, const std::string &msg) {
  if (last_warn_ && now - *last_warn_ < std::chrono::seconds(1)) return;
  last_warn_ = now;
  if (hooks_.log) hooks_.log(Level::Warn, msg);
}

void Controller::hold_all(TimePoint now, const std::string &why, bool expected) {
  std::lock_guard<std::mutex> lock(out_mu_);
  hold_all_locked(now, why, expected);
}

bool Controller::publish_holds_locked() {
  bool any = false;
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    if (!book_.has_command(i)) continue;  // nothing was commanded yet: nothing to hold
    const std::vector<double> hold = book_.hold(i);
    hooks_.publish(i, hold, true);
    if (hooks_.publish_trajectory) {
      trajectories_[i] = single_point(hold, cfg_.trajectory_period);
      hooks_.publish_trajectory(i, trajectories_[i], true);
    }
    // In lockstep the env takes a step for a hold too: in the Report
    // phase its step is complete when it has answered this one as well.
    if (cfg_.mode == Mode::Lockstep && phase_ == Phase::Report) in_flight_[i]++;
    any = true;
  }
  return any;
}

void Controller::hold_all_locked(TimePoint now, const std::string &why, bool expected) {
  if (closed_) return;
  // A timer ticks at the control rate: hold at every tick. In lockstep a
  // command is a step of the env: hold once per max_obs_age at most.
  if (cfg_.mode == Mode::Lockstep && last_hold_ && now - *last_hold_ < cfg_.max_obs_age) return;
  last_hold_ = now;
  if (!publish_holds_locked()) return;
  if (cfg_.mode == Mode::Lockstep) last_publication_ = now;
  holds_++;
  if (!expected) {
    warn_throttled(now, "holding the safe action: " + why);
  } else if (hooks_.log) {
    hooks_.log(Level::Debug, "holding the safe action: " + why);
  }
}

bool Controller::hold_if_blocked(TimePoint now) {
  std::lock_guard<std::mutex> lock(out_mu_);
  if (cfg_.mode != Mode::Timer || !stale_at_ || now < *stale_at_) return false;
  held_while_waiting_ = true;
  hold_all_locked(now,
                  "no answer from the server after " + seconds_str(now - wait_since_) +
                      "; the observation it is for went stale",
                  false);
  return true;
}

void Controller::final_hold(const std::string &why) {
  std::lock_guard<std::mutex> lock(out_mu_);
  if (closed_) return;
  closed_ = true;
  const bool any = publish_holds_locked();
  if (any) holds_++;
  if (hooks_.log)
    hooks_.log(Level::Info, std::string(any ? "final hold published: " : "nothing was commanded, nothing to hold: ") +
                                why);
}

Controller::Result Controller::hold_step(TimePoint now, const std::string &why, bool expected) {
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    if (cfg_.mode == Mode::Lockstep) {
      // The hold stands in for the step's command: the env steps on it,
      // and the step is complete when it has answered it. hold_all_locked
      // counts each hold it publishes in the Report phase, this one too:
      // from zero, or the step waits for an answer to a second command
      // that never went out (max_obs_age, and an "answer lost" warning,
      // at every such step).
      begin_step_locked();
      in_flight_.assign(cfg_.num_envs, 0);
    }
    phase_ = Phase::Report;
    hold_all_locked(now, why, expected);
  }
  return Result::Waiting;
}

Controller::Result Controller::wake(TimePoint now) {
  const TimePoint started = Clock::now();
  hooks_.snapshot(in_);
  // Timer mode reports a step that ended episodes after their resets
  // (ended_): its Reset phase is the report's.
  // (When the report went before the resets - Config::max_report_delay -
  // no end is captured, and the Reset phase only waits for them.)
  const bool report_after_resets = cfg_.mode == Mode::Timer && phase_ == Phase::Reset &&
                                   std::find(ended_.begin(), ended_.end(), true) != ended_.end();
  if (phase_ == Phase::Report || report_after_resets) {
    Result r = do_report(now);
    if (r != Result::Stepped) return r;
    // A report can wait (a send to a slow server, a reconnect): the act
    // that follows judges its observation's age at the time it asks.
    now += Clock::now() - started;
  }
  if (phase_ == Phase::Reset && !resets_done(now)) return Result::Waiting;
  return do_act(now);
}

void Controller::begin_wait(TimePoint asked) {
  // hold_if_blocked, on the control timer's thread, holds once the
  // observation's oldest value goes stale while the hook waits.
  std::lock_guard<std::mutex> lock(out_mu_);
  wait_since_ = asked;
  stale_at_.reset();
  held_while_waiting_ = false;
  if (cfg_.mode != Mode::Timer) return;
  std::optional<TimePoint> oldest;  // every value is there: readiness said so
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    if (max_age(i) == Duration::max()) continue;  // an ended env's state is never stale
    for (std::size_t src = 0; src < in_.num_sources(); src++) {
      if (in_.source(src).is_context()) continue;  // never stale
      if (auto at = in_.received(src, i); at && (!oldest || *at < *oldest)) oldest = at;
    }
  }
  if (oldest) stale_at_ = *oldest + cfg_.max_obs_age;
}

bool Controller::end_wait() {
  std::lock_guard<std::mutex> lock(out_mu_);
  stale_at_.reset();
  return held_while_waiting_;
}

Duration Controller::max_age(std::size_t env) const {
  // In lockstep an observation is as old as the env's last step, which is
  // fine: it is the state the env is in. In timer mode an env whose
  // episode ended (its done flag came, or its end is captured) keeps its
  // last state, however old: a robot may stop sending until its reset. An
  // end that came while the node held (another's reset, a stale
  // observation) is taken by the step after the next act, which must not
  // wait for a fresh state of it (review: every env held for good).
  if (cfg_.mode != Mode::Timer) return Duration::max();
  const InputState::Signals &s = in_.signals(env);
  return s.terminated || s.truncated || ended_[env] ? Duration::max() : cfg_.max_obs_age;
}

void Controller::capture_end(std::size_t env, bool ask) {
  InputState::Signals &s = in_.signals(env);
  ended_[env] = true;
  end_rows_.copy_row(in_, env);
  end_reward_[env] = s.reward;
  end_terminated_[env] = s.terminated ? 1 : 0;
  end_truncated_[env] = s.truncated ? 1 : 0;
  s.clear_step();
  if (ask) begin_reset(env);
}

void Controller::begin_reset(std::size_t env) {
  resetting_[env] = true;
  answers_at_request_[env] = in_.signals(env).reset_answers;  // an answer counts from here
  reset_sent_[env] = Clock::now();
  ask_reset(env);
}

Controller::Result Controller::do_act(TimePoint now) {
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    std::string why = obs_readiness(in_, i, now, max_age(i), std::nullopt);
    if (!why.empty()) {
      hold_all(now, "env " + std::to_string(i) + ": " + why);
      return Result::Waiting;
    }
  }
  in_.describe(obs_);
  const TimePoint asked = Clock::now();
  begin_wait(asked);
  bool running = false;
  try {
    running = hooks_.act(obs_, actions_);
  } catch (...) {
    end_wait();
    // No action for this tick (a server error, a reconnect that failed),
    // and the node asks again at the next: in timer mode the robot holds
    // meanwhile, as for a stale observation. The last step's command had
    // stood for as long as the failures went on (review: a server that
    // died with max_reconnects -1, or whose reconnects failed within
    // max_obs_age, left the robot on its last action for good). In
    // lockstep a command is a step: nothing stands, nothing is sent.
    if (cfg_.mode == Mode::Timer) hold_all(now + (Clock::now() - asked), "no action: the call to the server failed");
    throw;
  }
  const bool held = end_wait();
  if (!running) return Result::Stopped;
  acted_at_ = now + (Clock::now() - asked);  // the step's feedback is owed from here
  if (held) {
    // The control timer found the observation stale while act waited and
    // has held since: the action is for that stale observation. (Its
    // clock and this thread's can differ by the time between the wake
    // and the ask; the timer's word is final, so no action follows a
    // hold of the same step.)
    return hold_step(now + (Clock::now() - asked),
                     "the action came after its observation went stale (held while waiting); not acting on it");
  }
  if (cfg_.mode == Mode::Timer) {
    // An act that blocked (a slow server, a reconnect) may bring an action
    // for an observation that is now too old to act on: hold instead, as a
    // tick with that observation would. The step still happened for the
    // runner, so its report is owed, at the next tick.
    const TimePoint later = now + (Clock::now() - asked);
    for (std::size_t i = 0; i < cfg_.num_envs; i++) {
      std::string why = obs_readiness(in_, i, later, max_age(i), std::nullopt);
      if (!why.empty())
        return hold_step(later, "the action came after its observation went stale (env " + std::to_string(i) + ": " +
                                    why + "); not acting on it");
    }
  }
  if (!actions_.empty() && actions_.size() % cfg_.num_envs == 0) {
    const std::size_t width = actions_.size() / cfg_.num_envs;
    if (!width_) width_ = width;
    if (width != *width_) {
      // A reconnect found a server of another action width: a command of
      // that width is not what the robot's controllers take. Hold, say so
      // (an error, at most once a second: a lockstep env steps on each
      // hold at once, which made thousands of lines a second), and report
      // the step.
      if (hooks_.log && (!last_width_error_ || now - *last_width_error_ >= std::chrono::seconds(1))) {
        last_width_error_ = now;
        hooks_.log(Level::Error, "the server's actions changed width from " + std::to_string(*width_) + " to " +
                                     std::to_string(width) + " values per env: holding; restart the node for the new width");
      }
      return hold_step(now, "the action's width changed", true);
    }
  }
  std::lock_guard<std::mutex> lock(out_mu_);
  if (closed_) {
    // final_hold ran while act waited: the run is over, send nothing.
    phase_ = Phase::Report;
    return Result::Waiting;
  }
  if (book_.set_from_actions(actions_) == 0)
    throw plugrl::Error(PLUGRL_PROTOCOL_ERROR, "the server's step action has " + std::to_string(actions_.size()) +
                                                   " values, not a multiple of the " +
                                                   std::to_string(cfg_.num_envs) + " envs");
  // The chunks are read now, between act and report, before any command
  // goes out (reading one sends nothing and does not block).
  if (hooks_.publish_trajectory)
    for (std::size_t i = 0; i < cfg_.num_envs; i++) build_trajectory(i, now);
  begin_step_locked();
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    hooks_.publish(i, book_.command(i), false);
    if (hooks_.publish_trajectory) hooks_.publish_trajectory(i, trajectories_[i], false);
  }
  phase_ = Phase::Report;
  return Result::Stepped;
}

void Controller::build_trajectory(std::size_t env, TimePoint now) {
  const std::vector<double> &command = book_.command(env);
  const std::size_t k = command.size();
  if (hooks_.chunk) {
    std::string why;
    try {
      const int64_t steps = hooks_.chunk(env, chunk_);
      if (steps >= 1 && chunk_.size() == static_cast<std::size_t>(steps) * k) {
        trajectories_[env] =
            trajectory_points(chunk_.data(), static_cast<std::size_t>(steps), k, cfg_.trajectory_period, book_);
        return;
      }
      why = std::to_string(steps) + " step(s) in " + std::to_string(chunk_.size()) + " values, for steps of " +
            std::to_string(k);
    } catch (const plugrl::Error &e) {
      why = e.what();
    }
    warn_throttled(now, "env " + std::to_string(env) + ": cannot read the rest of the chunk (" + why +
                            "); its trajectory is this step's command");
  }
  trajectories_[env] = single_point(command, cfg_.trajectory_period);
}

Controller::Result Controller::do_report(TimePoint now) {
  bool report_before_resets = false;  // timer mode: reported while envs still reset
  if (cfg_.mode == Mode::Timer) {
    for (std::size_t i = 0; i < cfg_.num_envs; i++) {
      // The final observation of an ended episode is a state that came
      // with or after the flag (Config::state_after_signal_wait).
      const std::optional<TimePoint> ended = in_.signals(i).ended_at;
      if (!ended_[i] && ended && now - *ended < cfg_.state_after_signal_wait &&
          !state_since(in_, i, *ended, cfg_.signal_skew)) {
        const std::string why =
            "env " + std::to_string(i) + "'s episode ended: waiting for its state after the done flag";
        // In the Report phase the step's commands stand (nothing is
        // stale); while others reset, every env holds, as at each tick.
        if (phase_ == Phase::Reset)
          hold_all(now, why, true);
        else if (hooks_.log)
          hooks_.log(Level::Debug, why);
        return Result::Waiting;
      }
    }
    // Envs whose episode ended: their end is taken out of the step now,
    // and the step is reported once they have reset, with the others'
    // states of that moment, which the next infer sends too.
    // Every end is counted before any reset is asked: when this step
    // brings the run to max_episodes, none of the envs that ended in it
    // is reset, not only those counted after the limit (review: the
    // others were sent into a reset after the run was over).
    int64_t ends = episodes_;
    std::vector<std::size_t> new_ends;
    for (std::size_t i = 0; i < cfg_.num_envs; i++) {
      const InputState::Signals &s = in_.signals(i);
      if (ended_[i]) {
        ends++;
      } else if (s.terminated || s.truncated) {
        ends++;
        new_ends.push_back(i);
      }
    }
    // The run's last episodes need no reset: they are reported at once.
    const bool last = cfg_.max_episodes > 0 && ends >= cfg_.max_episodes;
    for (std::size_t i : new_ends) capture_end(i, !last);
    // After the final hold no reset is asked for: the server still gets
    // the step's feedback, at once.
    bool closed;
    {
      std::lock_guard<std::mutex> lock(out_mu_);
      closed = closed_;
    }
    const bool finishing = last || closed;
    std::string why;
    if (!finishing && !resets_complete(now, why)) {
      phase_ = Phase::Reset;
      // Not past the server's feedback timeout (Config::max_report_delay):
      // then the step is reported now, and the resets waited for after.
      if (!acted_at_ || now - *acted_at_ < cfg_.max_report_delay) {
        hold_all(now, why, true);  // the normal course, not a warning
        return Result::Waiting;
      }
      report_before_resets = true;
      std::lock_guard<std::mutex> lock(out_mu_);
      warn_throttled(now, "the step's report has waited " + seconds_str(now - *acted_at_) + " for resets (" + why +
                              "): reporting it now, before the server's feedback timeout");
    }
    for (std::size_t i = 0; i < cfg_.num_envs; i++) {
      if (ended_[i]) continue;  // its terminal state is kept
      why = obs_readiness(in_, i, now, max_age(i), std::nullopt);
      if (!why.empty()) {
        hold_all(now, "env " + std::to_string(i) + ": " + why);
        return Result::Waiting;
      }
    }
  } else if (!lockstep_step_complete(now)) {
    return Result::Waiting;
  }
  bool any_ended = false;
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    if (ended_[i]) {
      any_ended = true;
      rewards_[i] = end_reward_[i];
      terminated_[i] = end_terminated_[i];
      truncated_[i] = end_truncated_[i];
    } else {
      InputState::Signals &s = in_.signals(i);
      rewards_[i] = s.reward;
      terminated_[i] = s.terminated ? 1 : 0;
      truncated_[i] = s.truncated ? 1 : 0;
      s.clear_step();
    }
    success_[i] = truncated_[i] && !terminated_[i];
  }
  if (any_ended) {
    // The ended envs' terminal states, the others' current ones.
    for (std::size_t i = 0; i < cfg_.num_envs; i++) report_rows_.copy_row(ended_[i] ? end_rows_ : in_, i);
    report_rows_.describe(obs_);
  } else {
    in_.describe(obs_);
  }
  ended_.assign(cfg_.num_envs, false);
  bool running = true;
  std::exception_ptr failure;
  begin_wait(Clock::now());  // a report that waits gets the timer's holds too
  try {
    running = hooks_.report(obs_, rewards_, terminated_, truncated_, success_);
  } catch (...) {
    failure = std::current_exception();
  }
  const bool held = end_wait();
  if (!running) return Result::Stopped;

  // The step happened whatever became of its feedback: count it.
  bool any_done = false, finished = false;
  std::vector<std::size_t> ended;
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    ep_return_[i] += rewards_[i];
    ep_length_[i]++;
    if (!terminated_[i] && !truncated_[i]) continue;
    EpisodeRecord e{++episodes_, i, std::chrono::duration<double>(Clock::now() - start_).count(), ep_return_[i],
                    ep_length_[i], success_[i] != 0};
    if (hooks_.on_episode) hooks_.on_episode(e);
    ep_return_[i] = 0;
    ep_length_[i] = 0;
    ended.push_back(i);
    any_done = true;
  }
  if (cfg_.max_episodes > 0 && episodes_ >= cfg_.max_episodes) finished = true;
  // Lockstep asks for the resets now; timer mode has had them done, or
  // has asked for them and waits on in the Reset phase (a step reported
  // before its resets, Config::max_report_delay).
  const bool reset_now = any_done && cfg_.mode == Mode::Lockstep;
  if (!finished && reset_now) {
    for (std::size_t i : ended) begin_reset(i);
  }
  phase_ = reset_now || report_before_resets ? Phase::Reset : Phase::Act;
  if (finished) {
    // The run is over with this step whatever became of its feedback: a
    // failure rethrown here left the caller acting past max_episodes.
    if (failure && hooks_.log) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception &e) {
        hooks_.log(Level::Error, std::string("the last step's feedback failed: ") + e.what());
      } catch (...) {
        hooks_.log(Level::Error, "the last step's feedback failed");
      }
    }
    return Result::Finished;
  }
  if (failure) std::rethrow_exception(failure);
  // The control timer held while the report waited: the snapshot is as
  // old as the timer found it; act at the next tick, on a new one.
  if (held) return Result::Waiting;
  return Result::Stepped;
}

bool Controller::lockstep_step_complete(TimePoint now) {
  // Each command is a step of the env, holds included: the step is
  // complete when every env has answered (a message on each of its
  // topics) every command it got since the step's own. Counting, not
  // timestamps: a step slower than max_obs_age gets a hold, and the
  // answer to that hold, which comes after the next command, must not be
  // taken for the next command's (review: that shifted every later
  // observation onto the wrong command for good).
  std::string why;
  bool each_answered = true;
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    const uint64_t a = answers(i);
    if (a < in_flight_[i] && why.empty()) {
      why = step_readiness(in_, i, *command_at_, cfg_.reward_topic, cfg_.terminated_topic, cfg_.truncated_topic);
      why = "env " + std::to_string(i) + ": " + std::to_string(a) + " of its " + std::to_string(in_flight_[i]) +
            " command(s) answered" + (why.empty() ? std::string() : " (" + why + ")");
    }
    if (a == 0) each_answered = false;
  }
  if (why.empty()) return true;
  if (now - last_publication_ < cfg_.max_obs_age) return false;
  if (!each_answered) {
    hold_all(now, why);
    return false;
  }
  // Every env answered, just not every command. The rest are lost only
  // when no answer came for max_obs_age: a slow step's answer that came
  // just before would otherwise be taken, and the hold's answer, due a
  // step later, for the next command's (review: every later observation
  // one command off, which the counting is there to prevent). Only a
  // topic that is not ahead of the env's answers can bring one: a
  // message on a topic already ahead (a state a simulator republishes
  // while it idles, after a lost reward) is none, and counting it kept
  // the step waiting for good, with no hold either (review).
  TimePoint last_answer = last_publication_;
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    const uint64_t a = answers(i);
    for (std::size_t src = 0; src < in_.num_sources(); src++)
      if (auto at = in_.received(src, i);
          at && !in_.source(src).is_context() && in_.arrivals(src, i) - arrivals_at_command_[src][i] == a)
        last_answer = std::max(last_answer, *at);
    const InputState::Signals &s = in_.signals(i);
    const std::pair<bool, uint64_t> counted[] = {{cfg_.reward_topic, s.rewards},
                                                 {cfg_.terminated_topic, s.terminated_msgs},
                                                 {cfg_.truncated_topic, s.truncated_msgs}};
    const std::optional<TimePoint> stamps[] = {s.reward_at, s.terminated_at, s.truncated_at};
    for (std::size_t k = 0; k < 3; k++)
      if (counted[k].first && counted[k].second == a && stamps[k]) last_answer = std::max(last_answer, *stamps[k]);
  }
  if (now - last_answer < cfg_.max_obs_age) return false;
  // Nothing more came: the rest were lost on the way (a dropped message).
  // Take the step with the latest data rather than hold for ever.
  std::lock_guard<std::mutex> lock(out_mu_);
  warn_throttled(now, "a step's answer was lost (" + why + ", no more answer came in " +
                          seconds_str(cfg_.max_obs_age) + "): reporting the step with the latest data");
  return true;
}

void Controller::ask_reset(std::size_t env) {
  // A reset moves a robot as an action does: after the final hold (a
  // shutdown, while the runner thread finishes a report) it is not asked
  // for (review: the report of a step that ended an episode, or the
  // reset phase's second request, still asked). Under out_mu_, as every
  // publication, so that final_hold cannot come in between.
  std::lock_guard<std::mutex> lock(out_mu_);
  if (closed_) return;
  hooks_.request_reset(env);
}

bool Controller::resets_done(TimePoint now) {
  std::string why;
  if (!resets_complete(now, why)) {
    // Holding while envs reset is the normal course, not a warning.
    if (cfg_.mode == Mode::Timer) hold_all(now, why, true);
    return false;
  }
  phase_ = Phase::Act;
  return true;
}

bool Controller::resets_complete(TimePoint now, std::string &why) {
  bool all = true;
  for (std::size_t i = 0; i < cfg_.num_envs; i++) {
    if (!resetting_[i]) continue;
    InputState::Signals &s = in_.signals(i);
    if (s.reset_answers > answers_at_request_[i]) {
      if (!s.reset_ok) {
        // Ask again, but not in a tight loop.
        if (now - reset_sent_[i] >= std::chrono::seconds(1)) {
          if (hooks_.log) hooks_.log(Level::Error, "the reset of env " + std::to_string(i) + " failed; asking again");
          begin_reset(i);
        }
        all = false;
        why = "env " + std::to_string(i) + "'s reset failed";
        continue;
      }
      // Answered: done once an observation newer than the request came
      // (the one the reset produced, not one still on its way before it).
      // In lockstep without a reset service nothing new comes before the
      // next command (a simulator that starts its next episode by itself
      // sends only what a step brings): go on with the latest (review: the
      // node waited for it for good).
      const bool wait_new = cfg_.reset_service || cfg_.mode == Mode::Timer;
      std::string not_yet =
          wait_new ? obs_readiness(in_, i, now, Duration::max(), reset_sent_[i]) : std::string();
      // In timer mode a robot publishes all along: a state that came after
      // the request may still be from before the reset, and the answer
      // may overtake the reset's own state. Wait a little for one that
      // came after the answer (Config::state_after_signal_wait).
      if (not_yet.empty() && cfg_.mode == Mode::Timer && s.reset_answer_at &&
          now - *s.reset_answer_at < cfg_.state_after_signal_wait &&
          !state_since(in_, i, *s.reset_answer_at, cfg_.signal_skew))
        not_yet = "waiting for its state after the reset's answer";
      if (!not_yet.empty()) {
        all = false;
        why = "env " + std::to_string(i) + " reset: " + not_yet;
        continue;
      }
      resetting_[i] = false;
      s.clear_step();  // what arrived about the ended episode belongs to no step
      continue;
    }
    all = false;
    why = "waiting for env " + std::to_string(i) + "'s reset";
    if (now - reset_sent_[i] > cfg_.reset_timeout) {
      if (hooks_.log)
        hooks_.log(Level::Warn, "env " + std::to_string(i) + "'s reset was not answered in " +
                                    seconds_str(cfg_.reset_timeout) + "; asking again, unless the robot has the request");
      reset_sent_[i] = Clock::now();
      ask_reset(i);
    }
  }
  return all;
}

}  // namespace plugrl_ros2
