/*
** cancel.c - threads that pthread_cancel stops while they call in, through
** the real library.
**
**   cancel URL   (a `plugrl-hostile --scenario slow-action --action-delay 30s`)
**
** A supervisor that stops a worker thread with pthread_cancel (legacy
** controllers, some plugin hosts) may catch it inside a call. A call is
** never a cancellation point (plugrl.h, THREADS): the cancel acts at the
** thread's first cancellation point after the call returns, and the
** library is left as after any call. Each case, on its own thread:
**
**   - cancelled inside a log callback of plugrl_open (the callback cancels
**     its own thread, then sleeps: a cancellation point): the sleep
**     returns, the open returns PLUGRL_OK, and the thread is cancelled
**     after it; another thread then closes the client it opened. Before,
**     the thread was unwound out of the callback through the Go frames
**     that called it, and the open never returned (its handle stayed
**     busy, the collection's gate counted it in);
**   - cancelled while it waits in plugrl_infer, deferred and asynchronous
**     (PTHREAD_CANCEL_ASYNCHRONOUS): the infer goes on waiting until
**     plugrl_interrupt ends it and returns PLUGRL_INTERRUPTED (an
**     asynchronous cancel acts as the call returns, so the caller never
**     sees the status), and the thread is cancelled after it; another
**     thread closes the client. Before, the asynchronous cancel unwound
**     the thread out of the middle of the call, and the close waited for
**     ever. And pthread_join gives PTHREAD_CANCELED for it: the workers
**     run on stacks of their own, fresh, where before glibc's cache
**     handed them a cancelled thread's descriptor, whose exit value hid
**     that the library's way of acting on the cancel left it unset
**     (exports.c, restore_cancellation);
**   - cancelled asynchronously while it makes calls back to back
**     (plugrl_errmsg(NULL), which enters Go; plugrl_version_number, used
**     here before, no longer does), on a new thread each time, BETWEEN_TRIALS
**     times, each cancel at another moment: the thread exits with
**     PTHREAD_CANCELED within 10 s. Before, a cancel sent as a call began
**     could act inside it (glibc before 2.41 acts on the SIGCANCEL of an
**     asynchronous cancel that arrives after cancellation was turned off):
**     the thread was unwound out of Go, and its exit spun for ever in the
**     runtime's dropm (helpers.c, plugrl__cancellation_off);
**   - a log callback that turns cancellation back on, asynchronous, and
**     leaves it so: the next callback of the same call (an open that
**     waits for an address that refuses it) finds it off and deferred
**     again. Before, the rest of the call ran cancellable, in Go.
**
** Exit status 0 when every check passed, 1 otherwise; a hang is ended by
** alarm().
*/
#define _GNU_SOURCE /* usleep, pthread_clockjoin_np */
#include <plugrl.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const char *url;
static char ledger_path[256];

/* What a worker leaves for main, written with atomics (never a
** cancellation point). */
static plugrl_client *opened;
static int callback_slept; /* the callback's sleep returned */
static int call_returned;  /* the call returned, with status + 1 */
static int started;        /* a calls_worker is asynchronously cancellable */

#define LOAD(v) __atomic_load_n(&(v), __ATOMIC_SEQ_CST)
#define STORE(v, x) __atomic_store_n(&(v), (x), __ATOMIC_SEQ_CST)

static void cancel_in_callback(void *user, int level, const char *message) {
  (void)user;
  (void)level;
  (void)message;
  if (LOAD(callback_slept)) {
    return;
  }
  pthread_cancel(pthread_self());
  usleep(1000); /* a cancellation point: not one while the library runs */
  STORE(callback_slept, 1);
}

/* A worker that opens a client whose first log message (the ledger's) is
** delivered to cancel_in_callback. */
static void *open_worker(void *arg) {
  (void)arg;
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = url;
  o.log = cancel_in_callback;
  o.ledger_path = ledger_path;
  plugrl_client *c = NULL;
  plugrl_status s = plugrl_open(&o, &c);
  STORE(call_returned, (int)s + 1);
  STORE(opened, c);
  for (;;) {
    usleep(1000); /* the cancel acts here */
  }
  return NULL;
}

static void *infer_worker(void *arg) {
  int async = *(int *)arg;
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = url;
  plugrl_client *c = NULL;
  plugrl_status s = plugrl_open(&o, &c);
  STORE(opened, c);
  if (s != PLUGRL_OK) {
    STORE(call_returned, (int)s + 1);
    return NULL;
  }
  double state[2] = {1, 2};
  int64_t shape[2] = {1, 2}, env = 0, step = 0;
  plugrl_array arr = {"s", state, PLUGRL_DTYPE_F64, 2, shape};
  plugrl_observation obs;
  memset(&obs, 0, sizeof obs);
  obs.states = &arr;
  obs.num_states = 1;
  plugrl_action a;
  if (async) {
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  }
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  STORE(call_returned, (int)s + 1);
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
  for (;;) {
    usleep(1000); /* the cancel acts here */
  }
  return NULL;
}

