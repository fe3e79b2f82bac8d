/*
** coroutine.c - calls from coroutines: stacks the host made, through the
** real library.
**
**   coroutine URL   (a `plugrl serve --action-dim 3 --horizon 4 --policy probe`)
**
** A behaviour tree's or an executor's coroutines (ucontext, boost.context,
** minicoro) run on stacks of tens of KiB that the host allocated, several
** on one thread, each switched out between calls. The Go runtime inside
** does not know those stacks: it assumes 32 KiB below the stack pointer of
** a stack it did not make, and its own code that runs there (the first
** call's binding of the thread, a goroutine stack's growth, the garbage
** collector's assists) uses some of it.
**
** THREADS threads each run COROUTINES coroutines on 64 KiB stacks (mmap'd,
** with a guard page below, as boost's protected stacks have, so that an
** overflow faults instead of writing over the heap). Each thread's first
** call into the library is made from a coroutine. Each coroutine opens its
** own client and runner and steps STEPS times, switching out between act
** and report; every action is the probe policy's (probe_runner.h). Then
** the stacks are unmapped and each thread steps again on its own stack.
**
** Last, one coroutine moves between two threads, as an executor's thread
** pool resumes coroutines on whichever thread is free (boost.asio's spawn
** on a multi-threaded io_context): each act and each report is made on
** the other thread from the one before, on the same stack and handles,
** 2 x STEPS times.
**
** Checked: every call returns PLUGRL_OK with the right actions, and no
** coroutine used more than 32 KiB of its stack (painted before, read
** after). The most used is printed: 3,688 to 4,608 bytes in 30 runs (a
** thread's first call; 1.5-2.9 KiB for later ones).
**
** Not in the sanitizer runs: AddressSanitizer needs every switch of stacks
** announced to it (__sanitizer_start_switch_fiber).
**
** Exit status 0 when every check passed, 1 otherwise.
*/
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "probe_runner.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

enum { THREADS = 2, COROUTINES = 3, STEPS = 100 };
enum { STACK = 64 << 10, GO_ASSUMES = 32 << 10, PAINT = 0xA5 };

struct coroutine {
  ucontext_t ctx;
  unsigned char *stack; /* STACK bytes above a guard page */
  size_t guard;         /* the guard page's size */
  int finished;
  int failed;
  char why[512];
};

struct thread {
  const char *url;
  int index;
  ucontext_t scheduler;
  struct coroutine co[COROUTINES];
  int failed;
  char why[512 + 32]; /* room for "coroutine N: " and a coroutine's why */
};

static struct thread threads[THREADS];

/* yield switches from coroutine c of thread t back to t's scheduler. */
static void yield(struct thread *t, struct coroutine *c) {
  if (swapcontext(&c->ctx, &t->scheduler) != 0) {
    perror("swapcontext");
    exit(1);
  }
}

/* steps opens a client and runner and steps them n times, checking every
** action; between act and report it yields if c is not NULL. It returns
** 1 on success, else 0 with why filled. */
static int steps(struct thread *t, struct coroutine *c, double tag, int n, char *why, size_t why_len) {
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = t->url;
  opt.receive_timeout_ms = 20000;
  probe_runner p;
  plugrl_status s = probe_open(&p, &opt, "coroutine", tag);
  int ok = 1;
  if (s != PLUGRL_OK) {
    snprintf(why, why_len, "open: %s: %s", plugrl_status_str(s), probe_errmsg(&p));
    ok = 0;
  }
  for (int i = 0; ok && i < n; i++) {
    if ((s = probe_act(&p)) != PLUGRL_OK) {
      snprintf(why, why_len, "act %d: %s: %s", i, plugrl_status_str(s), probe_errmsg(&p));
      ok = 0;
      break;
    }
    if (c != NULL) {
      yield(t, c);
    }
    if (!probe_check(&p, why, why_len)) {
      ok = 0;
      break;
    }
    if ((s = probe_report(&p)) != PLUGRL_OK) {
      snprintf(why, why_len, "report %d: %s: %s", i, plugrl_status_str(s), probe_errmsg(&p));
      ok = 0;
    }
    if (c != NULL) {
      yield(t, c);
    }
  }
  probe_close(&p);
  return ok;
}

