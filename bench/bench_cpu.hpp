// bench_cpu.hpp - the client's CPU time per exchange, for both bench clients
// (bench_floor.cpp and bench_client.cpp), measured the same way.
//
// The measuring thread calls tick() after every exchange: it reads
// CLOCK_MONOTONIC (the vDSO, no system call) and, at most once a
// millisecond, takes a sample (monotonic time, the process's CPU time
// CLOCK_PROCESS_CPUTIME_ID, exchanges so far) into a ring allocated before
// the run. Reading the CPU clock is a system call, which is why it is not
// read on every exchange: at 30k exchanges/s that would be a measurable
// share of the floor's own cost.
//
// After the run, result() interpolates CPU time and exchanges linearly at
// the ends of a window and divides. The window is the server's own
// (cmd/plugrl-bench-server prints "window_ns START END" in CLOCK_MONOTONIC
// nanoseconds before it stops its clients; --window-file points at that
// output); without one, it is the run from its first 20 % of exchanges to
// the end, the first 20 % being the warm-up.
#pragma once

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

inline int64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One exchange counter per thread, each on its own cache line: only its
// thread writes it; the measuring thread reads them all when it samples.
struct alignas(64) Counter {
  std::atomic<long long> n{0};
  void add() { n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
};

inline long long total(const std::vector<Counter> &c) {
  long long s = 0;
  for (const Counter &k : c) s += k.n.load(std::memory_order_relaxed);
  return s;
}

class CpuMeter {
 public:
  // 2^17 samples of 1 ms: over two minutes of run before the ring wraps.
  CpuMeter() : ring_(size_t(1) << 17) {}

  // After an exchange; total() gives the process's exchanges so far (it is
  // called only when a sample is due: with many threads it sums their
  // counters, which is not free).
  template <class F>
  void tick(F total) {
    int64_t t = clock_ns(CLOCK_MONOTONIC);
    if (t >= next_) sample(t, total());
  }
  // Unconditionally: before the loop and after it.
  void sample(long long exchanges) { sample(clock_ns(CLOCK_MONOTONIC), exchanges); }

  struct Result {
    double us_per_exchange = 0, exchanges = 0;
    bool server_window = false;
  };

  // The CPU per exchange over the server's window read from path (may be
  // empty), else over the run after its first 20 % of exchanges.
  Result result(const std::string &path) const {
    Result r;
    if (taken_ < 2) return r;
    int64_t start = 0, end = 0;
    if (!path.empty() && read_window(path, start, end)) {
      r.server_window = true;
    } else {
      const Sample &last = at(taken_ - 1);
      long long from = last.exchanges / 5;
      size_t i = first();
      while (i + 1 < taken_ && at(i).exchanges < from) i++;
      start = at(i).mono;
      end = last.mono;
    }
    Sample a = interpolate(start), b = interpolate(end);
    r.exchanges = double(b.exchanges - a.exchanges) + (b.frac - a.frac);
    if (r.exchanges > 0) r.us_per_exchange = double(b.cpu - a.cpu) / 1e3 / r.exchanges;
    return r;
  }

  // Prints "cpu_us_per_exchange X" and how it was measured.
  void print(const std::string &path) const {
    Result r = result(path);
    std::printf("cpu_us_per_exchange %.3f\n", r.us_per_exchange);
    std::printf("cpu_measured_over %s (%.0f exchanges)\n",
                r.server_window ? "server-window" : "run-after-first-20%", r.exchanges);
  }

 private:
  struct Sample {
    int64_t mono = 0, cpu = 0;
    long long exchanges = 0;
    double frac = 0;  // the interpolated fraction of an exchange
  };
  std::vector<Sample> ring_;
  size_t taken_ = 0;
  int64_t next_ = 0;

  void sample(int64_t t, long long exchanges) {
    ring_[taken_ % ring_.size()] = Sample{t, clock_ns(CLOCK_PROCESS_CPUTIME_ID), exchanges, 0};
    taken_++;
    next_ = t + 1000000;
  }
  size_t first() const { return taken_ > ring_.size() ? taken_ - ring_.size() : 0; }
  const Sample &at(size_t i) const { return ring_[i % ring_.size()]; }

  // The (cpu, exchanges) at time t, linear between the samples around it;
  // the nearest sample outside the recorded span.
  Sample interpolate(int64_t t) const {
    size_t lo = first(), hi = taken_ - 1;
    if (t <= at(lo).mono) return at(lo);
    if (t >= at(hi).mono) return at(hi);
    while (hi - lo > 1) {  // samples are in time order
      size_t mid = lo + (hi - lo) / 2;
      (at(mid).mono <= t ? lo : hi) = mid;
    }
    const Sample &a = at(lo), &b = at(hi);
    double f = double(t - a.mono) / double(b.mono - a.mono);
    double ex = double(b.exchanges - a.exchanges) * f;
    Sample s{t, a.cpu + int64_t(double(b.cpu - a.cpu) * f), a.exchanges, 0};
    s.exchanges += (long long)ex;
    s.frac = ex - double((long long)ex);
    return s;
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
