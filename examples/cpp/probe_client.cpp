// probe_client.cpp - N probe envs of SPEC 8.1 on plugrl.hpp's Runner, which
// does the chunk bookkeeping (chunk sums, early flush at a done, terminal
// observations, step_ids, observation reuse, reconnects).
//
// Usage:
//   probe_client --url ws://HOST:PORT [--envs N] [--api-key KEY]
//                [--max-reconnects N] [--timeout-ms MS]
//
// Exits 0 when the server stops the run; on any other end prints the
// library's message and exits 1 (2 for a usage error). SIGINT (Ctrl-C) or
// SIGTERM ends the call that waits on the server at once (connecting
// included); the client then closes with a close frame (SPEC 7.5) and the
// program ends by that signal (a shell sees 130 for SIGINT), so that a
// script running it in a loop stops too. A signal the program was started
// with ignored (SIGINT in a script's background job) stays ignored, as the
// shell that started it asks: stop such a program with SIGTERM.
#include <plugrl.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char *kProg = "plugrl_probe_client";

// The signal that asked the program to stop (SIGINT, SIGTERM), or 0.
volatile std::sig_atomic_t g_signal = 0;

// Async-signal-safe: a flag, and an interrupt of whatever call waits on the
// server (or is still connecting), which then throws
// Error(PLUGRL_INTERRUPTED); a client not in a call gets it pending, and
// its next act throws at once.
extern "C" void on_signal(int sig) {
  g_signal = sig;
  plugrl::interrupt_all();
}

// SA_ONSTACK: the Go runtime in libplugrl needs it (plugrl.h, PROCESS FACTS).
// A signal ignored at start keeps its SIG_IGN (above).
bool install_signal_handlers() {
  struct sigaction sa, old;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) {
    if (sigaction(sig, nullptr, &old) != 0 || (old.sa_handler != SIG_IGN && sigaction(sig, &sa, nullptr) != 0)) {
      std::cerr << kProg << ": sigaction: " << std::strerror(errno) << "\n";
      return false;
    }
  }
  return true;
}

// Ends the program by the signal that asked it to stop, with a line saying
// so, once the client is closed: a process that exits with a status
// instead leaves the shell that started it to go on, as if the user had
// not pressed Ctrl-C.
int die_by_signal() {
  std::cout << kProg << ": interrupted (" << (g_signal == SIGINT ? "SIGINT" : "SIGTERM") << ")" << std::endl;
  std::signal(g_signal, SIG_DFL);
  std::raise(g_signal);
  return 128 + g_signal;  // not reached
}

struct Args {
  std::string url;
  std::string api_key;
  long long envs = 3;
  long long max_reconnects = 5;
  long long timeout_ms = 30000;
};

void usage(std::ostream &out) {
  out << "usage: " << kProg
      << " --url ws://HOST:PORT [--envs N] [--api-key KEY]\n"
         "           [--max-reconnects N] [--timeout-ms MS]\n"
         "Runs N probe envs (SPEC 8.1) on plugrl::Runner until the server stops the\n"
         "run (exit 0); any other end exits 1 with the library's message.\n";
}

bool parse_int(const std::string &flag, const std::string &s, long long lo, long long hi, long long &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || *end || v < lo || v > hi) {
    std::cerr << kProg << ": " << flag << " wants an integer in [" << lo << ", " << hi << "], got \"" << s
              << "\"\n";
    return false;
  }
  out = v;
  return true;
}

// 0: parsed; otherwise the exit code.
int parse(int argc, char **argv, Args &a) {
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(std::cout);
      return -1;
    }
    if (i + 1 >= argc) {
      std::cerr << kProg << ": unknown option or missing value: " << arg << "\n";
      usage(std::cerr);
      return 2;
    }
    std::string val = argv[++i];
    if (arg == "--url") {
      a.url = val;
    } else if (arg == "--api-key") {
      a.api_key = val;
    } else if (arg == "--envs") {
      if (!parse_int(arg, val, 1, 999, a.envs)) return 2;
    } else if (arg == "--max-reconnects") {
      if (!parse_int(arg, val, -1, 1000000, a.max_reconnects)) return 2;
    } else if (arg == "--timeout-ms") {
      if (!parse_int(arg, val, 1, 2147483647LL, a.timeout_ms)) return 2;
    } else {
      std::cerr << kProg << ": unknown option: " << arg << "\n";
      usage(std::cerr);
      return 2;
    }
  }
  if (a.url.empty()) {
    std::cerr << kProg << ": --url is required\n";
    usage(std::cerr);
    return 2;
  }
  return 0;
}

