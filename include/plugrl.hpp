/*
** plugrl.hpp - a header-only C++17 wrapper over plugrl.h.
**
** Everything here is inline code over the C ABI: no separate library, no
** exceptions crossing the C boundary, no state the C handles do not have.
**
**   plugrl::Options opts("ws://127.0.0.1:8000");
**   plugrl::Client client(opts.max_reconnects(5));      // throws plugrl::Error
**   plugrl::Runner runner(client, n);                   // int64_t n: shapes are int64_t
**   plugrl::Observation obs;
**   obs.state("t", t.data(), {n, 1}).state("a", a.data(), {n, d});
**   std::vector<double> actions;
**   while (runner.act(obs, actions)) {                   // false: run stopped
**     ...step every env...
**     if (!runner.report(obs, rewards, terminated, truncated)) break;
**     ...reset the envs that ended...
**   }
**
** ERRORS. Every call that fails throws plugrl::Error, which carries the
** plugrl_status and the library's message, except for the statuses that are
** a normal outcome a caller must react to. Those are returned, never thrown:
**
**   Runner::act, Runner::report          return bool: false means the server
**                                        stopped the run (PLUGRL_STOPPED).
**   Client::infer, Client::feedback      return plugrl_status: PLUGRL_OK,
**                                        PLUGRL_RECONNECTED (drop every
**                                        chunk, infer again) or
**                                        PLUGRL_STOPPED (exit).
**   Client::can_reuse, metadata getters  never return a status (absent
**                                        metadata keys are std::nullopt).
**
** Everything else throws on any status other than PLUGRL_OK.
**
** LIFETIMES. Client and Runner own their C handle, are move-only, and free it
** in their destructor. A Runner borrows its Client: destroy the Runner first
** (calls on a runner whose client is gone throw Error(PLUGRL_CLOSED)).
** An Observation holds descriptors of the caller's arrays, not copies: the
** arrays must stay alive, at the same address, during every call that gets
** the Observation. ActionView points into library memory that is valid only
** until the next call on its Client.
**
** THREADS. As for plugrl.h: one thread per handle at a time, except
** interrupt() and stats(), which any thread may call at any time. An
** Observation is rebuilt into C form by each call that takes it (c()), so
** one Observation must not be passed to two calls running at once, even
** as const: give each thread its own.
**
** VERSIONS. Everything is declared in an inline namespace named for the
** layout of this header's classes (plugrl::layout2 here; PLUGRL_HPP_LAYOUT
** counts the changes): code keeps writing plugrl::Client, but translation
** units or shared libraries built against headers whose classes differ
** (two ROS 2 components in one process, each with its own copy of this
** header) get distinct types and symbols, and fail to link or convert,
** where one name for two layouts would break C++'s one-definition rule
** without a word. Declare nothing in namespace plugrl yourself: include
** this header.
*/
#ifndef PLUGRL_HPP
#define PLUGRL_HPP

#include "plugrl.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

/* The layout of this header's classes: bumped whenever a class gains,
** loses or changes a member (2: ActionView's infer_id and client). */
#define PLUGRL_HPP_LAYOUT 2

namespace plugrl {
inline namespace layout2 {

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* A failed call: the status and the library's message. what() is
** "<status name>: <message>" (or the message alone when it starts with the
** status name already). */
class Error : public std::runtime_error {
 public:
  Error(plugrl_status status, const std::string &message)
      : std::runtime_error(describe(status, message)), status_(status), message_(message) {}

  plugrl_status status() const noexcept { return status_; }
  /* The library's message alone, without the status name. */
  const std::string &message() const noexcept { return message_; }

 private:
  /* "<status name>: <message>", unless the message already starts so. */
  static std::string describe(plugrl_status status, const std::string &message) {
    std::string name = plugrl_status_str(status);
    if (message.compare(0, name.size(), name) == 0) return message;
    return message.empty() ? name : name + ": " + message;
  }

  plugrl_status status_;
  std::string message_;
};

/* The library's version string, e.g. "0.2.0". */
inline std::string version() { return plugrl_version(); }

/* The library's version number (MAJOR*1000000 + MINOR*1000 + PATCH). */
inline int version_number() noexcept { return plugrl_version_number(); }

/* True when the loaded library has the major and minor version of this
** header (a newer patch is fine). */
inline bool version_matches() noexcept {
  return plugrl_version_number() / 1000 == PLUGRL_VERSION_NUMBER / 1000;
}

/* The static name of a status. */
inline const char *status_str(plugrl_status status) noexcept { return plugrl_status_str(status); }

/* Interrupts every client's call (plugrl_interrupt_all): async-signal-safe,
** for a SIGINT handler that has no handle at hand. */
inline void interrupt_all() noexcept { (void)plugrl_interrupt_all(); }

namespace detail {

inline std::string safe(const char *s) { return s ? std::string(s) : std::string(); }

[[noreturn]] inline void throw_client(plugrl_status s, plugrl_client *c) {
  throw Error(s, safe(plugrl_errmsg(c)));
}

[[noreturn]] inline void throw_runner(plugrl_status s, plugrl_runner *r) {
  throw Error(s, safe(plugrl_runner_errmsg(r)));
}

inline void check_client(plugrl_status s, plugrl_client *c) {
  if (s != PLUGRL_OK) throw_client(s, c);
}

inline void check_runner(plugrl_status s, plugrl_runner *r) {
  if (s != PLUGRL_OK) throw_runner(s, r);
}

/* The bytes of count elements of T, for a (pointer, count) overload; a
** count whose bytes a size_t cannot hold throws: count * sizeof(T) would
** wrap to a small size that the library might take for the right one. */
template <class T>
std::size_t bytes_of(std::size_t count, const char *what) {
  if (count > SIZE_MAX / sizeof(T))
    throw Error(PLUGRL_INVALID_ARGUMENT, std::string(what) + ": a count of " + std::to_string(count) +
                                             " elements of " + std::to_string(sizeof(T)) +
                                             " bytes is more bytes than a size_t holds");
  return count * sizeof(T);
}

/* Takes the handle out of h and closes it with close (plugrl_close or
** plugrl_runner_free); false, with the handle put back, when the library
** refuses (PLUGRL_BUSY: inside one of the handle's callbacks). */
template <class H>
bool close_handle(std::atomic<H *> &h, plugrl_status (*close)(H *)) noexcept {
  H *p = h.exchange(nullptr);
  if (p && close(p) == PLUGRL_BUSY) {
    h.store(p, std::memory_order_release);
    return false;
  }
  return true;
}

}  // namespace detail

/* ------------------------------------------------------------------------ */
/* Element types and spans                                                  */
/* ------------------------------------------------------------------------ */

/* dtype_of<T>::value is the plugrl_dtype of T, for the element types the
** library knows. (Half precision has no C++17 type: use the C dtype
** PLUGRL_DTYPE_F16 with uint16_t bits through the pointer overloads.) */
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static_assert(sizeof(bool) == 1, "plugrl: bool must be one byte to be |b1");
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_BOOL;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_U8;
};
template <>
struct dtype_of<uint16_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_U16;
};
template <>
struct dtype_of<uint32_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_U32;
};
template <>
struct dtype_of<uint64_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_U64;
};
template <>
struct dtype_of<int8_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_I8;
};
template <>
struct dtype_of<int16_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_I16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_I32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_I64;
};
template <>
struct dtype_of<float> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_F32;
};
template <>
struct dtype_of<double> {
  static constexpr plugrl_dtype value = PLUGRL_DTYPE_F64;
};

