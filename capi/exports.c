/* The exported functions of plugrl.h: each checks, in C, that the process
** is not a child forked after the library was loaded, then calls its Go
** implementation (plugrl__go_*, in client.go, runner.go and main.go).
**
** Why in C: a forked child has only the thread that called fork(); the Go
** runtime's other threads are gone, and entering Go there can wait for
** ever for one of them (a scheduler lock, a P, a garbage collection in
** progress at the fork). So the child never enters Go: every call returns
** PLUGRL_CLOSED (or a static answer), and nothing touches the parent's
** connections. plugrl_interrupt, plugrl_runner_interrupt and
** plugrl_fix_signal_handlers are C already (helpers.c), and so are
** plugrl_version, plugrl_version_number, plugrl_status_str and
** plugrl_dtype_size (below), which never enter Go.
**
** Each also lets a real-time caller raise sysmon to its priority before it
** enters Go (plugrl__rt_ceiling, helpers.c): entering Go from a real-time
** thread could otherwise spin against a preempted sysmon. And each counts
** its call in and out of the collection's gate (enter, leave: the library
** collects after a close only when no other call is in progress, and
** holds new calls at the gate meanwhile; helpers.c says why), so every
** path from enter() returns through leave(). */
#include <pthread.h>

#include "capi.h"
#include "_cgo_export.h"

/* A thread's first call into Go takes one of the runtime's spare Ms
** (needm), and the runtime makes the next spare only from a thread already
** in Go (cgocallbackg1): a thread that finds none waits in a loop of 1 us
** sleeps. 64 SCHED_FIFO threads opening clients at once on one core all
** did, and their wake-ups left the core to nothing else: the runtime's
** threads starved, and the handshakes timed out. So a thread's first call
** is an empty one, made alone: it takes the spare M and, inside Go, makes
** the next, which the next thread then finds waiting. Threads queue for
** it asleep, on a mutex. Once per thread. */
static __thread int thread_bound;
static pthread_mutex_t first_call_mu = PTHREAD_MUTEX_INITIALIZER;

/* A call is never a cancellation point. A thread that pthread_cancel
** acted on inside a call (at a cancellation point in a log or episode
** callback: a printf, a usleep) was unwound through the Go frames it was
** called from, and left its handle busy for good (a plugrl_close of it
** then waited for ever), the collection's gate counted in, and its
** goroutine stuck. So each call turns cancellation off while it runs, and
** the outermost one (a callback may call in again) puts it back: a cancel
** that came meanwhile acts as the call returns (an asynchronous thread) or
** at the thread's first cancellation point after it. Three calls to
** glibc per call for a deferred thread (two in plugrl__cancellation_off,
** one in restore_cancellation), each a thread-local atomic of a few
** nanoseconds; five for an asynchronous one. */
static __thread int call_depth;
static __thread int cancel_state;
static __thread int cancel_type;

/* restore_cancellation, at the end of the outermost call, puts back the
** cancellation state and type that enter found. A cancel that came during
** the call acts here when that state is enabled: at once when the type is
** asynchronous, otherwise at the thread's next cancellation point. glibc
** before 2.41 (2.31 and 2.36 seen) acts on the asynchronous case inside
** pthread_setcancelstate without setting the thread's exit value, so
** pthread_join gave NULL, or PTHREAD_CANCELED only when a cancelled
** thread's descriptor happened to be reused (tests/c/cancel.c failed so,
** rarely). So the state comes back while the type is still deferred (as
** enter left it, and each callback's return puts it back: helpers.c,
** plugrl__call_log), when a state change never acts; pthread_testcancel
** then acts as a cancellation point does, with PTHREAD_CANCELED; and the
** asynchronous type comes back after it. */
static void restore_cancellation(void) {
  pthread_setcancelstate(cancel_state, NULL);
  if (cancel_type == PTHREAD_CANCEL_ASYNCHRONOUS) {
    if (cancel_state == PTHREAD_CANCEL_ENABLE) {
      pthread_testcancel();
    }
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  }
}

