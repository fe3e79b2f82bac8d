// mujoco_cartpole.cpp - N cartpoles simulated with MuJoCo, trained through
// PlugRL: the server's policy pushes each cart, this program steps the
// physics, and plugrl::Runner does the protocol's bookkeeping (chunk reward
// sums, terminal observations, step_ids, info.episode, reconnects).
//
// Usage:
//   plugrl_mujoco_cartpole --url ws://HOST:PORT [--envs N] [--episodes K]
//                          [--max-steps T] [--seed S] [--csv PATH] [--quiet]
//                          [--timeout-ms MS]
//
// The env: a cart on a frictionless slider with a 1 m pole on a hinge, one
// actuator pushing the cart with up to 10 N (action in [-1, 1], clamped by
// MuJoCo; a NaN or infinite action, which only a broken server sends, is
// applied as 0), 0.01 s per step. Observation: states "qpos" [n, 2] (cart
// position in m, pole angle in rad) and "qvel" [n, 2] (their rates), f64.
// Reward 1 for every step after which the pole is still up; the episode is
// terminated when the pole tilts past 0.2 rad or the cart leaves the track
// (|x| > 2.4 m), truncated after T steps (default 500), and a success when
// it lasts all T. A reset puts every coordinate at a random value in
// [-0.05, 0.05] (seeded by --seed).
//
// Prints each episode's return as it ends (not with --quiet) and a summary;
// --csv writes one line per episode: episode,env,seconds,return,length,success.
// Runs until K episodes have ended (K = 0: until the server stops the run),
// then exits 0; any other end exits 1 with the library's message (2 for a
// usage error). SIGINT (Ctrl-C) or SIGTERM at any point ends the call that
// waits on the server (plugrl::interrupt_all), closes the connection (a
// close frame, SPEC 7.5) and the ledger, prints the summary so far and
// ends the program by that signal (a shell sees 130 for SIGINT), so that a
// script running it in a loop stops too. A signal the program was started
// with ignored (SIGINT in a script's background job) stays ignored, as the
// shell that started it asks: stop such a program with SIGTERM.
#include <plugrl.hpp>

#include <mujoco/mujoco.h>

#include "cartpole_model.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr const char *kProg = "plugrl_mujoco_cartpole";

// The signal that asked the program to stop (SIGINT, SIGTERM), or 0.
volatile std::sig_atomic_t g_signal = 0;

// Async-signal-safe: a flag, and an interrupt of whatever call waits on the
// server (or is still connecting), which then throws
// Error(PLUGRL_INTERRUPTED). The loop looks at the flag between steps.
extern "C" void on_signal(int sig) {
  g_signal = sig;
  plugrl::interrupt_all();
}

// SA_ONSTACK: the Go runtime in libplugrl needs it (plugrl.h, PROCESS FACTS).
// A signal ignored at start keeps its SIG_IGN (above).
void install_signal_handlers() {
  struct sigaction sa, old;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM})
    if (sigaction(sig, nullptr, &old) != 0 || (old.sa_handler != SIG_IGN && sigaction(sig, &sa, nullptr) != 0))
      throw std::runtime_error("sigaction: " + std::string(std::strerror(errno)));
}

bool interrupted(const plugrl::Error &e) { return e.status() == PLUGRL_INTERRUPTED && g_signal != 0; }

using namespace plugrl_cartpole;  // kModel, the rules, Rng, load_model

struct Args {
  std::string url;
  std::string csv;
  long long envs = 8;
  long long episodes = 0;
  long long max_steps = 500;
  long long seed = 1;
  long long timeout_ms = 30000;
  bool quiet = false;
};

