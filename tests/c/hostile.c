/*
** hostile.c - libplugrl against a server that lies, floods or stalls.
**
**   hostile --list | --list-all
**   hostile --case NAME [--n N] [--obs-bytes B] ws://127.0.0.1:PORT
**   HOSTILE_CA_FILE=ca.pem hostile --case NAME ... wss://127.0.0.1:PORT
**
** Each case runs in its own process against its own plugrl-hostile server
** (tests/hostile.sh starts the scenario --list names for the case, passes
** its URL and stops it afterwards), through the real C API only. A case
** prints exactly one result line on stdout:
**
**   case=NAME status=PLUGRL_X took_ms=T deadline_ms=D overshoot_ms=O peak_rss_kb=K result=PASS|FAIL [key=value...]
**
** took_ms is the measured call (the one the case is about); deadline_ms is
** the deadline it must keep ("0" for a call that must fail at once, "-"
** where there is none) and overshoot_ms = took_ms - deadline_ms; peak_rss_kb
** is getrusage(RUSAGE_SELF).ru_maxrss at the end of the case (each case is
** its own process, so it is that case's peak). Why a case failed goes to
** stderr. Exit status: 0 when the case passed, 1 when it failed, 2 on a
** usage error.
**
** --list prints one line per case: NAME SCENARIO [plugrl-hostile flags...].
** --list-all adds the cases tests/hostile.sh does not run (the flag in the
** case table): dead-address and silent-dns, which tests/names.sh runs
** where it can give them a name that resolves as they need, and
** server-late, whose server tests/server_late.sh starts a second late,
** and clock-behind, which it runs over wss://; and keepalive, whose server
** tests/keepalive.sh starts (a Python websockets one).
** interrupt-once, the reproducer of a fixed bug, is one of the default
** cases: one plugrl_interrupt must end at most one call.
** --n N sets the count of interrupt-latency (1000), interrupt-signal (100),
** tokens (4200000), errmsg-threads (200000), interrupt-once (200) and
** garble and garble-runner (1000), garble-metadata (300 opens) and
** garble-frames (600);
** --obs-bytes B the observation size of no-read (4 MiB). HOSTILE_TRACE=1
** in the environment traces every infer of the interrupt cases, and
** every refusal of garble's, on stderr;
** HOSTILE_CA_FILE, when set, is every case's tls_ca_file (the PEM that
** plugrl-hostile --tls-self-signed wrote), for a wss:// URL.
** HOSTILE_NO_MEMORY_BOUND=1 drops the memory cases' RSS limit (peaks are
** still reported): under MemorySanitizer, whose shadow and origins double
** and triple every byte held, the resident set is the sanitizer's.
**
** Limits: memory cases must keep peak RSS under RSS_LIMIT_KB (64 MB)
** (not rlimit, whose honest uncapped 512 MiB action is stopped by the
** address-space limit instead; its peak is reported);
** deadline cases must return within OVERSHOOT_LIMIT_MS (250 ms) after
** their deadline, and not before it; interrupt-latency must end 99 % of
** blocked calls within INTERRUPT_LIMIT_US (10 ms) and every one within 10
** times that (see interrupt_case).
*/
#define _GNU_SOURCE /* sigaltstack flags, pthread_kill, getrusage fields */
#include <plugrl.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RSS_LIMIT_KB 65536L
#define OVERSHOOT_LIMIT_MS 250.0
/* HOSTILE_OVERSHOOT_LIMIT_MS, if set, replaces OVERSHOOT_LIMIT_MS: for
** the sanitizer and qemu runs (tests/sanitizers.sh, tests/cross_arm64.sh),
** which are 5-8 times slower and share the 2 cores with another test
** under ctest -j 2, and check memory and the arm64 build rather than
** latency (no-read under MemorySanitizer took 896 ms against its 300 ms
** deadline in one such run, 366 ms over wss:// a minute later). The plain
** hostile and hostile_tls CTests hold OVERSHOOT_LIMIT_MS. It replaces
** AT_ONCE_MS too, for the same runs: endless-header over wss:// under
** AddressSanitizer, beside the arm64 build under qemu, took 271.8 ms to
** fail its open (2026-12-07, a clean-clone CI run). */
static double overshoot_limit_ms = OVERSHOOT_LIMIT_MS;
#define UNDERSHOOT_LIMIT_MS 25.0 /* a timeout this long before its deadline is a failure too */
#define AT_ONCE_MS 250.0         /* "at once": a refusal within this */
static double at_once_ms = AT_ONCE_MS;
#define INTERRUPT_LIMIT_US 10000.0
/* HOSTILE_INTERRUPT_LIMIT_US, if set, replaces INTERRUPT_LIMIT_US (the
** interrupt cases' p99; their slowest may take 10 times it), as
** HOSTILE_OVERSHOOT_LIMIT_MS does OVERSHOOT_LIMIT_MS, and for the same
** runs: an interrupt passes through two threads (the watcher's, which
** ends the connection, and the waiting call's), each of which waits for a
** core, and instrumented code on each. Under the race detector, over wss://,
** with four busy loops on this machine's 2 cores, interrupt-signal took
** p99 12.3 ms and max 14.4 ms of 90 (2026-12-07), and failed the 10 ms
** that the plain hostile and hostile_tls CTests hold. */
static double interrupt_limit_us = INTERRUPT_LIMIT_US;
#define IDLE_CPU_LIMIT_PCT 0.5

/* ------------------------------------------------------------------------ */
/* Utilities                                                                */
/* ------------------------------------------------------------------------ */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_us(long us) {
  struct timespec ts;
  ts.tv_sec = us / 1000000L;
  ts.tv_nsec = (us % 1000000L) * 1000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static long peak_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss; /* kilobytes on Linux */
}