template <class T>
inline constexpr plugrl_dtype dtype_v = dtype_of<std::remove_cv_t<T>>::value;

/* Bytes per element of dtype, or 0 for an unknown value. */
inline std::size_t dtype_size(plugrl_dtype dtype) noexcept { return plugrl_dtype_size(dtype); }

/* A non-owning view of count contiguous T, like C++20's std::span. It
** converts implicitly from std::vector, std::array, a C array and
** (pointer, count), so functions taking Span<const T> accept all of them. */
template <class T>
class Span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using iterator = T *;

  constexpr Span() noexcept = default;
  constexpr Span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr Span(T (&a)[N]) noexcept : data_(a), size_(N) {}
  template <class U, std::size_t N,
            class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr Span(std::array<U, N> &a) noexcept : data_(a.data()), size_(N) {}
  template <class U, std::size_t N,
            class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
  constexpr Span(const std::array<U, N> &a) noexcept : data_(a.data()), size_(N) {}
  template <class U, class A, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  Span(std::vector<U, A> &v) noexcept : data_(v.data()), size_(v.size()) {}
  template <class U, class A,
            class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
  Span(const std::vector<U, A> &v) noexcept : data_(v.data()), size_(v.size()) {}
  /* For a braced list in a call, e.g. client.infer({0, 1}, ...): the list
  ** lives until the end of the full expression, which covers the call. Do
  ** not keep such a Span in a variable: its list would be gone. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  template <class U = T, class = std::enable_if_t<std::is_const_v<U>>>
  constexpr Span(std::initializer_list<value_type> l) noexcept : data_(l.begin()), size_(l.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  constexpr T *data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }
  constexpr T *begin() const noexcept { return data_; }
  constexpr T *end() const noexcept { return data_ + size_; }

 private:
  T *data_ = nullptr;
  std::size_t size_ = 0;
};

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

/* A log callback: level is PLUGRL_LOG_DEBUG..PLUGRL_LOG_ERROR. It runs on
** the thread of the library call that caused it and must not call into the
** library. An exception it throws is swallowed (it cannot cross the C ABI). */
using LogFn = std::function<void(int level, const char *message)>;

/* A builder over plugrl_options. It owns copies of its strings; the Client
** keeps the log callback alive for as long as it lives. Durations are in
** milliseconds; 0 means the library's default. */
class Options {
 public:
  Options() { init(); }
  explicit Options(std::string url) : url_(std::move(url)) { init(); }

  Options &url(std::string v) { url_ = std::move(v); return *this; }
  Options &api_key(std::string v) { api_key_ = std::move(v); return *this; }
  Options &connect_timeout_ms(int32_t v) { o_.connect_timeout_ms = v; return *this; }
  Options &metadata_timeout_ms(int32_t v) { o_.metadata_timeout_ms = v; return *this; }
  Options &receive_timeout_ms(int32_t v) { o_.receive_timeout_ms = v; return *this; }
  /* Attempts after a lost connection; -1: never reconnect. */
  Options &max_reconnects(int32_t v) { o_.max_reconnects = v; return *this; }
  Options &reconnect_backoff_ms(int32_t v) { o_.reconnect_backoff_ms = v; return *this; }
  Options &max_backoff_ms(int32_t v) { o_.max_backoff_ms = v; return *this; }
  Options &tls_ca_file(std::string v) { ca_file_ = std::move(v); return *this; }
  Options &tls_insecure(bool v) { o_.tls_insecure = v ? 1 : 0; return *this; }
  Options &disable_reuse(bool v) { o_.disable_reuse = v ? 1 : 0; return *this; }
  /* Cap on one received message in bytes; 0: derived (see plugrl.h); -1: none. */
  Options &max_message_size(int64_t v) { o_.max_message_size = v; return *this; }
  Options &send_timeout_ms(int32_t v) { o_.send_timeout_ms = v; return *this; }
  Options &close_timeout_ms(int32_t v) { o_.close_timeout_ms = v; return *this; }
  Options &reconnect_timeout_ms(int32_t v) { o_.reconnect_timeout_ms = v; return *this; }
  Options &max_handshake_size(int32_t v) { o_.max_handshake_size = v; return *this; }
  /* How long the server's machine may acknowledge nothing before the connection
  ** counts as lost (see plugrl.h, "A server that vanishes"); at least 2000; -1: off. */
  Options &dead_peer_timeout_ms(int32_t v) { o_.dead_peer_timeout_ms = v; return *this; }
  /* How long the open keeps trying while the server cannot be reached yet (see
  ** plugrl.h, "Waiting for the server"); 0: one attempt; -1: until it answers. */
  Options &open_wait_ms(int32_t v) { o_.open_wait_ms = v; return *this; }
  /* Record a step ledger at this path (a directory: one file per client). */
  Options &ledger_path(std::string v) { ledger_ = std::move(v); return *this; }
  /* PLUGRL_LEDGER_DIGEST or PLUGRL_LEDGER_FULL; 0: PLUGRL_LEDGER_LEVEL, else digest. */
  Options &ledger_level(int32_t v) { o_.ledger_level = v; return *this; }
  /* The CPUs the ledger's writer runs on ("3", "2-3,6"); unset: PLUGRL_LEDGER_CPUS. */
  Options &ledger_cpus(std::string v) { ledger_cpus_ = std::move(v); return *this; }
  /* Sets (or, with an empty function, clears) the log callback. */
  Options &log(LogFn fn) {
    log_ = fn ? std::make_shared<LogFn>(std::move(fn)) : nullptr;
    return *this;
  }

  const std::string &url() const noexcept { return url_; }