/* start_on_fresh_stack starts fn(arg) on a stack mapped for it alone,
** zeroed, which *stack receives (unmapped with munmap(*stack,
** FRESH_STACK_SIZE) after the join). glibc keeps a thread's descriptor at
** its stack's top and reuses a cached stack's with the exit value the last
** thread left there: a PTHREAD_CANCELED from an earlier case would pass a
** check of the value by chance. */
#define FRESH_STACK_SIZE (8u << 20)
static pthread_t start_on_fresh_stack(void *(*fn)(void *), void *arg, void **stack) {
  *stack = mmap(NULL, FRESH_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (*stack == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, *stack, FRESH_STACK_SIZE);
  pthread_t t;
  int err = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    fprintf(stderr, "pthread_create: %s\n", strerror(err));
    exit(1);
  }
  return t;
}

static void reset(void) {
  STORE(opened, NULL);
  STORE(callback_slept, 0);
  STORE(call_returned, 0);
  STORE(started, 0);
}

static void test_cancel_in_callback(void) {
  reset();
  void *stack;
  pthread_t t = start_on_fresh_stack(open_worker, NULL, &stack);
  void *ret = NULL;
  int joined = pthread_join(t, &ret);
  munmap(stack, FRESH_STACK_SIZE);
  CHECK(joined == 0 && ret == PTHREAD_CANCELED,
        "the worker cancelled in a callback was not cancelled: pthread_join returned %d (%s), the thread's value %p",
        joined, strerror(joined), ret);
  CHECK(LOAD(callback_slept), "the cancel acted inside the callback, while the library ran");
  int st = LOAD(call_returned) - 1;
  CHECK(st == PLUGRL_OK, "open: %s, want PLUGRL_OK", st < 0 ? "never returned" : plugrl_status_str(st));
  plugrl_client *c = LOAD(opened);
  plugrl_status s = plugrl_close(c);
  CHECK(s == PLUGRL_OK, "close of the cancelled worker's client: %s", plugrl_status_str(s));
  unlink(ledger_path);
}

static void test_cancel_in_infer(int async) {
  reset();
  void *stack;
  pthread_t t = start_on_fresh_stack(infer_worker, &async, &stack);
  while (LOAD(opened) == NULL && LOAD(call_returned) == 0) {
    usleep(1000);
  }
  usleep(200 * 1000); /* the worker waits in infer: the server answers in 30 s */
  pthread_cancel(t);
  usleep(100 * 1000);
  CHECK(LOAD(call_returned) == 0, "%s cancel: the infer returned %s before plugrl_interrupt", async ? "an asynchronous" : "a deferred",
        plugrl_status_str(LOAD(call_returned) - 1));
  plugrl_client *c = LOAD(opened);
  plugrl_interrupt(c);
  void *ret = NULL;
  int joined = pthread_join(t, &ret);
  munmap(stack, FRESH_STACK_SIZE);
  const char *how = async ? "asynchronous" : "deferred";
  CHECK(joined == 0 && ret == PTHREAD_CANCELED,
        "%s: the worker was not cancelled: pthread_join returned %d (%s), the thread's value %p (the infer's status + 1: %d)",
        how, joined, strerror(joined), ret, LOAD(call_returned));
  /* An asynchronous cancel acts as the call turns cancellation back on,
  ** on its way out: the status never reaches the caller. */
  int st = LOAD(call_returned) - 1;
  CHECK(st == PLUGRL_INTERRUPTED || (async && st < 0), "%s: infer: %s, want PLUGRL_INTERRUPTED", how,
        st < 0 ? "never returned" : plugrl_status_str(st));
  plugrl_status s = plugrl_close(c);
  CHECK(s == PLUGRL_OK, "%s: close of the cancelled worker's client: %s", how, plugrl_status_str(s));
}

/* A worker that makes calls back to back, asynchronously cancellable
** between them. Against the library before plugrl__cancellation_off, 11 of 12
** runs of 1000 trials left a worker stuck (first at trial 0 to 466); one
** found none. 1000 trials take about 1 s. */
static void *calls_worker(void *arg) {
  (void)arg;
  /* plugrl_errmsg enters Go (the pure helpers, plugrl_version_number
  ** among them, are C only); the thread's first call binds it. */
  (void)plugrl_errmsg(NULL);
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  STORE(started, 1);
  for (;;) {
    (void)plugrl_errmsg(NULL);
  }
  return NULL;
}

