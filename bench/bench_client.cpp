// bench_client.cpp - libplugrl's benchmark client, on the LOW LEVEL API
// (plugrl_infer / plugrl_feedback).
//
// Usage:
//   plugrl_bench_client --url ws://HOST:PORT [--envs N] [--cams C] [--img S] [--state D]
//                       [--handles H] [--window-file PATH] [--mlockall 1]
//   plugrl_bench_client --url ws://HOST:PORT --calls K
//   plugrl_bench_client --url ws://HOST:PORT --idle K
//
// The first form runs an env loop of one endless episode until the server
// stops the run (plugrl-server-stop), then prints exchanges/s and exits 0:
//
//   infer    images cam0..cam{C-1}: u8 [N, S, S, 3]; states "state": f64
//            [N, D] (none when D is 0); text "pick up the red block" per
//            env (sent as <U21); step_ids: the chunks completed (SPEC 5.2)
//   feedback the observation after the step (its state values +1e-3),
//            rewards f4, terminated and truncated false, info {}, and its
//            chunk's step_ids; the next infer sends that observation again
//
// The arrays are filled once before the loop, and a step changes only the
// state values, the step ids and the rewards (most bytes of each f64: 8 B
// per state value), so the number is the cost of the library and the
// transport, not of an environment. They change because a step ledger
// records them: a fixed state patched to nothing in a full ledger, which
// flattered it (with --state 0 nothing in the observation changes). The
// images stay; a full ledger records a message that large whole anyway. `./build.sh bench`
// runs it against cmd/plugrl-bench-server beside the transport floor
// (bench_floor.cpp), which sends frames of the same sizes with no encoding.
// With --handles H it runs H threads, each with its own plugrl_client and
// its own copy of the workload, against a server serving H connections.
// At the end it prints its CPU time per exchange, "cpu_us_per_exchange X",
// over the server's window, which it reads from PATH (the server's output)
// after the server has stopped it; without --window-file, over the run
// after its first 20 % of exchanges (bench_cpu.hpp).
//
// The second form measures the cost of one C call into the library: K calls
// each of plugrl_version_number, plugrl_status_str, plugrl_metadata_int and
// plugrl_stats (on an open client, after a few exchanges so that the
// round-trip histogram is not empty), printed in ns per call. The first
// two are C only (they never enter Go, so that a signal handler may call
// them): their figure is the call alone; the last two enter Go.
//
// The third form measures the memory one idle client costs: it opens and
// closes one client (so that the Go runtime's own start-up is not counted),
// then opens K more and leaves them idle for a second, and prints the
// process's resident set (VmRSS) before and after, and the difference per
// client. Any server that accepts K connections will do (plugrl serve).
#include <plugrl.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_cpu.hpp"

namespace {

constexpr const char *kProg = "plugrl_bench_client";

struct Args {
  std::string url, window_file;
  long long envs = 1, cams = 0, img = 0, state = 8, calls = 0, handles = 1, idle = 0, mlockall = 0;
};

void usage(FILE *out) {
  std::fprintf(out,
               "usage: %s --url ws://HOST:PORT [--envs N] [--cams C] [--img S] [--state D]\n"
               "                 [--handles H] [--window-file PATH] [--mlockall 1]\n"
               "       %s --url ws://HOST:PORT --calls K\n"
               "       %s --url ws://HOST:PORT --idle K\n"
               "Sends N envs' observation (C u8 [N,S,S,3] images, f64 [N,D] state, text) on\n"
               "every infer and feedback until the server stops the run, then prints\n"
               "exchanges/s and CPU time per exchange (over the window the server printed to\n"
               "PATH). --handles: H threads, a client each. With --calls, times K calls of\n"
               "cheap library functions. With --idle, the resident memory of K idle clients.\n"
               "--mlockall 1: lock all memory first (mlockall MCL_CURRENT | MCL_FUTURE), as a\n"
               "real-time process does, and print the memory locked and resident at the end.\n",
               kProg, kProg, kProg);
}

bool parse_int(const char *flag, const char *s, long long lo, long long hi, long long &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    std::fprintf(stderr, "%s: %s wants an integer in [%lld, %lld], got \"%s\"\n", kProg, flag, lo, hi, s);
    return false;
  }
  out = v;
  return true;
}

