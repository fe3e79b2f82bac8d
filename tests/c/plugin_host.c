/*
** A host that loads libplugrl only through a plugin (tests/c/plugin.c), as
** a controller manager, a component container or a simulator loads its
** plugins: dlopen() after the process has started, RTLD_LOCAL, and
** dlclose() when done, then the same plugin loaded again. Run as
**
**   plugin_host PLUGIN.so URL
**
** against `plugrl serve --policy probe --horizon 4 --action-dim 3
** --feedback-timeout 200ms` (tests/run_with_server.sh passes URL).
**
** What it checks, for each of CYCLES loads:
**   - the plugin loads, its clients step and every action is right;
**   - dlclose() really unloads the plugin (dlopen RTLD_NOLOAD finds it
**     gone, and its statics start again at the next load) and leaves
**     libplugrl loaded (it is linked NODELETE: the Go runtime cannot be
**     unloaded), the same copy each time;
**   - in every other cycle the plugin forgets a client it opened, owing the
**     server a feedback, and is unloaded with it open: the server then
**     closes that connection ("Feedback timeout") while no code of the
**     plugin is loaded, and the library must not call the plugin's log
**     callback from its own threads, nor crash, nor stop the next load's
**     clients from working.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { CYCLES = 5, STEPS = 200 };

typedef int (*run_fn)(const char *url, int steps, int leave_open, char *why, size_t why_len);
typedef int (*count_fn)(void);
typedef const char *(*version_fn)(void);

/* Whether any object loaded in the process has "libplugrl" in its name. */
static int find_plugrl(struct dl_phdr_info *info, size_t size, void *found) {
  (void)size;
  if (info->dlpi_name && strstr(info->dlpi_name, "libplugrl")) {
    *(int *)found = 1;
  }
  return 0;
}

static int plugrl_loaded(void) {
  int found = 0;
  dl_iterate_phdr(find_plugrl, &found);
  return found;
}

static void *symbol(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "plugin_host: dlsym %s: %s\n", name, dlerror());
  }
  return p;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PLUGIN.so ws://HOST:PORT\n", argv[0]);
    return 2;
  }
  const char *plugin = argv[1], *url = argv[2];
  if (plugrl_loaded()) {
    fprintf(stderr, "plugin_host: libplugrl is loaded before the plugin: this host must not link it\n");
    return 1;
  }
  char library[4096] = "";
  int leaked = 0;
  for (int cycle = 0; cycle < CYCLES; cycle++) {
    void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "plugin_host: cycle %d: dlopen %s: %s\n", cycle, plugin, dlerror());
      return 1;
    }
    /* ISO C has no conversion from an object pointer to a function
    ** pointer; POSIX guarantees dlsym's result can be copied into one. */
    void *p_run = symbol(h, "plugin_run"), *p_lines = symbol(h, "plugin_log_lines"),
         *p_runs = symbol(h, "plugin_runs"), *p_version = symbol(h, "plugin_library_version");
    /* dlsym on the plugin's handle searches its dependencies too. */
    void *in_library = symbol(h, "plugrl_version");
    if (!p_run || !p_lines || !p_runs || !p_version || !in_library) {
      return 1;
    }
    run_fn run;
    count_fn log_lines, runs;
    version_fn version;
    memcpy(&run, &p_run, sizeof run);
    memcpy(&log_lines, &p_lines, sizeof log_lines);
    memcpy(&runs, &p_runs, sizeof runs);
    memcpy(&version, &p_version, sizeof version);
    Dl_info info;
    if (!dladdr(in_library, &info) || !info.dli_fname) {
      fprintf(stderr, "plugin_host: dladdr of plugrl_version failed\n");
      return 1;
    }
    if (cycle == 0) {
      snprintf(library, sizeof library, "%s", info.dli_fname);
      printf("plugin_host: %s loads %s, version %s\n", plugin, library, version());
    } else if (strcmp(library, info.dli_fname) != 0) {
      fprintf(stderr, "plugin_host: cycle %d: the plugin found %s, not the %s of cycle 0\n", cycle, info.dli_fname,
              library);
      return 1;
    }
    /* The run count, not the log lines: a run logs nothing, so a count of
    ** those that survived the unload would still read 0. */
    if (runs() != 0 || log_lines() != 0) {
      fprintf(stderr, "plugin_host: cycle %d: the plugin's statics survived its dlclose (%d runs, %d log lines)\n",
              cycle, runs(), log_lines());
      return 1;
    }
    char why[512] = "";
    if (run(url, STEPS, 0, why, sizeof why) != 0) {
      fprintf(stderr, "plugin_host: cycle %d: %s\n", cycle, why);
      return 1;
    }
    int leave_one = cycle % 2 == 1;
    if (leave_one) {
      if (run(url, 1, 1, why, sizeof why) != 0) {
        fprintf(stderr, "plugin_host: cycle %d, the client left open: %s\n", cycle, why);
        return 1;
      }
      leaked++;
    }
    if (dlclose(h) != 0) {
      fprintf(stderr, "plugin_host: cycle %d: dlclose: %s\n", cycle, dlerror());
      return 1;
    }
    void *still = dlopen(plugin, RTLD_NOW | RTLD_NOLOAD);
    if (still) {
      fprintf(stderr, "plugin_host: cycle %d: the plugin is still loaded after dlclose: the test proves nothing\n",
              cycle);
      return 1;
    }
    void *lib = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) {
      fprintf(stderr, "plugin_host: cycle %d: %s was unloaded with the plugin (it should be NODELETE)\n", cycle,
              library);
      return 1;
    }
    dlclose(lib);
    if (leave_one) {
      /* The server's feedback timeout (200 ms) ends the forgotten client's
      ** connection meanwhile, with nothing of the plugin loaded. */
      struct timespec wait = {0, 600 * 1000 * 1000};
      nanosleep(&wait, NULL);
    }
  }
  printf("plugin_host: %d loads and unloads, %d x %d steps, %d clients left open at unload\n", CYCLES, CYCLES, STEPS,
         leaked);
  return 0;
}