/* enter starts a call into Go: it turns cancellation off, waits while the
** library collects (plugrl__gate_enter, helpers.c), lets a real-time
** caller raise sysmon (and be seen before its first call fits the
** runtime's Ps to the threads: runtime.go, fitProcs), and binds the
** thread on its first call. leave ends the call. */
static void enter(void) {
  if (call_depth == 0) {
    /* Type deferred, then state off (helpers.c says why), both kept for
    ** restore_cancellation. Counted after: a cancel that acts before
    ** this leaves no count behind. */
    plugrl__cancellation_off(&cancel_type, &cancel_state);
  }
  call_depth++;
  plugrl__gate_enter();
  plugrl__rt_ceiling();
  if (!thread_bound) {
    /* Before this thread first runs Go code (on a goroutine stack, with
    ** the signal stack the runtime gives it from here on): the handlers
    ** installed since load get SA_ONSTACK, as plugrl_open does. A host's
    ** first call is often plugrl_options_init, before any open. */
    plugrl__onstack_all();
    pthread_mutex_lock(&first_call_mu);
    plugrl__gate_bind_thread(); /* counted before Go fits its Ps to the threads */
    plugrl__go_bind_thread();
    pthread_mutex_unlock(&first_call_mu);
    thread_bound = 1;
  }
}

static void leave(void) {
  plugrl__gate_leave();
  if (--call_depth == 0) {
    restore_cancellation();
  }
}

static const char forked_msg[] =
    "libplugrl cannot be used in a child forked after it was loaded: its handles belong to the parent";

plugrl_status plugrl_options_init_size(plugrl_options *options, size_t size) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_options_init(options, size);
  leave();
  return result;
}

/* Release 0.1's entry point (the name in parentheses: plugrl.h makes
** plugrl_options_init a macro). */
plugrl_status(plugrl_options_init)(plugrl_options *options) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_options_init(options, plugrl__go_options_size_0_1());
  leave();
  return result;
}

plugrl_status plugrl_open(const plugrl_options *options, plugrl_client **client) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  /* Read before anything that may wait (enter, the Go runtime's start):
  ** a plugrl_interrupt_all from here on ends this open, though it finds
  ** no handle to raise until the open has registered one. */
  uint64_t interrupts = plugrl__interrupt_all_count();
  enter();
  plugrl_status result = plugrl__go_open(options, client, interrupts);
  leave();
  return result;
}

plugrl_status plugrl_close(plugrl_client *client) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_close(client);
  leave();
  return result;
}

const char *plugrl_errmsg(plugrl_client *client) {
  if (plugrl__forked) {
    return forked_msg;
  }
  enter();
  const char *result = plugrl__go_errmsg(client);
  leave();
  return result;
}

plugrl_status plugrl_metadata_int(plugrl_client *client, const char *key, int64_t *value, int *present) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_metadata_int(client, key, value, present);
  leave();
  return result;
}

plugrl_status plugrl_metadata_string(plugrl_client *client, const char *key, char *buf, size_t size, size_t *length, int *present) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_metadata_string(client, key, buf, size, length, present);
  leave();
  return result;
}

plugrl_status plugrl_metadata_has_feature(plugrl_client *client, const char *feature, int *present) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_metadata_has_feature(client, feature, present);
  leave();
  return result;
}

plugrl_status plugrl_metadata_json(plugrl_client *client, const char *key, char *buf, size_t size, size_t *length, int *present) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_metadata_json(client, key, buf, size, length, present);
  leave();
  return result;
}

plugrl_status plugrl_infer(plugrl_client *client, const int64_t *env_indices, const int64_t *step_ids, size_t n, const plugrl_observation *obs, const uint8_t *reuse, plugrl_action *action) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_infer(client, env_indices, step_ids, n, obs, reuse, action);
  leave();
  return result;
}

plugrl_status plugrl_action_copy(plugrl_client *client, void *dst, size_t dst_size, plugrl_dtype dtype) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_action_copy(client, dst, dst_size, dtype);
  leave();
  return result;
}

plugrl_status plugrl_feedback(plugrl_client *client, const int64_t *env_indices, const int64_t *step_ids, size_t m, const plugrl_observation *next_obs, const float *rewards, const uint8_t *terminated, const uint8_t *truncated, const plugrl_episode *episode) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_feedback(client, env_indices, step_ids, m, next_obs, rewards, terminated, truncated, episode);
  leave();
  return result;
}

plugrl_status plugrl_can_reuse(plugrl_client *client, int64_t env, int *yes) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_can_reuse(client, env, yes);
  leave();
  return result;
}

/* The four handle-free helpers answer in C, without entering Go: they are
** async-signal-safe (plugrl.h, CONVENTIONS, Signals). A signal handler
** that called one (a SIGINT handler writing plugrl_status_str of the last
** status, a crash reporter recording plugrl_version) on a thread that the
** signal caught inside the library's Go code entered Go a second time on
** that thread, and the runtime ended the process ("fatal error: morestack
** on g0", "unexpected return pc"; CTest signal_helpers). They answer the
** same in a forked child, and bind no thread to the runtime nor wait for a
** collection. */
const char *plugrl_version(void) { return PLUGRL_VERSION_STRING; }

