/*
** A day of handles in one process. A fleet process or a test rig opens and
** closes handles for hours, from threads that come and go; what one handle
** took must be given back when it closes, or a process that lives for a
** day runs out. This opens SEQUENTIAL sessions on one thread, then WAVES
** waves of WAVE threads that each open a session and exit, then SEQUENTIAL
** more; a session is open, a runner of one env, STEPS steps, free, close.
** Between the phases it counts the process's open descriptors, threads and
** resident memory, and fails if any grows with the number of sessions:
**
**   - descriptors: back to what they were after the warm-up, exactly;
**   - threads: the rest of the run (the waves and the second thousand,
**     1640 sessions) adds at most THREAD_SLACK to what the first 1050
**     left. The runtime keeps every thread
**     it makes, and makes one when it finds none idle: a high-water mark,
**     which a SCHED_FIFO caller preempting the runtime's threads on their
**     core pushes up (tens of threads over the first thousand sessions,
**     then a few), but which must not follow the number of sessions. Under
**     tests/sched_fifo.sh the rest of the run added 7-24 threads (24 runs,
**     2026-12-02, the library of then and of 620d039 alike; one wave's
**     worth, 16, failed 4 of them); a thread per exited thread or per
**     session adds hundreds;
**   - resident memory: the rest of the run adds at most RSS_SLACK to what
**     the first 1050 sessions left (the Go heap settles; it must not keep
**     growing).
**
** It also prints the slowest session of each phase: tests/sched_fifo.sh
** runs it under SCHED_FIFO on one core, where a collection meeting a
** real-time caller once stalled a session for a second.
**
** Over a longer run the high-water mark levels off: with --rounds 125 (the
** waves and the second thousand 125 times, 205,000 sessions, 11 minutes)
** under SCHED_FIFO on one core, threads went 26, 63 after the first round,
** 112 after 8, 152 after 13 (a jump while a compile ran on the other
** core), then 155-160 over the last 110 rounds; resident memory stayed at
** 17.2-17.6 MiB (2026-12-02).
**
** With --reconnects N it churns one handle instead: a runner of two envs
** whose every other report comes after the server's feedback timeout
** (CTest churn_reconnect runs the server with --feedback-timeout 10ms),
** so that every other act reconnects, N times in all. What a connection
** took must be given back when the next replaces it: descriptors exactly,
** threads within THREAD_SLACK and memory within RECONNECT_RSS_SLACK of
** what the first RECONNECT_WARMUP reconnects left. (By hand, 2,000 such
** reconnects left resident memory within 0.5 MiB, descriptors and
** threads unchanged; 2026-12-04.)
**
** Run as: churn [--quick] [--rounds N] [--reconnects N] [--no-memory-bound] URL
** (tests/run_with_server.sh passes the URL). With --quick, a tenth of the
** sessions; with --rounds N, the waves and the sessions after them N times,
** measured after each (default 1), and the bounds apply to the last round
** against the first. --no-memory-bound leaves resident memory unchecked
** (descriptors and threads still are): under a sanitizer
** (tests/sanitizers.sh) it is the sanitizer's shadow and per-thread state.
** With PLUGRL_TEST_CA_FILE set (run_with_server.sh with PLUGRL_TEST_TLS=1,
** CTest churn_tls), the sessions are wss:// ones that trust that PEM.
*/
#define _POSIX_C_SOURCE 200809L
#include <plugrl.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { WARMUP = 50, SEQUENTIAL = 1000, WAVES = 40, WAVE = 16, STEPS = 5, THREAD_SLACK = 3 * WAVE };
#define RSS_SLACK (8L << 20)
enum { RECONNECT_WARMUP = 200, RECONNECT_LATE_MS = 30 };
#define RECONNECT_RSS_SLACK (2L << 20)

/* Cleared by --no-memory-bound. */
static int memory_bound = 1;

/* What the process holds: open descriptors, threads, resident bytes. */
struct usage {
  long fds, threads, rss;
};

static long count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) {
    return -1;
  }
  long n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] != '.') {
      n++;
    }
  }
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static long count_threads(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) {
    return -1;
  }
  char line[256];
  long n = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Threads:", 8) == 0) {
      n = strtol(line + 8, NULL, 10);
    }
  }
  fclose(f);
  return n;
}