  /* The C struct, with pointers into this object's strings: valid until
  ** this Options is changed or destroyed. Unset strings are NULL. */
  plugrl_options c() const {
    plugrl_options o = o_;
    o.url = url_.empty() ? nullptr : url_.c_str(); /* no URL: the library says so */
    o.api_key = api_key_ ? api_key_->c_str() : nullptr;
    o.tls_ca_file = ca_file_ ? ca_file_->c_str() : nullptr;
    o.ledger_path = ledger_ ? ledger_->c_str() : nullptr;
    o.ledger_cpus = ledger_cpus_ ? ledger_cpus_->c_str() : nullptr;
    o.log = log_ ? &Options::trampoline : nullptr;
    o.log_user = log_ ? log_.get() : nullptr;
    return o;
  }

  /* The log callback's shared state, which a Client keeps. */
  const std::shared_ptr<LogFn> &log_state() const noexcept { return log_; }

 private:
  void init() {
    plugrl_status s = plugrl_options_init(&o_);
    if (s != PLUGRL_OK) throw Error(s, "plugrl_options_init failed");
  }

  static void trampoline(void *user, int level, const char *message) noexcept {
    try {
      const LogFn &fn = *static_cast<const LogFn *>(user);
      fn(level, message ? message : "");
    } catch (...) {
      /* Nothing may unwind into the library. */
    }
  }

  plugrl_options o_{};
  std::string url_;
  std::optional<std::string> api_key_, ca_file_, ledger_, ledger_cpus_;
  std::shared_ptr<LogFn> log_;
};

/* ------------------------------------------------------------------------ */
/* Observation                                                              */
/* ------------------------------------------------------------------------ */

/* The descriptors of one batch of observations (plugrl_observation): named
** images ([n, h, w, c] u8) and states ([n, ...] of any numeric dtype),
** plus text, one string per env. It stores names, shapes and text; for the
** array data it stores only the pointer, so the caller's arrays must stay
** alive and in place during each call that reads the Observation. An
** Observation built once over buffers that are updated in place can be
** passed to every call of a loop. */
class Observation {
 public:
  Observation() = default;
  Observation(const Observation &o) { *this = o; }
  Observation(Observation &&o) noexcept = default;
  Observation &operator=(const Observation &o) {
    if (this != &o) {
      images_ = o.images_;
      states_ = o.states_;
      text_ = o.text_;
      has_text_ = o.has_text_;
      text_as_strings_ = o.text_as_strings_;
    }
    return *this;
  }
  Observation &operator=(Observation &&o) noexcept = default;

  /* Adds (or, if name exists, replaces) an image: u8 [n, height, width, channels]. */
  Observation &image(std::string name, const uint8_t *data, std::vector<int64_t> shape) {
    put(images_, std::move(name), data, PLUGRL_DTYPE_U8, std::move(shape));
    return *this;
  }
  /* The same over a vector, which must hold at least prod(shape) bytes
  ** (else Error(PLUGRL_INVALID_ARGUMENT); the first prod(shape) are sent)
  ** and outlive the calls that read the Observation: a temporary is
  ** refused at compile time. */
  Observation &image(std::string name, const std::vector<uint8_t> &data, std::vector<int64_t> shape) {
    check_elements(name, data.size(), shape);
    return image(std::move(name), data.data(), std::move(shape));
  }
  Observation &image(std::string, std::vector<uint8_t> &&, std::vector<int64_t>) = delete;
  Observation &image(std::string, const std::vector<uint8_t> &&, std::vector<int64_t>) = delete;

  /* Adds (or replaces) a state of T, shape [n, ...]. */
  template <class T>
  Observation &state(std::string name, const T *data, std::vector<int64_t> shape) {
    put(states_, std::move(name), data, dtype_v<T>, std::move(shape));
    return *this;
  }
  /* The same over a vector, which must hold at least prod(shape) elements
  ** (else Error(PLUGRL_INVALID_ARGUMENT); the first prod(shape) are sent)
  ** and outlive the calls that read the Observation: a temporary is
  ** refused at compile time. */
  template <class T, class A>
  Observation &state(std::string name, const std::vector<T, A> &data, std::vector<int64_t> shape) {
    check_elements(name, data.size(), shape);
    return state(std::move(name), data.data(), std::move(shape));
  }
  template <class T, class A>
  Observation &state(std::string, std::vector<T, A> &&, std::vector<int64_t>) = delete;
  template <class T, class A>
  Observation &state(std::string, const std::vector<T, A> &&, std::vector<int64_t>) = delete;
  /* Adds (or replaces) a state of an explicit dtype (e.g. PLUGRL_DTYPE_F16). */
  Observation &state(std::string name, const void *data, plugrl_dtype dtype, std::vector<int64_t> shape) {
    put(states_, std::move(name), data, dtype, std::move(shape));
    return *this;
  }

  /* Points an existing image or state at new data (same dtype and shape
  ** rules). Throws Error(PLUGRL_INVALID_ARGUMENT) if there is no such name. */
  Observation &set_data(const std::string &name, const void *data) {
    for (auto *group : {&images_, &states_})
      for (auto &e : *group)
        if (e.name == name) {
          e.data = data;
          return *this;
        }
    throw Error(PLUGRL_INVALID_ARGUMENT, "observation has no array named \"" + name + "\"");
  }

  /* Sets the text, one string per row of the arrays (copied). Rows past
  ** the last string get "" (see c()); more strings than rows is an error. */
  Observation &text(std::vector<std::string> text) {
    text_ = std::move(text);
    has_text_ = true;
    return *this;
  }
  /* Sets one env's text (the vector grows to hold it). An env past the
  ** library's 2^20 envs (such as an int64_t -1 converted to size_t, whose
  ** env + 1 wrapped to 0) throws Error(PLUGRL_INVALID_ARGUMENT). */
  Observation &text(std::size_t env, std::string value) {
    if (env >= (std::size_t(1) << 20))  // the library's bound on envs in a message, as in c()
      throw Error(PLUGRL_INVALID_ARGUMENT, "observation text for env " + std::to_string(env) +
                                               ": more than a message can carry (2^20 envs)");
    if (text_.size() <= env) text_.resize(env + 1);
    text_[env] = std::move(value);
    has_text_ = true;
    return *this;
  }
  /* No text: the library sends empty strings. */
  Observation &clear_text() {
    text_.clear();
    has_text_ = false;
    return *this;
  }
  /* Sends text as a msgpack string array instead of numpy's <U. */
  Observation &text_as_strings(bool v) {
    text_as_strings_ = v;
    return *this;
  }
  /* Removes everything. */
  Observation &clear() {
    images_.clear();
    states_.clear();
    clear_text();
    return *this;
  }

