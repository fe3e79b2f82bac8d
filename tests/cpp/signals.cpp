/*
** signals.cpp - the rclcpp signal problem, and plugrl_fix_signal_handlers.
**
**   signals ws://HOST:PORT        (a `plugrl serve --action-dim 3 --horizon 4`)
**
** rclcpp::init() installs SIGINT and SIGTERM handlers with sigaction and
** SA_SIGINFO but without SA_ONSTACK. A signal that lands on a thread while it
** runs libplugrl's Go code then runs the handler on the goroutine's small
** stack, which the handler can overflow: the process crashes now and then.
** plugrl_fix_signal_handlers() adds SA_ONSTACK to such handlers.
**
** This program does what an rclcpp node does: it installs SIGINT and SIGUSR1
** handlers the way rclcpp does (SA_SIGINFO only; the handler formats a line
** with snprintf into a 256-byte stack buffer and write(2)s it to a log fd,
** here /dev/null; for SIGINT it also sets a global stop flag and calls
** plugrl_interrupt on every client), then calls plugrl_fix_signal_handlers()
** (skipped when PLUGRL_NO_FIX=1) and checks it fixed at least those two.
** (Since plugrl_open adds SA_ONSTACK to the handlers installed before it,
** PLUGRL_NO_FIX=1 no longer shows the crash: the first open fixes them.) It opens 4 clients, runs a runner of 2 envs on each from
** 4 worker threads, and a signaller thread sends SIGUSR1 for about a second,
** alternating kill(getpid()) and pthread_kill to each worker in turn. Then
** it sends itself SIGINT: the workers see PLUGRL_INTERRUPTED or the stop
** flag and leave their loops, and everything is freed and closed.
**
** Exit status 0 when every call returned what it should; 1 on any
** unexpected status; 2 on a usage error. A crash is a failure, of course
** (tests/signals.sh runs this many times and counts crashes and hangs).
*/
#include <plugrl.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr int kWorkers = 4;
constexpr std::size_t kEnvs = 2;
constexpr std::size_t kDim = 3; // the server's --action-dim

// What the handlers touch: set before the handlers can fire.
std::atomic<bool> g_stop{false};
plugrl_client *g_clients[kWorkers];
std::atomic<int> g_num_clients{0};
int g_log_fd = -1;
std::atomic<long> g_usr1{0}, g_int{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<long>::is_always_lock_free,
              "the handler's atomics must be lock-free");

// The rclcpp-style handler: a line formatted on the stack, written to the
// log; SIGINT also stops the loops and interrupts every client.
void on_signal(int sig, siginfo_t *info, void *context) {
  (void)context;
  int saved = errno;
  char line[256];
  int n = std::snprintf(line, sizeof line, "[signal] got %s (%d) from pid %d, code %d, stop=%d\n",
                        sig == SIGINT ? "SIGINT" : "SIGUSR1", sig, info ? static_cast<int>(info->si_pid) : -1,
                        info ? info->si_code : 0, g_stop.load() ? 1 : 0);
  if (n > 0) {
    ssize_t w = write(g_log_fd, line, static_cast<std::size_t>(n) < sizeof line ? static_cast<std::size_t>(n)
                                                                                  : sizeof line - 1);
    (void)w;
  }
  if (sig == SIGINT) {
    g_int.fetch_add(1);
    g_stop.store(true);
    int k = g_num_clients.load();
    for (int i = 0; i < k; i++) {
      plugrl_interrupt(g_clients[i]); // async-signal-safe
    }
  } else {
    g_usr1.fetch_add(1);
  }
  errno = saved;
}

// Installs the handler as rclcpp does: SA_SIGINFO, no SA_ONSTACK.
bool install(int sig) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, nullptr) != 0) {
    std::perror("sigaction");
    return false;
  }
  return true;
}

