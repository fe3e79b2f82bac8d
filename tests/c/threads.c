/*
** Many handles on many threads: THREADS threads, each with its own client
** and runner of 2 envs, step in parallel against one server, every call
** returns PLUGRL_OK, and every action is the one the server sent for that
** env at that step of its chunk. Run as: threads URL (tests/run_with_server.sh
** passes it), against `plugrl serve --policy probe --horizon 4
** --action-dim 3`, whose actions encode where they belong (probe_runner.h).
*/
#include <plugrl.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "probe_runner.h"

enum { THREADS = 8, STEPS = 300 };

struct job {
  const char *url;
  int index;
  int failed;
  char why[512];
};

static void *run(void *arg) {
  struct job *j = arg;
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = j->url;
  opt.receive_timeout_ms = 20000;
  probe_runner p;
  char why[400] = "";
  plugrl_status s = probe_open(&p, &opt, "thread", (double)j->index);
  for (int step = 0; s == PLUGRL_OK && step < STEPS; step++) {
    s = probe_act(&p);
    if (s != PLUGRL_OK) {
      break;
    }
    if (!probe_check(&p, why, sizeof why)) {
      j->failed = 1;
      snprintf(j->why, sizeof j->why, "thread %d, %s", j->index, why);
      break;
    }
    s = probe_report(&p);
  }
  if (s != PLUGRL_OK && !j->failed) {
    j->failed = 1;
    snprintf(j->why, sizeof j->why, "thread %d: %s: %s", j->index, plugrl_status_str(s), probe_errmsg(&p));
  }
  probe_close(&p);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ws://HOST:PORT\n", argv[0]);
    return 2;
  }
  pthread_t th[THREADS];
  struct job jobs[THREADS];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < THREADS; i++) {
    jobs[i].url = argv[1];
    jobs[i].index = i;
    if (pthread_create(&th[i], NULL, run, &jobs[i]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  int failed = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].failed) {
      fprintf(stderr, "%s\n", jobs[i].why);
      failed++;
    }
  }
  printf("%d threads x %d steps on their own handles: %d failed\n", THREADS, STEPS, failed);
  return failed ? 1 : 0;
}
