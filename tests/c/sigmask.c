/*
** A host that takes its signals in a thread of its own: main blocks them
** before it starts any thread, and one thread takes them with sigwait (a
** signalfd works the same way), so that a Ctrl-C stops the robot in order.
** The library's threads must leave those signals to it: the kernel hands a
** signal sent to the process to any thread that does not block it, and
** before the fix the Go runtime's threads did not, so the first SIGINT
** ended the process (its default action) instead of reaching sigwait.
** Run as: sigmask URL (tests/run_with_server.sh passes it), against
** `plugrl serve --action-dim 3 --horizon 4`.
**
** Two threads step runners (one client with a ledger, whose writer is one
** more thread of the library's) while main sends the process SIGNALS
** signals, each one only after sigwait took the one before. Then every
** thread of the process, the library's included, must block every signal
** the host blocked, but for the waiting thread (sigwait unblocks them
** while it waits) and what Go needs unblocked (SIGURG, the faults, SIGCHLD,
** SIGPROF and signal 34, glibc's SIGRTMIN; see capi/helpers.c).
*/
#define _GNU_SOURCE
#include <plugrl.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "probe_runner.h"

enum { CALLERS = 2, SIGNALS = 200 };

/* The last two are SIGRTMIN + 1 and SIGRTMAX, set in main (glibc's are no
** constants): a real-time signal, as a POSIX timer sends, but not SIGRTMIN
** itself, which Go unblocks (plugrl.h). */
static int host_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, 0, 0};
enum { HOST_SIGNALS = sizeof host_signals / sizeof host_signals[0] };

static sigset_t host_set;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int taken;           /* signals sigwait took */
static int last_taken;      /* the last of them */
static pid_t waiter_tid;    /* the sigwait thread */
static int stop;            /* the callers stop stepping */