void usage(std::ostream &out) {
  out << "usage: " << kProg
      << " --url ws://HOST:PORT [--envs N] [--episodes K] [--max-steps T]\n"
         "           [--seed S] [--csv PATH] [--quiet] [--timeout-ms MS]\n"
         "Runs N MuJoCo cartpoles on plugrl::Runner until K episodes have ended\n"
         "(K = 0: until the server stops the run). Episodes last at most T steps.\n";
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

// 0: parsed; -1: help shown; otherwise the exit code.
int parse(int argc, char **argv, Args &a) {
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(std::cout);
      return -1;
    }
    if (arg == "--quiet") {
      a.quiet = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << kProg << ": unknown option or missing value: " << arg << "\n";
      usage(std::cerr);
      return 2;
    }
    std::string val = argv[++i];
    bool ok = true;
    if (arg == "--url") {
      a.url = val;
    } else if (arg == "--csv") {
      a.csv = val;
    } else if (arg == "--envs") {
      ok = parse_int(arg, val, 1, 999, a.envs);
    } else if (arg == "--episodes") {
      ok = parse_int(arg, val, 0, 1000000000LL, a.episodes);
    } else if (arg == "--max-steps") {
      ok = parse_int(arg, val, 1, 1000000000LL, a.max_steps);
    } else if (arg == "--seed") {
      ok = parse_int(arg, val, 0, 9223372036854775807LL, a.seed);
    } else if (arg == "--timeout-ms") {
      ok = parse_int(arg, val, 1, 2147483647LL, a.timeout_ms);
    } else {
      std::cerr << kProg << ": unknown option: " << arg << "\n";
      usage(std::cerr);
      return 2;
    }
    if (!ok) return 2;
  }
  if (a.url.empty()) {
    std::cerr << kProg << ": --url is required\n";
    usage(std::cerr);
    return 2;
  }
  return 0;
}

// N cartpoles with one model, and the observation batch they fill.
class Cartpoles {
 public:
  Cartpoles(std::size_t n, long long max_steps, uint64_t seed)
      : n_(n), max_steps_(max_steps), model_(load_model()), rng_{seed} {
    const mjModel *m = model_.get();
    if (m->nq != 2 || m->nv != 2 || m->nu != 1) throw std::runtime_error("the cartpole model is not 2 dof, 1 actuator");
    for (std::size_t i = 0; i < n; i++) {
      data_.emplace_back(mj_makeData(m));
      if (!data_.back()) throw std::runtime_error("mj_makeData failed");
    }
    qpos_.assign(n * 2, 0.0);
    qvel_.assign(n * 2, 0.0);
    t_.assign(n, 0);
    for (std::size_t i = 0; i < n; i++) reset(i);
  }

  std::size_t size() const { return n_; }
  static std::size_t action_width() { return 1; }

  // The observation batch, over buffers updated in place.
  void describe(plugrl::Observation &obs) const {
    const auto n = static_cast<int64_t>(n_);
    obs.state("qpos", qpos_.data(), {n, 2}).state("qvel", qvel_.data(), {n, 2});
  }

  void reset(std::size_t i) {
    mjData *d = data_[i].get();
    mj_resetData(model_.get(), d);
    for (int j = 0; j < 2; j++) {
      d->qpos[j] = rng_.uniform(-kResetNoise, kResetNoise);
      d->qvel[j] = rng_.uniform(-kResetNoise, kResetNoise);
    }
    t_[i] = 0;
    copy_out(i);
  }

  // Applies action u to env i for one step; returns its reward and sets the
  // done flags.
  double step(std::size_t i, double u, uint8_t &terminated, uint8_t &truncated) {
    mjData *d = data_[i].get();
    // MuJoCo clamps to ctrlrange; a NaN would poison the state (and a
    // warning reset it), so a non-finite action pushes with 0.
    d->ctrl[0] = std::isfinite(u) ? u : 0.0;
    mj_step(model_.get(), d);
    t_[i]++;
    copy_out(i);
    const bool fallen = !(std::fabs(d->qpos[1]) <= kMaxAngle && std::fabs(d->qpos[0]) <= kMaxX);
    terminated = fallen;
    truncated = !fallen && t_[i] >= max_steps_;
    return fallen ? 0.0 : 1.0;
  }

  long long steps(std::size_t i) const { return t_[i]; }