static double cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* A field of /proc/self/status in kB ("VmSize", "VmRSS"), or -1. */
static long proc_status_kb(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(field);
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      v = strtol(line + n + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return v;
}

static const char *status_name(plugrl_status s) {
  static const char *const names[] = {
      "PLUGRL_OK",           "PLUGRL_STOPPED",          "PLUGRL_RECONNECTED",  "PLUGRL_TIMEOUT",
      "PLUGRL_SERVER_ERROR", "PLUGRL_PROTOCOL_ERROR",   "PLUGRL_INVALID_ARGUMENT", "PLUGRL_OUT_OF_ORDER",
      "PLUGRL_CONNECT_FAILED", "PLUGRL_CLOSED",         "PLUGRL_BUSY",         "PLUGRL_BUFFER_TOO_SMALL",
      "PLUGRL_NO_MEMORY",    "PLUGRL_INTERNAL",         "PLUGRL_INTERRUPTED",
  };
  if ((int)s < 0 || (size_t)s >= sizeof names / sizeof names[0]) return "PLUGRL_UNKNOWN";
  return names[s];
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------------ */
/* The result of a case                                                     */
/* ------------------------------------------------------------------------ */

static struct {
  const char *name;
  plugrl_status status;
  double took_ms;
  double deadline_ms; /* < 0: none */
  int check_rss;
  int failed;
  char extra[1024];
} R = {NULL, PLUGRL_OK, 0, -1, 0, 0, ""};

static void fail(const char *fmt, ...) {
  va_list ap;
  R.failed = 1;
  fprintf(stderr, "hostile %s: FAIL: ", R.name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static void extra(const char *fmt, ...) {
  va_list ap;
  size_t used = strlen(R.extra);
  if (used + 2 >= sizeof R.extra) return;
  R.extra[used++] = ' ';
  R.extra[used] = '\0';
  va_start(ap, fmt);
  vsnprintf(R.extra + used, sizeof R.extra - used, fmt, ap);
  va_end(ap);
}

/* Checks that a call returned want; the message comes from c if given. */
static int expect(const char *what, plugrl_status got, plugrl_status want, plugrl_client *c) {
  if (got == want) return 1;
  fail("%s returned %s, want %s%s%s", what, status_name(got), status_name(want), c ? "; errmsg: " : "",
       c ? plugrl_errmsg(c) : "");
  return 0;
}

/* Checks a measured deadline: took within [deadline - UNDERSHOOT, deadline + OVERSHOOT]. */
static void check_deadline(const char *what, double took, double deadline) {
  double over = took - deadline;
  if (over > overshoot_limit_ms)
    fail("%s took %.1f ms against a deadline of %.0f ms: %.1f ms over (limit %.0f)", what, took, deadline, over,
         overshoot_limit_ms);
  if (deadline > 0 && over < -UNDERSHOOT_LIMIT_MS)
    fail("%s returned after %.1f ms, %.1f ms before its deadline of %.0f ms", what, took, -over, deadline);
}

static void at_once(const char *what, double took) {
  if (took > at_once_ms) fail("%s took %.1f ms; it should fail at once (limit %.0f ms)", what, took, at_once_ms);
}

static void print_result(void) {
  char dl[32], over[32];
  long rss = peak_rss_kb();
  const char *unbound = getenv("HOSTILE_NO_MEMORY_BOUND");
  if (unbound != NULL && strcmp(unbound, "1") == 0) R.check_rss = 0;
  if (R.check_rss && rss >= RSS_LIMIT_KB) fail("peak RSS %ld kB is over the limit of %ld kB", rss, RSS_LIMIT_KB);
  if (R.deadline_ms < 0) {
    snprintf(dl, sizeof dl, "-");
    snprintf(over, sizeof over, "-");
  } else {
    snprintf(dl, sizeof dl, "%.0f", R.deadline_ms);
    snprintf(over, sizeof over, "%.1f", R.took_ms - R.deadline_ms);
  }
  printf("case=%s status=%s took_ms=%.1f deadline_ms=%s overshoot_ms=%s peak_rss_kb=%ld result=%s%s\n", R.name,
         status_name(R.status), R.took_ms, dl, over, rss, R.failed ? "FAIL" : "PASS", R.extra);
  fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* Observations and clients                                                 */
/* ------------------------------------------------------------------------ */

/* One float64 state array "s" of shape [n, width], zeros, and env
** indices 0..n-1 with step ids 0. */
typedef struct obsbuf {
  size_t n;
  int64_t shape[2];
  double *data;
  int64_t *idx, *steps;
  float *rewards;
  uint8_t *flags;
  plugrl_array arr;
  plugrl_observation obs;
} obsbuf;

static int obs_init(obsbuf *o, size_t n, size_t width) {
  size_t i;
  memset(o, 0, sizeof *o);
  o->n = n;
  o->shape[0] = (int64_t)n;
  o->shape[1] = (int64_t)width;
  o->data = calloc(n * width, sizeof(double));
  o->idx = calloc(n, sizeof(int64_t));
  o->steps = calloc(n, sizeof(int64_t));
  o->rewards = calloc(n, sizeof(float));
  o->flags = calloc(n, 1);
  if (!o->data || !o->idx || !o->steps || !o->rewards || !o->flags) {
    fail("out of memory for an observation of %zu x %zu", n, width);
    return 0;
  }
  for (i = 0; i < n; i++) o->idx[i] = (int64_t)i;
  o->arr.name = "s";
  o->arr.data = o->data;
  o->arr.dtype = PLUGRL_DTYPE_F64;
  o->arr.ndim = 2;
  o->arr.shape = o->shape;
  o->obs.states = &o->arr;
  o->obs.num_states = 1;
  return 1;
}

static void obs_free(obsbuf *o) {
  free(o->data);
  free(o->idx);
  free(o->steps);
  free(o->rewards);
  free(o->flags);
}

static plugrl_status infer(plugrl_client *c, obsbuf *o, plugrl_action *a) {
  return plugrl_infer(c, o->idx, o->steps, o->n, &o->obs, NULL, a);
}

static plugrl_status feedback(plugrl_client *c, obsbuf *o) {
  return plugrl_feedback(c, o->idx, o->steps, o->n, &o->obs, o->rewards, o->flags, o->flags, NULL);
}

/* Every case's options: over wss:// (tests/hostile.sh --tls), the server's
** self-signed certificate is trusted through HOSTILE_CA_FILE. */
static void options(plugrl_options *opt, const char *url) {
  const char *ca = getenv("HOSTILE_CA_FILE");
  plugrl_options_init(opt);
  opt->url = url;
  if (ca != NULL && *ca != '\0') opt->tls_ca_file = ca;
}

/* Opens; on failure reports it and closes the handle. */
static plugrl_client *open_ok(const plugrl_options *opt) {
  plugrl_client *c = NULL;
  plugrl_status s = plugrl_open(opt, &c);
  if (s != PLUGRL_OK) {
    fail("plugrl_open(%s) returned %s: %s", opt->url ? opt->url : "NULL", status_name(s),
         c ? plugrl_errmsg(c) : "(no handle)");
    R.status = s;
    plugrl_close(c);
    return NULL;
  }
  return c;
}

/* One infer + feedback for n envs of one state each. */
static int exchange(plugrl_client *c, obsbuf *o) {
  plugrl_action a;
  if (!expect("plugrl_infer", infer(c, o, &a), PLUGRL_OK, c)) return 0;
  if (!expect("plugrl_feedback", feedback(c, o), PLUGRL_OK, c)) return 0;
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Memory attacks                                                           */
/* ------------------------------------------------------------------------ */

static long opt_n = -1;           /* --n */
static long opt_obs_bytes = -1;   /* --obs-bytes */

/* huge-length: a frame claiming 2^62 bytes is refused on its header. */
static void case_huge_length(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  double t0;
  R.check_rss = 1;
  R.deadline_ms = 0;
  options(&opt, url);
  opt.receive_timeout_ms = 10000;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  expect("plugrl_infer", R.status, PLUGRL_PROTOCOL_ERROR, c);
  at_once("plugrl_infer", R.took_ms);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* huge-length-nocap: no message cap, so the frame is read as it trickles
** in until the receive deadline; memory follows the bytes received. */
static void case_huge_length_nocap(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  double t0;
  long rss0;
  R.check_rss = 1;
  R.deadline_ms = 2000;
  options(&opt, url);
  opt.max_message_size = -1;
  opt.receive_timeout_ms = 2000;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  rss0 = proc_status_kb("VmRSS");
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  extra("rss_before_kb=%ld rss_after_kb=%ld rss_growth_kb=%ld", rss0, proc_status_kb("VmRSS"), peak_rss_kb() - rss0);
  expect("plugrl_infer", R.status, PLUGRL_TIMEOUT, c);
  check_deadline("plugrl_infer", R.took_ms, R.deadline_ms);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* endless-header: the handshake response never ends; open fails on the
** handshake cap, long before the connect deadline. */
static void case_endless_header(const char *url) {
  plugrl_options opt;
  plugrl_client *c = NULL;
  double t0;
  R.check_rss = 1;
  R.deadline_ms = 0;
  options(&opt, url);
  t0 = now_ms();
  R.status = plugrl_open(&opt, &c);
  R.took_ms = now_ms() - t0;
  expect("plugrl_open", R.status, PLUGRL_PROTOCOL_ERROR, c);
  at_once("plugrl_open", R.took_ms);
  expect("plugrl_close of the failed open", plugrl_close(c), PLUGRL_OK, NULL);
}

/* zero-dim-action: an action of shape [4e18, n, 0], through the runner. */
static void case_zero_dim_action(const char *url) {
  enum { N = 4 };
  plugrl_options opt;
  plugrl_client *c;
  plugrl_runner *r = NULL;
  obsbuf o;
  double actions[N];
  double t0;
  R.check_rss = 1;
  R.deadline_ms = 0;
  options(&opt, url);
  opt.receive_timeout_ms = 10000;
  if (!(c = open_ok(&opt)) || !obs_init(&o, N, 1)) return;
  if (!expect("plugrl_runner_new", plugrl_runner_new(c, N, &r), PLUGRL_OK, c)) return;
  t0 = now_ms();
  R.status = plugrl_runner_act(r, &o.obs, actions, sizeof actions, PLUGRL_DTYPE_F64);
  R.took_ms = now_ms() - t0;
  if (R.status != PLUGRL_PROTOCOL_ERROR)
    fail("plugrl_runner_act returned %s, want PLUGRL_PROTOCOL_ERROR; errmsg: %s", status_name(R.status),
         plugrl_runner_errmsg(r));
  at_once("plugrl_runner_act", R.took_ms);
  expect("plugrl_runner_free", plugrl_runner_free(r), PLUGRL_OK, NULL);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* double-action: every infer is answered twice, both copies in one write.
** The second is out of turn; taken as the reply to the next infer, it would
** shift every later action by one request (its env_ids match). The report
** after the first action fails with a protocol error that says so. */
static void case_double_action(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  plugrl_runner *r = NULL;
  obsbuf o;
  double actions[1];
  double reward[1] = {1};
  uint8_t done[1] = {0};
  R.deadline_ms = 0;
  options(&opt, url);
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  if (!expect("plugrl_runner_new", plugrl_runner_new(c, 1, &r), PLUGRL_OK, c)) return;
  if (expect("plugrl_runner_act", plugrl_runner_act(r, &o.obs, actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK,
             c)) {
    R.status = plugrl_runner_report(r, &o.obs, reward, done, done, NULL);
    if (R.status != PLUGRL_PROTOCOL_ERROR)
      fail("plugrl_runner_report after a doubled action returned %s, want PLUGRL_PROTOCOL_ERROR; errmsg: %s",
           status_name(R.status), plugrl_runner_errmsg(r));
    else if (strstr(plugrl_runner_errmsg(r), "none was due") == NULL)
      fail("the protocol error does not say what was wrong: %s", plugrl_runner_errmsg(r));
  }
  expect("plugrl_runner_free", plugrl_runner_free(r), PLUGRL_OK, NULL);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* big-action-one-env: a true 8 MiB action for one env (under the 64 MiB
** derived cap, since metadata has no H and D) is taken. */
static void case_big_action_one_env(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  double t0;
  R.check_rss = 1;
  R.deadline_ms = -1;
  options(&opt, url);
  opt.receive_timeout_ms = 20000;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  if (expect("plugrl_infer", R.status, PLUGRL_OK, c)) {
    int64_t bytes = a.horizon * a.num_envs * a.step_size * (int64_t)plugrl_dtype_size(a.dtype);
    extra("action_bytes=%lld horizon=%lld", (long long)bytes, (long long)a.horizon);
    if (a.num_envs != 1 || bytes < (8 << 20) - 64)
      fail("the action is %lld bytes for %lld envs; want about 8 MiB for 1", (long long)bytes, (long long)a.num_envs);
    expect("plugrl_feedback", feedback(c, &o), PLUGRL_OK, c);
  }
  extra("rss_after_feedback_kb=%ld", proc_status_kb("VmRSS"));
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* rlimit: address space capped at what the process has + 256 MiB, then a
** true 512 MiB action with no message cap: PLUGRL_NO_MEMORY (or a
** protocol error), never an abort; then a clean close. No 64 MB check
** here: the action is honest and uncapped, so memory follows the bytes
** received until the address-space limit stops it (the peak is reported). */
static void case_rlimit(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  struct rlimit rl;
  long vm;
  double t0;
  R.deadline_ms = -1;
  options(&opt, url);
  opt.max_message_size = -1;
  opt.receive_timeout_ms = 60000;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  vm = proc_status_kb("VmSize");
  if (vm <= 0) {
    fail("cannot read VmSize from /proc/self/status");
    return;
  }
  rl.rlim_cur = rl.rlim_max = (rlim_t)vm * 1024 + ((rlim_t)256 << 20);
  if (setrlimit(RLIMIT_AS, &rl) != 0) {
    fail("setrlimit(RLIMIT_AS): %s", strerror(errno));
    return;
  }
  extra("vmsize_kb=%ld rlimit_as_kb=%ld", vm, (long)(rl.rlim_cur / 1024));
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  if (R.status != PLUGRL_NO_MEMORY && R.status != PLUGRL_PROTOCOL_ERROR)
    fail("plugrl_infer returned %s, want PLUGRL_NO_MEMORY (or PLUGRL_PROTOCOL_ERROR); errmsg: %s",
         status_name(R.status), plugrl_errmsg(c));
  else
    fprintf(stderr, "hostile rlimit: plugrl_infer: %s: %s\n", status_name(R.status), plugrl_errmsg(c));
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* ------------------------------------------------------------------------ */
/* Deadlines                                                                */
/* ------------------------------------------------------------------------ */

/* no-metadata: the handshake completes, metadata never comes. */
static void case_no_metadata(const char *url) {
  plugrl_options opt;
  plugrl_client *c = NULL;
  double t0, close_ms;
  R.deadline_ms = 300;
  options(&opt, url);
  opt.metadata_timeout_ms = 300;
  t0 = now_ms();
  R.status = plugrl_open(&opt, &c);
  R.took_ms = now_ms() - t0;
  expect("plugrl_open", R.status, PLUGRL_TIMEOUT, c);
  check_deadline("plugrl_open", R.took_ms, R.deadline_ms);
  t0 = now_ms();
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  close_ms = now_ms() - t0;
  extra("close_ms=%.1f", close_ms);
  check_deadline("plugrl_close after the failed open", close_ms, 0);
}

/* interrupt-open: plugrl_open waits for metadata that never comes, with
** minute-long timeouts; plugrl_interrupt on the handle it already set
** (from another thread) ends it at once with PLUGRL_INTERRUPTED. */
static plugrl_client *open_handle; /* written by plugrl_open before it connects */
static plugrl_status open_status;
static double open_returned_ms;

static void *open_worker(void *arg) {
  open_status = plugrl_open((const plugrl_options *)arg, &open_handle);
  open_returned_ms = now_ms();
  return NULL;
}

enum { INTERRUPT_ONE, INTERRUPT_ALL, INTERRUPT_EARLY };
static void interrupt_open(const char *url, int how);
static void case_interrupt_open(const char *url) { interrupt_open(url, INTERRUPT_ONE); }

/* interrupt-open-early: the same, but plugrl_interrupt comes while
** plugrl_open has not made its client yet: its ledger goes to a directory
** that holds the names of the first EARLY_NAMES ledgers this process would
** write there, which it skips (never overwriting a ledger) before it makes
** its own file, and then the client. The open must end at once (an
** interrupt this early was lost, and the open waited for its metadata
** deadline). early=1 says the interrupt came before the ledger's file
** existed, so before the client did. */
#define EARLY_NAMES 3000
static void case_interrupt_open_early(const char *url) { interrupt_open(url, INTERRUPT_EARLY); }

/* interrupt-all: the same, with plugrl_interrupt_all (no handle needed)
** called from a SIGUSR1 handler, as a program's SIGINT handler would. */
static void on_sigusr1_all(int sig) {
  (void)sig;
  plugrl_interrupt_all();
}
static void case_interrupt_all(const char *url) { interrupt_open(url, INTERRUPT_ALL); }

static void interrupt_open(const char *url, int how) {
  plugrl_options opt;
  pthread_t th;
  plugrl_client *c = NULL;
  double t0;
  int i, early = 0;
  char dir[] = "/tmp/plugrl-hostile-XXXXXX", name[128];
  R.deadline_ms = 0;
  options(&opt, url);
  opt.connect_timeout_ms = 60000;
  opt.metadata_timeout_ms = 60000;
  if (how == INTERRUPT_EARLY) {
    if (mkdtemp(dir) == NULL) {
      fail("mkdtemp: %s", strerror(errno));
      return;
    }
    for (i = 1; i <= EARLY_NAMES; i++) {
      snprintf(name, sizeof name, "%s/plugrl-%d-%d.ledger", dir, (int)getpid(), i);
      int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0600);
      if (fd < 0) {
        fail("creating %s: %s", name, strerror(errno));
        return;
      }
      close(fd);
    }
    opt.ledger_path = dir;
  }
  if (pthread_create(&th, NULL, open_worker, &opt) != 0) {
    fail("pthread_create failed");
    return;
  }
  for (i = 0; i < 2000000 && (c = __atomic_load_n(&open_handle, __ATOMIC_ACQUIRE)) == NULL; i++) sleep_us(1);
  if (c == NULL) {
    fail("plugrl_open did not set *client within 2 s");
    pthread_join(th, NULL);
    return;
  }
  if (how != INTERRUPT_EARLY) sleep_us(200000); /* well into the wait for metadata */
  t0 = now_ms();
  if (how == INTERRUPT_EARLY) {
    expect("plugrl_interrupt", plugrl_interrupt(c), PLUGRL_OK, NULL);
    snprintf(name, sizeof name, "%s/plugrl-%d-%d.ledger", dir, (int)getpid(), EARLY_NAMES + 1);
    early = access(name, F_OK) != 0;
    extra("early=%d", early);
  } else if (how == INTERRUPT_ALL) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1_all;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    kill(getpid(), SIGUSR1);
  } else {
    expect("plugrl_interrupt", plugrl_interrupt(c), PLUGRL_OK, NULL);
  }
  pthread_join(th, NULL);
  R.status = open_status;
  R.took_ms = open_returned_ms - t0;
  expect("plugrl_open", R.status, PLUGRL_INTERRUPTED, c);
  at_once("plugrl_open after plugrl_interrupt", R.took_ms);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  if (how == INTERRUPT_EARLY) {
    for (i = 1; i <= EARLY_NAMES + 1; i++) {
      snprintf(name, sizeof name, "%s/plugrl-%d-%d.ledger", dir, (int)getpid(), i);
      unlink(name);
    }
    rmdir(dir);
  }
}

/* slow-handshake: the 101 response arrives a byte every 100 ms. */
static void case_slow_handshake(const char *url) {
  plugrl_options opt;
  plugrl_client *c = NULL;
  double t0;
  R.deadline_ms = 300;
  options(&opt, url);
  opt.connect_timeout_ms = 300;
  t0 = now_ms();
  R.status = plugrl_open(&opt, &c);
  R.took_ms = now_ms() - t0;
  expect("plugrl_open", R.status, PLUGRL_TIMEOUT, c);
  check_deadline("plugrl_open", R.took_ms, R.deadline_ms);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
}

/* An infer whose action does not come within receive_timeout_ms. */
static void receive_deadline(const char *url, int32_t timeout_ms) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  double t0;
  R.deadline_ms = timeout_ms;
  options(&opt, url);
  opt.receive_timeout_ms = timeout_ms;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  expect("plugrl_infer", R.status, PLUGRL_TIMEOUT, c);
  check_deadline("plugrl_infer", R.took_ms, R.deadline_ms);
  t0 = now_ms();
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  extra("close_ms=%.1f", now_ms() - t0);
  obs_free(&o);
}

static void case_receive_short(const char *url) { receive_deadline(url, 200); }
static void case_receive_long(const char *url) { receive_deadline(url, 1500); }
static void case_stall_mid_frame(const char *url) {
  R.check_rss = 1;
  receive_deadline(url, 1500);
}

/* Forks a child that stops this process (SIGSTOP, as a debugger's
** breakpoint or Ctrl-Z does) after_ms from now and continues it (SIGCONT)
** for_ms later; returns its pid, or -1 (failed). The child makes only
** async-signal-safe calls: this process hosts a Go runtime. */
static pid_t stop_me_later(long after_ms, long for_ms) {
  pid_t parent = getpid(), pid;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0) {
    fail("fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    struct timespec ts = {after_ms / 1000, (after_ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
    kill(parent, SIGSTOP);
    ts.tv_sec = for_ms / 1000;
    ts.tv_nsec = (for_ms % 1000) * 1000 * 1000;
    nanosleep(&ts, NULL);
    kill(parent, SIGCONT);
    _exit(0);
  }
  return pid;
}

/* Waits for stop_me_later's child, which ends once it continued this
** process. */
static void wait_stopper(pid_t pid) {
  int wst = 0;
  if (waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst)) fail("the stopping child did not exit cleanly");
}

/* stopped: the process is stopped (SIGSTOP, as a debugger's breakpoint,
** Ctrl-Z or a frozen container stops it) while an infer waits, for longer
** than receive_timeout_ms, and the action arrives meanwhile (slow-action
** --action-delay 800ms --slow-every 2: every second infer of a connection
** is answered 800 ms late, the others at once). After a first exchange,
** the second infer is the one stopped. When the process runs again the
** action is in its socket: the infer must return it (PLUGRL_OK, not
** PLUGRL_TIMEOUT), and the connection must go on (the next exchange
** without a reconnect). Twice: a 700 ms receive timeout, which
** the socket's timeout keeps, and a 1500 ms one, which the library's
** poller keeps. A child process stops the case 100 ms into the infer and
** continues it stop_ms later; took_ms is the longest infer. The stop may
** come up to 600 ms late (before the deadline and the action) on a loaded
** machine. */
static int stopped_infer(const char *url, int32_t timeout_ms) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  plugrl_statistics st;
  pid_t pid;
  int ok = 1;
  long stop_ms = timeout_ms + 1000L;
  double t0, took;
  options(&opt, url);
  opt.receive_timeout_ms = timeout_ms;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return 0;
  if (!exchange(c, &o)) {
    plugrl_close(c);
    obs_free(&o);
    return 0;
  }
  t0 = now_ms();
  if ((pid = stop_me_later(100, stop_ms)) < 0) {
    plugrl_close(c);
    obs_free(&o);
    return 0;
  }
  R.status = infer(c, &o, &a);
  took = now_ms() - t0;
  wait_stopper(pid);
  R.took_ms = took > R.took_ms ? took : R.took_ms;
  extra("timeout%d_ms=%.1f", (int)timeout_ms, took);
  if (took < (double)stop_ms) fail("the infer returned after %.1f ms, before the process was continued (%ld ms)", took, stop_ms);
  ok = expect("plugrl_infer (stopped past its deadline, the action arrived meanwhile)", R.status, PLUGRL_OK, c) &&
       expect("plugrl_feedback after it", feedback(c, &o), PLUGRL_OK, c) && exchange(c, &o);
  if (ok) {
    st.size = sizeof st;
    if (expect("plugrl_stats", plugrl_stats(c, &st), PLUGRL_OK, c) && st.reconnects != 0) {
      fail("the connection was replaced (%llu reconnects): the action that waited was thrown away",
           (unsigned long long)st.reconnects);
      ok = 0;
    }
  }
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
  return ok;
}

static void case_stopped(const char *url) {
  R.deadline_ms = -1;
  if (stopped_infer(url, 700)) stopped_infer(url, 1500);
}

/* no-read: the server never reads; a 4 MiB observation cannot be sent. */
static void case_no_read(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  double t0;
  long bytes = opt_obs_bytes > 0 ? opt_obs_bytes : 4L << 20;
  R.check_rss = 1;
  R.deadline_ms = 300;
  options(&opt, url);
  opt.send_timeout_ms = 300;
  /* If the whole message fitted into the socket buffers, the infer would
  ** wait for an action instead: bound that wait too, so that it shows as
  ** a huge overshoot rather than a hang. */
  opt.receive_timeout_ms = 5000;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, (size_t)bytes / sizeof(double))) return;
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  extra("obs_bytes=%ld", bytes);
  expect("plugrl_infer", R.status, PLUGRL_TIMEOUT, c);
  check_deadline("plugrl_infer", R.took_ms, R.deadline_ms);
  t0 = now_ms();
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  extra("close_ms=%.1f", now_ms() - t0);
  obs_free(&o);
}

/* vanish, vanish-unacked, vanish-idle: the server's machine vanishes
** (plugrl-hostile vanish: every packet from the client dropped unacknowledged
** from its third infer, nothing more sent; vanish-unacked: from its second
** action, so the client's next feedback and infer go unacknowledged).
** dead_peer_timeout_ms is 2000, receive_timeout_ms 60000. The infer in
** flight must end after the bound, not the receive deadline, within the
** usual overshoot (the poller looks when the bound would pass), with
** PLUGRL_RECONNECTED and a message naming the dead-peer timeout; the next exchanges run on a new connection, and the
** stats count one reconnect, lost. vanish-idle waits between calls instead:
** the feedback after the wait must find the connection gone at once. Only
** Linux can drop a connection's packets (a socket filter), so the cases
** run there only. */
#define DEAD_PEER_MS 2000
static void vanish(const char *url, int idle) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  plugrl_statistics st;
  double t0;
  int i;
  R.deadline_ms = DEAD_PEER_MS;
  options(&opt, url);
  opt.receive_timeout_ms = 60000;
  opt.dead_peer_timeout_ms = DEAD_PEER_MS;
  opt.reconnect_backoff_ms = 1;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  for (i = 0; i < 2 && !R.failed; i++) {
    if (!expect("plugrl_infer", infer(c, &o, &a), PLUGRL_OK, c)) break;
    if (idle && i == 1) break;
    expect("plugrl_feedback", feedback(c, &o), PLUGRL_OK, c);
  }
  if (R.failed) goto out;
  if (idle) {
    /* The server vanished as it sent the last action: the connection is
    ** silent, and only keepalive can tell: its first probe after 1 s, the
    ** poller's look when the bound has passed since. */
    sleep_us((DEAD_PEER_MS + 2500) * 1000L);
    t0 = now_ms();
    R.status = feedback(c, &o);
    R.took_ms = now_ms() - t0;
    R.deadline_ms = 0;
    at_once("plugrl_feedback", R.took_ms);
    extra("feedback=%s", status_name(R.status));
    if (R.status == PLUGRL_OK) fail("plugrl_feedback on a connection whose server vanished returned PLUGRL_OK");
  } else {
    t0 = now_ms();
    R.status = infer(c, &o, &a);
    R.took_ms = now_ms() - t0;
    expect("plugrl_infer", R.status, PLUGRL_RECONNECTED, c);
    check_deadline("plugrl_infer", R.took_ms, R.deadline_ms);
  }
  if (strstr(plugrl_errmsg(c), "dead-peer timeout") == NULL)
    fail("the message does not name the dead-peer timeout: %s", plugrl_errmsg(c));
  /* The next connection is an honest server's (an idle client's first
  ** infer is the one that reconnects). */
  for (i = 0; i < 2 && !R.failed; i++) {
    plugrl_status s = infer(c, &o, &a);
    if (idle && i == 0 && s == PLUGRL_RECONNECTED) s = infer(c, &o, &a);
    if (!expect("plugrl_infer on the next connection", s, PLUGRL_OK, c)) break;
    expect("plugrl_feedback on the next connection", feedback(c, &o), PLUGRL_OK, c);
  }
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  if (expect("plugrl_stats", plugrl_stats(c, &st), PLUGRL_OK, c) && (st.reconnects != 1 || st.reconnects_lost != 1))
    fail("reconnects %llu, lost %llu: want one, lost", (unsigned long long)st.reconnects,
         (unsigned long long)st.reconnects_lost);
out:
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

static void case_vanish(const char *url) { vanish(url, 0); } /* vanish and vanish-unacked: the server differs */
static void case_vanish_idle(const char *url) { vanish(url, 1); }

/* ------------------------------------------------------------------------ */
/* A server's name (tests/names.sh)                                         */
/* ------------------------------------------------------------------------ */

/* These cases need a name that resolves as they ask, so they are not in
** --list: tests/names.sh runs them in a network namespace of its own
** (a private loopback), each in a mount namespace of its own whose
** /etc/hosts maps NAMES_HOST to 127.0.0.1 and then 127.0.0.2 (where the
** server listens), and whose /etc/resolv.conf names NAMES_ADDR_DNS
** (port 53) as the only name server, under each of Go's two resolvers
** (GODEBUG=netdns=go, =cgo). glibc's getaddrinfo puts 127.0.0.1 first
** whatever the file's order (RFC 6724's longest matching prefix with the
** source address, 127.0.0.1), and Go's resolver keeps the file's: the
** dead address is the first either way. Nothing leaves the loopback
** interface. */
#define NAMES_HOST "trainer.test"
#define NAMES_ADDR_DEAD "127.0.0.1"
#define NAMES_ADDR_DNS "127.0.0.2"

/* The URL with its host replaced by host (url is ws://127.0.0.2:PORT);
** port gets the port. Returns 0 when url has no port. */
static int url_with_host(const char *url, const char *host, char *out, size_t size, int *port) {
  const char *colon = strrchr(url, ':');
  if (colon == NULL || strncmp(url, "ws://", 5) != 0) {
    fail("the URL %s is not ws://HOST:PORT", url);
    return 0;
  }
  *port = atoi(colon + 1);
  snprintf(out, size, "ws://%s%s", host, colon);
  return 1;
}

/* A socket of type on ip:port, bound and, for a stream socket, listening
** with a backlog of 0 and never accepting; -1 on failure (reported). */
static int bound_socket(int type, const char *ip, int port) {
  struct sockaddr_in sa;
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, ip, &sa.sin_addr);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || (type == SOCK_STREAM && listen(fd, 0) != 0)) {
    fail("binding %s:%d: %s", ip, port, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* Connects to ip:port without blocking; returns the socket when the
** connection is made within ms, else closes it and returns -1. */
static int connect_within(const char *ip, int port, int ms) {
  struct sockaddr_in sa;
  struct timeval tv = {0, ms * 1000};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, ip, &sa.sin_addr);
  if (fd < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); /* bounds a blocking connect */
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
  close(fd);
  return -1;
}

/* An infer on another thread (the one the server holds back). */
struct held_infer {
  plugrl_client *c;
  obsbuf *o;
  plugrl_status status;
};
static void *held_infer_worker(void *arg) {
  struct held_infer *h = arg;
  plugrl_action a;
  h->status = infer(h->c, h->o, &a);
  return NULL;
}

/* The reconnect after an interrupt ended the connection: the next infer
** reconnects (PLUGRL_RECONNECTED), and must go to the address the last
** connection went to first, not wait 250 ms behind the dead one again.
** The server (slow-action --slow-every 2) holds the connection's second
** infer, which is interrupted. */
static void reconnect_prefers_last_address(plugrl_client *c, obsbuf *o) {
  struct held_infer h = {c, o, PLUGRL_OK};
  pthread_t th;
  plugrl_action a;
  plugrl_status s;
  double t0, took;
  if (pthread_create(&th, NULL, held_infer_worker, &h) != 0) {
    fail("pthread_create failed");
    return;
  }
  sleep_us(100000);
  expect("plugrl_interrupt", plugrl_interrupt(c), PLUGRL_OK, NULL);
  pthread_join(th, NULL);
  if (!expect("the held plugrl_infer, interrupted", h.status, PLUGRL_INTERRUPTED, c)) return;
  t0 = now_ms();
  s = infer(c, o, &a);
  took = now_ms() - t0;
  extra("reconnect_ms=%.1f", took);
  if (!expect("plugrl_infer after the interrupt (it reconnects)", s, PLUGRL_RECONNECTED, c)) return;
  if (took > 200)
    fail("the reconnect took %.1f ms: it did not try the address of the last connection first", took);
  exchange(c, o);
}

/* dead-address: the name's first address is a machine that is not there
** (a listener whose queue is full, so the kernel drops every SYN), its
** second the server. plugrl_open under a 2 s connect timeout must reach
** the server, after the 250 ms it gives the first address alone. Go's
** dialer gave the first address the whole 2 s and never tried the second
** (under the default 10 s, 5 s of it, at every connect and reconnect).
** Then a reconnect must go to the server's address first (above). */
static void case_dead_address(const char *url) {
  char named[256];
  int port, dead, queued[4], nq = 0;
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  double t0;
  R.deadline_ms = -1;
  if (!url_with_host(url, NAMES_HOST, named, sizeof named, &port)) return;
  if ((dead = bound_socket(SOCK_STREAM, NAMES_ADDR_DEAD, port)) < 0) return;
  /* Fill its queue (a backlog of 0 queues one); the next must not connect. */
  while (nq < 4 && (queued[nq] = connect_within(NAMES_ADDR_DEAD, port, 200)) >= 0) nq++;
  if (nq == 4) {
    fail("%s:%d queued 4 connections at a backlog of 0: it cannot stand for a dead address", NAMES_ADDR_DEAD, port);
  } else {
    options(&opt, named);
    opt.connect_timeout_ms = 2000;
    opt.reconnect_backoff_ms = 1; /* the reconnect's time is then its connect's */
    t0 = now_ms();
    c = open_ok(&opt);
    R.took_ms = now_ms() - t0;
    if (c != NULL && obs_init(&o, 1, 1)) {
      if (exchange(c, &o)) {
        R.status = PLUGRL_OK;
        reconnect_prefers_last_address(c, &o);
      }
      obs_free(&o);
    }
    if (c != NULL) expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
    if (!R.failed && R.took_ms < 200)
      fail("plugrl_open(%s) connected in %.1f ms: the resolver gave the live address first, and the case tested "
           "nothing (check the hosts file's order)",
           named, R.took_ms);
    if (!R.failed && R.took_ms > 1000)
      fail("plugrl_open(%s) took %.1f ms: the dead address held it up for most of its 2 s", named, R.took_ms);
  }
  while (nq > 0) close(queued[--nq]);
  close(dead);
}

/* Opens with opt on another thread, interrupts it 300 ms in (well into a
** wait that would last longer), and checks that it returned
** PLUGRL_INTERRUPTED at once; where says where the interrupt lands, key
** names the figure. */
static void open_interrupted(const plugrl_options *opt, const char *where, const char *key) {
  plugrl_client *c = NULL;
  pthread_t th;
  double t0, took;
  open_handle = NULL;
  if (pthread_create(&th, NULL, open_worker, (void *)opt) != 0) {
    fail("pthread_create failed");
    return;
  }
  for (int i = 0; i < 2000000 && (c = __atomic_load_n(&open_handle, __ATOMIC_ACQUIRE)) == NULL; i++) sleep_us(1);
  if (c == NULL) {
    fail("plugrl_open did not set *client within 2 s");
    pthread_join(th, NULL);
    return;
  }
  sleep_us(300000);
  t0 = now_ms();
  expect("plugrl_interrupt", plugrl_interrupt(c), PLUGRL_OK, NULL);
  pthread_join(th, NULL);
  took = open_returned_ms - t0;
  extra("%s=%.1f", key, took);
  if (expect(where, open_status, PLUGRL_INTERRUPTED, c)) at_once("plugrl_open after plugrl_interrupt", took);
  plugrl_close(c);
}

/* silent-dns: the name server takes the question and never answers.
** plugrl_open must end at connect_timeout_ms with PLUGRL_TIMEOUT and a
** message that names the lookup, and plugrl_interrupt must end one with a
** long timeout at once (the lookup is part of the connect). */
static void case_silent_dns(const char *url) {
  char named[256];
  int port, dns;
  plugrl_options opt;
  plugrl_client *c = NULL;
  plugrl_status s;
  double t0;
  R.deadline_ms = 1000;
  if (!url_with_host(url, NAMES_HOST, named, sizeof named, &port)) return;
  if ((dns = bound_socket(SOCK_DGRAM, NAMES_ADDR_DNS, 53)) < 0) return;
  options(&opt, named);
  opt.connect_timeout_ms = 1000;
  t0 = now_ms();
  s = plugrl_open(&opt, &c);
  R.took_ms = now_ms() - t0;
  R.status = s;
  if (expect("plugrl_open", s, PLUGRL_TIMEOUT, c)) {
    check_deadline("plugrl_open with a silent name server", R.took_ms, R.deadline_ms);
    if (strstr(plugrl_errmsg(c), "lookup") == NULL)
      fail("plugrl_open's message does not say the lookup timed out: %s", plugrl_errmsg(c));
  }
  plugrl_close(c);

  /* The same with a minute to go, interrupted. */
  opt.connect_timeout_ms = 60000;
  open_interrupted(&opt, "plugrl_open interrupted while it looks up the name", "interrupted_ms");
  close(dns);
}

/* ------------------------------------------------------------------------ */
/* A server that is not up yet (tests/server_late.sh)                       */
/* ------------------------------------------------------------------------ */

static void count_attempts(void *user, int level, const char *message) {
  (void)level;
  if (strstr(message, "connect attempt") != NULL) ++*(int *)user;
}

/* Opens url with open_wait_ms 10000 (backoff 50 ms up to max_backoff_ms),
** which must connect after min_failed to max_failed failed attempts (why
** says what made them fail; max_failed -1: no upper bound), then
** exchanges and closes: took_ms is the open, and the status PLUGRL_OK
** once the exchange went through. */
static void open_waiting(const char *url, int max_backoff_ms, int min_failed, int max_failed, const char *why) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  int attempts = 0;
  double t0;
  options(&opt, url);
  opt.open_wait_ms = 10000;
  opt.reconnect_backoff_ms = 50;
  opt.max_backoff_ms = max_backoff_ms;
  opt.log = count_attempts;
  opt.log_user = &attempts;
  t0 = now_ms();
  c = open_ok(&opt);
  R.took_ms = now_ms() - t0;
  extra("attempts=%d", attempts);
  if (c == NULL) return;
  if (attempts < min_failed || (max_failed >= 0 && attempts > max_failed))
    fail("plugrl_open connected after %d failed attempts; %s", attempts, why);
  if (obs_init(&o, 1, 1)) {
    if (exchange(c, &o)) R.status = PLUGRL_OK;
    obs_free(&o);
  }
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
}

/* plugrl_open(opt), which must fail at once with want (what names the
** open): 1 if it did. *c is its handle, for the caller to read the
** message from and close; *took the open's time. */
static int open_fails_at_once(const plugrl_options *opt, const char *what, plugrl_status want, plugrl_client **c,
                              double *took) {
  double t0 = now_ms();
  plugrl_status s;
  *c = NULL;
  s = plugrl_open(opt, c);
  *took = now_ms() - t0;
  if (!expect(what, s, want, *c)) return 0;
  at_once("plugrl_open", *took);
  return 1;
}

/* server-late: tests/server_late.sh starts the server on url's port a
** second after this case starts (nothing listens there before). Without
** open_wait_ms the open fails at once; with it, it connects once the
** server comes. Then, against a port where nothing ever listens: a wait
** of 500 ms ends after it, saying so, and one with no end ends at once on
** plugrl_interrupt, between attempts and inside one. */
static void case_server_late(const char *url) {
  plugrl_options opt;
  plugrl_client *c = NULL;
  plugrl_status s;
  double t0, took;
  R.deadline_ms = -1;

  options(&opt, url);
  open_fails_at_once(&opt, "plugrl_open before the server is up, no wait", PLUGRL_CONNECT_FAILED, &c, &took);
  plugrl_close(c);

  open_waiting(url, 200, 2, -1, "the server came a second late");
  if (R.status != PLUGRL_OK) return;

  /* Nothing ever listens at port 1. */
  options(&opt, "ws://127.0.0.1:1");
  opt.open_wait_ms = 500;
  opt.reconnect_backoff_ms = 50;
  c = NULL;
  t0 = now_ms();
  s = plugrl_open(&opt, &c);
  took = now_ms() - t0;
  extra("wait_500_ms=%.1f", took);
  if (expect("plugrl_open with open_wait_ms 500 and no server", s, PLUGRL_CONNECT_FAILED, c)) {
    check_deadline("plugrl_open with open_wait_ms 500", took, 500);
    if (strstr(plugrl_errmsg(c), "open wait") == NULL) fail("its message does not name the wait: %s", plugrl_errmsg(c));
  }
  plugrl_close(c);

  opt.open_wait_ms = -1;
  open_interrupted(&opt, "plugrl_open waiting for ever, interrupted between attempts (refused at once)",
                   "interrupted_ms");

  /* The same inside an attempt: a port whose queue is full drops the SYN,
  ** so the connect waits (connect_timeout_ms 5000) when the interrupt
  ** comes. */
  {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    char dead_url[64];
    int dead = bound_socket(SOCK_STREAM, "127.0.0.1", 0), queued = -1, port;
    if (dead < 0) return;
    getsockname(dead, (struct sockaddr *)&sa, &len);
    port = ntohs(sa.sin_port);
    queued = connect_within("127.0.0.1", port, 200); /* fills its backlog of 0 */
    snprintf(dead_url, sizeof dead_url, "ws://127.0.0.1:%d", port);
    options(&opt, dead_url);
    opt.open_wait_ms = -1;
    opt.connect_timeout_ms = 5000;
    open_interrupted(&opt, "plugrl_open waiting for ever, interrupted inside an attempt (its SYN dropped)",
                     "interrupted_in_attempt_ms");
    if (queued >= 0) close(queued);
    close(dead);
  }
}

/* rate-limited: a proxy that limits how fast clients come answers 429
** with "Retry-After: 1" to a request that comes less than a second after
** its last refusal, and to the first after a connection. Without
** open_wait_ms the open fails at once, its message quoting the answer and
** the wait asked for. With open_wait_ms 10000 and a backoff of 50 ms
** (max_backoff_ms 2000), the open is refused once and then pauses the
** second asked for, not its 50 ms: it connects at its second attempt
** (took_ms at least 1000), where a client that ignored Retry-After would
** be refused until its own backoff passed a second (5 refusals or more). */
static void case_rate_limited(const char *url) {
  plugrl_options opt;
  plugrl_client *c = NULL;
  double took;
  R.deadline_ms = -1;

  options(&opt, url);
  if (open_fails_at_once(&opt, "plugrl_open refused with 429, no wait", PLUGRL_CONNECT_FAILED, &c, &took)) {
    if (strstr(plugrl_errmsg(c), "429 Too Many Requests") == NULL || strstr(plugrl_errmsg(c), "Retry-After") == NULL)
      fail("its message does not quote the 429 and its Retry-After: %s", plugrl_errmsg(c));
  }
  plugrl_close(c);

  open_waiting(url, 2000, 1, 1, "with the asked second between them, one");
  if (R.status == PLUGRL_OK && R.took_ms < 1000)
    fail("plugrl_open connected after %.1f ms; the server asked for a second", R.took_ms);
}

/* clock-behind (tests/server_late.sh, over wss://): the server's
** certificate becomes valid 1.5 s after the server starts (plugrl-hostile
** --tls-valid-in 1500ms; 1.5 to 2.5 s, as a certificate's times are whole
** seconds, rounded up), as a trainer's certificate looks to a robot whose clock NTP has
** not set yet since it booted. Without open_wait_ms the open fails at once
** (PLUGRL_CONNECT_FAILED), its message saying that the clock is behind the
** certificate; with open_wait_ms 10000 it connects once the certificate
** is valid (took_ms; the certificate still verified against
** HOSTILE_CA_FILE), and an exchange follows. */
static void case_clock_behind(const char *url) {
  plugrl_options opt;
  plugrl_client *c = NULL;
  double took;
  int refused;
  R.deadline_ms = -1;
  if (strncmp(url, "wss://", 6) != 0 || getenv("HOSTILE_CA_FILE") == NULL) {
    fail("needs a wss:// URL and HOSTILE_CA_FILE (tests/server_late.sh gives both), got %s", url);
    return;
  }
  options(&opt, url);
  refused = open_fails_at_once(&opt, "plugrl_open, the clock behind the certificate, no wait", PLUGRL_CONNECT_FAILED,
                               &c, &took);
  extra("no_wait_ms=%.1f", took);
  if (refused) {
    if (strstr(plugrl_errmsg(c), "clock") == NULL || strstr(plugrl_errmsg(c), "valid from") == NULL)
      fail("its message does not say the clock is behind the certificate: %s", plugrl_errmsg(c));
  }
  plugrl_close(c);

  open_waiting(url, 200, 1, -1, "the certificate was not valid yet");
}

/* keepalive (tests/keepalive.sh): against a PlugRL server on Python
** websockets whose keepalive is short (tests/keepalive_server.py: a ping
** every 1 s, a client dropped after 2 s without its pong), the process is
** stopped for 5 s between an exchange and the next infer (SIGSTOP, as a
** debugger's breakpoint stops it), and the server drops it with close code
** 1011, reason "keepalive ping timeout". That is not the server failing:
** the infer must return PLUGRL_RECONNECTED (not PLUGRL_SERVER_ERROR), its
** message saying why, the next exchange must go through, and the stats
** must count one reconnect. */
static void case_keepalive(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  plugrl_statistics st;
  pid_t pid;
  double t0;
  R.deadline_ms = -1;
  options(&opt, url);
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  if (!exchange(c, &o)) goto out;
  if ((pid = stop_me_later(100, 5000)) < 0) goto out;
  wait_stopper(pid); /* between calls: stopped, then continued, while this waits */
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  if (expect("plugrl_infer after the server dropped the stopped client (1011, keepalive ping timeout)", R.status,
             PLUGRL_RECONNECTED, c) &&
      strstr(plugrl_errmsg(c), "unanswered") == NULL)
    fail("its message does not say the server dropped this client for unanswered pings: %s", plugrl_errmsg(c));
  if (exchange(c, &o)) {
    st.size = sizeof st;
    if (expect("plugrl_stats", plugrl_stats(c, &st), PLUGRL_OK, c) && st.reconnects != 1)
      fail("%llu reconnects counted, want 1", (unsigned long long)st.reconnects);
    extra("reconnects_lost=%llu", (unsigned long long)st.reconnects_lost);
  }
out:
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* ping-flood: pings as fast as the socket takes them, no action ever;
** then close with a short close deadline. */
static void case_ping_flood(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  double t0, close_ms;
  R.check_rss = 1;
  R.deadline_ms = 1500;
  options(&opt, url);
  opt.receive_timeout_ms = 1500;
  opt.close_timeout_ms = 200;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  t0 = now_ms();
  R.status = infer(c, &o, &a);
  R.took_ms = now_ms() - t0;
  expect("plugrl_infer", R.status, PLUGRL_TIMEOUT, c);
  check_deadline("plugrl_infer", R.took_ms, R.deadline_ms);
  t0 = now_ms();
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  close_ms = now_ms() - t0;
  extra("close_ms=%.1f close_deadline_ms=200 close_overshoot_ms=%.1f", close_ms, close_ms - 200);
  if (close_ms - 200 > overshoot_limit_ms) fail("plugrl_close took %.1f ms against a 200 ms close deadline", close_ms);
  obs_free(&o);
}

/* close-no-reply: the server never answers the close frame. */
static void case_close_no_reply(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  double t0;
  R.deadline_ms = 300;
  options(&opt, url);
  opt.close_timeout_ms = 300;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  if (!exchange(c, &o)) return;
  t0 = now_ms();
  R.status = plugrl_close(c);
  R.took_ms = now_ms() - t0;
  expect("plugrl_close", R.status, PLUGRL_OK, NULL);
  check_deadline("plugrl_close", R.took_ms, R.deadline_ms);
  obs_free(&o);
}

/* interrupt-close: the same server, a close_timeout_ms of a minute, and a
** program's Ctrl-C (plugrl_interrupt_all) while plugrl_close waits: the
** close returns at once, everything freed. A call made while it waits is
** PLUGRL_CLOSED. */
static double close_returned_ms;
static plugrl_status close_status;
static void *close_worker(void *arg) {
  close_status = plugrl_close((plugrl_client *)arg);
  close_returned_ms = now_ms();
  return NULL;
}

static void case_interrupt_close(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  pthread_t th;
  double t0;
  R.deadline_ms = 0;
  options(&opt, url);
  opt.close_timeout_ms = 60000;
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  if (!exchange(c, &o)) return;
  if (pthread_create(&th, NULL, close_worker, c) != 0) {
    fail("pthread_create failed");
    return;
  }
  sleep_us(200000); /* well into the wait for the server's close frame */
  {
    /* A call that begins while plugrl_close runs finds the handle closing:
    ** PLUGRL_CLOSED, which a loop ends on, not PLUGRL_BUSY (the close is
    ** no other thread's call). */
    plugrl_action a;
    expect("plugrl_infer while plugrl_close waits", infer(c, &o, &a), PLUGRL_CLOSED, NULL);
  }
  t0 = now_ms();
  expect("plugrl_interrupt_all", plugrl_interrupt_all(), PLUGRL_OK, NULL);
  pthread_join(th, NULL);
  R.status = close_status;
  R.took_ms = close_returned_ms - t0;
  expect("plugrl_close", R.status, PLUGRL_OK, NULL);
  at_once("plugrl_close after plugrl_interrupt_all", R.took_ms);
  obs_free(&o);
}

/* ------------------------------------------------------------------------ */
/* Interrupt latency                                                        */
/* ------------------------------------------------------------------------ */

/* Each iteration, the worker calls plugrl_infer (after one whose
** interrupt dropped the connection, one infer that must return
** PLUGRL_RECONNECTED at once, and then) one that blocks on the slow
** action; the main thread waits until that blocking call has been running
** for 2 ms, takes t0 and interrupts it, directly or by a signal to the
** worker whose handler calls plugrl_interrupt; the latency is from t0 to
** the call's return with PLUGRL_INTERRUPTED.
**
** An interrupt can also land before the call gets into the library: the
** caller's thread, descheduled between announcing the call and making it
** (a busy machine, a sanitizer), is still outside when the 2 ms are up.
** The library then keeps the interrupt for the call, which returns
** PLUGRL_INTERRUPTED with "nothing was sent" and keeps the connection, so
** the next call blocks again rather than reconnect. One iteration in
** LATE_EVERY makes that happen on purpose (its blocking call sleeps
** LATE_US before it calls; the middle one of each LATE_EVERY, never the last
** iteration, so that a next one checks the connection); any call may by
** chance. Such an interrupt is counted as early, not timed, and the
** connection must have survived it. And an interrupt ends at most one
** call: no more calls may return PLUGRL_INTERRUPTED than the main thread
** sent interrupts (one that stayed pending would end every later call
** before it sent anything, each counted as early). */
enum { LATE_EVERY = 10, LATE_US = 20000 };
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  plugrl_client *c;
  obsbuf o;
  long iterations;
  long go;           /* iterations the main thread has started */
  long done;         /* iterations the worker has finished */
  unsigned long seq; /* calls begun */
  int in_call;
  int blocking;   /* the call running is the one that should block */
  double call_ms; /* when the running call began */
  double ret_ms;  /* when the last call returned */
  plugrl_status last;
  unsigned long last_seq; /* which call the last four describe */
  int last_blocking;
  int last_early; /* it was interrupted before it sent anything */
  long reconnected, other, unexpected;
  long after;   /* calls after an interrupt of a blocked call */
  long early;   /* blocking calls an interrupt ended before they sent */
  long dropped; /* calls after an early interrupt that reconnected */
  long late;    /* iterations whose blocking call waited LATE_US first */
  long sent;    /* interrupts the main thread sent (counted before each) */
  long taken;   /* calls that returned PLUGRL_INTERRUPTED */
  long unasked; /* of those, ones beyond the interrupts sent */
  unsigned long entered; /* the last call that entered the library */
  unsigned long before;  /* a call plugrl_interrupt returned before it entered */
  long misread;          /* such calls that did not end early */
} W = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, {0}, 0, 0, 0, 0, 0, 0, 0, 0, PLUGRL_OK, 0, 0, 0, 0,
       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

static plugrl_client *volatile signal_client;

/* Set by the worker between announcing a call and entering the library,
** for its own signal handler (the same thread, so sig_atomic_t
** suffices): a handler that runs then raises the interrupt before the
** call enters, which must then end it early. */
static volatile sig_atomic_t worker_announced, signal_before_call;

static void on_sigusr1(int sig) {
  (void)sig;
  if (worker_announced) signal_before_call = 1;
  plugrl_interrupt(signal_client); /* async-signal-safe; keeps errno */
}

/* One infer, announced to the main thread; late sleeps between the
** announcement and the call, as a descheduled thread would. */
static plugrl_status worker_call(long i, int blocking, int late) {
  plugrl_action a;
  plugrl_status s;
  double t, t_call;
  unsigned long seq;
  int early, unasked, must_early;
  signal_before_call = 0;
  worker_announced = 1;
  pthread_mutex_lock(&W.mu);
  seq = ++W.seq;
  W.in_call = 1;
  W.blocking = blocking;
  W.call_ms = t_call = now_ms();
  pthread_cond_broadcast(&W.cond);
  pthread_mutex_unlock(&W.mu);
  if (late) sleep_us(LATE_US);
  pthread_mutex_lock(&W.mu);
  W.entered = seq; /* after this, an interrupt may find the call blocked */
  pthread_mutex_unlock(&W.mu);
  worker_announced = 0;
  s = infer(W.c, &W.o, &a);
  t = now_ms();
  early = s == PLUGRL_INTERRUPTED && strstr(plugrl_errmsg(W.c), "nothing was sent") != NULL;
  if (getenv("HOSTILE_TRACE"))
    fprintf(stderr, "trace %ld: %s infer: %s after %.3f ms: %s\n", i, blocking ? "blocking" : "reconnecting",
            status_name(s), t - t_call, s == PLUGRL_OK ? "" : plugrl_errmsg(W.c));
  pthread_mutex_lock(&W.mu);
  W.in_call = 0;
  W.ret_ms = t;
  W.last = s;
  W.last_seq = seq;
  W.last_blocking = blocking;
  W.last_early = early;
  unasked = s == PLUGRL_INTERRUPTED && ++W.taken > W.sent;
  must_early = W.before == seq || signal_before_call;
  pthread_cond_broadcast(&W.cond);
  pthread_mutex_unlock(&W.mu);
  if (must_early && !early && W.misread++ < 10)
    fprintf(stderr,
            "hostile %s: iteration %ld: the interrupt came before the call entered the library, yet the call "
            "returned %s, not an early PLUGRL_INTERRUPTED (\"nothing was sent\"): %s\n",
            R.name, i, status_name(s), plugrl_errmsg(W.c));
  if (unasked && W.unasked++ < 10)
    fprintf(stderr, "hostile %s: iteration %ld: PLUGRL_INTERRUPTED for which no interrupt was left (%s): %s\n", R.name,
            i, early ? "early" : "blocked", plugrl_errmsg(W.c));
  return s;
}

static void *interrupt_worker(void *arg) {
  long i;
  int kept = 0; /* the last interrupt came early: the connection is up */
  (void)arg;
  for (i = 0; i < W.iterations; i++) {
    plugrl_status s;
    int first = 1, late = i % LATE_EVERY == LATE_EVERY / 2 && i + 1 < W.iterations;
    pthread_mutex_lock(&W.mu);
    while (W.go <= i) pthread_cond_wait(&W.cond, &W.mu);
    pthread_mutex_unlock(&W.mu);
    if (i > 0 && !kept) {
      W.after++;
      s = worker_call(i, 0, 0);
      if (s == PLUGRL_RECONNECTED) {
        W.reconnected++;
      } else if (W.unexpected++ < 10) {
        fprintf(stderr, "hostile %s: iteration %ld: the infer after an interrupt returned %s, not PLUGRL_RECONNECTED: %s\n",
                R.name, i, status_name(s), plugrl_errmsg(W.c));
      }
    }
    if (late) W.late++;
    while ((s = worker_call(i, 1, late)) == PLUGRL_RECONNECTED) {
      if (kept && first && W.dropped++ < 10)
        fprintf(stderr,
                "hostile %s: iteration %ld: an interrupt that came before the call sent anything dropped the "
                "connection\n",
                R.name, i);
      first = 0;
    }
    kept = s == PLUGRL_INTERRUPTED && W.last_early;
    if (kept) W.early++;
    if (s != PLUGRL_INTERRUPTED && W.other++ < 10)
      fprintf(stderr, "hostile %s: iteration %ld: the blocked infer returned %s, not PLUGRL_INTERRUPTED: %s\n", R.name,
              i, status_name(s), plugrl_errmsg(W.c));
    pthread_mutex_lock(&W.mu);
    W.done = i + 1;
    pthread_cond_broadcast(&W.cond);
    pthread_mutex_unlock(&W.mu);
  }
  return NULL;
}

static void interrupt_case(const char *url, int by_signal, long n) {
  plugrl_options opt;
  pthread_t th;
  double *lat;
  long i, measured = 0, stuck = 0;
  struct sigaction sa;
  R.deadline_ms = -1;
  options(&opt, url);
  opt.max_reconnects = 3;
  opt.reconnect_backoff_ms = 1;
  if (!(W.c = open_ok(&opt)) || !obs_init(&W.o, 1, 1)) return;
  lat = calloc((size_t)n, sizeof *lat);
  if (lat == NULL) {
    fail("out of memory");
    return;
  }
  if (by_signal) {
    signal_client = W.c;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) {
      fail("sigaction: %s", strerror(errno));
      return;
    }
  }
  W.iterations = n;
  if (pthread_create(&th, NULL, interrupt_worker, NULL) != 0) {
    fail("pthread_create failed");
    return;
  }
  for (i = 0; i < n; i++) {
    double t0 = 0;
    pthread_mutex_lock(&W.mu);
    W.go = i + 1;
    pthread_cond_broadcast(&W.cond);
    while (W.done <= i) {
      unsigned long seen;
      if (!W.in_call) {
        pthread_cond_wait(&W.cond, &W.mu);
        continue;
      }
      seen = W.seq;
      pthread_mutex_unlock(&W.mu);
      sleep_us(2000);
      pthread_mutex_lock(&W.mu);
      if (!W.in_call || W.seq != seen) continue; /* that call returned */
      if (!W.blocking) {
        /* The reconnecting infer should return at once; one that still
        ** runs after 500 ms is stuck (reported by the worker) and is
        ** interrupted too, to go on. */
        if (now_ms() - W.call_ms < 500) continue;
        stuck++;
      }
      /* The call has been running for 2 ms: it waits on the server. */
      W.sent++; /* before the interrupt, so that the call it ends sees it */
      pthread_mutex_unlock(&W.mu);
      t0 = now_ms();
      if (by_signal)
        pthread_kill(th, SIGUSR1);
      else
        plugrl_interrupt(W.c);
      pthread_mutex_lock(&W.mu);
      /* plugrl_interrupt has returned, and the call had not entered: it
      ** enters after, and the library promises that such a call sees the
      ** interrupt. (By signal, the worker's handler knows; see
      ** on_sigusr1.) */
      if (!by_signal && W.entered != seen) W.before = seen;
      while (W.in_call && W.seq == seen) pthread_cond_wait(&W.cond, &W.mu);
      /* Measure the call that was interrupted, and only if it was the
      ** blocking one: the worker may already be in its next call (whose
      ** W.blocking is not the interrupted call's), and an iteration may
      ** interrupt a stuck reconnecting call as well as its blocking one. */
      if (W.last_seq == seen && W.last_blocking && W.last == PLUGRL_INTERRUPTED && !W.last_early && measured < n) {
        lat[measured++] = (W.ret_ms - t0) * 1e3;
        if (lat[measured - 1] > interrupt_limit_us / 4)
          fprintf(stderr, "hostile %s: iteration %ld: the interrupt took %.0f us\n", R.name, i, lat[measured - 1]);
      }
    }
    pthread_mutex_unlock(&W.mu);
  }
  pthread_join(th, NULL);
  R.status = PLUGRL_INTERRUPTED;
  if (W.other) {
    R.status = W.last;
    fail("%ld of %ld blocked infers did not return PLUGRL_INTERRUPTED", W.other, n);
  }
  /* Every interrupt of a blocked call dropped its connection, so the
  ** next call reconnected; every early one kept it. */
  if (W.reconnected < W.after)
    fail("only %ld of the %ld infers after an interrupt of a blocked call returned PLUGRL_RECONNECTED (%ld were stuck)",
         W.reconnected, W.after, stuck);
  if (W.dropped) fail("%ld interrupts that came before their call sent anything dropped the connection", W.dropped);
  if (W.misread)
    fail("%ld calls that plugrl_interrupt came before did not end early, before sending anything", W.misread);
  if (W.unasked)
    fail("%ld calls returned PLUGRL_INTERRUPTED beyond the %ld interrupts sent: an interrupt ended more than one call",
         W.unasked, W.sent);
  if (W.late > 0 && W.early == 0)
    fail("no interrupt came before its call sent anything, though %ld blocking calls waited %d ms first", W.late,
         LATE_US / 1000);
  if (measured > 0) {
    double med, p99, max, sum = 0;
    qsort(lat, (size_t)measured, sizeof *lat, cmp_double);
    for (i = 0; i < measured; i++) sum += lat[i];
    med = lat[measured / 2];
    p99 = lat[(size_t)((double)(measured - 1) * 0.99)];
    max = lat[measured - 1];
    R.took_ms = max / 1e3;
    extra("n=%ld reconnected=%ld early=%ld interrupt_us_median=%.0f p99=%.0f max=%.0f mean=%.0f min=%.0f", measured,
          W.reconnected, W.early, med, p99, max, sum / (double)measured, lat[0]);
    /* The target is every interrupt within 10 ms. On a quiet machine the
    ** slowest of 1000 takes a few ms; the interrupt passes through Go
    ** threads that wait for a core on a loaded one (CI runs this beside
    ** one other test, ctest -j 2, a developer beside a build; with a busy
    ** loop on each of this machine's 2 cores, p99 was 2.6 ms and the
    ** slowest 3.8 ms of 200), so the test holds p99 to the target and the
    ** slowest to 10 times it: a broken interrupt waits the server's full
    ** 60 s. --figures reports the distribution. */
    if (p99 > interrupt_limit_us || max > 10 * interrupt_limit_us)
      fail("interrupts took median %.0f us, p99 %.0f us, max %.0f us (limits: p99 %.0f us, max %.0f us)", med, p99,
           max, interrupt_limit_us, 10 * interrupt_limit_us);
  } else {
    fail("no interrupt was measured");
  }
  if (by_signal) signal(SIGUSR1, SIG_IGN);
  expect("plugrl_close", plugrl_close(W.c), PLUGRL_OK, NULL);
  obs_free(&W.o);
  free(lat);
}

static void case_interrupt_latency(const char *url) { interrupt_case(url, 0, opt_n > 0 ? opt_n : 1000); }
static void case_interrupt_signal(const char *url) { interrupt_case(url, 1, opt_n > 0 ? opt_n : 100); }

/* ------------------------------------------------------------------------ */
/* Handles                                                                  */
/* ------------------------------------------------------------------------ */

/* no-descriptors: the process is out of file descriptors (RLIMIT_NOFILE
** lowered to DESC_CAP, every one taken) when it first opens a client, then
** has k = 0, 1, ... DESC_SPARE_MAX of them free. Every open returns
** PLUGRL_OK, or PLUGRL_CONNECT_FAILED with a handle whose message says the
** process is out of descriptors ("too many open files"); then, with all
** of them back, an open connects and exchanges (and, none free once more,
** one whose first descriptor would be its ledger's file is refused the
** same way, not as an invalid argument). The first open starts Go's
** network poller, and a runtime that cannot make the poller's descriptors
** ends the process: with 1 or 2 free it did ("fatal error: runtime:
** netpollinit failed"), before the library made sure of them first. */
enum { DESC_CAP = 256, DESC_SPARE_MAX = 8 };

static void case_no_descriptors(const char *url) {
  struct rlimit old, rl;
  int fds[DESC_CAP];
  int refused = 0, opened = 0;
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  R.deadline_ms = -1;
  options(&opt, url);
  if (getrlimit(RLIMIT_NOFILE, &old) != 0) {
    fail("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    return;
  }
  rl = old;
  if (rl.rlim_cur > DESC_CAP) rl.rlim_cur = DESC_CAP;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    fail("setrlimit(RLIMIT_NOFILE, %ld): %s", (long)rl.rlim_cur, strerror(errno));
    return;
  }
  for (int k = 0; k <= DESC_SPARE_MAX && !R.failed; k++) {
    int n = 0, fd;
    plugrl_status s;
    c = NULL;
    while (n < DESC_CAP && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) fds[n++] = fd;
    if (n == DESC_CAP || errno != EMFILE) {
      fail("could not use up the descriptors (%d taken: %s)", n, strerror(errno));
    } else {
      for (int i = 0; i < k && n > 0; i++) close(fds[--n]);
      s = plugrl_open(&opt, &c);
      if (c == NULL) {
        fail("plugrl_open with %d descriptors free returned %s and no handle: nothing says why", k, status_name(s));
      } else if (s == PLUGRL_OK) {
        opened++;
      } else if (s == PLUGRL_CONNECT_FAILED && strstr(plugrl_errmsg(c), "too many open files") != NULL) {
        refused++;
      } else {
        fail("plugrl_open with %d descriptors free returned %s: %s; want PLUGRL_OK, or PLUGRL_CONNECT_FAILED saying "
             "the process is out of descriptors",
             k, status_name(s), plugrl_errmsg(c));
      }
      if (c != NULL) expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
    }
    while (n > 0) close(fds[--n]);
  }
  /* The poller runs now; an open with none free whose first descriptor
  ** would be its ledger's file is refused the same way, not taken for an
  ** invalid argument. */
  if (!R.failed) {
    char ledger[64];
    int n = 0, fd;
    plugrl_status s;
    snprintf(ledger, sizeof ledger, "/tmp/plugrl-hostile-nofd-%ld.ledger", (long)getpid());
    opt.ledger_path = ledger;
    c = NULL;
    while (n < DESC_CAP && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) fds[n++] = fd;
    s = plugrl_open(&opt, &c);
    while (n > 0) close(fds[--n]);
    if (s != PLUGRL_CONNECT_FAILED || c == NULL || strstr(plugrl_errmsg(c), "too many open files") == NULL)
      fail("plugrl_open with a ledger and no descriptor free returned %s: %s; want PLUGRL_CONNECT_FAILED saying the "
           "process is out of descriptors",
           status_name(s), c ? plugrl_errmsg(c) : "(no handle)");
    if (c != NULL) expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
    unlink(ledger);
    opt.ledger_path = NULL;
  }
  if (setrlimit(RLIMIT_NOFILE, &old) != 0) fail("restoring RLIMIT_NOFILE: %s", strerror(errno));
  extra("refused=%d opened=%d", refused, opened);
  if (R.failed) return;
  if (refused < 3) fail("%d opens refused with 0 to %d descriptors free; want at least those with 0, 1 and 2", refused,
                        DESC_SPARE_MAX);
  c = open_ok(&opt);
  if (c == NULL || !obs_init(&o, 1, 1)) {
    plugrl_close(c);
    return;
  }
  if (exchange(c, &o)) R.status = PLUGRL_OK;
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* tokens: millions of open/close pairs never run out of handles, never
** give the first handle's value again, and a closed handle stays dead. */
static void case_tokens(const char *url) {
  long n = opt_n > 0 ? opt_n : 4200000;
  long i, repeats = 0;
  plugrl_options opt;
  plugrl_client *first = NULL, *prev = NULL, *c;
  plugrl_action a;
  obsbuf o;
  double t0;
  R.deadline_ms = -1;
  options(&opt, NULL);
  if (!obs_init(&o, 1, 1)) return;
  t0 = now_ms();
  for (i = 0; i < n; i++) {
    plugrl_status s;
    c = NULL;
    s = plugrl_open(&opt, &c);
    if (s != PLUGRL_INVALID_ARGUMENT || c == NULL) {
      fail("open #%ld with url NULL returned %s and handle %p; want PLUGRL_INVALID_ARGUMENT and a handle", i,
           status_name(s), (void *)c);
      R.status = s;
      break;
    }
    if (i == 0) {
      first = c;
    } else if (c == first || c == prev) {
      if (repeats++ < 5)
        fail("open #%ld returned handle %p, the value of the %s handle", i, (void *)c, c == first ? "first" : "previous");
    }
    s = plugrl_close(c);
    if (s != PLUGRL_OK) {
      fail("close #%ld returned %s", i, status_name(s));
      R.status = s;
      break;
    }
    if ((i & 4095) == 0 || i == n - 1) {
      /* Spot checks: this handle and the first are dead. */
      if (plugrl_close(c) != PLUGRL_CLOSED || plugrl_infer(c, o.idx, o.steps, 1, &o.obs, NULL, &a) != PLUGRL_CLOSED ||
          plugrl_interrupt(c) != PLUGRL_CLOSED || plugrl_close(first) != PLUGRL_CLOSED ||
          plugrl_interrupt(first) != PLUGRL_CLOSED) {
        fail("after close #%ld, a call on a closed handle did not return PLUGRL_CLOSED", i);
        break;
      }
    }
    prev = c;
  }
  R.took_ms = now_ms() - t0;
  extra("opens=%ld per_pair_us=%.2f first=%p last=%p", i, R.took_ms * 1e3 / (double)(i ? i : 1), (void *)first,
        (void *)prev);
  /* The last open still works, against the real server. */
  if (!R.failed) {
    options(&opt, url);
    c = open_ok(&opt);
    if (c) {
      R.status = PLUGRL_OK;
      if (c == first) fail("the final open returned the first handle's value");
      if (exchange(c, &o)) expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
    }
  }
  obs_free(&o);
}

/* fork: the child finds every inherited handle dead, the pure helpers
** still answering, and the parent's connection is untouched. */
static void case_fork(const char *url) {
  plugrl_options opt;
  plugrl_client *c;
  obsbuf o;
  pid_t pid;
  int st = 0, i;
  double t0;
  size_t sizes[PLUGRL_DTYPE_F64 + 2];
  R.deadline_ms = -1;
  options(&opt, url);
  /* The parent's answers, from Go, which the child's, from C, must match
  ** (0 for the values around the enum). */
  for (i = 0; i <= PLUGRL_DTYPE_F64 + 1; i++) sizes[i] = plugrl_dtype_size((plugrl_dtype)i);
  if (!(c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  if (!exchange(c, &o)) return;
  fflush(stdout);
  fflush(stderr);
  t0 = now_ms();
  pid = fork();
  if (pid < 0) {
    fail("fork: %s", strerror(errno));
    return;
  }
  if (pid == 0) {
    /* The child: only async-signal-safe work and the library's calls. */
    plugrl_action a;
    plugrl_client *c2 = NULL;
    int bad = 0;
    alarm(20); /* a hang is a failure, not a stuck test */
    if (infer(c, &o, &a) != PLUGRL_CLOSED) bad |= 1;
    if (feedback(c, &o) != PLUGRL_CLOSED) bad |= 2;
    if (plugrl_close(c) != PLUGRL_CLOSED) bad |= 4;
    if (plugrl_open(&opt, &c2) != PLUGRL_CLOSED) bad |= 8;
    for (i = 0; i <= PLUGRL_DTYPE_F64 + 1; i++)
      if (plugrl_dtype_size((plugrl_dtype)i) != sizes[i]) bad |= 16;
    if (plugrl_version_number() != PLUGRL_VERSION_NUMBER) bad |= 32;
    _exit(bad);
  }
  {
    /* Wait up to 20 s for the child. */
    int waited = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && waited < 20000) {
      sleep_us(1000);
      waited++;
    }
    if (w == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fail("the forked child hung in the library (killed after 20 s)");
    }
  }
  R.took_ms = now_ms() - t0;
  if (WIFSIGNALED(st)) {
    fail("the forked child died of signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
    int b = WEXITSTATUS(st);
    fail("in the forked child, these did not answer as documented:%s%s%s%s%s%s", b & 1 ? " plugrl_infer" : "",
         b & 2 ? " plugrl_feedback" : "", b & 4 ? " plugrl_close" : "", b & 8 ? " plugrl_open" : "",
         b & 16 ? " plugrl_dtype_size (not the parent's sizes)" : "",
         b & 32 ? " plugrl_version_number" : "");
  }
  extra("child_ms=%.1f child_status=%d", R.took_ms, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
  for (i = 0; i < 10 && !R.failed; i++)
    if (!exchange(c, &o)) break;
  R.status = plugrl_close(c);
  expect("plugrl_close", R.status, PLUGRL_OK, NULL);
  obs_free(&o);
}

/* errmsg-threads: messages are never seen half written. */
static struct {
  plugrl_client *c;
  obsbuf *o;
  long n;
  atomic_int stop;    /* the reader is done */
  atomic_long calls;  /* failing calls made */
  long bad_status;
} E;

/* Thread A: failing calls on c, alternating two invalid arguments, until
** the reader is done and at least E.n were made. */
static void *errmsg_caller(void *arg) {
  long i;
  int64_t v;
  int present;
  plugrl_action a;
  plugrl_client *c = (plugrl_client *)arg;
  for (i = 0; !atomic_load(&E.stop) || i < E.n; i++) {
    plugrl_status s = (i & 1) ? plugrl_infer(c, E.o->idx, E.o->steps, 0, &E.o->obs, NULL, &a)
                              : plugrl_metadata_int(c, NULL, &v, &present);
    if (s != PLUGRL_INVALID_ARGUMENT) E.bad_status++;
    atomic_store(&E.calls, i + 1);
  }
  return NULL;
}

static void case_errmsg_threads(const char *url) {
  plugrl_options opt;
  plugrl_client *c, *c2;
  obsbuf o;
  plugrl_action a;
  int64_t v;
  int present;
  char *msg_key = NULL, *msg_n = NULL, *msg_busy = NULL;
  long i, n = opt_n > 0 ? opt_n : 200000;
  long seen_key = 0, seen_n = 0, seen_busy = 0, seen_empty = 0, torn = 0;
  pthread_t th;
  double t0;
  R.deadline_ms = -1;
  options(&opt, url);
  if (!(c = open_ok(&opt)) || !(c2 = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  E.o = &o;
  /* The two invalid-argument messages, single-threaded. */
  expect("plugrl_metadata_int(key NULL)", plugrl_metadata_int(c2, NULL, &v, &present), PLUGRL_INVALID_ARGUMENT, c2);
  msg_key = strdup(plugrl_errmsg(c2));
  expect("plugrl_infer(n 0)", plugrl_infer(c2, o.idx, o.steps, 0, &o.obs, NULL, &a), PLUGRL_INVALID_ARGUMENT, c2);
  msg_n = strdup(plugrl_errmsg(c2));
  if (!msg_key || !msg_n || !*msg_key || !*msg_n || strlen(msg_key) == strlen(msg_n)) {
    fail("the two messages should be non-empty and of different lengths: \"%s\" and \"%s\"", msg_key ? msg_key : "",
         msg_n ? msg_n : "");
    return;
  }
  /* The busy message: what plugrl_errmsg gives while another thread is
  ** inside a call on the handle (on c2, hammered by a thread). */
  atomic_store(&E.stop, 0);
  E.n = 1;
  pthread_create(&th, NULL, errmsg_caller, c2);
  t0 = now_ms();
  while (msg_busy == NULL && now_ms() - t0 < 10000) {
    const char *m = plugrl_errmsg(c2);
    if (strcmp(m, msg_key) != 0 && strcmp(m, msg_n) != 0 && *m) msg_busy = strdup(m);
  }
  atomic_store(&E.stop, 1);
  pthread_join(th, NULL);
  if (msg_busy == NULL || strstr(msg_busy, "busy") == NULL) {
    fail("found no busy message in 10 s (got \"%s\")", msg_busy ? msg_busy : "");
    return;
  }
  fprintf(stderr, "messages: key NULL: \"%s\"\nmessages: n 0: \"%s\"\nmessages: busy: \"%s\"\n", msg_key, msg_n,
          msg_busy);
  E.bad_status = 0;
  /* The test, on a fresh handle. Thread B (this one) starts once thread A
  ** has made its first failing call, so the message is never "" again,
  ** and A goes on until B is done. B reads n messages, and goes on (up
  ** to 30 s) until it has seen both: on a busy machine A may not run
  ** at all while B reads its n (seen under AddressSanitizer beside
  ** another test). */
  E.c = c;
  E.n = n;
  atomic_store(&E.stop, 0);
  atomic_store(&E.calls, 0);
  pthread_create(&th, NULL, errmsg_caller, c);
  t0 = now_ms();
  while (atomic_load(&E.calls) == 0) sched_yield();
  for (i = 0; i < n || ((seen_key == 0 || seen_n == 0) && now_ms() - t0 < 30000); i++) {
    const char *m = plugrl_errmsg(c);
    if (strcmp(m, msg_key) == 0)
      seen_key++;
    else if (strcmp(m, msg_n) == 0)
      seen_n++;
    else if (strcmp(m, msg_busy) == 0)
      seen_busy++;
    else if (*m == '\0')
      seen_empty++;
    else if (torn++ < 5)
      fail("plugrl_errmsg gave a message that is none of the known ones: \"%s\"", m);
  }
  atomic_store(&E.stop, 1);
  pthread_join(th, NULL);
  R.took_ms = now_ms() - t0;
  R.status = PLUGRL_INVALID_ARGUMENT;
  n = i;
  if (torn) fail("%ld of %ld messages were torn or unknown", torn, n);
  if (seen_empty) fail("%ld messages were \"\" after the handle's first failing call", seen_empty);
  if (seen_key == 0 || seen_n == 0)
    fail("the reader never saw one of the two messages (%ld and %ld times): the threads did not overlap", seen_key,
         seen_n);
  if (E.bad_status) fail("%ld failing calls returned something else than PLUGRL_INVALID_ARGUMENT", E.bad_status);
  extra("errmsg_calls=%ld failing_calls=%ld key_msg=%ld n_msg=%ld busy=%ld empty=%ld torn=%ld", n,
        atomic_load(&E.calls), seen_key, seen_n, seen_busy, seen_empty, torn);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  expect("plugrl_close", plugrl_close(c2), PLUGRL_OK, NULL);
  free(msg_key);
  free(msg_n);
  free(msg_busy);
  obs_free(&o);
}

/* idle-cpu: 64 open, idle clients cost next to no CPU. */
static void case_idle_cpu(const char *url) {
  enum { CLIENTS = 64 };
  plugrl_options opt;
  plugrl_client *c[CLIENTS];
  int i, opened = 0;
  double cpu0, t0, cpu, wall, pct;
  R.deadline_ms = -1;
  options(&opt, url);
  for (i = 0; i < CLIENTS; i++) {
    if (!(c[i] = open_ok(&opt))) break;
    opened++;
  }
  if (opened == CLIENTS) {
    sleep_us(200000); /* let the opens' own work settle */
    cpu0 = cpu_ms();
    t0 = now_ms();
    sleep_us(5000000);
    cpu = cpu_ms() - cpu0;
    wall = now_ms() - t0;
    pct = 100.0 * cpu / wall;
    R.took_ms = wall;
    R.status = PLUGRL_OK;
    extra("clients=%d cpu_ms=%.1f cpu_pct=%.3f", CLIENTS, cpu, pct);
    if (pct > IDLE_CPU_LIMIT_PCT)
      fail("%d idle clients used %.1f ms of CPU in %.0f ms: %.3f%% of a core (limit %.1f%%)", CLIENTS, cpu, wall, pct,
           IDLE_CPU_LIMIT_PCT);
  }
  for (i = 0; i < opened; i++) expect("plugrl_close", plugrl_close(c[i]), PLUGRL_OK, NULL);
}

/* ------------------------------------------------------------------------ */
/* Reproducers (not in --list: run them by name)                            */
/* ------------------------------------------------------------------------ */

/* One infer at a time on a worker thread, for interrupting it. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  plugrl_client *c;
  obsbuf *o;
  long req, started, done;
  plugrl_status st;
  char msg[512];
} J = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0, PLUGRL_OK, ""};

static void *job_worker(void *arg) {
  (void)arg;
  for (;;) {
    plugrl_action a;
    plugrl_status s;
    long k;
    pthread_mutex_lock(&J.mu);
    while (J.req == J.done) pthread_cond_wait(&J.cond, &J.mu);
    k = J.req;
    if (k < 0) {
      pthread_mutex_unlock(&J.mu);
      return NULL;
    }
    J.started = k;
    pthread_cond_broadcast(&J.cond);
    pthread_mutex_unlock(&J.mu);
    s = infer(J.c, J.o, &a);
    pthread_mutex_lock(&J.mu);
    J.st = s;
    snprintf(J.msg, sizeof J.msg, "%s", s == PLUGRL_OK ? "" : plugrl_errmsg(J.c));
    J.done = k;
    pthread_cond_broadcast(&J.cond);
    pthread_mutex_unlock(&J.mu);
  }
}

/* interrupt-once: ONE plugrl_interrupt, sent while an infer is
** reconnecting (at offsets from 0 to 4 ms into the call), must end at
** most one call. The calls after it (receive_timeout_ms 30) are made until
** one waits out its deadline on a live connection (PLUGRL_TIMEOUT); every
** PLUGRL_INTERRUPTED among them and the interrupted call is counted. */
static void case_interrupt_once(const char *url) {
  plugrl_options opt;
  pthread_t th;
  plugrl_action a;
  obsbuf o;
  long k, n = opt_n > 0 ? opt_n : 200, doubled = 0;
  R.deadline_ms = -1;
  options(&opt, url);
  opt.max_reconnects = 3;
  opt.reconnect_backoff_ms = 1;
  opt.receive_timeout_ms = 30;
  if (!(J.c = open_ok(&opt)) || !obs_init(&o, 1, 1)) return;
  J.o = &o;
  pthread_create(&th, NULL, job_worker, NULL);
  /* Drop the connection: the next infer reconnects. */
  expect("plugrl_infer", infer(J.c, &o, &a), PLUGRL_TIMEOUT, J.c);
  for (k = 1; k <= n && !R.failed; k++) {
    plugrl_status s, seq[8];
    char msgs[8][512];
    int calls = 0, interrupted = 0, j;
    long d_us = (k % 81) * 50;
    pthread_mutex_lock(&J.mu);
    J.req = k;
    pthread_cond_broadcast(&J.cond);
    while (J.started != k) pthread_cond_wait(&J.cond, &J.mu);
    pthread_mutex_unlock(&J.mu);
    sleep_us(d_us);
    plugrl_interrupt(J.c);
    pthread_mutex_lock(&J.mu);
    while (J.done != k) pthread_cond_wait(&J.cond, &J.mu);
    s = J.st;
    snprintf(msgs[0], sizeof msgs[0], "%s", J.msg);
    pthread_mutex_unlock(&J.mu);
    seq[calls++] = s;
    interrupted += s == PLUGRL_INTERRUPTED;
    while (s != PLUGRL_TIMEOUT && calls < 8) {
      s = infer(J.c, &o, &a);
      snprintf(msgs[calls], sizeof msgs[calls], "%s", s == PLUGRL_OK ? "" : plugrl_errmsg(J.c));
      seq[calls++] = s;
      interrupted += s == PLUGRL_INTERRUPTED;
    }
    if (interrupted > 1 || s != PLUGRL_TIMEOUT) {
      doubled += interrupted > 1;
      if (doubled <= 3 || s != PLUGRL_TIMEOUT) {
        fprintf(stderr, "hostile %s: iteration %ld: one plugrl_interrupt %.2f ms into a reconnecting infer, then:\n",
                R.name, k, (double)d_us / 1e3);
        for (j = 0; j < calls; j++)
          fprintf(stderr, "    %s infer: %s: %s\n", j == 0 ? "interrupted" : "next", status_name(seq[j]), msgs[j]);
      }
      if (s != PLUGRL_TIMEOUT) fail("iteration %ld: 8 infers in a row did not wait out their deadline", k);
    }
  }
  R.status = doubled ? PLUGRL_INTERRUPTED : PLUGRL_OK;
  extra("iterations=%ld doubled=%ld", n, doubled);
  if (doubled)
    fail("in %ld of %ld iterations one plugrl_interrupt ended two calls (a later infer on a fresh connection "
         "returned PLUGRL_INTERRUPTED as well)", doubled, n);
  pthread_mutex_lock(&J.mu);
  J.req = -1;
  pthread_cond_broadcast(&J.cond);
  pthread_mutex_unlock(&J.mu);
  pthread_join(th, NULL);
  expect("plugrl_close", plugrl_close(J.c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* garble_value is element k of an action's view as a double, as
** plugrl_action_copy to PLUGRL_DTYPE_F64 must give it; *bad is set for a
** BOOL byte other than 0 or 1 (plugrl.h: one byte holding 0 or 1). */
static double garble_value(const plugrl_action *a, int64_t k, int *bad) {
  const unsigned char *p = a->data;
  switch (a->dtype) {
  case PLUGRL_DTYPE_BOOL:
    if (p[k] > 1) *bad = 1;
    return p[k];
  case PLUGRL_DTYPE_U8: return p[k];
  case PLUGRL_DTYPE_I8: return ((const int8_t *)a->data)[k];
  case PLUGRL_DTYPE_U16: return ((const uint16_t *)a->data)[k];
  case PLUGRL_DTYPE_I16: return ((const int16_t *)a->data)[k];
  case PLUGRL_DTYPE_U32: return ((const uint32_t *)a->data)[k];
  case PLUGRL_DTYPE_I32: return ((const int32_t *)a->data)[k];
  case PLUGRL_DTYPE_U64: return (double)((const uint64_t *)a->data)[k];
  case PLUGRL_DTYPE_I64: return (double)((const int64_t *)a->data)[k];
  case PLUGRL_DTYPE_F32: return ((const float *)a->data)[k];
  case PLUGRL_DTYPE_F64: return ((const double *)a->data)[k];
  case PLUGRL_DTYPE_F16: {
    uint16_t h = ((const uint16_t *)a->data)[k];
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 31) {
      v = m ? NAN : INFINITY;
    } else {
      /* (e ? 1024 + m : m) x 2^(max(e, 1) - 25), by exact doublings */
      v = e ? 1024 + m : m;
      for (int x = (e ? e : 1) - 25; x < 0; x++) v *= 0.5;
      for (int x = (e ? e : 1) - 25; x > 0; x--) v *= 2;
    }
    return (h & 0x8000) ? -v : v;
  }
  }
  *bad = 1;
  return 0;
}

/* garble_open opens a client for garble's server and an observation of its
** 3 envs. A third of the actions end their connection, so reconnects wait
** 1 ms, not 100. NULL (a failure reported, nothing left open) if either
** fails. */
static plugrl_client *garble_open(const char *url, obsbuf *o) {
  plugrl_options opt;
  plugrl_client *c;
  R.deadline_ms = -1;
  options(&opt, url);
  opt.receive_timeout_ms = 5000;
  opt.max_reconnects = 3;
  opt.reconnect_backoff_ms = 1;
  opt.max_backoff_ms = 1;
  if (!(c = open_ok(&opt))) return NULL;
  if (!obs_init(o, 3, 1)) {
    obs_free(o);
    plugrl_close(c);
    return NULL;
  }
  return c;
}

/* garble_refused checks the message of call i's protocol error: it must say
** why. HOSTILE_TRACE=1 prints it. */
static void garble_refused(const char *call, long i, const char *msg) {
  if (msg == NULL || strlen(msg) < 10) fail("%s %ld: a protocol error with no message that says why", call, i);
  if (getenv("HOSTILE_TRACE")) fprintf(stderr, "trace %ld: refused: %s\n", i, msg);
}

/* garble_reconnect applies the rule of the infer loops of garble and
** garble-frames: the infer after a refusal, and only that one, returns
** PLUGRL_RECONNECTED (plugrl.h: the next infer reconnects; the server ends
** no connection itself). what names the infer's kind in a failure ("" for
** none). It clears *was_refused and returns -1 (a failure reported: stop),
** 1 (reconnected, counted: on to the next infer) or 0 (go on with st). */
static int garble_reconnect(long i, const char *what, plugrl_status st, plugrl_client *c, int *was_refused,
                            long *reconnected) {
  if ((st == PLUGRL_RECONNECTED) != *was_refused) {
    R.status = st;
    fail("infer %ld%s%s%s returned %s %s a refusal; want PLUGRL_RECONNECTED after each refusal, and only then; "
         "errmsg: %s",
         i, *what ? " (" : "", what, *what ? ")" : "", status_name(st), *was_refused ? "after" : "not after",
         plugrl_errmsg(c));
    return -1;
  }
  *was_refused = 0;
  if (st != PLUGRL_RECONNECTED) return 0;
  (*reconnected)++;
  return 1;
}

/* garble_end checks what both garble cases need of a whole run: some
** actions taken, some refused, and every call answered at once. */
static void garble_end(const char *taken, long ok, long refused, long n, double slowest) {
  R.took_ms = slowest;
  if (!R.failed && (ok == 0 || refused == 0))
    fail("%ld %s and %ld refused in %ld calls: want some of each", ok, taken, refused, n);
  if (slowest > 1000) fail("a call took %.1f ms; each infer is answered at once", slowest);
}

/* garble: N infers (--n, 1000) against a server whose actions are drawn at
** random, most of them wrong (internal/hostile/garble.go; metadata H 2,
** D 3), for 3 envs. Each infer returns at once with PLUGRL_OK, or with
** PLUGRL_PROTOCOL_ERROR and a message (the connection dropped); the infer
** after a refusal, and only that one, returns PLUGRL_RECONNECTED (plugrl.h:
** the next infer reconnects; the server ends no connection itself). An
** action taken is whole and true to SPEC 5.3: env_ids are the request's,
** the shape [2, 3, 3] (metadata's H and D; a per-step shape of [1, 3] or
** [3, 1] is D too), a known dtype; its every byte is read (under the
** sanitizers, a view past the message, or of bytes never received, is
** reported), copied out as float64 and compared with the view (so a
** byte-swap or conversion gone wrong shows; a BOOL byte must be 0 or 1),
** and fed back, which must return PLUGRL_OK. Both outcomes must occur: a
** library that refused everything, or took everything, fails. */
static void case_garble(const char *url) {
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  long i, n = opt_n > 0 ? opt_n : 1000, ok = 0, refused = 0, reconnected = 0, not_f32 = 0, multi_axis = 0;
  double slowest = 0, t0, took;
  unsigned sum = 0;
  double copy[2 * 3 * 3];
  int was_refused = 0;
  if (!(c = garble_open(url, &o))) return;
  for (i = 0; i < n && !R.failed; i++) {
    t0 = now_ms();
    plugrl_status st = infer(c, &o, &a);
    took = now_ms() - t0;
    if (took > slowest) slowest = took;
    int after = garble_reconnect(i, "", st, c, &was_refused, &reconnected);
    if (after < 0) break;
    if (after > 0) continue;
    if (st == PLUGRL_PROTOCOL_ERROR) {
      garble_refused("infer", i, plugrl_errmsg(c));
      refused++;
      was_refused = 1;
      continue;
    }
    if (st != PLUGRL_OK) {
      R.status = st;
      fail("infer %ld returned %s, want PLUGRL_OK, PLUGRL_PROTOCOL_ERROR or PLUGRL_RECONNECTED; errmsg: %s", i,
           status_name(st), plugrl_errmsg(c));
      break;
    }
    ok++;
    int64_t size = (int64_t)plugrl_dtype_size(a.dtype);
    if (size <= 0 || a.data == NULL || a.shape == NULL || a.env_ids == NULL) {
      fail("infer %ld: an action taken with dtype %d, data %p, shape %p, env_ids %p", i, (int)a.dtype, a.data,
           (const void *)a.shape, (const void *)a.env_ids);
      break;
    }
    if (a.num_envs != 3 || a.step_size != 3 || a.horizon != 2 || a.ndim < 3 || a.ndim > PLUGRL_MAX_DIMS ||
        a.shape[0] != a.horizon || a.shape[1] != a.num_envs) {
      fail("infer %ld: an action taken with horizon %lld, num_envs %lld, step_size %lld, ndim %d; want [2, 3, 3]",
           i, (long long)a.horizon, (long long)a.num_envs, (long long)a.step_size, (int)a.ndim);
      break;
    }
    /* shape[2:] must multiply to step_size (3): each axis 1 to 3, so the
    ** product cannot overflow whatever a library gets wrong. */
    int64_t steps = 1;
    for (int32_t k = 2; k < a.ndim && steps <= 3; k++)
      steps = a.shape[k] >= 1 && a.shape[k] <= 3 ? steps * a.shape[k] : 4;
    if (steps != a.step_size) {
      fail("infer %ld: shape[2:] does not multiply to step_size %lld", i, (long long)a.step_size);
      break;
    }
    int ids_ok = 1;
    for (int k = 0; k < 3 && ids_ok; k++)
      if (a.env_ids[k] != o.idx[k]) {
        fail("infer %ld: env_ids[%d] is %lld, the request's env %lld (SPEC 5.3)", i, k, (long long)a.env_ids[k],
             (long long)o.idx[k]);
        ids_ok = 0;
      }
    if (!ids_ok) break;
    const unsigned char *bytes = a.data;
    for (int64_t b = 0; b < a.horizon * a.num_envs * a.step_size * size; b++) sum += bytes[b];
    not_f32 += a.dtype != PLUGRL_DTYPE_F32;
    multi_axis += a.ndim > 3;
    if (!expect("plugrl_action_copy", plugrl_action_copy(c, copy, sizeof copy, PLUGRL_DTYPE_F64), PLUGRL_OK, c))
      break;
    for (int64_t k = 0; k < 2 * 3 * 3; k++) {
      int bad = 0;
      double v = garble_value(&a, k, &bad);
      if (bad || !(v == copy[k] || (isnan(v) && isnan(copy[k])))) {
        fail("infer %ld: element %lld of the action (dtype %d) reads %.17g in its view, %.17g copied out as "
             "float64%s",
             i, (long long)k, (int)a.dtype, v, copy[k], bad ? " (not a value of its dtype)" : "");
        break;
      }
    }
    if (R.failed) break;
    st = feedback(c, &o);
    if (st != PLUGRL_OK) {
      R.status = st;
      fail("plugrl_feedback after infer %ld returned %s, want PLUGRL_OK (the server ends no connection after an "
           "action taken); errmsg: %s",
           i, status_name(st), plugrl_errmsg(c));
      break;
    }
  }
  extra("n=%ld taken=%ld refused=%ld reconnected=%ld taken_not_f4=%ld taken_multi_axis=%ld slowest_ms=%.1f sum=%u", n, ok,
        refused, reconnected, not_f32, multi_axis, slowest, sum);
  garble_end("actions taken", ok, refused, n, slowest);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* same_value: a and b are the same double, NaN included. */
static int same_value(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* garble-runner: garble's server through a runner (--n acts, 1000; 3 envs,
** H 2, D 3), which converts every action it takes into the caller's
** float64 buffer step by step. Each act returns PLUGRL_OK or
** PLUGRL_PROTOCOL_ERROR with a message (the next act reconnects by
** itself); each report PLUGRL_OK. The values must agree three ways: what
** plugrl_runner_chunk gives for each env's chunk right after an act that
** inferred (steps 0 and 1), what that act gave (step 0), and what the next
** act gives (step 1), each through the library's own conversion. */
static void case_garble_runner(const char *url) {
  plugrl_client *c;
  plugrl_runner *r = NULL;
  obsbuf o;
  long i, n = opt_n > 0 ? opt_n : 1000, ok = 0, refused = 0, chunks = 0;
  double act[3 * 3], chunk[3][2 * 3], rewards[3] = {0, 0, 0};
  uint8_t done[3] = {0, 0, 0};
  int step = 0; /* the step of its chunk the next act gives each env (they move together) */
  double slowest = 0, t0, took;
  if (!(c = garble_open(url, &o))) return;
  if (!expect("plugrl_runner_new", plugrl_runner_new(c, 3, &r), PLUGRL_OK, c)) {
    obs_free(&o);
    plugrl_close(c);
    return;
  }
  for (i = 0; i < n && !R.failed; i++) {
    t0 = now_ms();
    plugrl_status st = plugrl_runner_act(r, &o.obs, act, sizeof act, PLUGRL_DTYPE_F64);
    took = now_ms() - t0;
    if (took > slowest) slowest = took;
    if (st == PLUGRL_PROTOCOL_ERROR) {
      garble_refused("act", i, plugrl_runner_errmsg(r));
      refused++;
      step = 0; /* the chunks went with the connection */
      continue;
    }
    if (st != PLUGRL_OK) {
      R.status = st;
      fail("act %ld returned %s, want PLUGRL_OK or PLUGRL_PROTOCOL_ERROR; errmsg: %s", i, status_name(st),
           plugrl_runner_errmsg(r));
      break;
    }
    ok++;
    if (step == 0) {
      chunks++;
      for (int e = 0; e < 3 && !R.failed; e++) {
        int64_t steps = 0;
        st = plugrl_runner_chunk(r, e, chunk[e], sizeof chunk[e], PLUGRL_DTYPE_F64, &steps);
        if (st != PLUGRL_OK || steps != 2) {
          R.status = st;
          fail("act %ld: plugrl_runner_chunk(env %d) returned %s with %lld steps, want PLUGRL_OK and 2; errmsg: %s", i,
               e, status_name(st), (long long)steps, plugrl_runner_errmsg(r));
        }
      }
    }
    for (int e = 0; e < 3 && !R.failed; e++)
      for (int k = 0; k < 3; k++)
        if (!same_value(act[e * 3 + k], chunk[e][step * 3 + k])) {
          fail("act %ld: env %d value %d of step %d is %.17g, its chunk said %.17g", i, e, k, step,
               act[e * 3 + k], chunk[e][step * 3 + k]);
          break;
        }
    if (R.failed) break;
    st = plugrl_runner_report(r, &o.obs, rewards, done, done, NULL);
    if (st != PLUGRL_OK) {
      R.status = st;
      fail("report after act %ld returned %s, want PLUGRL_OK; errmsg: %s", i, status_name(st),
           plugrl_runner_errmsg(r));
      break;
    }
    step = (step + 1) % 2;
  }
  extra("n=%ld acts_ok=%ld refused=%ld chunks=%ld slowest_ms=%.1f", n, ok, refused, chunks, slowest);
  garble_end("chunks taken", chunks, refused, n, slowest);
  expect("plugrl_runner_free", plugrl_runner_free(r), PLUGRL_OK, NULL);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* garble-frames: N infers (--n, 600) of 3 envs against a server that
** frames each action as the infer's step_ids[0] asks
** (internal/hostile/garble_frames.go; H 2, D 500: 12 KB actions), writing
** it in pieces, half of them 1 to 8 bytes. Two infers in three ask for
** legal framing: 1 to 8 fragments, some empty, with pings and
** unsolicited pongs between them. Such an action must be taken whole:
** [2, 3, 500] "<f4", the request's env_ids, and element k equal to the
** nonce the infer sent in step_ids[1] plus k, so that a byte assembled
** out of place shows. Its feedback must return PLUGRL_OK, and the server
** ends the connection if the library sent it before answering the pings
** it read, or sent a pong that echoes none. The others ask for one
** fault of RFC 6455 before the last fragment is whole (a reserved bit, a masked
** frame, a reserved opcode, a ping over 125 bytes, a fragmented ping, a
** continuation first, a binary frame inside the message): each must be
** PLUGRL_PROTOCOL_ERROR at once with a message; the action as a text
** frame PLUGRL_SERVER_ERROR (SPEC 7.1). The next infer after each, and
** only that one, returns PLUGRL_RECONNECTED. */
static void case_garble_frames(const char *url) {
  static const char *const faults[] = {"legal", "rsv", "masked", "reserved-opcode", "long-ping", "fragmented-ping",
                                       "continuation-first", "new-message-inside", "text"};
  plugrl_client *c;
  obsbuf o;
  plugrl_action a;
  long i, n = opt_n > 0 ? opt_n : 600, ok = 0, refused = 0, reconnected = 0, by_mode[9] = {0};
  double slowest = 0, t0, took;
  unsigned rnd = 20261205;
  int was_refused = 0;
  enum { H = 2, ENVS = 3, D = 500 };
  if (!(c = garble_open(url, &o))) return;
  for (i = 0; i < n && !R.failed; i++) {
    rnd = rnd * 1103515245u + 12345u;
    unsigned m = (rnd >> 16) % 24;
    int mode = m < 16 ? 0 : 1 + (int)(m - 16);
    o.steps[0] = mode;
    o.steps[1] = i;
    t0 = now_ms();
    plugrl_status st = infer(c, &o, &a);
    took = now_ms() - t0;
    if (took > slowest) slowest = took;
    int after = garble_reconnect(i, faults[mode], st, c, &was_refused, &reconnected);
    if (after < 0) break;
    if (after > 0) continue;
    by_mode[mode]++;
    if (mode != 0) {
      plugrl_status want = mode == 8 ? PLUGRL_SERVER_ERROR : PLUGRL_PROTOCOL_ERROR;
      if (st != want) {
        R.status = st;
        fail("infer %ld (%s) returned %s, want %s; errmsg: %s", i, faults[mode], status_name(st), status_name(want),
             plugrl_errmsg(c));
        break;
      }
      garble_refused("infer", i, plugrl_errmsg(c));
      refused++;
      was_refused = 1;
      continue;
    }
    if (st != PLUGRL_OK) {
      R.status = st;
      fail("infer %ld (legal framing) returned %s, want PLUGRL_OK; errmsg: %s", i, status_name(st), plugrl_errmsg(c));
      break;
    }
    if (a.dtype != PLUGRL_DTYPE_F32 || a.ndim != 3 || a.horizon != H || a.num_envs != ENVS || a.step_size != D ||
        a.shape[2] != D || a.env_ids == NULL) {
      fail("infer %ld: an action of dtype %d, ndim %d, [%lld, %lld, %lld]; want <f4 [2, 3, 500]", i, (int)a.dtype,
           (int)a.ndim, (long long)a.horizon, (long long)a.num_envs, (long long)a.step_size);
      break;
    }
    for (int e = 0; e < ENVS; e++)
      if (a.env_ids[e] != o.idx[e]) fail("infer %ld: env_ids[%d] is %lld", i, e, (long long)a.env_ids[e]);
    const float *v = a.data;
    for (long k = 0; k < H * ENVS * D && !R.failed; k++)
      if (v[k] != (float)(i + k))
        fail("infer %ld: element %ld is %.1f, want %.1f (the nonce %ld plus %ld): a byte out of place", i, k, v[k],
             (float)(i + k), i, k);
    if (R.failed) break;
    ok++;
    st = feedback(c, &o);
    if (st != PLUGRL_OK) {
      R.status = st;
      fail("plugrl_feedback after infer %ld returned %s, want PLUGRL_OK; errmsg: %s", i, status_name(st),
           plugrl_errmsg(c));
      break;
    }
  }
  extra("n=%ld taken=%ld refused=%ld reconnected=%ld slowest_ms=%.1f rsv=%ld masked=%ld reserved_op=%ld "
        "long_ping=%ld fragmented_ping=%ld continuation_first=%ld new_message_inside=%ld text=%ld",
        n, ok, refused, reconnected, slowest, by_mode[1], by_mode[2], by_mode[3], by_mode[4], by_mode[5], by_mode[6],
        by_mode[7], by_mode[8]);
  garble_end("actions taken", ok, refused, n, slowest);
  for (int m = 1; m < 9 && !R.failed; m++)
    if (by_mode[m] == 0) fail("no infer asked for fault %s in %ld infers", faults[m], n);
  expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  obs_free(&o);
}

/* ------------------------------------------------------------------------ */
/* garble-metadata                                                          */
/* ------------------------------------------------------------------------ */

/* Every key garble-metadata's server may send (garble_metadata.go), one
** it adds at the top level only, one it never sends, and the empty key. */
static const char *const gm_keys[] = {"protocol_version", "server", "server_version", "algorithm", "policy",
                                      "action_horizon",   "action_dim", "features",     "x0",        "x1",
                                      "x2",               "x3",         "x4",           "x5",        "run",
                                      "absent",           ""};

typedef plugrl_status (*gm_copy_fn)(plugrl_client *, const char *, char *, size_t, size_t *, int *);

/* gm_copy runs the size protocol of a copying getter (plugrl_metadata_string
** or plugrl_metadata_json) for key: the length first (buf NULL, size 0),
** then a copy into exactly length + 1 bytes, then one into length bytes,
** which must be PLUGRL_BUFFER_TOO_SMALL with buf[0] NUL and the length
** set. Returns the value (malloc'd, NUL-terminated, *len its length; the
** caller frees it), or NULL: absent, or (json only, *no_json set) a
** value with no JSON form, for which the status must be
** PLUGRL_PROTOCOL_ERROR with *present 0 and a message. Each buffer is
** exactly as large as the call is told (plus, for the copy, one guard
** byte that must stay as it was), so a write past it is reported by asan
** or by the guard. */
static char *gm_copy(plugrl_client *c, gm_copy_fn fn, const char *what, const char *key, size_t *len,
                     int *no_json) {
  size_t length = 12345, got = 12345;
  int present = -1, again = -1;
  const char *shown = key ? key : "NULL";
  plugrl_status st = fn(c, key, NULL, 0, &length, &present);
  *len = 0;
  if (no_json) *no_json = 0;
  if (st == PLUGRL_PROTOCOL_ERROR && no_json) {
    const char *msg = plugrl_errmsg(c);
    if (present != 0 || strlen(msg) < 10)
      fail("%s(%s): PLUGRL_PROTOCOL_ERROR with present %d and message \"%s\"; want 0 and a message that says why",
           what, shown, present, msg);
    *no_json = 1;
    return NULL;
  }
  if (st != PLUGRL_OK || (present != 0 && present != 1)) {
    fail("%s(%s, NULL, 0) returned %s with present %d; want PLUGRL_OK and 0 or 1; errmsg: %s", what, shown,
         status_name(st), present, plugrl_errmsg(c));
    return NULL;
  }
  if (!present) {
    if (length != 0) fail("%s(%s): absent with length %zu, want 0", what, shown, length);
    return NULL;
  }
  if (length > (64u << 20)) {
    fail("%s(%s): a length of %zu", what, shown, length);
    return NULL;
  }
  char *buf = malloc(length + 2);
  if (buf == NULL) {
    fail("out of memory for %zu bytes", length + 2);
    return NULL;
  }
  memset(buf, 0xa5, length + 2);
  st = fn(c, key, buf, length + 1, &got, &again);
  if (st != PLUGRL_OK || again != 1 || got != length || buf[length] != '\0' || (unsigned char)buf[length + 1] != 0xa5) {
    fail("%s(%s) into %zu bytes returned %s, present %d, length %zu (asked: %zu), NUL %s, guard byte %s", what,
         shown, length + 1, status_name(st), again, got, length, buf[length] == '\0' ? "written" : "missing",
         (unsigned char)buf[length + 1] == 0xa5 ? "kept" : "overwritten");
    free(buf);
    return NULL;
  }
  if (length > 0) {
    char *small = malloc(length);
    if (small == NULL) {
      fail("out of memory for %zu bytes", length);
      free(buf);
      return NULL;
    }
    memset(small, 0xa5, length);
    got = 12345;
    again = -1;
    st = fn(c, key, small, length, &got, &again);
    if (st != PLUGRL_BUFFER_TOO_SMALL || got != length || again != 1 || small[0] != '\0')
      fail("%s(%s) into %zu bytes, one short, returned %s, present %d, length %zu, buf[0] %s; want "
           "PLUGRL_BUFFER_TOO_SMALL, 1, %zu, NUL",
           what, shown, length, status_name(st), again, got, small[0] == '\0' ? "NUL" : "not NUL", length);
    free(small);
  }
  *len = length;
  return buf;
}

/* gm_number reads js as one JSON number token: 1 and *x if it is one. */
static int gm_number(const char *js, double *x) {
  char *end;
  if (!(js[0] == '-' || (js[0] >= '0' && js[0] <= '9'))) return 0;
  *x = strtod(js, &end);
  return *end == '\0';
}

/* Counts over a garble-metadata run. */
static struct {
  long keys, ints, strings, json, no_json, whole_no_json, features;
} GM;

/* gm_read reads every getter for every key of an open client and checks
** them against one another: plugrl_metadata_int present when the key's
** JSON is a number that is an integer below 2^53 (where a double says
** which), and when present with the JSON's number (a zero-dimensional or
** one-element ndarray is an integer too, with JSON an object: not
** checked); a string
** present only when its JSON is a string; each feature present only when
** the features' JSON names it; the whole map's JSON an object that names
** every key present, and there only when every key has JSON. Sets *h and
** *d to action_horizon and action_dim, and *hp and *dp to whether each is
** present. */
static void gm_read(plugrl_client *c, long i, int64_t *h, int64_t *d, int *hp, int *dp) {
  size_t len, wlen;
  int no_json, whole_no_json;
  int any_no_json = 0;
  char *whole = gm_copy(c, plugrl_metadata_json, "plugrl_metadata_json", NULL, &wlen, &whole_no_json);
  *h = *d = 0;
  *hp = *dp = 0;
  if (R.failed) return;
  if (whole == NULL && !whole_no_json) {
    fail("open %ld: plugrl_metadata_json(NULL) says the metadata map is absent", i);
    return;
  }
  if (whole != NULL && (wlen < 2 || whole[0] != '{' || whole[wlen - 1] != '}' || strlen(whole) != wlen))
    fail("open %ld: the metadata map's JSON is not one object of %zu bytes: %.200s", i, wlen, whole);
  GM.whole_no_json += whole_no_json;
  for (size_t k = 0; k < sizeof gm_keys / sizeof gm_keys[0] && !R.failed; k++) {
    const char *key = gm_keys[k];
    int64_t v = 777;
    int ip = -1;
    double x;
    if (!expect("plugrl_metadata_int", plugrl_metadata_int(c, key, &v, &ip), PLUGRL_OK, c)) break;
    if (ip != 0 && ip != 1) fail("open %ld: plugrl_metadata_int(%s) sets present to %d", i, key, ip);
    if (!ip && v != 0) fail("open %ld: plugrl_metadata_int(%s) absent with value %lld, want 0", i, key, (long long)v);
    char *s = gm_copy(c, plugrl_metadata_string, "plugrl_metadata_string", key, &len, NULL);
    char *js = gm_copy(c, plugrl_metadata_json, "plugrl_metadata_json", key, &len, &no_json);
    if (R.failed) {
      free(s);
      free(js);
      break;
    }
    GM.keys += js != NULL || no_json;
    GM.ints += ip;
    GM.strings += s != NULL;
    GM.json += js != NULL;
    GM.no_json += no_json;
    any_no_json |= no_json;
    if (js != NULL && strlen(js) != len) fail("open %ld: the JSON of %s holds a NUL: %.200s", i, key, js);
    if ((ip || s) && !js) fail("open %ld: %s reads as %s but has no JSON", i, key, ip ? "an integer" : "a string");
    if (s && js && js[0] != '"') fail("open %ld: %s reads as a string, its JSON is %.200s", i, key, js);
    if (js && gm_number(js, &x)) {
      int integer = x == floor(x) && fabs(x) < 9007199254740992.0;
      if ((ip && (double)v != x) || (!ip && integer))
        fail("open %ld: %s is %s in JSON, plugrl_metadata_int says %s %lld", i, key, js, ip ? "present," : "absent",
             (long long)v);
    }
    if (whole != NULL && js != NULL) {
      /* the key as JSON spells it: these keys need no escapes */
      char spelled[64];
      snprintf(spelled, sizeof spelled, "\"%s\":", key);
      if (strstr(whole, spelled) == NULL) fail("open %ld: the map's JSON does not name key %s: %.300s", i, key, whole);
    }
    if (strcmp(key, "features") == 0) {
      static const char *const names[] = {"f-a", "f-b", "reuse-feedback-obs", "f-1023", "", "f-1024"};
      for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        int fp = -1;
        char quoted[64];
        if (!expect("plugrl_metadata_has_feature", plugrl_metadata_has_feature(c, names[f], &fp), PLUGRL_OK, c)) break;
        snprintf(quoted, sizeof quoted, "\"%s\"", names[f]);
        GM.features += fp == 1;
        if (fp != 0 && (fp != 1 || js == NULL || js[0] != '[' || strstr(js, quoted) == NULL))
          fail("open %ld: has_feature(%s) is %d, the features' JSON %.200s", i, names[f], fp, js ? js : "(none)");
      }
    }
    if (strcmp(key, "action_horizon") == 0) *h = v, *hp = ip;
    if (strcmp(key, "action_dim") == 0) *d = v, *dp = ip;
    free(s);
    free(js);
  }
  if (!R.failed && whole != NULL && any_no_json)
    fail("open %ld: a key has no JSON, but the whole map has: %.300s", i, whole);
  free(whole);
}

/* garble-metadata: N opens (--n, 300) against a server whose metadata is
** drawn at random for each connection, much of it odd and some of it no
** metadata message at all (internal/hostile/garble_metadata.go), its
** actions honest: [2, n, 3]. Each open returns at once with PLUGRL_OK or
** with PLUGRL_PROTOCOL_ERROR and a message. On each client opened every
** getter reads every key, with its size protocol, and they must agree
** (gm_read); under the sanitizers each byte given is checked as
** written and each buffer as not overrun. Then one infer of 2 envs: the
** action must be taken ([2, 2, 3]) unless the action_horizon or
** action_dim the getters read disagrees with it, and then refused with a
** protocol error that names metadata: what the caller reads is what the
** library acts on. Every outcome must occur. */
static void case_garble_metadata(const char *url) {
  long i, n = opt_n > 0 ? opt_n : 300, opened = 0, refused = 0, taken = 0, mismatched = 0;
  double slowest = 0, t0, took;
  obsbuf o;
  R.deadline_ms = -1;
  if (!obs_init(&o, 2, 1)) {
    obs_free(&o);
    return;
  }
  for (i = 0; i < n && !R.failed; i++) {
    plugrl_options opt;
    plugrl_client *c = NULL;
    plugrl_action a;
    int64_t h, d;
    int hp, dp;
    options(&opt, url);
    opt.metadata_timeout_ms = 5000;
    opt.receive_timeout_ms = 5000;
    t0 = now_ms();
    plugrl_status st = plugrl_open(&opt, &c);
    took = now_ms() - t0;
    if (took > slowest) slowest = took;
    if (c == NULL) {
      fail("open %ld: plugrl_open returned %s and no handle", i, status_name(st));
      break;
    }
    if (st == PLUGRL_PROTOCOL_ERROR) {
      garble_refused("open", i, plugrl_errmsg(c));
      refused++;
      expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
      continue;
    }
    if (st != PLUGRL_OK) {
      R.status = st;
      fail("open %ld returned %s, want PLUGRL_OK or PLUGRL_PROTOCOL_ERROR; errmsg: %s", i, status_name(st),
           plugrl_errmsg(c));
      plugrl_close(c);
      break;
    }
    opened++;
    gm_read(c, i, &h, &d, &hp, &dp);
    if (!R.failed) {
      int refuse = (hp && h != 2) || (dp && d != 3);
      st = infer(c, &o, &a);
      if (refuse) {
        const char *msg = plugrl_errmsg(c);
        if (st != PLUGRL_PROTOCOL_ERROR || strstr(msg, "metadata") == NULL)
          fail("open %ld: metadata says action_horizon %lld (present %d), action_dim %lld (present %d); an action [2, "
               "2, 3] returned %s (%s), want PLUGRL_PROTOCOL_ERROR naming metadata",
               i, (long long)h, hp, (long long)d, dp, status_name(st), msg);
        mismatched++;
      } else if (st != PLUGRL_OK || a.horizon != 2 || a.num_envs != 2 || a.step_size != 3) {
        fail("open %ld: metadata says action_horizon %lld (present %d), action_dim %lld (present %d); an action [2, "
             "2, 3] returned %s (%s), horizon %lld, envs %lld, step %lld; want it taken",
             i, (long long)h, hp, (long long)d, dp, status_name(st), plugrl_errmsg(c), (long long)a.horizon,
             (long long)a.num_envs, (long long)a.step_size);
      } else {
        taken++;
        expect("plugrl_feedback", feedback(c, &o), PLUGRL_OK, c);
      }
    }
    expect("plugrl_close", plugrl_close(c), PLUGRL_OK, NULL);
  }
  extra("n=%ld opened=%ld refused=%ld actions_taken=%ld refused_by_metadata=%ld keys=%ld ints=%ld strings=%ld "
        "json=%ld no_json=%ld whole_no_json=%ld features=%ld slowest_ms=%.1f",
        n, opened, refused, taken, mismatched, GM.keys, GM.ints, GM.strings, GM.json, GM.no_json, GM.whole_no_json,
        GM.features, slowest);
  R.took_ms = slowest;
  if (!R.failed && (opened == 0 || refused == 0 || taken == 0 || mismatched == 0 || GM.no_json == 0))
    fail("%ld opened, %ld refused, %ld actions taken, %ld refused by metadata, %ld values with no JSON in %ld opens: "
         "want some of each",
         opened, refused, taken, mismatched, GM.no_json, n);
  if (slowest > 1000) fail("an open took %.1f ms; each is answered at once", slowest);
  obs_free(&o);
}

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

static const struct kase {
  const char *name;
  const char *server; /* scenario and flags for plugrl-hostile */
  void (*run)(const char *url);
  int unlisted; /* not listed by --list (which lists what hostile.sh runs); --list-all lists it */
} cases[] = {
    {"huge-length", "huge-length", case_huge_length, 0},
    {"huge-length-nocap", "huge-length", case_huge_length_nocap, 0},
    {"endless-header", "endless-header", case_endless_header, 0},
    {"zero-dim-action", "zero-dim-action", case_zero_dim_action, 0},
    {"double-action", "double-action", case_double_action, 0},
    {"big-action-one-env", "big-action-one-env --action-bytes 8388608", case_big_action_one_env, 0},
    {"rlimit", "big-action-one-env --action-bytes 536870912", case_rlimit, 0},
    {"no-metadata", "no-metadata", case_no_metadata, 0},
    {"interrupt-open", "no-metadata", case_interrupt_open, 0},
    {"interrupt-all", "no-metadata", case_interrupt_all, 0},
    {"interrupt-open-early", "no-metadata", case_interrupt_open_early, 0},
    {"slow-handshake", "slow-handshake", case_slow_handshake, 0},
    {"receive-short", "slow-action --action-delay 60s", case_receive_short, 0},
    {"receive-long", "slow-action --action-delay 60s", case_receive_long, 0},
    {"stall-mid-frame", "stall-mid-frame", case_stall_mid_frame, 0},
    {"stopped", "slow-action --action-delay 800ms --slow-every 2", case_stopped, 0},
    {"no-read", "no-read", case_no_read, 0},
    {"ping-flood", "ping-flood", case_ping_flood, 0},
    {"close-no-reply", "close-no-reply", case_close_no_reply, 0},
    {"interrupt-close", "close-no-reply", case_interrupt_close, 0},
    {"interrupt-latency", "slow-action --action-delay 60s", case_interrupt_latency, 0},
    {"interrupt-signal", "slow-action --action-delay 60s", case_interrupt_signal, 0},
    {"tokens", "normal", case_tokens, 0},
    {"no-descriptors", "normal", case_no_descriptors, 0},
    {"fork", "normal", case_fork, 0},
    {"errmsg-threads", "normal", case_errmsg_threads, 0},
    {"idle-cpu", "normal", case_idle_cpu, 0},
    {"interrupt-once", "slow-action --action-delay 60s", case_interrupt_once, 0},
    {"garble", "garble --h 2 --d 3 --seed 1", case_garble, 0},
    {"garble-runner", "garble --h 2 --d 3 --seed 2", case_garble_runner, 0},
    {"garble-metadata", "garble-metadata --h 2 --d 3 --seed 3", case_garble_metadata, 0},
    {"garble-frames", "garble-frames --h 2 --d 500 --seed 4", case_garble_frames, 0},
    {"rate-limited", "rate-limited", case_rate_limited, 0},
#ifdef __linux__
    {"vanish", "vanish --vanish-after 2", case_vanish, 0},
    {"vanish-unacked", "vanish-unacked --vanish-after 2", case_vanish, 0},
    {"vanish-idle", "vanish-unacked --vanish-after 2", case_vanish_idle, 0},
#endif
    /* tests/names.sh: a namespace of their own (see "A server's name") */
    {"dead-address", "slow-action --action-delay 60s --slow-every 2", case_dead_address, 1},
    {"silent-dns", "slow-action --action-delay 60s --slow-every 2", case_silent_dns, 1},
    /* tests/server_late.sh: the server starts a second after the case */
    {"server-late", "normal", case_server_late, 1},
    /* tests/keepalive.sh: its server is tests/keepalive_server.py */
    {"keepalive", "normal", case_keepalive, 1},
    /* tests/server_late.sh: over wss://, a certificate valid from 1.5 s on */
    {"clock-behind", "normal --tls-valid-in 1500ms", case_clock_behind, 1},
};

static int usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s --list | --list-all\n"
          "       %s --case NAME [--n N] [--obs-bytes B] ws://127.0.0.1:PORT\n",
          argv0, argv0);
  return 2;
}

int main(int argc, char **argv) {
  const char *name = NULL, *url = NULL;
  const struct kase *k = NULL;
  size_t i;
  int a;
  const char *limit = getenv("HOSTILE_OVERSHOOT_LIMIT_MS");
  if (limit != NULL) {
    char *end = NULL;
    double v = strtod(limit, &end);
    if (end == limit || *end != 0 || !(v > 0)) {
      fprintf(stderr, "hostile: HOSTILE_OVERSHOOT_LIMIT_MS=%s: want a number of ms above 0\n", limit);
      return 2;
    }
    overshoot_limit_ms = v;
    at_once_ms = v;
  }
  limit = getenv("HOSTILE_INTERRUPT_LIMIT_US");
  if (limit != NULL) {
    char *end = NULL;
    double v = strtod(limit, &end);
    if (end == limit || *end != 0 || !(v > 0)) {
      fprintf(stderr, "hostile: HOSTILE_INTERRUPT_LIMIT_US=%s: want a number of us above 0\n", limit);
      return 2;
    }
    interrupt_limit_us = v;
  }
  for (a = 1; a < argc; a++) {
    if (strcmp(argv[a], "--list") == 0 || strcmp(argv[a], "--list-all") == 0) {
      for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!cases[i].unlisted || strcmp(argv[a], "--list-all") == 0) printf("%s %s\n", cases[i].name, cases[i].server);
      return 0;
    } else if (strcmp(argv[a], "--case") == 0 && a + 1 < argc) {
      name = argv[++a];
    } else if (strcmp(argv[a], "--n") == 0 && a + 1 < argc) {
      opt_n = strtol(argv[++a], NULL, 10);
    } else if (strcmp(argv[a], "--obs-bytes") == 0 && a + 1 < argc) {
      opt_obs_bytes = strtol(argv[++a], NULL, 10);
    } else if (argv[a][0] != '-' && url == NULL) {
      url = argv[a];
    } else {
      return usage(argv[0]);
    }
  }
  if (name == NULL || url == NULL) return usage(argv[0]);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (strcmp(cases[i].name, name) == 0) k = &cases[i];
  if (k == NULL) {
    fprintf(stderr, "%s: unknown case %s (--list lists them)\n", argv[0], name);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  R.name = k->name;
  k->run(url);
  print_result();
  return R.failed ? 1 : 0;
}