static void *waiter(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  waiter_tid = (pid_t)syscall(SYS_gettid);
  pthread_mutex_unlock(&mu);
  for (;;) {
    int sig = 0;
    if (sigwait(&host_set, &sig) != 0) {
      continue;
    }
    pthread_mutex_lock(&mu);
    taken++;
    last_taken = sig;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

struct caller {
  const char *url;
  const char *ledger;
  int steps;
  char why[512];
};

static void *step(void *arg) {
  struct caller *c = arg;
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = c->url;
  opt.ledger_path = c->ledger;
  opt.receive_timeout_ms = 20000;
  probe_runner p;
  plugrl_status s = probe_open(&p, &opt, "sigmask", 0);
  for (;;) {
    pthread_mutex_lock(&mu);
    int go_on = s == PLUGRL_OK && !stop;
    pthread_mutex_unlock(&mu);
    if (!go_on) {
      break;
    }
    s = probe_act(&p);
    if (s == PLUGRL_OK) {
      s = probe_report(&p);
      pthread_mutex_lock(&mu);
      c->steps++;
      pthread_cond_broadcast(&cv);
      pthread_mutex_unlock(&mu);
    }
  }
  if (s != PLUGRL_OK) {
    pthread_mutex_lock(&mu);
    snprintf(c->why, sizeof c->why, "%s: %s", plugrl_status_str(s), probe_errmsg(&p));
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
  probe_close(&p);
  return NULL;
}

/* check_masks reads every thread's blocked signals (SigBlk in
** /proc/self/task/TID/status, a hex mask with bit n-1 for signal n) and
** reports each thread but the waiter that lets one of the host's through.
** Returns how many threads it read, or -1 with why filled. */
static int check_masks(char *why, size_t why_len) {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) {
    snprintf(why, why_len, "opendir /proc/self/task: %s", strerror(errno));
    return -1;
  }
  int threads = 0, bad = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL && !bad) {
    if (e->d_name[0] == '.') {
      continue;
    }
    pid_t tid = (pid_t)atoi(e->d_name);
    char path[64], line[256], name[64] = "?";
    unsigned long long blocked = 0;
    int have = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) {
      continue; /* exited meanwhile */
    }
    while (fgets(line, sizeof line, f)) {
      if (sscanf(line, "Name: %63s", name) == 1) {
        continue;
      }
      if (sscanf(line, "SigBlk: %llx", &blocked) == 1) {
        have = 1;
      }
    }
    fclose(f);
    if (!have || tid == waiter_tid) {
      continue;
    }
    threads++;
    for (int i = 0; i < HOST_SIGNALS; i++) {
      if (!(blocked & (1ull << (host_signals[i] - 1)))) {
        snprintf(why, why_len, "thread %d (%s) lets %s through (SigBlk %016llx): a signal sent to the process can land there instead of in sigwait",
                 (int)tid, name, strsignal(host_signals[i]), blocked);
        bad = 1;
        break;
      }
    }
  }
  closedir(dir);
  return bad ? -1 : threads;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ws://HOST:PORT\n", argv[0]);
    return 2;
  }
  host_signals[HOST_SIGNALS - 2] = SIGRTMIN + 1;
  host_signals[HOST_SIGNALS - 1] = SIGRTMAX;
  sigemptyset(&host_set);
  for (int i = 0; i < HOST_SIGNALS; i++) {
    sigaddset(&host_set, host_signals[i]);
  }
  /* Before any thread: they all inherit it. */
  if (pthread_sigmask(SIG_BLOCK, &host_set, NULL) != 0) {
    fprintf(stderr, "sigmask: pthread_sigmask failed\n");
    return 1;
  }
  pthread_t w;
  if (pthread_create(&w, NULL, waiter, NULL) != 0) {
    fprintf(stderr, "sigmask: pthread_create failed\n");
    return 1;
  }
  char ledger[] = "/tmp/plugrl-sigmask-XXXXXX";
  int fd = mkstemp(ledger);
  if (fd < 0) {
    fprintf(stderr, "sigmask: mkstemp: %s\n", strerror(errno));
    return 1;
  }
  close(fd);
  struct caller callers[CALLERS];
  pthread_t th[CALLERS];
  memset(callers, 0, sizeof callers);
  for (int i = 0; i < CALLERS; i++) {
    callers[i].url = argv[1];
    callers[i].ledger = i == 0 ? ledger : NULL;
    if (pthread_create(&th[i], NULL, step, &callers[i]) != 0) {
      fprintf(stderr, "sigmask: pthread_create failed\n");
      return 1;
    }
  }
  /* The signals go while both callers step. */
  int failed = 0;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 20;
  pthread_mutex_lock(&mu);
  while (!failed && (callers[0].steps < 10 || callers[1].steps < 10)) {
    if (callers[0].why[0] || callers[1].why[0] || pthread_cond_timedwait(&cv, &mu, &deadline) == ETIMEDOUT) {
      fprintf(stderr, "sigmask: the callers did not make 10 steps each in 20 s (%d and %d)\n", callers[0].steps,
              callers[1].steps);
      failed = 1;
    }
  }
  pthread_mutex_unlock(&mu);
  /* Both clients are open, the ledger's file with them: its name goes
  ** now, before the signals, which end the process when the library lets
  ** one through (the failure this test looks for) and would leave the
  ** file behind in /tmp. The writer keeps writing to the open file. */
  unlink(ledger);
  for (int n = 0; n < SIGNALS && !failed; n++) {
    int sig = host_signals[n % HOST_SIGNALS];
    kill(getpid(), sig);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&mu);
    while (taken <= n) {
      if (pthread_cond_timedwait(&cv, &mu, &deadline) == ETIMEDOUT) {
        fprintf(stderr, "sigmask: signal %d of %d (%s) never reached sigwait in 10 s\n", n + 1, SIGNALS,
                strsignal(sig));
        failed = 1;
        break;
      }
    }
    if (!failed && last_taken != sig) {
      fprintf(stderr, "sigmask: sigwait took %s, want %s\n", strsignal(last_taken), strsignal(sig));
      failed = 1;
    }
    pthread_mutex_unlock(&mu);
  }
  char why[512] = "";
  int threads = check_masks(why, sizeof why);
  if (threads < 0) {
    fprintf(stderr, "sigmask: %s\n", why);
    failed = 1;
  }
  pthread_mutex_lock(&mu);
  stop = 1;
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < CALLERS; i++) {
    pthread_join(th[i], NULL);
    if (callers[i].why[0]) {
      fprintf(stderr, "sigmask: caller %d: %s\n", i, callers[i].why);
      failed = 1;
    } else if (callers[i].steps == 0) {
      fprintf(stderr, "sigmask: caller %d made no step\n", i);
      failed = 1;
    }
  }
  unlink(ledger);
  printf("sigmask: %d signals to the process, %d taken by sigwait; %d threads block the host's signals; steps %d and %d\n",
         SIGNALS, taken, threads, callers[0].steps, callers[1].steps);
  return failed ? 1 : 0;
}