static long resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) {
    return -1;
  }
  long size = 0, resident = -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) {
    resident = -1;
  }
  fclose(f);
  return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The slowest session since the last measure, in seconds (any thread). */
static pthread_mutex_t slowest_mu = PTHREAD_MUTEX_INITIALIZER;
static double slowest;

static void note_time(double took) {
  pthread_mutex_lock(&slowest_mu);
  if (took > slowest) {
    slowest = took;
  }
  pthread_mutex_unlock(&slowest_mu);
}

static struct usage measure(const char *when) {
  struct usage u = {count_fds(), count_threads(), resident_bytes()};
  printf("%-33s descriptors %3ld  threads %3ld  resident %6ld KiB  slowest session %6.1f ms\n", when, u.fds,
         u.threads, u.rss >> 10, slowest * 1e3);
  fflush(stdout);
  slowest = 0;
  return u;
}

/* session opens a client, steps a runner of one env STEPS times, and
** closes both; on failure it writes why and returns nonzero. */
/* test_options fills opt for url as every session of this test opens. */
static void test_options(plugrl_options *opt, const char *url) {
  plugrl_options_init(opt);
  opt->url = url;
  opt->tls_ca_file = getenv("PLUGRL_TEST_CA_FILE"); /* wss:// (CTest churn_tls); NULL otherwise */
  opt->receive_timeout_ms = 20000;
}

/* open_runner opens a client with opt and a runner of envs on it; on
** failure *r (and maybe *c) stays NULL, and the status says why. */
static plugrl_status open_runner(const plugrl_options *opt, int64_t envs, plugrl_client **c, plugrl_runner **r) {
  *c = NULL;
  *r = NULL;
  plugrl_status s = plugrl_open(opt, c);
  if (s == PLUGRL_OK) {
    s = plugrl_runner_new(*c, envs, r);
  }
  return s;
}

static int session(const char *url, int index, char *why, size_t n) {
  double start = now_s();
  plugrl_options opt;
  test_options(&opt, url);
  plugrl_client *c;
  plugrl_runner *r;
  plugrl_status s = open_runner(&opt, 1, &c, &r);
  double state[1][2] = {{(double)index, 0}};
  double actions[1][2];
  double reward[1] = {1};
  uint8_t terminated[1] = {0}, truncated[1] = {0};
  int64_t shape[2] = {1, 2};
  plugrl_array arr = {"s", state, PLUGRL_DTYPE_F64, 2, shape};
  const char *text[1] = {"churn"};
  plugrl_observation obs = {NULL, 0, &arr, 1, text, 0};
  for (int step = 0; s == PLUGRL_OK && step < STEPS; step++) {
    s = plugrl_runner_act(r, &obs, actions, sizeof actions, PLUGRL_DTYPE_F64);
    if (s == PLUGRL_OK) {
      state[0][1] += 1;
      terminated[0] = (uint8_t)(step == STEPS - 1);
      s = plugrl_runner_report(r, &obs, reward, terminated, truncated, NULL);
    }
  }
  if (s != PLUGRL_OK) {
    snprintf(why, n, "session %d: %s: %s", index, plugrl_status_str(s),
             r ? plugrl_runner_errmsg(r) : plugrl_errmsg(c));
  }
  if (r) {
    plugrl_runner_free(r);
  }
  plugrl_status cs = plugrl_close(c);
  if (s == PLUGRL_OK && cs != PLUGRL_OK) {
    snprintf(why, n, "session %d: close: %s", index, plugrl_status_str(cs));
    s = cs;
  }
  note_time(now_s() - start);
  return s != PLUGRL_OK;
}

static int sequential(const char *url, int count, int first) {
  char why[512];
  for (int i = 0; i < count; i++) {
    if (session(url, first + i, why, sizeof why)) {
      fprintf(stderr, "%s\n", why);
      return 1;
    }
  }
  return 0;
}

struct job {
  const char *url;
  int index, failed;
  char why[512];
};

static void *run(void *arg) {
  struct job *j = arg;
  j->failed = session(j->url, j->index, j->why, sizeof j->why);
  return NULL;
}