  std::size_t num_images() const noexcept { return images_.size(); }
  std::size_t num_states() const noexcept { return states_.size(); }
  const std::vector<std::string> &text() const noexcept { return text_; }

  /* The C struct, pointing into this object: valid until it is changed or
  ** destroyed. Rebuilt by each call, so one Observation must not be used
  ** by two threads at once. The library reads one text pointer per row of
  ** the first image (or, with none, the first state): rows past the last
  ** string get "", and more strings than rows, or text with no array to
  ** count the rows, throw Error(PLUGRL_INVALID_ARGUMENT). */
  const plugrl_observation *c() const {
    int64_t rows = 0;
    if (has_text_) {
      const std::vector<int64_t> *lead = !images_.empty()   ? &images_.front().shape
                                         : !states_.empty() ? &states_.front().shape
                                                            : nullptr;
      if (lead == nullptr)
        throw Error(PLUGRL_INVALID_ARGUMENT, "observation has text but no arrays to give its row count; add a state");
      if (lead->empty() || lead->front() < 0)
        throw Error(PLUGRL_INVALID_ARGUMENT, "observation has text, and its first array has no leading dimension to "
                                             "count the rows");
      rows = lead->front();
      if (rows > (int64_t(1) << 20))  // the library's bound on envs in a message (plugrl_infer's n)
        throw Error(PLUGRL_INVALID_ARGUMENT, "observation has text for " + std::to_string(rows) +
                                                 " rows: more than a message can carry (2^20)");
      if (static_cast<int64_t>(text_.size()) > rows)
        throw Error(PLUGRL_INVALID_ARGUMENT, "observation has " + std::to_string(text_.size()) +
                                                 " strings of text for " + std::to_string(rows) +
                                                 " rows; give one string per row");
    }
    c_images_.clear();
    c_states_.clear();
    for (const auto &e : images_) c_images_.push_back(e.c());
    for (const auto &e : states_) c_states_.push_back(e.c());
    c_text_.clear();
    if (has_text_) {
      for (const auto &s : text_) c_text_.push_back(s.c_str());
      c_text_.resize(static_cast<std::size_t>(rows), "");  // the rows no string was given for
    }
    obs_.images = c_images_.empty() ? nullptr : c_images_.data();
    obs_.num_images = c_images_.size();
    obs_.states = c_states_.empty() ? nullptr : c_states_.data();
    obs_.num_states = c_states_.size();
    obs_.text = has_text_ ? c_text_.data() : nullptr;
    obs_.text_as_strings = text_as_strings_ ? 1 : 0;
    return &obs_;
  }

 private:
  struct Entry {
    std::string name;
    const void *data;
    plugrl_dtype dtype;
    std::vector<int64_t> shape;
    plugrl_array c() const {
      plugrl_array a;
      a.name = name.c_str();
      a.data = data;
      a.dtype = dtype;
      a.ndim = static_cast<int32_t>(shape.size());
      a.shape = shape.data();
      return a;
    }
  };

  /* Throws unless a vector of size elements holds an array of shape. */
  static void check_elements(const std::string &name, std::size_t size, const std::vector<int64_t> &shape) {
    uint64_t n = 1;
    bool fits = true;
    for (int64_t d : shape) {
      if (d < 0 || (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d))) {
        fits = false;
        break;
      }
      n *= static_cast<uint64_t>(d);
    }
    if (!fits || n > size)
      throw Error(PLUGRL_INVALID_ARGUMENT, "array \"" + name + "\": the vector holds " + std::to_string(size) +
                                               " elements, its shape needs " +
                                               (fits ? std::to_string(n) : std::string("more than fit")));
  }

  static void put(std::vector<Entry> &group, std::string name, const void *data, plugrl_dtype dtype,
                  std::vector<int64_t> shape) {
    for (auto &e : group)
      if (e.name == name) {
        e.data = data;
        e.dtype = dtype;
        e.shape = std::move(shape);
        return;
      }
    group.push_back(Entry{std::move(name), data, dtype, std::move(shape)});
  }

  std::vector<Entry> images_, states_;
  std::vector<std::string> text_;
  bool has_text_ = false;
  bool text_as_strings_ = false;
  /* Rebuilt by c(): they point into the members above. */
  mutable std::vector<plugrl_array> c_images_, c_states_;
  mutable std::vector<const char *> c_text_;
  mutable plugrl_observation obs_{};
};

/* ------------------------------------------------------------------------ */
/* Client                                                                   */
/* ------------------------------------------------------------------------ */

/* An action chunk as received: a view of library memory, valid until the
** next call on the Client that produced it. Shape [H, n, *da], time-major:
** step k of the j-th env of the request starts at element
** (k * n + j) * step_size. */
struct ActionView {
  const void *data = nullptr;
  plugrl_dtype dtype = PLUGRL_DTYPE_F32;
  Span<const int64_t> shape;
  Span<const int64_t> env_ids;
  int64_t horizon = 0;
  int64_t num_envs = 0;
  int64_t step_size = 0;
  /* Which client and which of its infers made the view (Client::infer
  ** sets them; infer_id is the client's count of infers answered then,
  ** plugrl_statistics::exchanges): Client::action_copy(view, ...) refuses
  ** a view that is not its client's last action. 0 and NULL for a view
  ** Client::infer did not make: an empty one, which action_copy refuses,
  ** or one made from a plugrl_action, which it cannot check and leaves to
  ** the library. */
  uint64_t infer_id = 0;
  plugrl_client *client = nullptr;

  ActionView() = default;
  explicit ActionView(const plugrl_action &a)
      : data(a.data),
        dtype(a.dtype),
        shape(a.shape, a.ndim > 0 ? static_cast<std::size_t>(a.ndim) : 0),
        env_ids(a.env_ids, a.num_envs > 0 ? static_cast<std::size_t>(a.num_envs) : 0),
        horizon(a.horizon),
        num_envs(a.num_envs),
        step_size(a.step_size) {}

  /* Elements in the chunk: H * n * step_size. */
  std::size_t size() const noexcept { return static_cast<std::size_t>(horizon * num_envs * step_size); }

  /* The data as T; throws Error(PLUGRL_INVALID_ARGUMENT) unless dtype is T's. */
  template <class T>
  Span<const T> as() const {
    if (dtype != dtype_v<T>)
      throw Error(PLUGRL_INVALID_ARGUMENT, "the action's dtype is " + std::to_string(dtype) +
                                               ", not the one asked for (" + std::to_string(dtype_v<T>) +
                                               "): use Client::action_copy to convert");
    return Span<const T>(static_cast<const T *>(data), size());
  }

