// bench_cpu.hpp - the client's CPU time per exchange, for both bench clients
// (bench_floor.cpp and bench_client.cpp), measured the same way.
//
// A sampler thread of its own, started before the client's first
// connection and stopped after its last close, wakes every 5 ms
// (clock_nanosleep on absolute CLOCK_MONOTONIC deadlines) and takes a
// sample (monotonic time, the process's CPU time CLOCK_PROCESS_CPUTIME_ID,
// the exchanges so far: the sum of the client threads' counters; and the
// process's page faults and user and kernel time, from getrusage) into a
// ring allocated before the run. The client's main thread creates it, so
// it runs with the client's CPU affinity and scheduling policy (taskset,
// chrt -f: a new thread inherits both), in both clients alike.
//
// Until 2026-12 the first client thread took the samples itself, after its
// own exchanges: with 64 handles that thread went up to 45 ms without
// running, and the window's end was interpolated between a sample inside
// the window and the one taken after every connection had closed (the
// closes' CPU time spread into the window). Now the samples around the
// window's ends are one period apart unless the sampler itself is kept
// from running; print() says the longest gap.
//
// The period is 5 ms, not 1: on this KVM guest each wake-up costs the
// sampler 15-40 us on its thread's CPU clock in SMALL (taking the sample
// itself 2-9 us; the rest is the timer's and the scheduler's work), 1.5-3 %
// of a core at 1 ms, which on a shared core is taken from client and
// server; at 5 ms its thread's clock is 0.5-1 % of the process's CPU time
// in SMALL, and 3-5 % in LARGE, where nearly all of it (over 200 us a
// wake-up) is kernel work done while it happens to be the thread on the
// CPU, charged to it as it would be to any other (2026-12, cpu_sampler
// own_cpu_share). The figure is the process's CPU time as the kernel
// counts it, the sampler included, the same in both clients; print()
// reports the sampler's share so that a reader can see its bound. A 5 ms
// gap at each end of a 1.5 s window moves the result by at most the CPU
// of 5 ms of exchanges misplaced, 0.3 %, and in practice far less (the
// work is steady there, so linear interpolation is close).
//
// After the run, result() interpolates CPU time and exchanges linearly at
// the ends of a window and divides. The window is the server's own
// (cmd/plugrl-bench-server prints "window_ns START END" in CLOCK_MONOTONIC
// nanoseconds before it stops its clients; --window-file points at that
// output); without one, it is the run from its first 20 % of exchanges to
// the end, the first 20 % being the warm-up.
#pragma once

#include <time.h>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>

#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace bench {

inline int64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One exchange counter per thread, each on its own cache line: only its
// thread writes it; the sampler reads them all when it samples.
struct alignas(64) Counter {
  std::atomic<long long> n{0};
  void add() { n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
};

inline long long total(const std::vector<Counter> &c) {
  long long s = 0;
  for (const Counter &k : c) s += k.n.load(std::memory_order_relaxed);
  return s;
}

// status_kib reads a "Field: N kB" line of /proc/self/status; -1 if absent.
inline long long status_kib(const char *field) {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long v = -1;
  size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (!std::strncmp(line, field, n) && line[n] == ':') {
      std::sscanf(line + n + 1, "%lld", &v);
      break;
    }
  }
  std::fclose(f);
  return v;
}

// lock_memory locks the process's memory as a real-time process does
// (mlockall(MCL_CURRENT | MCL_FUTURE): every page mapped now and later is
// resident and stays so, and no page fault reaches the disk or the page
// allocator's slow path), for --mlockall 1. It says why when the kernel
// refuses: RLIMIT_MEMLOCK (without CAP_IPC_LOCK) must then cover the whole
// address space mapped, reservations included.
inline bool lock_memory(const char *prog) {
  if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) return true;
  int err = errno;
  rlimit rl{};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  std::fprintf(stderr,
               "%s: mlockall(MCL_CURRENT | MCL_FUTURE): %s (RLIMIT_MEMLOCK %lld KiB, VmSize %lld KiB: without "
               "CAP_IPC_LOCK the limit must cover all the address space mapped, reservations included)\n",
               prog, std::strerror(err), rl.rlim_cur == RLIM_INFINITY ? -1LL : (long long)(rl.rlim_cur / 1024),
               status_kib("VmSize"));
  return false;
}

// print_memory prints the process's memory at the end of a run.
inline void print_memory() {
  std::printf("memory vm_locked_kib %lld rss_kib %lld vm_size_kib %lld\n", status_kib("VmLck"), status_kib("VmRSS"),
              status_kib("VmSize"));
}

