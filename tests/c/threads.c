/*
** Many handles on many threads: THREADS threads, each with its own client
** and runner of 2 envs, step in parallel against one server, every call
** returns PLUGRL_OK, and every action is the one the server sent for that
** env at that step of its chunk. Run as: threads URL (tests/run_with_server.sh
** passes it), against `plugrl serve --policy probe --horizon 4
** --action-dim 3`, whose actions encode where they belong (SPEC 8.1:
** 10000 k + 10 env + d for step k of the chunk, env index env, dimension
** d): a runner that handed out the wrong env's row, the wrong step of the
** chunk, or nothing at all, passed when only the statuses were checked.
*/
#include <plugrl.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum { THREADS = 8, STEPS = 300, ENVS = 2, DIM = 3, HORIZON = 4 };

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
  plugrl_client *c = NULL;
  plugrl_runner *r = NULL;
  plugrl_status s = plugrl_open(&opt, &c);
  if (s == PLUGRL_OK) {
    s = plugrl_runner_new(c, ENVS, &r);
  }
  double state[ENVS][2] = {{0}};
  double actions[ENVS][DIM];
  double rewards[ENVS] = {1, 1};
  uint8_t terminated[ENVS] = {0}, truncated[ENVS] = {0};
  int64_t shape[2] = {ENVS, 2};
  plugrl_array arr = {"s", state, PLUGRL_DTYPE_F64, 2, shape};
  const char *text[ENVS] = {"thread", "thread"};
  plugrl_observation obs = {NULL, 0, &arr, 1, text, 0};
  /* The step of its chunk each env's next action must be: 0 at a new chunk
  ** (the first, after one ran out, after an episode ended). */
  int next_k[ENVS] = {0};
  for (int step = 0; s == PLUGRL_OK && step < STEPS; step++) {
    for (int i = 0; i < ENVS; i++) {
      for (int d = 0; d < DIM; d++) {
        actions[i][d] = -1; /* no probe value: an action not written shows */
      }
    }
    s = plugrl_runner_act(r, &obs, actions, sizeof actions, PLUGRL_DTYPE_F64);
    if (s != PLUGRL_OK) {
      break;
    }
    for (int i = 0; i < ENVS && !j->failed; i++) {
      for (int d = 0; d < DIM && !j->failed; d++) {
        double want = 10000.0 * next_k[i] + 10.0 * i + d;
        if (actions[i][d] != want) {
          j->failed = 1;
          snprintf(j->why, sizeof j->why, "thread %d, act %d: env %d's action[%d] is %g, want %g (step %d of its chunk)",
                   j->index, step, i, d, actions[i][d], want, next_k[i]);
        }
      }
    }
    if (j->failed) {
      break;
    }
    for (int i = 0; i < ENVS; i++) {
      state[i][0] += 1;
      state[i][1] = (double)j->index;
      terminated[i] = (uint8_t)((int)state[i][0] % (5 + i) == 0);
      next_k[i] = terminated[i] || next_k[i] + 1 == HORIZON ? 0 : next_k[i] + 1;
    }
    s = plugrl_runner_report(r, &obs, rewards, terminated, truncated, NULL);
  }
  if (s != PLUGRL_OK && !j->failed) {
    j->failed = 1;
    snprintf(j->why, sizeof j->why, "thread %d: %s: %s", j->index, plugrl_status_str(s),
             r ? plugrl_runner_errmsg(r) : plugrl_errmsg(c));
  }
  if (r) {
    plugrl_runner_free(r);
  }
  plugrl_close(c);
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
