/*
** A plugin that uses libplugrl, as a ros2_control controller, a ROS 2
** component or a simulator's plugin does: a module the host loads with
** dlopen() and unloads with dlclose(), which links libplugrl while the host
** does not. tests/c/plugin_host.c loads and unloads it, and calls what it
** exports. Built as a MODULE library (CMakeLists.txt).
**
** Its runs check every action against `plugrl serve --policy probe
** --horizon 4 --action-dim 3` (SPEC 8.1: 10000 k + 10 env + d for step k
** of the chunk, env index env, dimension d), as tests/c/threads.c does.
*/
#include <plugrl.h>

#include <stdio.h>
#include <string.h>

enum { ENVS = 2, DIM = 3, HORIZON = 4 };

/* Log lines the library gave this plugin's clients; the callback is code
** of this module, so a call after the module is unloaded would crash. */
static int log_lines;

static void plugin_log(void *user, int level, const char *message) {
  (void)user;
  (void)level;
  (void)message;
  log_lines++;
}

/* The library's own version, read through the plugin's link to it. */
const char *plugin_library_version(void) { return plugrl_version(); }

/*
** Opens a client and a runner on url and steps `steps` times, checking
** every action. With leave_open, the last step's report is not made and
** neither handle is freed: the plugin forgot them, and the host unloads it
** with the connection open (with steps 1, owing the server the feedback
** of the action it just inferred). Returns 0, or 1 with why filled.
*/
int plugin_run(const char *url, int steps, int leave_open, char *why, size_t why_len) {
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = url;
  opt.receive_timeout_ms = 20000;
  opt.log = plugin_log;
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
  const char *text[ENVS] = {"plugin", "plugin"};
  plugrl_observation obs = {NULL, 0, &arr, 1, text, 0};
  int next_k[ENVS] = {0};
  int failed = 0;
  for (int step = 0; s == PLUGRL_OK && step < steps && !failed; step++) {
    memset(actions, 0xff, sizeof actions); /* NaN: an action not written shows */
    s = plugrl_runner_act(r, &obs, actions, sizeof actions, PLUGRL_DTYPE_F64);
    if (s != PLUGRL_OK) {
      break;
    }
    for (int i = 0; i < ENVS && !failed; i++) {
      for (int d = 0; d < DIM && !failed; d++) {
        double want = 10000.0 * next_k[i] + 10.0 * i + d;
        if (actions[i][d] != want) {
          failed = 1;
          snprintf(why, why_len, "act %d: env %d's action[%d] is %g, want %g", step, i, d, actions[i][d], want);
        }
      }
    }
    if (leave_open && step == steps - 1) {
      return failed;
    }
    for (int i = 0; i < ENVS; i++) {
      state[i][0] += 1;
      terminated[i] = (uint8_t)((int)state[i][0] % (5 + i) == 0);
      next_k[i] = terminated[i] || next_k[i] + 1 == HORIZON ? 0 : next_k[i] + 1;
    }
    s = plugrl_runner_report(r, &obs, rewards, terminated, truncated, NULL);
  }
  if (s != PLUGRL_OK && !failed) {
    failed = 1;
    snprintf(why, why_len, "%s: %s", plugrl_status_str(s), r ? plugrl_runner_errmsg(r) : plugrl_errmsg(c));
  }
  if (r) {
    plugrl_runner_free(r);
  }
  plugrl_close(c);
  return failed;
}

/* How many log lines this copy of the plugin was given. */
int plugin_log_lines(void) { return log_lines; }