  /* The step_size elements of step k of the request's j-th env, as T. */
  template <class T>
  Span<const T> step(int64_t k, int64_t j) const {
    Span<const T> all = as<T>();
    if (k < 0 || k >= horizon || j < 0 || j >= num_envs)
      throw Error(PLUGRL_INVALID_ARGUMENT, "action step [" + std::to_string(k) + ", " + std::to_string(j) +
                                               "] is outside [" + std::to_string(horizon) + ", " +
                                               std::to_string(num_envs) + "]");
    return Span<const T>(all.data() + (k * num_envs + j) * step_size, static_cast<std::size_t>(step_size));
  }
};

/* Finished episodes' statistics for a feedback (plugrl_episode): one entry
** per feedback env; success may be empty. */
struct EpisodeStats {
  Span<const double> returns;
  Span<const int64_t> lengths;
  Span<const uint8_t> success;
  Span<const uint8_t> mask;
};

/* One session with a server (plugrl_client). Opens in the constructor,
** closes (with a 1000 close frame) in the destructor. Move-only. */
class Client {
 public:
  /* Connects and reads metadata. Throws Error with the library's message
  ** when it cannot (e.g. PLUGRL_CONNECT_FAILED, PLUGRL_TIMEOUT). */
  explicit Client(const Options &options) : log_(options.log_state()) {
    plugrl_options o = options.c();
    plugrl_client *h = nullptr;
    plugrl_status s = plugrl_open(&o, &h);
    if (s != PLUGRL_OK) {
      std::string msg = h ? detail::safe(plugrl_errmsg(h)) : std::string("plugrl_open failed");
      if (h) plugrl_close(h);
      throw Error(s, msg);
    }
    h_.store(h, std::memory_order_release);
  }
  explicit Client(const std::string &url) : Client(Options(url)) {}

  /* Closes the client. From inside one of its own log callbacks the
  ** library refuses (PLUGRL_BUSY): the client is then left open and its
  ** callback's state kept, both for good (a leak), rather than freed while
  ** the library still calls them. infer and feedback (where reconnects
  ** log) touch nothing of the object after their C call, so a Client may
  ** be destroyed in a log callback they run; not in one of another member
  ** function (the constructor's open, a metadata call), which goes on
  ** using the object (close() in any callback throws PLUGRL_BUSY). A
  ** Runner acting on this client uses only its own state, and a Runner may
  ** be destroyed inside its own episode callback. */
  ~Client() { reset_or_leak(); }
  Client(const Client &) = delete;
  Client &operator=(const Client &) = delete;
  Client(Client &&o) noexcept : h_(o.h_.exchange(nullptr)), log_(std::move(o.log_)) {}
  Client &operator=(Client &&o) noexcept {
    if (this != &o) {
      reset_or_leak();
      h_.store(o.h_.exchange(nullptr), std::memory_order_release);
      log_ = std::move(o.log_);
    }
    return *this;
  }

  /* Closes now (a 1000 close frame); later calls throw Error(PLUGRL_CLOSED).
  ** It may run while another thread is inside a call on this client: that
  ** call is interrupted and waited for, never leaked. The destructor may
  ** not: as for any C++ object, destroying a Client another thread is
  ** using is undefined; close() first, then destroy it once no thread
  ** uses it. */
  void close() {
    if (!reset())
      throw Error(PLUGRL_BUSY, "Client::close inside one of this client's callbacks: the library refuses; close it after");
  }
  /* plugrl_interrupt: ends the call running on this client (it throws
  ** Error(PLUGRL_INTERRUPTED)), or the next act/infer. Any thread; the
  ** handle it uses may also be kept for a signal handler (handle()). */
  void interrupt() const noexcept { plugrl_interrupt(h()); }
  bool is_open() const noexcept { return h() != nullptr; }
  /* The C handle, for calls this wrapper does not cover. */
  plugrl_client *handle() const noexcept { return h(); }
  /* The message of the last call that failed; "" if none. */
  std::string errmsg() const { return detail::safe(plugrl_errmsg(h())); }

  /* METADATA: std::nullopt when the key is absent or of another type. */

  std::optional<int64_t> metadata_int(const std::string &key) const {
    int64_t v = 0;
    int present = 0;
    detail::check_client(plugrl_metadata_int(h(), key.c_str(), &v, &present), h());
    return present ? std::optional<int64_t>(v) : std::nullopt;
  }
  std::optional<std::string> metadata_string(const std::string &key) const {
    return copy_out(&plugrl_metadata_string, key.c_str());
  }
  /* One key as JSON. */
  std::optional<std::string> metadata_json(const std::string &key) const {
    return copy_out(&plugrl_metadata_json, key.c_str());
  }
  /* The whole metadata map as JSON. */
  std::string metadata_json() const { return copy_out(&plugrl_metadata_json, nullptr).value_or("{}"); }
  bool has_feature(const std::string &feature) const {
    int present = 0;
    detail::check_client(plugrl_metadata_has_feature(h(), feature.c_str(), &present), h());
    return present != 0;
  }
  std::optional<int64_t> protocol_version() const { return metadata_int("protocol_version"); }
  std::optional<int64_t> action_horizon() const { return metadata_int("action_horizon"); }
  std::optional<int64_t> action_dim() const { return metadata_int("action_dim"); }

  /* LOW LEVEL (SPEC 4). infer and feedback alternate.
  **
  ** infer returns PLUGRL_OK (and sets action), PLUGRL_RECONNECTED (the
  ** connection was replaced: drop every chunk and infer again) or
  ** PLUGRL_STOPPED (the run is over: exit). Any other status throws. Once
  ** its arguments are accepted, action is emptied first (data NULL, size
  ** 0): the view it held died with the call.
  ** reuse may be empty (no reuse) or hold one flag per env. */
  plugrl_status infer(Span<const int64_t> env_indices, Span<const int64_t> step_ids, const Observation &obs,
                      Span<const uint8_t> reuse, ActionView &action) {
    return infer(env_indices, step_ids, obs.c(), reuse, action);
  }
  plugrl_status infer(Span<const int64_t> env_indices, Span<const int64_t> step_ids, const Observation &obs,
                      ActionView &action) {
    return infer(env_indices, step_ids, obs.c(), Span<const uint8_t>(), action);
  }
  plugrl_status infer(Span<const int64_t> env_indices, Span<const int64_t> step_ids, const plugrl_observation *obs,
                      Span<const uint8_t> reuse, ActionView &action) {
    if (step_ids.size() != env_indices.size())
      throw Error(PLUGRL_INVALID_ARGUMENT, "infer: " + std::to_string(env_indices.size()) + " env_indices but " +
                                               std::to_string(step_ids.size()) + " step_ids");
    if (!reuse.empty() && reuse.size() != env_indices.size())
      throw Error(PLUGRL_INVALID_ARGUMENT, "infer: " + std::to_string(env_indices.size()) + " env_indices but " +
                                               std::to_string(reuse.size()) + " reuse flags");
    plugrl_action a{};
    /* After the C call only locals: the log callback may have destroyed
    ** this client (see ~Client). */
    plugrl_client *const hc = h();
    /* The call ends the last view's life whatever it returns: an action
    ** left holding it (RECONNECTED, STOPPED, a throw) would dangle. */
    action = ActionView();
    plugrl_status s = plugrl_infer(hc, env_indices.data(), step_ids.data(), env_indices.size(), obs,
                                   reuse.empty() ? nullptr : reuse.data(), &a);
    if (s == PLUGRL_OK) {
      action = ActionView(a);
      action.infer_id = answered(hc);
      action.client = hc;
      return s;
    }
    if (s == PLUGRL_RECONNECTED || s == PLUGRL_STOPPED) return s;
    detail::throw_client(s, hc);
  }

