/*
** The handle-free helpers from a signal handler. A handler that reports
** why the program stops (a SIGINT or SIGTERM handler that writes
** plugrl_status_str of the last status with write(2), a crash reporter
** that records plugrl_version) calls them on whatever thread the signal
** lands on, also a thread inside a call into the library. Those four
** enter no Go code (plugrl.h, CONVENTIONS, Signals), so this works.
**
** A SIGALRM every 100 us (ITIMER_REAL) while the main thread exchanges
** with the server for 1.5 s: the handler calls plugrl_version,
** plugrl_version_number, plugrl_status_str (a known status and an unknown
** one) and plugrl_dtype_size, and checks every answer; the exchanges must
** all succeed and the handler must have run thousands of times. Before,
** the four entered the Go runtime like every other call, and a signal
** that landed while the thread ran the library's Go code ended the
** process within a few hundred signals ("fatal error: unsafe.Slice: len
** out of range", "unexpected return pc for
** _cgoexp_..._plugrl__go_status_str").
**
** Run as: signal_helpers URL (tests/run_with_server.sh passes it). Exit
** status 0 when every check passed, 1 otherwise; a hang is ended by
** alarm(), a crash is the runtime's exit status (2) or a signal.
*/
#define _GNU_SOURCE /* SA_ONSTACK, setitimer */
#include <plugrl.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t hits, wrong;

/* strcmp without depending on its being async-signal-safe. */
static int same(const char *a, const char *b) {
  if (a == NULL || b == NULL) {
    return 0;
  }
  while (*a != 0 && *a == *b) {
    a++;
    b++;
  }
  return *a == *b;
}

static void on_alarm(int sig) {
  (void)sig;
  int saved = errno;
  hits++;
  if (!same(plugrl_version(), PLUGRL_VERSION_STRING)) wrong |= 1;
  if (plugrl_version_number() != PLUGRL_VERSION_NUMBER) wrong |= 2;
  if (!same(plugrl_status_str(PLUGRL_TIMEOUT), "timeout")) wrong |= 4;
  if (!same(plugrl_status_str((plugrl_status)1000), "unknown status")) wrong |= 8;
  if (plugrl_dtype_size(PLUGRL_DTYPE_F32) != 4 || plugrl_dtype_size((plugrl_dtype)0) != 0) wrong |= 16;
  errno = saved;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = argv[1];
  plugrl_client *c = NULL;
  plugrl_status s = plugrl_open(&opt, &c);
  if (s != PLUGRL_OK) {
    fprintf(stderr, "signal_helpers: FAIL: plugrl_open: %s: %s\n", plugrl_status_str(s), plugrl_errmsg(c));
    plugrl_close(c);
    return 1;
  }

  /* Installed after the open, with SA_ONSTACK as PROCESS FACTS asks. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGALRM, &sa, NULL) != 0) {
    perror("signal_helpers: sigaction");
    return 1;
  }

  double obs[2] = {0, 0};
  int64_t shape[2] = {1, 2}, env = 0, step = 0;
  plugrl_array state = {"s", obs, PLUGRL_DTYPE_F64, 2, shape};
  plugrl_observation o = {NULL, 0, &state, 1, NULL, 0};
  float reward = 0;
  uint8_t done = 0;
  plugrl_action a;
  long exchanges = 0;
  int failed = 0;

  struct itimerval every = {{0, 100}, {0, 100}}, off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &every, NULL);
  double end = now_s() + 1.5;
  while (now_s() < end) {
    s = plugrl_infer(c, &env, &step, 1, &o, NULL, &a);
    if (s == PLUGRL_OK) {
      s = plugrl_feedback(c, &env, &step, 1, &o, &reward, &done, &done, NULL);
    }
    if (s != PLUGRL_OK) {
      fprintf(stderr, "signal_helpers: FAIL: exchange %ld: %s: %s\n", exchanges, plugrl_status_str(s),
              plugrl_errmsg(c));
      failed = 1;
      break;
    }
    exchanges++;
  }
  setitimer(ITIMER_REAL, &off, NULL);

  s = plugrl_close(c);
  if (s != PLUGRL_OK) {
    fprintf(stderr, "signal_helpers: FAIL: plugrl_close: %s\n", plugrl_status_str(s));
    failed = 1;
  }
  if (wrong) {
    fprintf(stderr, "signal_helpers: FAIL: in the handler, wrong answers from:%s%s%s%s%s\n",
            wrong & 1 ? " plugrl_version" : "", wrong & 2 ? " plugrl_version_number" : "",
            wrong & 4 ? " plugrl_status_str" : "", wrong & 8 ? " plugrl_status_str (unknown)" : "",
            wrong & 16 ? " plugrl_dtype_size" : "");
    failed = 1;
  }
  if (hits < 1000) {
    fprintf(stderr, "signal_helpers: FAIL: the handler ran %ld times in 1.5 s; want 1000 or more\n", (long)hits);
    failed = 1;
  }
  printf("signal_helpers: %ld exchanges, the handler ran %ld times%s\n", exchanges, (long)hits,
         failed ? "" : ": every answer right");
  return failed;
}