static int waves(const char *url, int count, int first) {
  for (int w = 0; w < count; w++) {
    pthread_t th[WAVE];
    struct job jobs[WAVE];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < WAVE; i++) {
      jobs[i].url = url;
      jobs[i].index = first + w * WAVE + i;
      if (pthread_create(&th[i], NULL, run, &jobs[i]) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
      }
    }
    int failed = 0;
    for (int i = 0; i < WAVE; i++) {
      pthread_join(th[i], NULL);
      if (jobs[i].failed) {
        fprintf(stderr, "%s\n", jobs[i].why);
        failed = 1;
      }
    }
    if (failed) {
      return 1;
    }
  }
  return 0;
}

/* One runner, reconnects times a new connection: every other report comes
** RECONNECT_LATE_MS after its action, past the server's feedback timeout,
** and the next act reconnects (the report between them goes through, so
** the library's "every connection ends before a feedback" guard never
** trips). */
static int reconnect_churn(const char *url, long reconnects) {
  plugrl_options opt;
  test_options(&opt, url);
  opt.max_reconnects = 1000;
  opt.reconnect_backoff_ms = 1;
  opt.max_backoff_ms = 2;
  plugrl_client *c;
  plugrl_runner *r;
  plugrl_status s = open_runner(&opt, 2, &c, &r);
  double state[2][2] = {{0, 0}, {1, 0}}, actions[2][2], reward[2] = {1, 1};
  uint8_t terminated[2] = {0}, truncated[2] = {0};
  int64_t shape[2] = {2, 2};
  plugrl_array arr = {"s", state, PLUGRL_DTYPE_F64, 2, shape};
  plugrl_observation obs = {NULL, 0, &arr, 1, NULL, 0};
  struct usage first = {0, 0, 0};
  int measured = 0;
  plugrl_statistics st;
  long step = 0;
  double last_step = now_s();
  for (; s == PLUGRL_OK; step++) {
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (plugrl_runner_stats(r, &st) != PLUGRL_OK) {
      break;
    }
    if (!measured && st.reconnects >= RECONNECT_WARMUP) {
      first = measure("after the first reconnects");
      measured = 1;
    }
    if ((long)st.reconnects >= reconnects) {
      break;
    }
    s = plugrl_runner_act(r, &obs, actions, sizeof actions, PLUGRL_DTYPE_F64);
    if (s != PLUGRL_OK) {
      break;
    }
    if (step % 2 == 1) {
      struct timespec late = {0, RECONNECT_LATE_MS * 1000000L};
      nanosleep(&late, NULL);
    }
    state[0][1] += 1;
    s = plugrl_runner_report(r, &obs, reward, terminated, truncated, NULL);
    double t = now_s();
    note_time(t - last_step);
    last_step = t;
  }
  if (s != PLUGRL_OK) {
    fprintf(stderr, "churn: step %ld, after %llu reconnects: %s: %s\n", step, (unsigned long long)st.reconnects,
            plugrl_status_str(s), r ? plugrl_runner_errmsg(r) : plugrl_errmsg(c));
  }
  struct usage last = measure("after the rest");
  if (r) {
    plugrl_runner_free(r);
  }
  plugrl_close(c);
  if (s != PLUGRL_OK || !measured) {
    return 1;
  }
  int bad = 0;
  if (last.fds != first.fds) {
    fprintf(stderr, "churn: %ld descriptors open after %llu reconnects, %ld after %d: a reconnect leaks them\n",
            last.fds, (unsigned long long)st.reconnects, first.fds, (int)RECONNECT_WARMUP);
    bad = 1;
  }
  if (last.threads > first.threads + THREAD_SLACK) {
    fprintf(stderr, "churn: %ld threads after %llu reconnects, %ld after %d\n", last.threads,
            (unsigned long long)st.reconnects, first.threads, (int)RECONNECT_WARMUP);
    bad = 1;
  }
  if (memory_bound && last.rss > first.rss + RECONNECT_RSS_SLACK) {
    fprintf(stderr, "churn: resident memory grew by %ld KiB over %llu reconnects (allowed: %ld KiB)\n",
            (last.rss - first.rss) >> 10, (unsigned long long)st.reconnects - RECONNECT_WARMUP,
            RECONNECT_RSS_SLACK >> 10);
    bad = 1;
  }
  printf("%llu reconnects of one handle (%llu for the feedback timeout), %ld steps: %s\n",
         (unsigned long long)st.reconnects, (unsigned long long)st.reconnects_feedback_timeout, step,
         bad ? "something grew" : "descriptors, threads and memory stayed bounded");
  return bad;
}