 private:
  void copy_out(std::size_t i) {
    const mjData *d = data_[i].get();
    std::copy(d->qpos, d->qpos + 2, qpos_.begin() + static_cast<std::ptrdiff_t>(2 * i));
    std::copy(d->qvel, d->qvel + 2, qvel_.begin() + static_cast<std::ptrdiff_t>(2 * i));
  }

  std::size_t n_;
  long long max_steps_;
  std::unique_ptr<mjModel, ModelDeleter> model_;
  std::vector<std::unique_ptr<mjData, DataDeleter>> data_;
  std::vector<double> qpos_, qvel_;  // [n, 2] each
  std::vector<long long> t_;
  Rng rng_;
};

struct Record {
  long long episode;
  int64_t env;
  double seconds;
  double ret;
  int64_t length;
  bool success;
};

double mean_of(const std::vector<Record> &r, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; i++) s += r[i].ret;
  return to > from ? s / static_cast<double>(to - from) : 0.0;
}

int run(const Args &args) {
  const auto n = static_cast<std::size_t>(args.envs);
  Cartpoles envs(n, args.max_steps, static_cast<uint64_t>(args.seed));

  std::ofstream csv;
  if (!args.csv.empty()) {
    csv.open(args.csv, std::ios::out | std::ios::trunc);
    if (!csv) throw std::runtime_error("cannot write " + args.csv);
    csv << "episode,env,seconds,return,length,success\n" << std::flush;
  }

  plugrl::Options opts(args.url);
  opts.connect_timeout_ms(static_cast<int32_t>(args.timeout_ms))
      .metadata_timeout_ms(static_cast<int32_t>(args.timeout_ms))
      .receive_timeout_ms(static_cast<int32_t>(args.timeout_ms))
      .log([](int level, const char *msg) {
        if (level >= PLUGRL_LOG_INFO) std::cerr << kProg << ": " << msg << "\n";
      });
  // A signal from here on ends the open, but not one that came before it
  // began: look first.
  if (g_signal) {
    std::cout << kProg << ": interrupted" << std::endl;
    return 128 + g_signal;
  }
  plugrl::Client client(opts);  // declared before the runner: it outlives it
  if (auto dim = client.action_dim(); dim && static_cast<std::size_t>(*dim) != Cartpoles::action_width())
    throw plugrl::Error(PLUGRL_INVALID_ARGUMENT, "the server's action_dim is " + std::to_string(*dim) +
                                                     "; the cartpole has one actuator (serve with --action-dim 1)");
  std::cout << kProg << ": " << n << " MuJoCo " << mj_versionString() << " cartpoles, episodes of at most "
            << args.max_steps << " steps, server " << client.metadata_string("server").value_or("?") << " (algorithm "
            << client.metadata_string("algorithm").value_or("?") << ", policy "
            << client.metadata_string("policy").value_or("?") << ", horizon "
            << (client.action_horizon() ? std::to_string(*client.action_horizon()) : "?") << ")" << std::endl;

  plugrl::Runner runner(client, n);
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<Record> done;
  runner.on_episode([&](const plugrl::Episode &e) {
    Record r{static_cast<long long>(done.size()) + 1, e.env, seconds(), e.episode_return, e.length, e.success};
    done.push_back(r);
    char line[160];
    if (!args.quiet) {
      std::snprintf(line, sizeof line, "episode %lld env %lld return %g length %lld%s at %.1f s\n", r.episode,
                    static_cast<long long>(r.env), r.ret, static_cast<long long>(r.length),
                    r.success ? " success" : "", r.seconds);
      std::cout << line;
    }
    if (csv.is_open()) {
      std::snprintf(line, sizeof line, "%lld,%lld,%.3f,%.17g,%lld,%d\n", r.episode, static_cast<long long>(r.env),
                    r.seconds, r.ret, static_cast<long long>(r.length), r.success ? 1 : 0);
      csv << line;
    }
  });

  plugrl::Observation obs;
  envs.describe(obs);
  std::vector<double> actions;
  std::vector<double> rewards(n, 0.0);
  std::vector<uint8_t> terminated(n, 0), truncated(n, 0), success(n, 0);
  long long steps = 0;
  bool stopped = false;
  // An interrupt that comes while no call waits is held for the next act,
  // which then throws without sending anything; the flag ends the loop
  // before it.
  try {
    for (;;) {
      if (g_signal) break;
      if (!runner.act(obs, actions)) {
        stopped = true;
        break;
      }
      if (actions.size() != n * Cartpoles::action_width())
        throw plugrl::Error(PLUGRL_PROTOCOL_ERROR, "the server's actions have " + std::to_string(actions.size() / n) +
                                                       " values per step; the cartpole has one actuator");
      for (std::size_t i = 0; i < n; i++) {
        rewards[i] = envs.step(i, actions[i], terminated[i], truncated[i]);
        success[i] = truncated[i];  // it lasted all T steps
      }
      steps += static_cast<long long>(n);
      // obs holds every env's state after its step: the terminal observation
      // for those that ended.
      if (!runner.report(obs, rewards, terminated, truncated, success)) {
        stopped = true;
        break;
      }
      if (csv.is_open()) csv.flush();
      if (args.episodes > 0 && static_cast<long long>(done.size()) >= args.episodes) break;
      for (std::size_t i = 0; i < n; i++)
        if (terminated[i] || truncated[i]) envs.reset(i);
    }
  } catch (const plugrl::Error &e) {
    if (!interrupted(e)) throw;
  }
  const double wall = seconds();
  std::cout.flush();

  const std::size_t k = std::max<std::size_t>(1, std::min<std::size_t>(20, done.size() / 2));
  std::ostringstream sum;
  sum << std::fixed << std::setprecision(1);
  const char *end = g_signal ? (g_signal == SIGINT ? "interrupted (SIGINT)" : "interrupted (SIGTERM)")
                    : stopped ? "the server stopped the run"
                              : "done";
  sum << kProg << ": " << end << " after " << done.size()
      << " episodes, " << steps << " env steps in " << wall << " s (" << std::setprecision(0)
      << (wall > 0 ? static_cast<double>(steps) / wall : 0.0) << " steps/s)\n";
  if (!done.empty()) {
    const double best = std::max_element(done.begin(), done.end(), [](const Record &a, const Record &b) {
                          return a.ret < b.ret;
                        })->ret;
    const auto wins = std::count_if(done.begin(), done.end(), [](const Record &r) { return r.success; });
    sum << std::setprecision(1) << kProg << ": mean return " << mean_of(done, 0, done.size()) << ", best " << best
        << ", " << wins << " episodes balanced all " << args.max_steps << " steps; first " << k
        << " episodes' mean " << mean_of(done, 0, k) << ", last " << k << " episodes' mean "
        << mean_of(done, done.size() - k, done.size()) << "\n";
  }
  std::cout << sum.str() << std::flush;
  return g_signal ? 128 + g_signal : 0;
}

}  // namespace

int main(int argc, char **argv) {
  Args args;
  int rc = parse(argc, argv, args);
  if (rc == -1) return 0;
  if (rc != 0) return rc;
  try {
    install_signal_handlers();
    rc = run(args);  // the client and its ledger close as run returns or throws
  } catch (const plugrl::Error &e) {
    if (interrupted(e)) {  // e.g. while connecting
      std::cout << kProg << ": interrupted" << std::endl;
    } else if (e.status() == PLUGRL_STOPPED) {  // e.g. stopped while connecting
      std::cout << kProg << ": the server stopped the run" << std::endl;
      rc = 0;
    } else {
      std::cerr << kProg << ": " << e.what() << std::endl;
      rc = 1;
    }
  } catch (const std::exception &e) {
    std::cerr << kProg << ": " << e.what() << std::endl;
    rc = 1;
  }
  if (g_signal) {
    // End by the signal, now that the client is closed: a process that
    // exits with a status leaves the shell that started it to go on, as
    // if the user had not pressed Ctrl-C.
    std::cout << std::flush;
    std::signal(g_signal, SIG_DFL);
    std::raise(g_signal);
  }
  return rc;
}
