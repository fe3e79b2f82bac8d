/*
** profiler.c - a host profiled the way gperftools and gprof profile: a
** SIGPROF handler installed without SA_ONSTACK, and ITIMER_PROF firing
** every 200 us of the process's CPU time.
**
**   profiler URL
**
** A handler without SA_ONSTACK runs on whatever stack its thread is on,
** and a thread inside the library runs Go code on a goroutine stack of a
** few KiB; a profiler's handler ran past its end into the Go heap, and the
** collector then died ("fatal error: found pointer to free object",
** gperftools' CPUPROFILE with the bench client). A thread's first call
** into the library (here plugrl_options_init) and plugrl_open give every
** handler installed by then SA_ONSTACK, so it runs on the signal stack the
** runtime gives each thread that calls in (32 KiB). (With plugrl_open
** alone, a signal between the first call, which gave main its signal
** stack, and the open ran off it: 1 run of 100 in 1 of 12 runs, four at a
** time.) This checks:
**
**   1. after plugrl_open, SIGPROF's handler has SA_ONSTACK, and is
**      otherwise the host's (the same function, SA_SIGINFO and SA_RESTART);
**   2. over STEPS steps of two probe envs or more, until the handler has
**      run MIN_CALLS times (ITIMER_PROF counts CPU time, in scheduler
**      ticks), each action right, and every run of the handler on a thread
**      that has a signal stack on it, and at least one such run (the
**      handler uses 12 KiB of stack, as a profiler's unwinder may);
**   3. a handler installed after the open (SIGUSR1's) is left as it is,
**      and plugrl_fix_signal_handlers gives it SA_ONSTACK (and returns 1).
**
** Exits 0 when all hold, else 1 with what did not.
*/
#define _GNU_SOURCE
#include "probe_runner.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>

enum { STEPS = 3000, MAX_STEPS = 400000, MIN_CALLS = 100, HANDLER_STACK = 12 * 1024 };

/* Counted with the compiler's atomic builtins (the tests build as C99). */
static long calls;
/* Runs on a thread that had a signal stack, but not on it: on the thread's
** own stack, or, inside the library, on a goroutine's. */
static long off_signal_stack;
/* Runs on the signal stack: with none, nothing was checked. */
static long on_signal_stack;

static void on_sigprof(int sig, siginfo_t *info, void *context) {
  (void)sig;
  (void)info;
  (void)context;
  volatile char unwind[HANDLER_STACK];
  unwind[0] = 1;
  unwind[sizeof unwind - 1] = 1;
  stack_t ss;
  if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
    __atomic_fetch_add((ss.ss_flags & SS_ONSTACK) ? &on_signal_stack : &off_signal_stack, 1, __ATOMIC_RELAXED);
  }
  __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
}

static void on_sigusr1(int sig) { (void)sig; }

static int fail(const char *why) {
  fprintf(stderr, "profiler: %s\n", why);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART; /* as gperftools installs it */
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0) {
    return fail("sigaction(SIGPROF) failed");
  }
  struct itimerval every = {{0, 200}, {0, 200}};
  if (setitimer(ITIMER_PROF, &every, NULL) != 0) {
    return fail("setitimer(ITIMER_PROF) failed");
  }

  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = argv[1];
  probe_runner p;
  plugrl_status s = probe_open(&p, &opt, "profiled", 3);
  char why[512] = "";
  struct sigaction now;
  memset(&now, 0, sizeof now);
  sigaction(SIGPROF, NULL, &now);
  if (s == PLUGRL_OK && (!(now.sa_flags & SA_ONSTACK) || now.sa_sigaction != on_sigprof ||
                         (now.sa_flags & (SA_SIGINFO | SA_RESTART)) != (SA_SIGINFO | SA_RESTART))) {
    snprintf(why, sizeof why, "after plugrl_open SIGPROF's action has flags %#x (want SA_ONSTACK added to the host's)",
             (unsigned)now.sa_flags);
  }
  for (int step = 0; s == PLUGRL_OK && why[0] == '\0' && step < MAX_STEPS &&
                     (step < STEPS || __atomic_load_n(&calls, __ATOMIC_RELAXED) < MIN_CALLS);
       step++) {
    if ((s = probe_act(&p)) != PLUGRL_OK || !probe_check(&p, why, sizeof why)) {
      break;
    }
    s = probe_report(&p);
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  if (s != PLUGRL_OK && why[0] == '\0') {
    snprintf(why, sizeof why, "%s: %s", plugrl_status_str(s), probe_errmsg(&p));
  }
  int acts = p.acts;

  /* A handler installed after the open is the host's to fix. */
  struct sigaction usr;
  memset(&usr, 0, sizeof usr);
  usr.sa_handler = on_sigusr1;
  sigemptyset(&usr.sa_mask);
  sigaction(SIGUSR1, &usr, NULL);
  memset(&now, 0, sizeof now);
  sigaction(SIGUSR1, NULL, &now);
  int left = !(now.sa_flags & SA_ONSTACK);
  int fixed = plugrl_fix_signal_handlers();
  memset(&now, 0, sizeof now);
  sigaction(SIGUSR1, NULL, &now);
  probe_close(&p);

  long n = __atomic_load_n(&calls, __ATOMIC_RELAXED), off_stack = __atomic_load_n(&off_signal_stack, __ATOMIC_RELAXED);
  long on_stack = __atomic_load_n(&on_signal_stack, __ATOMIC_RELAXED);
  if (why[0] != '\0') {
    return fail(why);
  }
  if (off_stack != 0) {
    snprintf(why, sizeof why, "%ld of %ld SIGPROF handler runs were off their thread's signal stack", off_stack, n);
    return fail(why);
  }
  if (on_stack == 0) {
    snprintf(why, sizeof why, "none of %ld SIGPROF handler runs was on a thread with a signal stack: nothing checked", n);
    return fail(why);
  }
  if (n < MIN_CALLS) {
    snprintf(why, sizeof why, "only %ld SIGPROF handler runs in %d steps (want %d or more)", n, acts, MIN_CALLS);
    return fail(why);
  }
  if (!left || fixed != 1 || !(now.sa_flags & SA_ONSTACK)) {
    snprintf(why, sizeof why,
             "a handler installed after the open: left as installed %d, plugrl_fix_signal_handlers fixed %d (want 1), "
             "SA_ONSTACK then %d",
             left, fixed, !!(now.sa_flags & SA_ONSTACK));
    return fail(why);
  }
  printf("profiler: %d steps, every action right; %ld SIGPROF handler runs, each on its thread's signal stack "
         "where it had one (%ld on one)\n",
         acts, n, on_stack);
  return 0;
}