  /* Copies the last action into dst (converting to T): dst is resized to
  ** the action's H * n * step_size elements. action must be the view this
  ** client's last infer returned: one from an earlier infer (this client's
  ** own, its Runner's or a C call's on its handle), another client's, or
  ** an empty one throws Error(PLUGRL_OUT_OF_ORDER), where it would size
  ** dst by one action and fill it with another. "Last" is the library's
  ** count of infers answered (plugrl_statistics::exchanges): an infer the
  ** library refused (PLUGRL_BUSY from a second thread, say) ends no
  ** action. A view made from a plugrl_action (ActionView(const
  ** plugrl_action &)) is not checked: the library's checks are those. */
  template <class T>
  void action_copy(const ActionView &action, std::vector<T> &dst) {
    const bool unchecked = action.client == nullptr && action.data != nullptr;
    if (!unchecked && (action.client == nullptr || action.client != h() || action.infer_id == 0 ||
                       action.infer_id != answered(h())))
      throw Error(PLUGRL_OUT_OF_ORDER,
                  "action_copy: the ActionView is not this client's last action (it is empty, another client's, or "
                  "an earlier infer's): copy an action before the next infer");
    dst.resize(action.size());
    detail::check_client(plugrl_action_copy(h(), dst.data(), dst.size() * sizeof(T), dtype_v<T>), h());
  }
  template <class T>
  std::vector<T> action_copy(const ActionView &action) {
    std::vector<T> v;
    action_copy(action, v);
    return v;
  }
  /* Copies into count elements at dst. */
  template <class T>
  void action_copy(T *dst, std::size_t count) {
    const std::size_t bytes = detail::bytes_of<T>(count, "action_copy");
    detail::check_client(plugrl_action_copy(h(), dst, bytes, dtype_v<T>), h());
  }

  /* Sends the feedback owed (SPEC 5.4) for the envs in env_indices. Returns
  ** PLUGRL_OK, PLUGRL_RECONNECTED (the feedback was dropped: drop every
  ** chunk and infer again) or PLUGRL_STOPPED. Any other status throws. */
  plugrl_status feedback(Span<const int64_t> env_indices, Span<const int64_t> step_ids, const Observation &next_obs,
                         Span<const float> rewards, Span<const uint8_t> terminated, Span<const uint8_t> truncated,
                         const std::optional<EpisodeStats> &episode = std::nullopt) {
    return feedback(env_indices, step_ids, next_obs.c(), rewards, terminated, truncated, episode);
  }
  plugrl_status feedback(Span<const int64_t> env_indices, Span<const int64_t> step_ids,
                         const plugrl_observation *next_obs, Span<const float> rewards,
                         Span<const uint8_t> terminated, Span<const uint8_t> truncated,
                         const std::optional<EpisodeStats> &episode = std::nullopt) {
    const std::size_t m = env_indices.size();
    if (step_ids.size() != m || rewards.size() != m || terminated.size() != m || truncated.size() != m)
      throw Error(PLUGRL_INVALID_ARGUMENT, "feedback: env_indices, step_ids, rewards, terminated and truncated "
                                           "need the same length, got " +
                                               std::to_string(m) + ", " + std::to_string(step_ids.size()) + ", " +
                                               std::to_string(rewards.size()) + ", " +
                                               std::to_string(terminated.size()) + ", " +
                                               std::to_string(truncated.size()));
    plugrl_episode ep{};
    if (episode) {
      if (episode->returns.size() != m || episode->lengths.size() != m || episode->mask.size() != m ||
          (!episode->success.empty() && episode->success.size() != m))
        throw Error(PLUGRL_INVALID_ARGUMENT,
                    "feedback: episode stats need " + std::to_string(m) + " returns, lengths and mask entries");
      ep.returns = episode->returns.data();
      ep.lengths = episode->lengths.data();
      ep.success = episode->success.empty() ? nullptr : episode->success.data();
      ep.mask = episode->mask.data();
    }
    plugrl_client *const hc = h(); /* only locals after the call, as in infer */
    plugrl_status s = plugrl_feedback(hc, env_indices.data(), step_ids.data(), m, next_obs, rewards.data(),
                                      terminated.data(), truncated.data(), episode ? &ep : nullptr);
    if (s == PLUGRL_OK || s == PLUGRL_RECONNECTED || s == PLUGRL_STOPPED) return s;
    detail::throw_client(s, hc);
  }

  /* Whether env's observation may be reused in the next infer (SPEC 10.1). */
  bool can_reuse(int64_t env) const {
    int yes = 0;
    detail::check_client(plugrl_can_reuse(h(), env, &yes), h());
    return yes != 0;
  }

  /* plugrl_stats: the client's live counters (see plugrl_statistics). Any
  ** thread, at any time, also during a call on this client; no allocation.
  ** Throws Error only for a closed or failed client. */
  plugrl_statistics stats() const {
    plugrl_statistics st{};
    st.size = sizeof st;
    detail::check_client(plugrl_stats(h(), &st), h());
    return st;
  }

 private:
  using CopyFn = plugrl_status (*)(plugrl_client *, const char *, char *, std::size_t, std::size_t *, int *);

  std::optional<std::string> copy_out(CopyFn fn, const char *key) const {
    /* Ask for the length, then copy; retry if it grew in between (a
    ** reconnect cannot happen here, but be exact anyway). */
    std::size_t length = 0;
    int present = 0;
    plugrl_status s = fn(h(), key, nullptr, 0, &length, &present);
    for (int attempt = 0; attempt < 4; attempt++) {
      if (s != PLUGRL_OK && s != PLUGRL_BUFFER_TOO_SMALL) detail::throw_client(s, h());
      if (!present) return std::nullopt;
      std::string buf(length + 1, '\0');
      s = fn(h(), key, &buf[0], buf.size(), &length, &present);
      if (s == PLUGRL_OK) {
        if (!present) return std::nullopt;
        buf.resize(length);
        return buf;
      }
    }
    detail::throw_client(s, h());
  }