class CpuMeter {
 public:
  // The sampling period: 5 ms (see above); 2^17 samples of it, ten minutes
  // of run, before the ring wraps.
  static constexpr int64_t kPeriodNs = 5000000;
  explicit CpuMeter(const std::vector<Counter> &counts) : counts_(counts), ring_(size_t(1) << 17) {}
  ~CpuMeter() { stop(); }
  CpuMeter(const CpuMeter &) = delete;
  CpuMeter &operator=(const CpuMeter &) = delete;

  // Takes the first sample and starts the sampler; before the client's
  // threads start.
  void start() {
    sample(clock_ns(CLOCK_MONOTONIC));
    thread_ = std::thread([this] { loop(); });
    // Named, so that tests/sched_fifo.sh can tell it from the library's
    // threads when it counts the real-time ones.
    pthread_setname_np(thread_.native_handle(), "bench-sampler");
  }
  // Stops the sampler and takes the last sample; after the client's threads
  // have ended.
  void stop() {
    if (!thread_.joinable()) return;
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
    sample(clock_ns(CLOCK_MONOTONIC));
  }

  struct Result {
    double us_per_exchange = 0, exchanges = 0;
    double max_gap_us = 0;  // the longest gap between samples around the window
    bool server_window = false;
  };

  // The CPU per exchange over the server's window read from path (may be
  // empty), else over the run after its first 20 % of exchanges.
  Result result(const std::string &path) const {
    Result r;
    if (taken_ < 2) return r;
    int64_t start = 0, end = 0;
    r.server_window = window(path, start, end);
    Sample a = interpolate(start), b = interpolate(end);
    r.exchanges = double(b.exchanges - a.exchanges) + (b.frac - a.frac);
    if (r.exchanges > 0) r.us_per_exchange = double(b.cpu - a.cpu) / 1e3 / r.exchanges;
    // The longest gap between two samples from the one before the window
    // to the one after it: what the ends were interpolated over at worst.
    size_t i = bracket(start).first, j = bracket(end).second;
    for (; i < j; i++) r.max_gap_us = std::max(r.max_gap_us, double(at(i + 1).mono - at(i).mono) / 1e3);
    return r;
  }

  // Prints "cpu_us_per_exchange X", how it was measured, and the sampler's
  // samples, longest gap around the window and footprint: its thread's CPU
  // time (part of X), per exchange and as a share of the process's CPU
  // time, over the whole run.
  void print(const std::string &path) const {
    Result r = result(path);
    std::printf("cpu_us_per_exchange %.3f\n", r.us_per_exchange);
    std::printf("cpu_measured_over %s (%.0f exchanges)\n",
                r.server_window ? "server-window" : "run-after-first-20%", r.exchanges);
    const Sample &a = at(first()), &b = at(taken_ - 1);
    double process = double(b.cpu - a.cpu), ex = double(b.exchanges - a.exchanges);
    std::printf("cpu_sampler samples %zu max_gap_us %.0f own_cpu_us_per_exchange %.4f own_cpu_share %.3f%%\n", taken_,
                r.max_gap_us, ex > 0 ? double(own_cpu_) / 1e3 / ex : 0.0,
                process > 0 ? 100.0 * double(own_cpu_) / process : 0.0);
    // The process's page faults between the first sample inside the window
    // and the last (a steady state takes none): the samples around it would
    // count the run's start or its closes.
    int64_t start = 0, end = 0;
    window(path, start, end);
    const Sample &fa = at(bracket(start).second), &fb = at(bracket(end).first);
    std::printf("page_faults_window minor %ld major %ld\n", fb.minflt - fa.minflt, fb.majflt - fa.majflt);
    // Where the CPU per exchange went: the process's user time (the
    // client's own code, the library's and the Go runtime's) and its
    // kernel time (the system calls, the network stack, the wake-ups),
    // getrusage's split between the first and last samples inside the
    // window (those of the page faults), applied to the figure above. The
    // kernel charges each tick to the mode it interrupted, so the split is
    // a sample: at most HZ ticks a second on a core (250 here), some 2-3 %
    // of the whole (one standard deviation) in a 1.5 s window of one busy
    // core, more in shorter ones; the sum is exact. "nan" when the window
    // holds fewer than two samples.
    double user = double(fb.utime - fa.utime), sys = double(fb.stime - fa.stime);
    if (user + sys > 0) {
      double share = user / (user + sys);
      std::printf("cpu_split user_us_per_exchange %.3f kernel_us_per_exchange %.3f\n", r.us_per_exchange * share,
                  r.us_per_exchange * (1 - share));
    } else {
      std::printf("cpu_split user_us_per_exchange nan kernel_us_per_exchange nan\n");
    }
  }

