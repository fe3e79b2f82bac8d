/*
** A plugin that uses libplugrl, as a ros2_control controller, a ROS 2
** component or a simulator's plugin does: a module the host loads with
** dlopen() and unloads with dlclose(), which links libplugrl while the host
** does not. tests/c/plugin_host.c loads and unloads it, and calls what it
** exports. Built as a MODULE library (CMakeLists.txt).
**
** Its runs check every action against `plugrl serve --policy probe
** --horizon 4 --action-dim 3` (probe_runner.h), as tests/c/threads.c does.
*/
#include <plugrl.h>

#include <stdio.h>
#include <string.h>

#include "probe_runner.h"

/* Log lines the library gave this plugin's clients; the callback is code
** of this module, so a call after the module is unloaded would crash. A
** run without a ledger or a reconnect logs nothing, so this stays 0. */
static int log_lines;

/* Runs of this copy of the plugin: a static that is never 0 after a run,
** for the host to see that an unload really dropped the module's data. */
static int runs;

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
  probe_runner runner, *p = &runner;
  runs++;
  plugrl_status s = probe_open(p, &opt, "plugin", 0);
  int failed = 0;
  for (int step = 0; s == PLUGRL_OK && step < steps && !failed; step++) {
    s = probe_act(p);
    if (s != PLUGRL_OK) {
      break;
    }
    if (!probe_check(p, why, why_len)) {
      failed = 1;
    } else if (leave_open && step == steps - 1) {
      return 0;
    } else {
      s = probe_report(p);
    }
  }
  if (s != PLUGRL_OK && !failed) {
    failed = 1;
    snprintf(why, why_len, "%s: %s", plugrl_status_str(s), probe_errmsg(p));
  }
  probe_close(p);
  return failed;
}

/* How many log lines this copy of the plugin was given. */
int plugin_log_lines(void) { return log_lines; }

/* How many times this copy of the plugin ran (plugin_run). */
int plugin_runs(void) { return runs; }