// 0: parsed; -1: help shown; otherwise the exit code.
int parse(int argc, char **argv, Args &a) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!std::strcmp(arg, "-h") || !std::strcmp(arg, "--help")) {
      usage(stdout);
      return -1;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: unknown option or missing value: %s\n", kProg, arg);
      usage(stderr);
      return 2;
    }
    const char *val = argv[++i];
    bool ok = true;
    if (!std::strcmp(arg, "--url")) {
      a.url = val;
    } else if (!std::strcmp(arg, "--envs")) {
      ok = parse_int(arg, val, 1, 4096, a.envs);
    } else if (!std::strcmp(arg, "--cams")) {
      ok = parse_int(arg, val, 0, 64, a.cams);
    } else if (!std::strcmp(arg, "--img")) {
      ok = parse_int(arg, val, 0, 8192, a.img);
    } else if (!std::strcmp(arg, "--state")) {
      ok = parse_int(arg, val, 0, 1 << 20, a.state);
    } else if (!std::strcmp(arg, "--handles")) {
      ok = parse_int(arg, val, 1, 4096, a.handles);
    } else if (!std::strcmp(arg, "--window-file")) {
      a.window_file = val;
    } else if (!std::strcmp(arg, "--calls")) {
      ok = parse_int(arg, val, 1, 1LL << 40, a.calls);
    } else if (!std::strcmp(arg, "--idle")) {
      ok = parse_int(arg, val, 1, 100000, a.idle);
    } else if (!std::strcmp(arg, "--mlockall")) {
      ok = parse_int(arg, val, 0, 1, a.mlockall);
    } else {
      std::fprintf(stderr, "%s: unknown option: %s\n", kProg, arg);
      usage(stderr);
      return 2;
    }
    if (!ok) return 2;
  }
  if (a.url.empty()) {
    std::fprintf(stderr, "%s: --url is required\n", kProg);
    usage(stderr);
    return 2;
  }
  if (a.cams > 0 && a.img == 0) {
    std::fprintf(stderr, "%s: --cams needs --img\n", kProg);
    return 2;
  }
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The cost of one C call into the library: two handle-free helpers, C only,
// then a metadata getter and the stats of an open client, which enter Go.
int time_calls(plugrl_client *c, long long k) {
  volatile int sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < k; i++) sink = sink + plugrl_version_number();
  double version_ns = seconds_since(t0) * 1e9 / double(k);

  t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < k; i++) sink = sink + plugrl_status_str(PLUGRL_STOPPED)[0];
  double status_ns = seconds_since(t0) * 1e9 / double(k);

  int64_t value = 0;
  int present = 0;
  t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < k; i++) {
    if (plugrl_metadata_int(c, "action_horizon", &value, &present) != PLUGRL_OK) {
      std::fprintf(stderr, "%s: plugrl_metadata_int: %s\n", kProg, plugrl_errmsg(c));
      return 1;
    }
  }
  double meta_ns = seconds_since(t0) * 1e9 / double(k);

  plugrl_statistics st;
  st.size = sizeof st;
  t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < k; i++) {
    if (plugrl_stats(c, &st) != PLUGRL_OK) {
      std::fprintf(stderr, "%s: plugrl_stats: %s\n", kProg, plugrl_errmsg(c));
      return 1;
    }
    sink = sink + int(st.exchanges);
  }
  double stats_ns = seconds_since(t0) * 1e9 / double(k);
  (void)sink;
  std::printf("calls %lld each\n", k);
  std::printf("plugrl_version_number ns/call %.1f\n", version_ns);
  std::printf("plugrl_status_str ns/call %.1f\n", status_ns);
  std::printf("plugrl_metadata_int ns/call %.1f (action_horizon %s %lld)\n", meta_ns,
              present ? "=" : "absent", (long long)value);
  std::printf("plugrl_stats ns/call %.1f (exchanges %llu, rtt p50 %.1f us, p99 %.1f us, max %.1f us)\n", stats_ns,
              (unsigned long long)st.exchanges, st.rtt_p50_us, st.rtt_p99_us, st.rtt_max_us);
  return 0;
}

// The workload of one client, filled once.
struct Workload {
  size_t n;
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<std::string> cam_names;
  std::vector<double> state;
  int64_t img_shape[4], state_shape[2];
  std::vector<plugrl_array> images, states;
  std::vector<const char *> text;
  plugrl_observation obs;
  std::vector<int64_t> env_indices, step_ids;
  std::vector<float> rewards;
  std::vector<uint8_t> terminated, truncated;

  explicit Workload(const Args &args)
      : n(size_t(args.envs)),
        pixels(size_t(args.cams), std::vector<uint8_t>(n * size_t(args.img) * size_t(args.img) * 3)),
        state(n * size_t(args.state)),
        img_shape{int64_t(n), args.img, args.img, 3},
        state_shape{int64_t(n), args.state},
        text(n, "pick up the red block"),
        env_indices(n),
        step_ids(n, 0),
        rewards(n, 0.0f),
        terminated(n, 0),
        truncated(n, 0) {
    for (size_t k = 0; k < pixels.size(); k++) {
      for (size_t i = 0; i < pixels[k].size(); i++) pixels[k][i] = uint8_t(i * 7 + k);
      cam_names.push_back("cam" + std::to_string(k));
    }
    for (size_t i = 0; i < state.size(); i++) state[i] = 0.001 * double(i);
    for (size_t k = 0; k < pixels.size(); k++) {
      images.push_back(plugrl_array{cam_names[k].c_str(), pixels[k].data(), PLUGRL_DTYPE_U8, 4, img_shape});
    }
    if (args.state > 0) states.push_back(plugrl_array{"state", state.data(), PLUGRL_DTYPE_F64, 2, state_shape});
    obs = plugrl_observation{images.data(), images.size(), states.data(), states.size(), text.data(), 0};
    for (size_t i = 0; i < n; i++) env_indices[i] = int64_t(i);
  }