  bool reset() noexcept { return detail::close_handle(h_, plugrl_close); }
  /* reset, or, where the library refuses, leave the client open and its
  ** log state alive for good: the library calls it again. */
  void reset_or_leak() noexcept {
    if (!reset()) {
      h_.store(nullptr, std::memory_order_release);
      // The log function must outlive the handle left to the library,
      // which may still call it: a copy of the shared_ptr whose destructor
      // never runs keeps its count above zero for good. Made in place, as
      // this is noexcept (a `new` here could only fail by terminating).
      alignas(std::shared_ptr<LogFn>) unsigned char keep[sizeof(std::shared_ptr<LogFn>)];
      ::new (static_cast<void *>(keep)) std::shared_ptr<LogFn>(std::move(log_));
    }
  }

  /* Atomic: close (reset) may run while another thread reads it in a
  ** call (interrupt, stats, or a call close interrupts); a handle read
  ** just before the close is dead afterwards, which the library reports
  ** as PLUGRL_CLOSED. */
  std::atomic<plugrl_client *> h_{nullptr};
  plugrl_client *h() const noexcept { return h_.load(std::memory_order_acquire); }
  std::shared_ptr<LogFn> log_;
  /* The library's count of infers answered on hc (plugrl_statistics::
  ** exchanges: one per successful infer, a Runner's included, and none for
  ** one it refused), ActionView::infer_id's source; 0 for a handle closed
  ** (or NULL). plugrl_stats takes no lock and allocates nothing, and hc
  ** may be a handle a log callback closed (it says PLUGRL_CLOSED). */
  static uint64_t answered(plugrl_client *hc) noexcept {
    plugrl_statistics st{};
    st.size = sizeof st;
    return plugrl_stats(hc, &st) == PLUGRL_OK ? st.exchanges : 0;
  }
};

/* ------------------------------------------------------------------------ */
/* Runner                                                                   */
/* ------------------------------------------------------------------------ */

/* A finished episode, as given to Runner::on_episode. */
struct Episode {
  int64_t env;
  double episode_return;
  int64_t length;
  bool success;
};

using EpisodeFn = std::function<void(const Episode &)>;

/* N envs in lockstep (plugrl_runner). Borrows its Client: destroy the
** Runner before the Client. Move-only. act and report return false when
** the server stopped the run (PLUGRL_STOPPED) and throw on every other
** failure; the runner rides through reconnects by itself. */
class Runner {
 public:
  Runner(Client &client, std::size_t num_envs) : n_(num_envs), state_(std::make_unique<State>()) {
    plugrl_runner *h = nullptr;
    plugrl_status s = plugrl_runner_new(client.handle(), num_envs, &h);
    if (s != PLUGRL_OK) {
      std::string msg = h ? detail::safe(plugrl_runner_errmsg(h)) : client.errmsg();
      if (h) plugrl_runner_free(h);
      throw Error(s, msg.empty() ? std::string("plugrl_runner_new failed") : msg);
    }
    h_.store(h, std::memory_order_release);
  }
  /* Frees the runner. From inside its own episode callback (or its
  ** client's log callback) the library refuses (PLUGRL_BUSY): the runner is
  ** then left to the library and its callback's state kept, for good (a
  ** leak), rather than freed while the report still calls it. act and
  ** report touch nothing of the object after their first C call, so a
  ** Runner may be destroyed in either callback during them. */
  ~Runner() { reset_or_leak(); }
  Runner(const Runner &) = delete;
  Runner &operator=(const Runner &) = delete;
  Runner(Runner &&o) noexcept : h_(o.h_.exchange(nullptr)), n_(o.n_), state_(std::move(o.state_)) {}
  Runner &operator=(Runner &&o) noexcept {
    if (this != &o) {
      reset_or_leak();
      h_.store(o.h_.exchange(nullptr), std::memory_order_release);
      n_ = o.n_;
      state_ = std::move(o.state_);
    }
    return *this;
  }

  plugrl_runner *handle() const noexcept { return h(); }
  std::size_t num_envs() const noexcept { return n_; }
  std::string errmsg() const { return detail::safe(plugrl_runner_errmsg(h())); }

  /* plugrl_runner_stats: the client's counters plus episodes and
  ** env_steps. Any thread, at any time, also during act or report. */
  plugrl_statistics stats() const {
    plugrl_statistics st{};
    st.size = sizeof st;
    detail::check_runner(plugrl_runner_stats(h(), &st), h());
    return st;
  }

  /* Elements per env per step of the server's actions, once known. */
  std::optional<int64_t> step_size() const { return step_size_of(h()); }

  /* This step's action for every env into count elements of T at out
  ** (count must be num_envs * step_size). false: the run was stopped. */
  template <class T>
  bool act(const Observation &obs, T *out, std::size_t count) {
    return act(obs.c(), out, detail::bytes_of<T>(count, "Runner::act"), dtype_v<T>);
  }

  /* This step's action for every env into actions, resized to num_envs *
  ** step_size (env i's at i * step_size). false: the run was stopped.
  ** When the step size is not known yet (no metadata action_dim and no
  ** action so far), the first call learns it from the library's answer,
  ** and so does a call during which a reconnect found a server of another
  ** action width (the chunk is kept; it acts again at the new size). */
  template <class T, class A>
  bool act(const Observation &obs, std::vector<T, A> &actions) {
    const plugrl_observation *o = obs.c();
    // Locals only after the first call, as in report: the client's log
    // callback (a reconnect inside the act) may have destroyed this Runner,
    // which then leaves the handle to the library (see ~Runner), alive.
    plugrl_runner *const h = this->h();
    const std::size_t n = n_;
    std::optional<int64_t> step = step_size_of(h);
    if (!step) {
      /* Let the runner infer into a one-element buffer: it needs a chunk to
      ** know the size, and reports a wrong size as PLUGRL_INVALID_ARGUMENT
      ** once it knows it (the chunk is kept; the retry below uses it). */
      T one{};
      plugrl_status s = plugrl_runner_act(h, o, &one, sizeof one, dtype_v<T>);
      if (s == PLUGRL_STOPPED) return false;
      if (s == PLUGRL_OK) { /* one env, one value per step */
        actions.assign(1, one);
        return true;
      }
      step = step_size_of(h);
      if (!step || s != PLUGRL_INVALID_ARGUMENT) detail::throw_runner(s, h);
    }
    actions.resize(n * static_cast<std::size_t>(*step));
    plugrl_status s = plugrl_runner_act(h, o, actions.data(), actions.size() * sizeof(T), dtype_v<T>);
    if (s == PLUGRL_INVALID_ARGUMENT) {
      std::optional<int64_t> now = step_size_of(h);
      if (now && *now != *step) {
        actions.resize(n * static_cast<std::size_t>(*now));
        s = plugrl_runner_act(h, o, actions.data(), actions.size() * sizeof(T), dtype_v<T>);
      }
    }
    if (s == PLUGRL_STOPPED) return false;
    detail::check_runner(s, h);
    return true;
  }