int plugrl_version_number(void) { return PLUGRL_VERSION_NUMBER; }

/* The English names of the statuses, by value: core/client's Kinds, which
** capi's TestStatusStrMatchesKinds checks them against. */
static const char *const status_names[] = {
    [PLUGRL_OK] = "ok",
    [PLUGRL_STOPPED] = "stopped by server",
    [PLUGRL_RECONNECTED] = "reconnected",
    [PLUGRL_TIMEOUT] = "timeout",
    [PLUGRL_SERVER_ERROR] = "server error",
    [PLUGRL_PROTOCOL_ERROR] = "protocol error",
    [PLUGRL_INVALID_ARGUMENT] = "invalid argument",
    [PLUGRL_OUT_OF_ORDER] = "call out of order",
    [PLUGRL_CONNECT_FAILED] = "connection failed",
    [PLUGRL_CLOSED] = "closed or invalid handle",
    [PLUGRL_BUSY] = "busy",
    [PLUGRL_BUFFER_TOO_SMALL] = "buffer too small",
    [PLUGRL_NO_MEMORY] = "out of memory",
    [PLUGRL_INTERNAL] = "internal error",
    [PLUGRL_INTERRUPTED] = "interrupted",
};

const char *plugrl_status_str(plugrl_status status) {
  if (plugrl__forked) {
    return forked_msg;
  }
  /* Compared as unsigned: an enum may be unsigned or signed, and a value
  ** cast from a negative int must not index before the table. */
  unsigned long i = (unsigned long)(long)status;
  if (i < sizeof status_names / sizeof status_names[0] && status_names[i] != NULL) {
    return status_names[i];
  }
  return "unknown status";
}

/* The header's enum; capi's TestDtypeSizeMatchesWire checks it against
** the wire's dtypes. */
size_t plugrl_dtype_size(plugrl_dtype dtype) {
  switch (dtype) {
  case PLUGRL_DTYPE_BOOL: case PLUGRL_DTYPE_U8: case PLUGRL_DTYPE_I8:
    return 1;
  case PLUGRL_DTYPE_U16: case PLUGRL_DTYPE_I16: case PLUGRL_DTYPE_F16:
    return 2;
  case PLUGRL_DTYPE_U32: case PLUGRL_DTYPE_I32: case PLUGRL_DTYPE_F32:
    return 4;
  case PLUGRL_DTYPE_U64: case PLUGRL_DTYPE_I64: case PLUGRL_DTYPE_F64:
    return 8;
  }
  return 0;
}

plugrl_status plugrl_runner_new(plugrl_client *client, size_t num_envs, plugrl_runner **runner) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_new(client, num_envs, runner);
  leave();
  return result;
}

plugrl_status plugrl_runner_free(plugrl_runner *runner) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_free(runner);
  leave();
  return result;
}

const char *plugrl_runner_errmsg(plugrl_runner *runner) {
  if (plugrl__forked) {
    return forked_msg;
  }
  enter();
  const char *result = plugrl__go_runner_errmsg(runner);
  leave();
  return result;
}

plugrl_status plugrl_runner_on_episode(plugrl_runner *runner, plugrl_episode_fn fn, void *user) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_on_episode(runner, fn, user);
  leave();
  return result;
}

plugrl_status plugrl_runner_step_size(plugrl_runner *runner, int64_t *step_size, int *known) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_step_size(runner, step_size, known);
  leave();
  return result;
}

plugrl_status plugrl_runner_chunk(plugrl_runner *runner, int64_t env, void *dst, size_t dst_size, plugrl_dtype dtype, int64_t *steps) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_chunk(runner, env, dst, dst_size, dtype, steps);
  leave();
  return result;
}

plugrl_status plugrl_runner_act(plugrl_runner *runner, const plugrl_observation *obs, void *actions, size_t actions_size, plugrl_dtype dtype) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_act(runner, obs, actions, actions_size, dtype);
  leave();
  return result;
}

plugrl_status plugrl_runner_report(plugrl_runner *runner, const plugrl_observation *next_obs, const double *rewards, const uint8_t *terminated, const uint8_t *truncated, const uint8_t *success) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_report(runner, next_obs, rewards, terminated, truncated, success);
  leave();
  return result;
}

plugrl_status plugrl_stats(plugrl_client *client, plugrl_statistics *out) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_stats(client, out);
  leave();
  return result;
}

plugrl_status plugrl_runner_stats(plugrl_runner *runner, plugrl_statistics *out) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  enter();
  plugrl_status result = plugrl__go_runner_stats(runner, out);
  leave();
  return result;
}
