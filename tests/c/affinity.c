/*
** A control loop pinned to a core of its own keeps it: the threads the
** library's runtime creates while such a thread calls in run on the CPUs
** the process runs on, not on the loop's one (capi/helpers.c,
** runtime_cpus). Glibc gives a new thread its creator's mask, and the Go
** runtime creates threads from whichever thread needs one, a caller's
** too: without the fix, a runtime thread pinned to the loop's core turned
** up in 3 of 4 runs of this test (in every round of those).
**
** In round r of ROUNDS, 2r new threads pin themselves to the last CPU the
** process may use, each opens a client recording a ledger (whose writer is
** a runtime goroutine), and they exchange for a while; then, all still
** open, one checks every thread of the process but theirs. Each round has
** more callers, and so more Ps (a P per calling thread), than the last:
** the runtime needs new threads for them, which it creates from the
** callers' threads. Run as: affinity URL (tests/run_with_server.sh passes
** it). Exits 77 (skipped) on a process with one CPU.
*/
#define _GNU_SOURCE
#include <plugrl.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 4, MOST = 2 * ROUNDS, ENVS = 1, STATE = 4 };

static const char *url;
static cpu_set_t process_cpus;
static int loop_cpu;
static int failures; /* under mu */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t opened, checked;
static pid_t loop_tids[MOST];
static int loops;

static void failed(int n) {
  pthread_mutex_lock(&mu);
  failures += n;
  pthread_mutex_unlock(&mu);
}

/* mono_ms is CLOCK_MONOTONIC in milliseconds. */
static long long mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* check_threads reports every thread of the process but the loops' whose
** CPUs are not the process's, and returns how many. */
static int check_threads(int round) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) {
    perror("affinity: /proc/self/task");
    return 1;
  }
  int bad = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    pid_t tid = (pid_t)atoi(e->d_name);
    int loop = 0;
    for (int i = 0; i < loops; i++) {
      loop |= loop_tids[i] == tid;
    }
    if (tid <= 0 || loop) {
      continue;
    }
    cpu_set_t set;
    if (sched_getaffinity(tid, sizeof set, &set) != 0) {
      continue; /* it exited meanwhile */
    }
    if (!CPU_EQUAL(&set, &process_cpus)) {
      char path[64], name[64] = "?";
      snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
      FILE *f = fopen(path, "r");
      if (f != NULL) {
        if (fgets(name, sizeof name, f) != NULL) {
          name[strcspn(name, "\n")] = 0;
        }
        fclose(f);
      }
      printf("FAIL round %d: thread %d (%s) runs on %d CPU(s), not the process's %d: %s\n", round, (int)tid, name,
             CPU_COUNT(&set), CPU_COUNT(&process_cpus),
             CPU_COUNT(&set) == 1 && CPU_ISSET(loop_cpu, &set) ? "pinned to the loop's core" : "another mask");
      bad++;
    }
  }
  closedir(d);
  return bad;
}

struct job {
  int round, index;
};

static void *loop(void *arg) {
  struct job *j = arg;
  int round = j->round;
  loop_tids[j->index] = (pid_t)syscall(SYS_gettid);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(loop_cpu, &one);
  char ledger[] = "/tmp/plugrl-affinity-XXXXXX";
  int fd = mkstemp(ledger);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0 || fd < 0) {
    printf("FAIL round %d: could not pin the loop to CPU %d or make its ledger\n", round, loop_cpu);
    failed(1);
  }
  if (fd >= 0) {
    close(fd);
  }
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = url;
  opt.ledger_path = ledger;
  opt.receive_timeout_ms = 20000;
  plugrl_client *c = NULL;
  plugrl_status s = plugrl_open(&opt, &c);
  float state[ENVS][STATE] = {{0}};
  int64_t shape[2] = {ENVS, STATE};
  plugrl_array arr = {"s", state, PLUGRL_DTYPE_F32, 2, shape};
  plugrl_observation obs = {NULL, 0, &arr, 1, NULL, 0};
  int64_t idx[ENVS] = {0}, ids[ENVS] = {0};
  float rewards[ENVS] = {1};
  uint8_t terminated[ENVS] = {0}, truncated[ENVS] = {0};
  long exchanges = 0;
  for (long long end = mono_ms() + 500; s == PLUGRL_OK && mono_ms() < end; exchanges++) {
    plugrl_action act;
    s = plugrl_infer(c, idx, ids, ENVS, &obs, NULL, &act);
    if (s == PLUGRL_OK) {
      state[0][0] += 1;
      s = plugrl_feedback(c, idx, ids, ENVS, &obs, rewards, terminated, truncated, NULL);
    }
  }
  if (s != PLUGRL_OK) {
    printf("FAIL round %d, loop %d: status %d: %s\n", round, j->index, (int)s, plugrl_errmsg(c));
    failed(1);
  }
  pthread_barrier_wait(&opened); /* every loop's client open */
  if (j->index == 0) {
    int bad = check_threads(round);
    failed(bad);
    printf("round %d: %d loops on CPU %d, %ld exchanges in the first; %s\n", round, loops, loop_cpu, exchanges,
           bad ? "runtime threads on the loop's CPUs" : "every other thread on the process's CPUs");
  }
  pthread_barrier_wait(&checked);
  if (c != NULL && plugrl_close(c) != PLUGRL_OK) {
    printf("FAIL round %d, loop %d: close: %s\n", round, j->index, plugrl_errmsg(c));
    failed(1);
  }
  unlink(ledger);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: affinity URL\n");
    return 2;
  }
  url = argv[1];
  if (sched_getaffinity(0, sizeof process_cpus, &process_cpus) != 0) {
    perror("affinity: sched_getaffinity");
    return 1;
  }
  if (CPU_COUNT(&process_cpus) < 2) {
    printf("SKIP: the process may use one CPU; pinning a loop to a core of its own needs two\n");
    return 77;
  }
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (CPU_ISSET(cpu, &process_cpus)) {
      loop_cpu = cpu;
    }
  }
  for (int round = 1; round <= ROUNDS; round++) {
    pthread_t t[MOST];
    struct job jobs[MOST];
    loops = 2 * round;
    pthread_barrier_init(&opened, NULL, (unsigned)loops);
    pthread_barrier_init(&checked, NULL, (unsigned)loops);
    for (int i = 0; i < loops; i++) {
      jobs[i] = (struct job){round, i};
      if (pthread_create(&t[i], NULL, loop, &jobs[i]) != 0) {
        printf("FAIL: pthread_create\n");
        return 1;
      }
    }
    for (int i = 0; i < loops; i++) {
      pthread_join(t[i], NULL);
    }
    pthread_barrier_destroy(&opened);
    pthread_barrier_destroy(&checked);
  }
  if (failures > 0) {
    printf("FAIL: %d problem(s)\n", failures);
    return 1;
  }
  printf("OK: %d rounds, no runtime thread on the loop's core alone\n", ROUNDS);
  return 0;
}
