/*
** main_exit.c - a program whose main thread ends with pthread_exit ends
** when its last thread does, through the real library.
**
**   main_exit URL   (a `plugrl serve --action-dim 3 --horizon 4 --policy probe`)
**
** The pthreads tutorials' pattern: main starts its workers and calls
** pthread_exit; POSIX ends the process, with status 0, when the last
** thread ends. The Go runtime's threads never end, so with the library
** loaded such a process ran on for ever after its last thread, and a
** SIGTERM could not end it (only SIGKILL): the runtime's threads block the
** host's signals. Each case runs in a child of its own (this program,
** exec'd with the case's name), which must exit with status 0 within 20 s
** and print what its threads did:
**
**   bound:    main opens a client, starts two workers that step 200 times
**             with the probe policy (probe_runner.h), closes its client and
**             calls pthread_exit;
**   unbound:  main never calls in; the same two workers;
**   late:     main opens a client; one worker steps, another never calls
**             in and ends 300 ms after it: the process ends after the late
**             one (it prints last), not when the last caller's thread does;
**   nofds:    main opens a client; a worker that never calls in leaves the
**             process one descriptor for 1 s (enough for the library's
**             look at /proc/self/task, not for reading a thread's entry),
**             then ends: the process ends after it (it prints last), not
**             while it runs (it ended at 0.4 s, status 0, when an entry
**             that could not be read was taken for a thread that was gone);
**   afterall: main never calls in; it joins the one worker that does,
**             then starts one that never calls in and ends 300 ms later,
**             and leaves: the process ends after that one (it prints
**             last). No thread that called in exits after main: the
**             library notes main's own end (a key set at load);
**   cancelled: main never calls in; a worker opens and closes a client
**             with its cancellation off, is cancelled meanwhile, and
**             returns 200 ms after main left with the cancel pending (as
**             one that came during its last call): the process ends after
**             it (it ran on, the cancel acting in the library's look at
**             /proc in the thread's exit, before the watcher started).
**
** Exit status 0 when every case passed, 1 otherwise.
*/
#define _DEFAULT_SOURCE /* usleep */
#include "probe_runner.h"

#include <pthread.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { STEPS = 200 };

static const char *url;
static int stepped; /* a worker's steps all went right (atomic) */

static void *stepper(void *arg) {
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = url;
  probe_runner p;
  char why[400] = "";
  plugrl_status s = probe_open(&p, &opt, "main_exit", (double)(long)arg);
  int step = 0;
  for (; s == PLUGRL_OK && step < STEPS; step++) {
    if ((s = probe_act(&p)) != PLUGRL_OK || !probe_check(&p, why, sizeof why)) {
      break;
    }
    s = probe_report(&p);
  }
  if (step == STEPS) {
    __atomic_add_fetch(&stepped, 1, __ATOMIC_SEQ_CST);
    printf("worker %ld stepped %d times\n", (long)arg, STEPS);
  } else {
    printf("worker %ld failed at step %d: %s %s\n", (long)arg, step, plugrl_status_str(s), why[0] ? why : probe_errmsg(&p));
  }
  fflush(stdout);
  probe_close(&p);
  return NULL;
}

static void *late(void *arg) {
  pthread_t *bound = arg;
  if (bound != NULL) {
    pthread_join(*bound, NULL);
  }
  usleep(300 * 1000);
  printf("late worker done\n");
  fflush(stdout);
  return NULL;
}

/* nofds leaves the process one descriptor for 1 s, 300 ms after main
** left. */
static void *nofds(void *arg) {
  (void)arg;
  usleep(300 * 1000);
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur > 256) {
    lim.rlim_cur = 256;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  int fds[256], n = 0;
  while (n < 256 && (fds[n] = eventfd(0, EFD_CLOEXEC)) >= 0) {
    n++;
  }
  if (n > 0) {
    close(fds[--n]);
  }
  usleep(1000 * 1000);
  while (n > 0) {
    close(fds[--n]);
  }
  printf("nofds worker done\n");
  fflush(stdout);
  return NULL;
}

static int cancel_sent; /* atomic */

/* cancelled_worker is cancelled while its cancellation is off, and
** returns with the cancel pending. */
static void *cancelled_worker(void *arg) {
  (void)arg;
  int old;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = url;
  plugrl_client *c = NULL;
  if (plugrl_open(&o, &c) == PLUGRL_OK) {
    plugrl_close(c);
  }
  while (!__atomic_load_n(&cancel_sent, __ATOMIC_SEQ_CST)) {
    usleep(1000);
  }
  usleep(200 * 1000);
  printf("cancelled worker returns\n");
  fflush(stdout);
  pthread_setcancelstate(old, NULL); /* no cancellation point from here */
  return NULL;
}