  int64_t step = 0;  // chunks completed in the (endless) episode

  // One exchange: infer the current observation, step (new state values
  // and rewards), feed the new observation back; the next infer sends it
  // again, as an env loop does (SPEC 5.4).
  plugrl_status exchange(plugrl_client *c) {
    for (int64_t &s : step_ids) s = step;
    plugrl_action action;
    plugrl_status st = plugrl_infer(c, env_indices.data(), step_ids.data(), n, &obs, nullptr, &action);
    if (st != PLUGRL_OK) return st;
    for (double &v : state) v += 1e-3;
    for (float &r : rewards) r = 0.01f * float(step % 100);
    step++;
    return plugrl_feedback(c, env_indices.data(), step_ids.data(), n, &obs, rewards.data(), terminated.data(),
                           truncated.data(), nullptr);
  }
};

plugrl_client *open_client(const Args &args) {
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = args.url.c_str();
  opt.max_reconnects = -1;  // a benchmark measures one connection
  plugrl_client *c = nullptr;
  if (plugrl_open(&opt, &c) != PLUGRL_OK) {
    std::fprintf(stderr, "%s: %s\n", kProg, plugrl_errmsg(c));
    plugrl_close(c);
    return nullptr;
  }
  return c;
}

// The process's resident set in KiB (VmRSS), or -1.
long rss_kib() {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

// --idle K: the resident memory of K idle clients, per client.
int measure_idle(const Args &args) {
  plugrl_client *first = open_client(args);  // the runtime starts here
  if (!first) return 1;
  plugrl_close(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  long before = rss_kib();
  std::vector<plugrl_client *> clients;
  int rc = 0;
  for (long long i = 0; i < args.idle; i++) {
    plugrl_client *c = open_client(args);
    if (!c) {
      rc = 1;
      break;
    }
    clients.push_back(c);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  long after = rss_kib();
  if (rc == 0) {
    std::printf("idle_clients %lld rss_before_kib %ld rss_after_kib %ld per_client_kib %.1f\n", args.idle, before,
                after, double(after - before) / double(args.idle));
  }
  for (plugrl_client *c : clients) plugrl_close(c);
  return rc;
}

// One client's run until the server stops it; false on any other end.
bool run_one(const Args &args, bench::Counter &count) {
  plugrl_client *c = open_client(args);
  if (!c) return false;
  Workload w(args);
  plugrl_status st;
  while ((st = w.exchange(c)) == PLUGRL_OK) {
    count.add();
  }
  if (st != PLUGRL_STOPPED) {
    std::fprintf(stderr, "%s: %s after %lld exchanges: %s\n", kProg, plugrl_status_str(st),
                 count.n.load(std::memory_order_relaxed), plugrl_errmsg(c));
  }
  plugrl_close(c);
  return st == PLUGRL_STOPPED;
}

}  // namespace

int main(int argc, char **argv) {
  Args args;
  int rc = parse(argc, argv, args);
  if (rc != 0) return rc < 0 ? 0 : rc;

  if (args.mlockall && !bench::lock_memory(kProg)) return 1;
  if (args.idle > 0) return measure_idle(args);
  if (args.calls > 0) {
    plugrl_client *c = open_client(args);
    if (!c) return 1;
    Workload w(args);
    // A few exchanges first, so that plugrl_stats has a histogram to read.
    for (int i = 0; i < 100 && w.exchange(c) == PLUGRL_OK; i++) {
    }
    rc = time_calls(c, args.calls);
    plugrl_close(c);
    return rc;
  }

  std::vector<bench::Counter> counts(size_t(args.handles));
  bench::CpuMeter meter(counts);
  meter.start();
  auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  if (args.handles == 1) {
    ok = run_one(args, counts[0]);
  } else {
    std::vector<char> oks(counts.size(), 0);
    std::vector<std::thread> threads;
    for (size_t h = 0; h < counts.size(); h++) {
      threads.emplace_back([&, h] { oks[h] = run_one(args, counts[h]); });
    }
    for (std::thread &t : threads) t.join();
    for (char k : oks) ok = ok && k;
  }
  meter.stop();
  long long exchanges = bench::total(counts);
  double elapsed = seconds_since(t0);
  if (!ok) return 1;
  std::printf("%lld exchanges in %.3f s\n", exchanges, elapsed);
  std::printf("exchanges/s %.1f\n", elapsed > 0 ? double(exchanges) / elapsed : 0.0);
  meter.print(args.window_file);
  if (args.mlockall) bench::print_memory();
  return 0;
}