// SPEC 8.1's probe env, batched: t counts the steps of the current episode,
// a holds the action applied last.
struct Probe {
  std::size_t n;
  std::size_t d;
  std::vector<double> t;  // [n, 1]
  std::vector<double> a;  // [n, d]

  Probe(std::size_t n_, std::size_t d_) : n(n_), d(d_), t(n_, 0.0), a(n_ * d_, 0.0) {}

  static double length(std::size_t i) { return static_cast<double>(3 + 2 * (i % 3)); }

  void describe(plugrl::Observation &obs) const {
    obs.state("t", t.data(), {static_cast<int64_t>(n), 1});
    obs.state("a", a.data(), {static_cast<int64_t>(n), static_cast<int64_t>(d)});
  }
};

int run(const Args &args) {
  const auto n = static_cast<std::size_t>(args.envs);
  plugrl::Options opts(args.url);
  opts.connect_timeout_ms(static_cast<int32_t>(args.timeout_ms))
      .metadata_timeout_ms(static_cast<int32_t>(args.timeout_ms))
      .receive_timeout_ms(static_cast<int32_t>(args.timeout_ms))
      // The library's 0 means its default; the flag's 0 means none.
      .max_reconnects(args.max_reconnects == 0 ? -1 : static_cast<int32_t>(args.max_reconnects))
      .log([](int level, const char *msg) {
        if (level >= PLUGRL_LOG_INFO) std::cerr << kProg << ": " << msg << "\n";
      });
  if (!args.api_key.empty()) opts.api_key(args.api_key);

  // A signal from here on ends the open, but not one that came before it
  // began: look first.
  if (g_signal) return 128 + g_signal;
  plugrl::Client client(opts);  // declared before the runner: it outlives it
  std::optional<int64_t> dim = client.action_dim();
  bool width_known = dim && *dim > 0;
  Probe probe(n, width_known ? static_cast<std::size_t>(*dim) : 1);

  plugrl::Runner runner(client, n);
  long long episodes = 0;
  runner.on_episode([&](const plugrl::Episode &) { episodes++; });

  plugrl::Observation obs;
  probe.describe(obs);
  std::vector<std::string> text(n);
  for (std::size_t i = 0; i < n; i++) text[i] = "probe env " + std::to_string(i);
  obs.text(text);  // numpy <U, as the Python env client sends

  std::vector<double> actions;
  std::vector<double> rewards(n, 1.0);  // the probe env pays 1 per step
  std::vector<uint8_t> terminated(n, 0), truncated(n, 0);

  for (;;) {
    if (g_signal) return 128 + g_signal;  // it came between calls
    if (!runner.act(obs, actions)) break;
    std::size_t width = actions.size() / n;
    if (width != probe.d) {
      if (width_known)
        throw plugrl::Error(PLUGRL_PROTOCOL_ERROR, "the server's actions have " + std::to_string(width) +
                                                       " values per step, metadata action_dim said " +
                                                       std::to_string(probe.d));
      // No action_dim in the metadata: the first action tells the width.
      probe.d = width;
      probe.a.assign(n * width, 0.0);
      probe.describe(obs);
      width_known = true;
    }
    for (std::size_t i = 0; i < n; i++) {
      probe.t[i] += 1;
      std::copy(actions.begin() + static_cast<std::ptrdiff_t>(i * width),
                actions.begin() + static_cast<std::ptrdiff_t>((i + 1) * width),
                probe.a.begin() + static_cast<std::ptrdiff_t>(i * width));
      terminated[i] = probe.t[i] == Probe::length(i);
    }
    // obs still describes t and a: this is the terminal observation for an
    // env that ended.
    if (!runner.report(obs, rewards, terminated, truncated)) break;
    for (std::size_t i = 0; i < n; i++)
      if (terminated[i]) probe.t[i] = 0;  // reset
  }
  std::cout << kProg << ": the server stopped the run after " << episodes << " episodes" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  Args args;
  int rc = parse(argc, argv, args);
  if (rc == -1) return 0;
  if (rc != 0) return rc;
  if (!install_signal_handlers()) return 1;
  try {
    rc = run(args);  // the client closes (a close frame) as run returns or throws
  } catch (const plugrl::Error &e) {
    if (e.status() == PLUGRL_STOPPED) {  // e.g. stopped while connecting
      std::cout << kProg << ": the server stopped the run" << std::endl;
      rc = 0;
    } else if (!g_signal) {
      std::cerr << kProg << ": " << e.what() << std::endl;
      rc = 1;
    }
  } catch (const std::exception &e) {
    std::cerr << kProg << ": " << e.what() << std::endl;
    rc = 1;
  }
  if (g_signal) return die_by_signal();
  return rc;
}