  /* The rest of env's chunk, from the step the last act gave it, into
  ** chunk (resized to steps * step_size, step after step); returns the
  ** steps. Between act and report only (plugrl_runner_chunk). */
  template <class T, class A>
  int64_t chunk(int64_t env, std::vector<T, A> &chunk) {
    int64_t steps = 0;
    plugrl_status s = plugrl_runner_chunk(h(), env, nullptr, 0, dtype_v<T>, &steps);
    if (s != PLUGRL_OK && s != PLUGRL_BUFFER_TOO_SMALL) detail::throw_runner(s, h());
    std::optional<int64_t> step = step_size();
    chunk.resize(static_cast<std::size_t>(steps * step.value_or(0)));
    detail::check_runner(plugrl_runner_chunk(h(), env, chunk.data(), chunk.size() * sizeof(T), dtype_v<T>, &steps), h());
    return steps;
  }

  /* The C form: actions_size bytes of dtype at actions. */
  bool act(const plugrl_observation *obs, void *actions, std::size_t actions_size, plugrl_dtype dtype) {
    plugrl_runner *const h = this->h(); /* only locals after the call, as in report */
    plugrl_status s = plugrl_runner_act(h, obs, actions, actions_size, dtype);
    if (s == PLUGRL_STOPPED) return false;
    detail::check_runner(s, h);
    return true;
  }

  /* Reports the step every env just took: next_obs (terminal observation
  ** for an env that ended), and num_envs rewards, terminated and truncated
  ** flags, and optionally success flags. Calls the episode callback for
  ** each episode that ended, then rethrows the first exception it threw.
  ** false: the run was stopped. */
  bool report(const Observation &next_obs, Span<const double> rewards, Span<const uint8_t> terminated,
              Span<const uint8_t> truncated, Span<const uint8_t> success = Span<const uint8_t>()) {
    return report(next_obs.c(), rewards, terminated, truncated, success);
  }
  bool report(const plugrl_observation *next_obs, Span<const double> rewards, Span<const uint8_t> terminated,
              Span<const uint8_t> truncated, Span<const uint8_t> success = Span<const uint8_t>()) {
    if (rewards.size() != n_ || terminated.size() != n_ || truncated.size() != n_ ||
        (!success.empty() && success.size() != n_))
      throw Error(PLUGRL_INVALID_ARGUMENT,
                  "report: the runner has " + std::to_string(n_) + " envs, got " + std::to_string(rewards.size()) +
                      " rewards, " + std::to_string(terminated.size()) + " terminated, " +
                      std::to_string(truncated.size()) + " truncated and " + std::to_string(success.size()) +
                      " success flags");
    if (!state_) throw Error(PLUGRL_CLOSED, "this Runner was moved from");
    // Locals only after the call: the episode callback may have destroyed
    // this Runner, which then leaves the handle and the State to the
    // library (see ~Runner), alive.
    State *st = state_.get();
    plugrl_runner *h = this->h();
    st->error = nullptr;
    plugrl_status s = plugrl_runner_report(h, next_obs, rewards.data(), terminated.data(), truncated.data(),
                                           success.empty() ? nullptr : success.data());
    if (st->error) std::rethrow_exception(std::exchange(st->error, nullptr));
    if (s == PLUGRL_STOPPED) return false;
    detail::check_runner(s, h);
    return true;
  }

  /* Sets (or, with an empty function, clears) the callback called during
  ** report for each episode that ended. It must not call into the library. */
  void on_episode(EpisodeFn fn) {
    if (!state_) throw Error(PLUGRL_CLOSED, "this Runner was moved from");
    // A new State, kept only once the library took it: a refused call
    // (PLUGRL_BUSY, CLOSED) leaves the registered one as it was. Calling
    // this while another thread is in act or report is still misuse (see
    // THREADS in the header): report reads the State after its call.
    auto next = std::make_unique<State>();
    next->fn = std::move(fn);
    const bool on = static_cast<bool>(next->fn);
    detail::check_runner(plugrl_runner_on_episode(h(), on ? &Runner::trampoline : nullptr, on ? next.get() : nullptr),
                         h());
    state_ = std::move(next);
  }

 private:
  struct State {
    EpisodeFn fn;
    std::exception_ptr error;
  };

  static void trampoline(void *user, int64_t env, double ret, int64_t length, int success) noexcept {
    State *st = static_cast<State *>(user);
    if (st->error) return; /* after a throw, skip the rest of this report */
    try {
      st->fn(Episode{env, ret, length, success != 0});
    } catch (...) {
      st->error = std::current_exception();
    }
  }

  static std::optional<int64_t> step_size_of(plugrl_runner *h) {
    int64_t v = 0;
    int known = 0;
    detail::check_runner(plugrl_runner_step_size(h, &v, &known), h);
    return known ? std::optional<int64_t>(v) : std::nullopt;
  }

  bool reset() noexcept { return detail::close_handle(h_, plugrl_runner_free); }
  /* reset, or, where the library refuses, leave the runner to the library
  ** and its episode state alive for good: the report calls it again. */
  void reset_or_leak() noexcept {
    if (!reset()) {
      h_.store(nullptr, std::memory_order_release);
      static_cast<void>(state_.release());
    }
  }

 public:
  /* plugrl_runner_interrupt: ends the act or report running on this
  ** runner (it throws Error(PLUGRL_INTERRUPTED)). Any thread. */
  void interrupt() const noexcept { plugrl_runner_interrupt(h()); }

 private:

  /* Atomic, as Client's: interrupt() may read it from any thread. */
  std::atomic<plugrl_runner *> h_{nullptr};
  plugrl_runner *h() const noexcept { return h_.load(std::memory_order_acquire); }
  std::size_t n_ = 0;
  std::unique_ptr<State> state_;
};

}  // namespace layout2
}  // namespace plugrl

#endif /* PLUGRL_HPP */