#define BETWEEN_TRIALS 1000
static void test_cancel_between_calls(void) {
  int wrong = 0, first_wrong = -1; /* workers whose value was not PTHREAD_CANCELED */
  void *first_value = NULL;
  for (int i = 0; i < BETWEEN_TRIALS; i++) {
    reset();
    void *stack;
    pthread_t t = start_on_fresh_stack(calls_worker, NULL, &stack);
    while (!LOAD(started)) {
      usleep(100);
    }
    usleep((useconds_t)(i * 37 % 300));
    pthread_cancel(t);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline); /* a step of the wall clock cannot end it */
    deadline.tv_sec += 10;
    void *ret = NULL;
    int joined = pthread_clockjoin_np(t, &ret, CLOCK_MONOTONIC, &deadline);
    if (joined != 0) {
      /* The library is left stuck (the worker's gate count, its
      ** goroutine): the other cases would wait for ever. */
      fprintf(stderr,
              "cancel: FAIL: back-to-back calls, trial %d: the cancelled worker did not exit in 10 s "
              "(pthread_clockjoin_np: %s): the cancel acted inside a call\n",
              i, strerror(joined));
      exit(1);
    }
    munmap(stack, FRESH_STACK_SIZE);
    if (ret != PTHREAD_CANCELED && wrong++ == 0) {
      first_wrong = i;
      first_value = ret;
    }
  }
  CHECK(wrong == 0, "back-to-back calls: %d of %d workers exited with a value other than PTHREAD_CANCELED (the first at trial %d: %p)",
        wrong, BETWEEN_TRIALS, first_wrong, first_value);
}

/* What the log callbacks of test_callback_leaves_cancellation saw. */
static int log_calls;
static int seen_state = -1, seen_type = -1; /* at the second callback */

static void enable_in_callback(void *user, int level, const char *message) {
  (void)user;
  (void)level;
  (void)message;
  int n = __atomic_add_fetch(&log_calls, 1, __ATOMIC_SEQ_CST);
  if (n == 1) {
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  } else if (n == 2) {
    int state, type;
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
    STORE(seen_state, state);
    STORE(seen_type, type);
  }
}

static void test_callback_leaves_cancellation(void) {
  /* An address that refuses connections: a socket bound, never listening. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    perror("cancel: a refusing address");
    exit(1);
  }
  char refused[64];
  snprintf(refused, sizeof refused, "ws://127.0.0.1:%d", ntohs(sa.sin_port));
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = refused;
  o.log = enable_in_callback;
  o.open_wait_ms = 300;        /* attempts, each failure logged, */
  o.reconnect_backoff_ms = 10; /* 10 ms apart and more */
  o.max_backoff_ms = 20;
  plugrl_client *c = NULL;
  plugrl_status s = plugrl_open(&o, &c);
  close(fd);
  CHECK(s != PLUGRL_OK, "open of a refusing address: PLUGRL_OK");
  plugrl_close(c);
  CHECK(LOAD(log_calls) >= 2, "open of a refusing address: %d log callbacks, want 2 or more (%s)", LOAD(log_calls),
        plugrl_status_str(s));
  CHECK(LOAD(seen_state) == PTHREAD_CANCEL_DISABLE && LOAD(seen_type) == PTHREAD_CANCEL_DEFERRED,
        "a callback's change of cancellation outlived it: the next callback found the state %s, the type %s",
        LOAD(seen_state) == PTHREAD_CANCEL_DISABLE ? "disabled" : "enabled",
        LOAD(seen_type) == PTHREAD_CANCEL_DEFERRED ? "deferred" : "asynchronous");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  url = argv[1];
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(ledger_path, sizeof ledger_path, "%s/plugrl-cancel-%d.ledger", dir, (int)getpid());
  alarm(50); /* a close that waits for ever ends the test, before CTest's 60 s */
  /* First: after the other cases (a client opened and closed) the race it
  ** looks for came up far less often here (in none of 3 runs of 200
  ** trials, where first it came up in 4 of 6). */
  test_cancel_between_calls();
  test_cancel_in_callback();
  test_cancel_in_infer(0);
  test_cancel_in_infer(1);
  test_callback_leaves_cancellation();
  if (failures) {
    fprintf(stderr, "cancel: %d checks failed\n", failures);
    return 1;
  }
  printf("cancel: threads cancelled in a callback and in a waiting infer (deferred and asynchronous) were cancelled "
         "after their calls returned, and their clients closed; %d threads cancelled asynchronously while making calls "
         "back to back exited with PTHREAD_CANCELED; a callback's change of cancellation did not outlive it\n",
         BETWEEN_TRIALS);
  return 0;
}