// Checks the handler is still ours, with SA_ONSTACK as wanted.
bool check_handler(int sig, bool want_onstack) {
  struct sigaction sa;
  if (sigaction(sig, nullptr, &sa) != 0) {
    std::perror("sigaction");
    return false;
  }
  bool ok = (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_signal &&
            ((sa.sa_flags & SA_ONSTACK) != 0) == want_onstack;
  if (!ok) {
    std::fprintf(stderr, "signals: FAIL: signal %d's handler after the fix: flags %#x, handler %s\n", sig,
                 static_cast<unsigned>(sa.sa_flags), sa.sa_sigaction == on_signal ? "ours" : "NOT ours");
  }
  return ok;
}

struct Worker {
  int index = 0;
  plugrl_client *client = nullptr;
  plugrl_runner *runner = nullptr;
  pthread_t thread{};
  long steps = 0;
  bool failed = false;
  std::string why;
  plugrl_status ended = PLUGRL_OK;
};

void *work(void *arg) {
  Worker &w = *static_cast<Worker *>(arg);
  double state[kEnvs][2] = {};
  double actions[kEnvs * kDim];
  double rewards[kEnvs] = {1, 1};
  uint8_t terminated[kEnvs] = {}, truncated[kEnvs] = {};
  int64_t shape[2] = {static_cast<int64_t>(kEnvs), 2};
  plugrl_array arr = {"s", state, PLUGRL_DTYPE_F64, 2, shape};
  plugrl_observation obs = {nullptr, 0, &arr, 1, nullptr, 0};
  auto unexpected = [&](const char *call, plugrl_status s) {
    w.failed = true;
    w.why = std::string(call) + " returned " + plugrl_status_str(s) + ": " + plugrl_runner_errmsg(w.runner);
  };
  while (!g_stop.load()) {
    plugrl_status s = plugrl_runner_act(w.runner, &obs, actions, sizeof actions, PLUGRL_DTYPE_F64);
    if (s == PLUGRL_INTERRUPTED && g_stop.load()) {
      w.ended = s;
      break;
    }
    if (s != PLUGRL_OK) {
      unexpected("plugrl_runner_act", s);
      break;
    }
    for (std::size_t i = 0; i < kEnvs; i++) {
      state[i][0] += 1;
      state[i][1] = actions[i * kDim];
      terminated[i] = static_cast<uint8_t>(static_cast<long>(state[i][0]) % static_cast<long>(7 + i) == 0);
    }
    s = plugrl_runner_report(w.runner, &obs, rewards, terminated, truncated, nullptr);
    if (s == PLUGRL_INTERRUPTED && g_stop.load()) {
      w.ended = s;
      break;
    }
    if (s != PLUGRL_OK) {
      unexpected("plugrl_runner_report", s);
      break;
    }
    for (std::size_t i = 0; i < kEnvs; i++) {
      if (terminated[i]) {
        state[i][0] = 0;
      }
    }
    w.steps++;
  }
  return nullptr;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ws://HOST:PORT\n", argv[0]);
    return 2;
  }
  const char *url = argv[1];
  const char *nofix = std::getenv("PLUGRL_NO_FIX");
  const bool fix = !(nofix && std::strcmp(nofix, "1") == 0);
  int failures = 0;

  g_log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (g_log_fd < 0) {
    std::perror("/dev/null");
    return 1;
  }
  if (!install(SIGINT) || !install(SIGUSR1)) {
    return 1;
  }
  if (fix) {
    int fixed = plugrl_fix_signal_handlers();
    if (fixed < 2) {
      std::fprintf(stderr, "signals: FAIL: plugrl_fix_signal_handlers() returned %d; want >= 2\n", fixed);
      failures++;
    }
    std::printf("plugrl_fix_signal_handlers() fixed %d handlers\n", fixed);
  } else {
    std::printf("PLUGRL_NO_FIX=1: handlers left without SA_ONSTACK\n");
  }
  if (!check_handler(SIGINT, fix) || !check_handler(SIGUSR1, fix)) {
    failures++;
  }

  Worker workers[kWorkers];
  for (int i = 0; i < kWorkers; i++) {
    plugrl_options opt;
    plugrl_options_init(&opt);
    opt.url = url;
    opt.receive_timeout_ms = 10000;
    Worker &w = workers[i];
    w.index = i;
    plugrl_status s = plugrl_open(&opt, &w.client);
    if (s != PLUGRL_OK) {
      std::fprintf(stderr, "signals: FAIL: plugrl_open: %s: %s\n", plugrl_status_str(s), plugrl_errmsg(w.client));
      plugrl_close(w.client);
      return 1;
    }
    g_clients[i] = w.client;
    g_num_clients.store(i + 1);
    s = plugrl_runner_new(w.client, kEnvs, &w.runner);
    if (s != PLUGRL_OK) {
      std::fprintf(stderr, "signals: FAIL: plugrl_runner_new: %s: %s\n", plugrl_status_str(s), plugrl_errmsg(w.client));
      return 1;
    }
  }
  for (Worker &w : workers) {
    if (pthread_create(&w.thread, nullptr, work, &w) != 0) {
      std::fprintf(stderr, "signals: FAIL: pthread_create\n");
      return 1;
    }
  }

  // The signaller: about a second of SIGUSR1, alternating the process and
  // each worker thread in turn.
  long sent = 0, process_sent = 0, thread_sent = 0;
  std::thread signaller([&] {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
      if (sent % 2 == 0) {
        kill(getpid(), SIGUSR1);
        process_sent++;
      } else {
        pthread_kill(workers[(sent / 2) % kWorkers].thread, SIGUSR1);
        thread_sent++;
      }
      sent++;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  signaller.join();
  kill(getpid(), SIGINT);

  long steps = 0;
  for (Worker &w : workers) {
    pthread_join(w.thread, nullptr);
    steps += w.steps;
    if (w.failed) {
      std::fprintf(stderr, "signals: FAIL: worker %d: %s\n", w.index, w.why.c_str());
      failures++;
    }
  }
  if (!g_stop.load() || g_int.load() != 1) {
    std::fprintf(stderr, "signals: FAIL: the SIGINT handler ran %ld times\n", g_int.load());
    failures++;
  }
  int interrupted = 0;
  for (Worker &w : workers) {
    interrupted += w.ended == PLUGRL_INTERRUPTED;
    plugrl_status s = plugrl_runner_free(w.runner);
    if (s != PLUGRL_OK) {
      std::fprintf(stderr, "signals: FAIL: plugrl_runner_free: %s\n", plugrl_status_str(s));
      failures++;
    }
    s = plugrl_close(w.client);
    if (s != PLUGRL_OK) {
      std::fprintf(stderr, "signals: FAIL: plugrl_close: %s\n", plugrl_status_str(s));
      failures++;
    }
  }
  std::printf("signals: %ld SIGUSR1 sent (%ld to the process, %ld to threads), %ld handled; %ld steps on %d "
              "workers; %d ended by PLUGRL_INTERRUPTED, %d by the stop flag: %s\n",
              sent, process_sent, thread_sent, g_usr1.load(), steps, kWorkers, interrupted, kWorkers - interrupted,
              failures ? "FAIL" : "ok");
  close(g_log_fd);
  return failures ? 1 : 0;
}