/* run_case is a child's main: the case's threads, then pthread_exit. */
static int run_case(const char *name) {
  static pthread_t t[2];
  plugrl_client *c = NULL;
  if (strcmp(name, "cancelled") == 0) {
    pthread_t w;
    pthread_create(&w, NULL, cancelled_worker, NULL);
    usleep(100 * 1000);
    pthread_cancel(w);
    __atomic_store_n(&cancel_sent, 1, __ATOMIC_SEQ_CST);
    pthread_exit(NULL);
  }
  if (strcmp(name, "afterall") == 0) {
    pthread_create(&t[0], NULL, stepper, (void *)0);
    pthread_join(t[0], NULL); /* the only thread that calls in has exited */
    pthread_create(&t[1], NULL, late, NULL);
    pthread_exit(NULL);
  }
  if (strcmp(name, "unbound") != 0) {
    plugrl_options o;
    plugrl_options_init(&o);
    o.url = url;
    plugrl_status s = plugrl_open(&o, &c);
    if (s != PLUGRL_OK) {
      printf("open: %s\n", plugrl_status_str(s));
      return 1;
    }
  }
  if (strcmp(name, "nofds") == 0) {
    plugrl_close(c);
    pthread_create(&t[0], NULL, nofds, NULL);
    pthread_exit(NULL);
  }
  int workers = strcmp(name, "late") == 0 ? 1 : 2;
  for (long i = 0; i < workers; i++) {
    pthread_create(&t[i], NULL, stepper, (void *)i);
  }
  if (workers == 1) {
    pthread_create(&t[1], NULL, late, &t[0]);
  }
  if (c != NULL) {
    plugrl_close(c); /* not in unbound: plugrl_close(NULL) is a call too */
  }
  pthread_exit(NULL);
}

/* check_case runs name in a child and checks how it ended and what it
** printed. */
static int check_case(const char *self, const char *name) {
  int out[2];
  if (pipe(out) != 0) {
    perror("pipe");
    return 0;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl(self, self, name, url, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  char text[2048] = "";
  size_t len = 0;
  /* The child's end of the pipe closes when it exits; one that runs on
  ** past 20 s is killed (SIGKILL: a SIGTERM is what it could not take). */
  int ran_on = 0;
  for (int waited_ms = 0;; waited_ms += 100) {
    struct pollfd pfd = {out[0], POLLIN, 0};
    int r = poll(&pfd, 1, 100);
    if (r > 0) {
      ssize_t n = read(out[0], text + len, sizeof text - 1 - len);
      if (n <= 0) {
        break; /* the child exited */
      }
      len += (size_t)n;
      if (len == sizeof text - 1) {
        break;
      }
    } else if (waited_ms >= 20000) {
      ran_on = 1;
      kill(pid, SIGKILL);
      break;
    }
  }
  text[len] = 0;
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (ran_on) {
    fprintf(stderr, "main_exit: case %s ran on for 20 s after its threads (killed)\n", name);
  }
  int ok = !ran_on && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  int want_workers = strcmp(name, "late") == 0 || strcmp(name, "afterall") == 0 ? 1 : strcmp(name, "nofds") == 0 || strcmp(name, "cancelled") == 0 ? 0 : 2;
  int workers = 0;
  for (const char *p = text; (p = strstr(p, " stepped ")) != NULL; p++) {
    workers++;
  }
  ok = ok && workers == want_workers;
  const char *last = strcmp(name, "late") == 0 || strcmp(name, "afterall") == 0 ? "late worker done\n" : strcmp(name, "nofds") == 0 ? "nofds worker done\n"
                     : strcmp(name, "cancelled") == 0 ? "cancelled worker returns\n" : NULL;
  if (last != NULL) {
    const char *done = strstr(text, last);
    ok = ok && done != NULL && done[strlen(last)] == 0; /* printed last */
  }
  if (!ok) {
    fprintf(stderr, "main_exit: FAIL: case %s: %s %d; its output:\n%s", name,
            WIFEXITED(status) ? "exit status" : "killed by signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), text);
  }
  return ok;
}

int main(int argc, char **argv) {
  if (argc == 3) {
    url = argv[2];
    return run_case(argv[1]);
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  url = argv[1];
  const char *cases[] = {"bound", "unbound", "late", "nofds", "cancelled", "afterall"};
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ok = check_case("/proc/self/exe", cases[i]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("main_exit: case %s: %s in %.2f s\n", cases[i], ok ? "ended with status 0" : "FAILED", s);
    failed += !ok;
  }
  return failed != 0;
}
