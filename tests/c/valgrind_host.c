/*
** valgrind_host.c - a host with three bugs of its own, for Memcheck
** (tests/valgrind.sh), and a fourth for Helgrind and DRD, run with
** libplugrl's suppressions: each bug must be reported by its tool, and
** nothing else.
**
**   valgrind_host [--clean] URL
**
** It steps two probe envs through a runner against `plugrl serve --policy
** probe --action-dim 3 --horizon 4` and checks every action (a branch on
** each value: an action the library handed over undefined would be
** reported here, in the host's code, where no suppression reaches), after
** a worker thread of its own has run and been joined (the runtime's next
** thread takes over its cached stack: tests/valgrind.sh runs it with
** glibc's stack cache off, as README says). Unless --clean, it also:
**
**   1. branches on a heap value it never wrote (host_branch_on_unwritten);
**   2. leaks a block of LEAK_BYTES (main);
**   3. reports BAD_STEPS steps whose observation buffer has a column it
**      never wrote, which the library copies and sends: the bytes reach
**      the socket undefined ("Syscall param ... points to uninitialised
**      byte(s)", created by the malloc in main);
**   4. has two threads of its own add to a counter with no lock, while
**      the main thread steps (racer).
**
** Exits 0 when the run ended as it should (every action right), else 1 with
** why: the verdict on the bugs is Memcheck's, read by the script.
*/
#include "probe_runner.h"

#include <pthread.h>
#include <stdlib.h>

enum { STEPS = 120, BAD_STEP = 60, BAD_STEPS = 12, LEAK_BYTES = 123 };

/* Where the leaked block's address was kept until it was overwritten. */
static void *volatile leaked;

/* The counter the racers share with no lock. */
static volatile long shared_count;

static void *racer(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    shared_count = shared_count + 1;
  }
  return NULL;
}

/* A worker of the host's, joined before the session opens: glibc caches
** its stack, with its thread-local storage, and the runtime's next thread
** takes it over until the process exits. Without
** GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0 Memcheck reports that
** storage as "possibly lost" at this file's pthread_create. */
static void *worker(void *arg) { return arg; }

/* Branches on p[1], which the caller never wrote. noinline keeps the
** branch in a frame of its own, named in Memcheck's report. */
__attribute__((noinline)) static int host_branch_on_unwritten(const int *p) {
  if (p[1] > 0) {
    fputs("valgrind_host: the unwritten value was positive\n", stdout);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int clean = argc == 3 && strcmp(argv[1], "--clean") == 0;
  if (argc != 2 && !clean) {
    fprintf(stderr, "usage: %s [--clean] URL\n", argv[0]);
    return 2;
  }
  pthread_t w;
  if (pthread_create(&w, NULL, worker, NULL) != 0 || pthread_join(w, NULL) != 0) {
    fputs("valgrind_host: the worker thread failed\n", stderr);
    return 1;
  }
  if (!clean) {
    int *scratch = malloc(4 * sizeof *scratch);
    if (scratch == NULL) {
      return 1;
    }
    scratch[0] = 1;
    /* Through a volatile pointer, so that the compiler cannot see that
    ** scratch[1] was never written (it refuses to build a known bug). */
    int *volatile unseen = scratch;
    volatile int taken = host_branch_on_unwritten(unseen);
    (void)taken;
    free(scratch);
    leaked = malloc(LEAK_BYTES);
    leaked = NULL;
  }
  pthread_t racers[2];
  int racing = 0;
  for (; !clean && racing < 2; racing++) {
    if (pthread_create(&racers[racing], NULL, racer, NULL) != 0) {
      fputs("valgrind_host: pthread_create failed\n", stderr);
      return 1;
    }
  }

  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = argv[argc - 1];
  probe_runner p;
  plugrl_status s = probe_open(&p, &opt, "valgrind", 7);
  char why[256] = "";
  for (int step = 0; s == PLUGRL_OK && step < STEPS; step++) {
    if ((s = probe_act(&p)) != PLUGRL_OK) {
      break;
    }
    if (!probe_check(&p, why, sizeof why)) {
      break;
    }
    double(*half)[2] = NULL;
    if (!clean && step >= BAD_STEP && step < BAD_STEP + BAD_STEPS) {
      /* Each row's first column is written, its second never. (A report
      ** sends the rows of the envs whose chunk or episode ended, so the
      ** bad buffer is given for long enough that every env's is sent.) */
      half = malloc(sizeof p.state);
      if (half == NULL) {
        return 1;
      }
      for (int i = 0; i < PROBE_ENVS; i++) {
        half[i][0] = p.state[i][0] + 1;
      }
      p.arr.data = half;
    }
    s = probe_report(&p);
    p.arr.data = p.state;
    free(half);
  }
  if (s != PLUGRL_OK) {
    snprintf(why, sizeof why, "%s: %s", plugrl_status_str(s), probe_errmsg(&p));
  }
  probe_close(&p);
  for (int i = 0; i < racing; i++) {
    pthread_join(racers[i], NULL);
  }
  if (why[0] != '\0') {
    fprintf(stderr, "valgrind_host: %s\n", why);
    return 1;
  }
  printf("valgrind_host: %d steps, every action right\n", p.acts);
  return 0;
}