int main(int argc, char **argv) {
  int quick = 0, rounds = 1, a = 1;
  long reconnects = 0;
  for (; a < argc - 1; a++) {
    if (strcmp(argv[a], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[a], "--no-memory-bound") == 0) {
      memory_bound = 0;
    } else if (strcmp(argv[a], "--rounds") == 0 && a + 1 < argc - 1) {
      char *end;
      long n = strtol(argv[++a], &end, 10);
      if (*end != '\0' || n < 1 || n > 1000000) {
        fprintf(stderr, "churn: --rounds takes a count from 1 to 1000000, not '%s'\n", argv[a]);
        return 2;
      }
      rounds = (int)n;
    } else if (strcmp(argv[a], "--reconnects") == 0 && a + 1 < argc - 1) {
      char *end;
      reconnects = strtol(argv[++a], &end, 10);
      if (*end != '\0' || reconnects <= RECONNECT_WARMUP || reconnects > 1000000) {
        fprintf(stderr, "churn: --reconnects takes a count from %d to 1000000, not '%s'\n", RECONNECT_WARMUP + 1,
                argv[a]);
        return 2;
      }
    } else {
      break;
    }
  }
  if (a != argc - 1) {
    fprintf(stderr, "usage: %s [--quick] [--rounds N] [--reconnects N] [--no-memory-bound] ws://HOST:PORT\n", argv[0]);
    return 2;
  }
  const char *url = argv[argc - 1];
  if (reconnects > 0) {
    return reconnect_churn(url, reconnects);
  }
  int seq = quick ? SEQUENTIAL / 10 : SEQUENTIAL, nwaves = quick ? WAVES / 10 : WAVES;
  if (sequential(url, WARMUP, 0)) {
    return 1;
  }
  struct usage base = measure("after the warm-up");
  if (base.fds < 0 || base.threads < 0 || base.rss < 0) {
    fprintf(stderr, "churn: /proc/self is not readable here: cannot count what the process holds\n");
    return 1;
  }
  if (sequential(url, seq, WARMUP)) {
    return 1;
  }
  struct usage first = measure("after sessions on one thread");
  struct usage last = first;
  int sessions = WARMUP + seq;
  for (int r = 1; r <= rounds; r++) {
    char when[64];
    if (waves(url, nwaves, sessions)) {
      return 1;
    }
    sessions += nwaves * WAVE;
    snprintf(when, sizeof when, rounds > 1 ? "round %d: threads came and went" : "after threads that came and went", r);
    measure(when);
    if (sequential(url, seq, sessions)) {
      return 1;
    }
    sessions += seq;
    snprintf(when, sizeof when, rounds > 1 ? "round %d: as many again" : "after as many again", r);
    last = measure(when);
  }
  int later = sessions - WARMUP - seq;
  int bad = 0;
  if (last.fds != base.fds) {
    fprintf(stderr, "churn: %ld descriptors open after %d sessions, %ld after the warm-up: a close leaks them\n",
            last.fds, sessions, base.fds);
    bad = 1;
  }
  if (last.threads > first.threads + THREAD_SLACK) {
    fprintf(stderr, "churn: %ld threads after %d sessions, %ld after the first %d: the last %d sessions added more than %d\n",
            last.threads, sessions, first.threads, WARMUP + seq, later, (int)THREAD_SLACK);
    bad = 1;
  }
  if (memory_bound && last.rss > first.rss + RSS_SLACK) {
    fprintf(stderr, "churn: resident memory grew by %ld KiB over the last %d sessions (allowed: %ld KiB)\n",
            (last.rss - first.rss) >> 10, later, RSS_SLACK >> 10);
    bad = 1;
  }
  printf("%d sessions (%d on threads that exited): %s\n", sessions, rounds * nwaves * WAVE,
         bad ? "something grew" : "descriptors, threads and memory stayed bounded");
  return bad;
}