 private:
  struct Sample {
    int64_t mono = 0, cpu = 0;
    long long exchanges = 0;
    double frac = 0;            // the interpolated fraction of an exchange
    long minflt = 0, majflt = 0;  // the process's page faults so far
    int64_t utime = 0, stime = 0;  // the process's user and kernel time so far, us (getrusage)
  };
  const std::vector<Counter> &counts_;
  std::vector<Sample> ring_;
  size_t taken_ = 0;  // written by the sampler while it runs, read after stop()
  std::thread thread_;
  std::atomic<bool> stop_{false};
  int64_t own_cpu_ = 0;  // the sampler thread's CPU time at its end, ns

  static int64_t micros(const timeval &tv) { return int64_t(tv.tv_sec) * 1000000 + tv.tv_usec; }
  void sample(int64_t t) {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    ring_[taken_ % ring_.size()] =
        Sample{t, clock_ns(CLOCK_PROCESS_CPUTIME_ID), total(counts_), 0, ru.ru_minflt, ru.ru_majflt,
               micros(ru.ru_utime), micros(ru.ru_stime)};
    taken_++;
  }
  void loop() {
    int64_t next = clock_ns(CLOCK_MONOTONIC);
    while (!stop_.load(std::memory_order_relaxed)) {
      next += kPeriodNs;
      timespec ts{time_t(next / 1000000000), long(next % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
      }  // EINTR
      int64_t t = clock_ns(CLOCK_MONOTONIC);
      sample(t);
      if (t > next + kPeriodNs) next = t;  // fell behind (not scheduled): no burst of catching up
    }
    own_cpu_ = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  }
  // The window: the server's, read from path, or the run after its first
  // 20 % of exchanges; true for the server's.
  bool window(const std::string &path, int64_t &start, int64_t &end) const {
    if (!path.empty() && read_window(path, start, end)) return true;
    const Sample &last = at(taken_ - 1);
    long long from = last.exchanges / 5;
    size_t i = first();
    while (i + 1 < taken_ && at(i).exchanges < from) i++;
    start = at(i).mono;
    end = last.mono;
    return false;
  }
  size_t first() const { return taken_ > ring_.size() ? taken_ - ring_.size() : 0; }
  const Sample &at(size_t i) const { return ring_[i % ring_.size()]; }

  // The (cpu, exchanges) at time t, linear between the samples around it;
  // the nearest sample outside the recorded span.
  Sample interpolate(int64_t t) const {
    size_t lo = first(), hi = taken_ - 1;
    if (t <= at(lo).mono) return at(lo);
    if (t >= at(hi).mono) return at(hi);
    std::tie(lo, hi) = bracket(t);
    const Sample &a = at(lo), &b = at(hi);
    double f = double(t - a.mono) / double(b.mono - a.mono);
    double ex = double(b.exchanges - a.exchanges) * f;
    // Page faults and the user/kernel split are read only at samples
    // (print), never interpolated: a's stand in.
    Sample s{t, a.cpu + int64_t(double(b.cpu - a.cpu) * f), a.exchanges, 0, a.minflt, a.majflt, a.utime, a.stime};
    s.exchanges += (long long)ex;
    s.frac = ex - double((long long)ex);
    return s;
  }

  // The samples around t: the last at or before it and the next (the
  // first or the last sample when t is outside the recorded span).
  std::pair<size_t, size_t> bracket(int64_t t) const {
    size_t lo = first(), hi = taken_ - 1;
    if (t <= at(lo).mono) return {lo, lo};
    if (t >= at(hi).mono) return {hi, hi};
    while (hi - lo > 1) {  // samples are in time order
      size_t mid = lo + (hi - lo) / 2;
      (at(mid).mono <= t ? lo : hi) = mid;
    }
    return {lo, hi};
  }

  static bool read_window(const std::string &path, int64_t &start, int64_t &end) {
    FILE *f = std::fopen(path.c_str(), "r");
    if (!f) return false;
    char line[256];
    bool found = false;
    while (std::fgets(line, sizeof line, f)) {
      long long a = 0, b = 0;
      if (std::sscanf(line, "window_ns %lld %lld", &a, &b) == 2 && b > a) {
        start = a;
        end = b;
        found = true;
      }
    }
    std::fclose(f);
    return found;
  }
};

}  // namespace bench