/* body is a coroutine's function: makecontext passes ints only. */
static void body(int ti, int ci) {
  struct thread *t = &threads[ti];
  struct coroutine *c = &t->co[ci];
  c->failed = !steps(t, c, 100.0 * ti + ci, STEPS, c->why, sizeof c->why);
  c->finished = 1; /* uc_link returns to the scheduler */
}

/* used is how many bytes at the top of c's stack are no longer paint. */
static size_t used(const struct coroutine *c) {
  size_t k = 0;
  while (k < STACK && c->stack[k] == PAINT) {
    k++;
  }
  return STACK - k;
}

static size_t most_used;
static pthread_mutex_t most_used_mu = PTHREAD_MUTEX_INITIALIZER;

/* start makes coroutine i of thread t, on a painted stack. */
static void start(struct thread *t, int i) {
  struct coroutine *c = &t->co[i];
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *m = mmap(NULL, page + STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0) {
    perror("mmap");
    exit(1);
  }
  c->guard = page;
  c->stack = m + page;
  memset(c->stack, PAINT, STACK);
  if (getcontext(&c->ctx) != 0) {
    perror("getcontext");
    exit(1);
  }
  c->ctx.uc_stack.ss_sp = c->stack;
  c->ctx.uc_stack.ss_size = STACK;
  c->ctx.uc_link = &t->scheduler;
  makecontext(&c->ctx, (void (*)(void))body, 2, t->index, i);
}

static void *run(void *arg) {
  struct thread *t = arg;
  for (int i = 0; i < COROUTINES; i++) {
    start(t, i);
  }
  /* Round robin until every coroutine has finished: coroutine 0 makes
  ** the thread's first call. */
  for (int live = COROUTINES; live > 0;) {
    live = 0;
    for (int i = 0; i < COROUTINES; i++) {
      if (!t->co[i].finished) {
        if (swapcontext(&t->scheduler, &t->co[i].ctx) != 0) {
          perror("swapcontext");
          exit(1);
        }
        live += !t->co[i].finished;
      }
    }
  }
  for (int i = 0; i < COROUTINES; i++) {
    struct coroutine *c = &t->co[i];
    size_t u = used(c);
    pthread_mutex_lock(&most_used_mu);
    if (u > most_used) {
      most_used = u;
    }
    pthread_mutex_unlock(&most_used_mu);
    if (c->failed) {
      t->failed = 1;
      snprintf(t->why, sizeof t->why, "coroutine %d: %s", i, c->why);
    } else if (u > GO_ASSUMES) {
      t->failed = 1;
      snprintf(t->why, sizeof t->why, "coroutine %d used %zu bytes of its stack, more than the %d the Go runtime assumes",
               i, u, GO_ASSUMES);
    }
    munmap(c->stack - c->guard, c->guard + STACK);
  }
  /* The stacks are gone: the thread's own stack calls in again. */
  if (!t->failed && !steps(t, NULL, 100.0 * t->index + 9, STEPS, t->why, sizeof t->why)) {
    t->failed = 1;
  }
  return NULL;
}

/* ------------------------------------------------------------------------
** A coroutine that moves between threads, as an executor's thread pool
** resumes its coroutines on whichever thread is free (boost.asio's spawn
** on a multi-threaded io_context): the two threads take turns resuming
** it, so each act and each report is made on the other thread from the
** one before, on the same stack and handles. */
static struct {
  const char *url;
  ucontext_t co, scheduler[2];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int turn, finished, failed;
  volatile int on; /* the thread that resumed it last (a global, not TLS) */
  char why[512];
} moving = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void move_on(void) {
  if (swapcontext(&moving.co, &moving.scheduler[moving.on]) != 0) {
    perror("swapcontext");
    exit(1);
  }
}

