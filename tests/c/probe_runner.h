/*
** probe_runner.h - a runner of PROBE_ENVS envs for the C tests that step
** against `plugrl serve` (tests/c/threads.c, plugin.c, sigmask.c): one
** client and runner, a float64 state of [PROBE_ENVS, 2], episodes that end
** every 5 steps for env 0 and every 6 for env 1, and the check of each
** action against `plugrl serve --policy probe --horizon PROBE_HORIZON
** --action-dim PROBE_DIM`, whose actions encode where they belong (SPEC
** 8.1: 10000 k + 10 env + d for step k of the chunk, env index env,
** dimension d). A runner that handed out the wrong env's row, the wrong
** step of the chunk, or nothing at all, passed when only the statuses
** were checked.
**
** Header-only (static inline functions), so that a test module (plugin.c) needs
** no other object. Not thread-safe: one probe_runner per thread.
*/
#ifndef PLUGRL_TESTS_PROBE_RUNNER_H
#define PLUGRL_TESTS_PROBE_RUNNER_H

#include <plugrl.h>

#include <stdio.h>
#include <string.h>

enum { PROBE_ENVS = 2, PROBE_DIM = 3, PROBE_HORIZON = 4 };

typedef struct probe_runner {
  plugrl_client *client;
  plugrl_runner *runner;
  double state[PROBE_ENVS][2];
  double actions[PROBE_ENVS][PROBE_DIM];
  double rewards[PROBE_ENVS];
  uint8_t terminated[PROBE_ENVS], truncated[PROBE_ENVS];
  int64_t shape[2];
  const char *text[PROBE_ENVS];
  plugrl_array arr;
  plugrl_observation obs;
  /* The step of its chunk each env's next action must be: 0 at a new
  ** chunk (the first, after one ran out, after an episode ended). */
  int next_k[PROBE_ENVS];
  int acts; /* actions taken */
} probe_runner;

/* probe_open opens a client with opt and a runner on it; the observation's
** text is text for every env and its state's second column is tag.
** PLUGRL_OK, or the status that failed (p->client may still need
** probe_close: call it either way). */
static inline plugrl_status probe_open(probe_runner *p, const plugrl_options *opt, const char *text, double tag) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < PROBE_ENVS; i++) {
    p->rewards[i] = 1;
    p->state[i][1] = tag;
    p->text[i] = text;
  }
  p->shape[0] = PROBE_ENVS;
  p->shape[1] = 2;
  p->arr.name = "s";
  p->arr.data = p->state;
  p->arr.dtype = PLUGRL_DTYPE_F64;
  p->arr.ndim = 2;
  p->arr.shape = p->shape;
  p->obs.states = &p->arr;
  p->obs.num_states = 1;
  p->obs.text = p->text;
  plugrl_status s = plugrl_open(opt, &p->client);
  if (s == PLUGRL_OK) {
    s = plugrl_runner_new(p->client, PROBE_ENVS, &p->runner);
  }
  return s;
}

/* probe_act gets this step's actions into p->actions (NaN first, so that
** an action not written shows). */
static inline plugrl_status probe_act(probe_runner *p) {
  memset(p->actions, 0xff, sizeof p->actions);
  plugrl_status s = plugrl_runner_act(p->runner, &p->obs, p->actions, sizeof p->actions, PLUGRL_DTYPE_F64);
  if (s == PLUGRL_OK) {
    p->acts++;
  }
  return s;
}

/* probe_check returns 1 when the last actions are the probe policy's for
** each env's step of its chunk, else 0 with why filled. */
static inline int probe_check(const probe_runner *p, char *why, size_t why_len) {
  for (int i = 0; i < PROBE_ENVS; i++) {
    for (int d = 0; d < PROBE_DIM; d++) {
      double want = 10000.0 * p->next_k[i] + 10.0 * i + d;
      if (p->actions[i][d] != want) {
        snprintf(why, why_len, "act %d: env %d's action[%d] is %g, want %g (step %d of its chunk)", p->acts - 1, i, d,
                 p->actions[i][d], want, p->next_k[i]);
        return 0;
      }
    }
  }
  return 1;
}

/* probe_report steps the envs (env i's episode ends every 5 + i steps) and
** reports. */
static inline plugrl_status probe_report(probe_runner *p) {
  for (int i = 0; i < PROBE_ENVS; i++) {
    p->state[i][0] += 1;
    p->terminated[i] = (uint8_t)((int)p->state[i][0] % (5 + i) == 0);
    p->next_k[i] = p->terminated[i] || p->next_k[i] + 1 == PROBE_HORIZON ? 0 : p->next_k[i] + 1;
  }
  return plugrl_runner_report(p->runner, &p->obs, p->rewards, p->terminated, p->truncated, NULL);
}

/* probe_errmsg is the message of the last failed call. */
static inline const char *probe_errmsg(const probe_runner *p) {
  return p->runner ? plugrl_runner_errmsg(p->runner) : plugrl_errmsg(p->client);
}

/* probe_close frees the runner and closes the client. */
static inline void probe_close(probe_runner *p) {
  if (p->runner) {
    plugrl_runner_free(p->runner);
    p->runner = NULL;
  }
  plugrl_close(p->client);
  p->client = NULL;
}

#endif