static void moving_body(void) {
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = moving.url;
  probe_runner p;
  plugrl_status s = probe_open(&p, &opt, "moving", 7);
  int ok = s == PLUGRL_OK;
  if (!ok) {
    snprintf(moving.why, sizeof moving.why, "open: %s: %s", plugrl_status_str(s), probe_errmsg(&p));
  }
  for (int i = 0; ok && i < 2 * STEPS; i++) {
    if ((s = probe_act(&p)) != PLUGRL_OK) {
      snprintf(moving.why, sizeof moving.why, "act %d: %s: %s", i, plugrl_status_str(s), probe_errmsg(&p));
      ok = 0;
      break;
    }
    move_on();
    if (!probe_check(&p, moving.why, sizeof moving.why)) {
      ok = 0;
      break;
    }
    if ((s = probe_report(&p)) != PLUGRL_OK) {
      snprintf(moving.why, sizeof moving.why, "report %d: %s: %s", i, plugrl_status_str(s), probe_errmsg(&p));
      ok = 0;
    }
    move_on();
  }
  probe_close(&p);
  moving.failed = !ok;
  pthread_mutex_lock(&moving.mu);
  moving.finished = 1;
  pthread_cond_broadcast(&moving.cv);
  pthread_mutex_unlock(&moving.mu);
  move_on(); /* never resumed */
}

static void *moving_thread(void *arg) {
  int me = (int)(intptr_t)arg;
  for (;;) {
    pthread_mutex_lock(&moving.mu);
    while (moving.turn != me && !moving.finished) {
      pthread_cond_wait(&moving.cv, &moving.mu);
    }
    int finished = moving.finished;
    pthread_mutex_unlock(&moving.mu);
    if (finished) {
      return NULL;
    }
    moving.on = me;
    if (swapcontext(&moving.scheduler[me], &moving.co) != 0) {
      perror("swapcontext");
      exit(1);
    }
    pthread_mutex_lock(&moving.mu);
    moving.turn = 1 - me;
    pthread_cond_broadcast(&moving.cv);
    pthread_mutex_unlock(&moving.mu);
  }
}

static int test_moving(const char *url) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *m = mmap(NULL, page + STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0 || getcontext(&moving.co) != 0) {
    perror("mmap");
    exit(1);
  }
  moving.url = url;
  moving.co.uc_stack.ss_sp = m + page;
  moving.co.uc_stack.ss_size = STACK;
  makecontext(&moving.co, moving_body, 0);
  pthread_t t[2];
  for (intptr_t i = 0; i < 2; i++) {
    if (pthread_create(&t[i], NULL, moving_thread, (void *)i) != 0) {
      perror("pthread_create");
      exit(1);
    }
  }
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  munmap(m, page + STACK);
  if (moving.failed) {
    fprintf(stderr, "coroutine: FAIL: the coroutine that moves between threads: %s\n", moving.why);
  }
  return !moving.failed;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  pthread_t tid[THREADS];
  for (int i = 0; i < THREADS; i++) {
    threads[i].url = argv[1];
    threads[i].index = i;
    if (pthread_create(&tid[i], NULL, run, &threads[i]) != 0) {
      perror("pthread_create");
      return 1;
    }
  }
  int failed = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(tid[i], NULL);
    if (threads[i].failed) {
      fprintf(stderr, "coroutine: FAIL: thread %d: %s\n", i, threads[i].why);
      failed = 1;
    }
  }
  if (failed || !test_moving(argv[1])) {
    return 1;
  }
  printf("coroutine: %d threads x %d coroutines on %d KiB stacks stepped %d times each with the probe policy's actions, "
         "then each thread on its own stack; the most stack a coroutine used: %zu bytes (the Go runtime assumes %d); "
         "a coroutine resumed by two threads in turn stepped %d times\n",
         THREADS, COROUTINES, STACK >> 10, STEPS, most_used, GO_ASSUMES, 2 * STEPS);
  return 0;
}
