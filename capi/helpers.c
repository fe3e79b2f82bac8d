#include "capi.h"

static const char *const status_names[] = {
    "ok",                      /* PLUGRL_OK */
    "stopped by server",       /* PLUGRL_STOPPED */
    "reconnected",             /* PLUGRL_RECONNECTED */
    "timeout",                 /* PLUGRL_TIMEOUT */
    "server error",            /* PLUGRL_SERVER_ERROR */
    "protocol error",          /* PLUGRL_PROTOCOL_ERROR */
    "invalid argument",        /* PLUGRL_INVALID_ARGUMENT */
    "call out of order",       /* PLUGRL_OUT_OF_ORDER */
    "connection failed",       /* PLUGRL_CONNECT_FAILED */
    "closed or invalid handle",/* PLUGRL_CLOSED */
    "busy",                    /* PLUGRL_BUSY */
    "buffer too small",        /* PLUGRL_BUFFER_TOO_SMALL */
    "out of memory",           /* PLUGRL_NO_MEMORY */
    "internal error",          /* PLUGRL_INTERNAL */
};

const char *plugrl__status_name(int status) {
  if (status < 0 || (size_t)status >= sizeof status_names / sizeof status_names[0]) {
    return "unknown status";
  }
  return status_names[status];
}

/* Handles are tokens, never dereferenced: see registry.go. */
plugrl_client *plugrl__client_token(uintptr_t id) { return (plugrl_client *)id; }
plugrl_runner *plugrl__runner_token(uintptr_t id) { return (plugrl_runner *)id; }

void plugrl__call_log(plugrl_log_fn fn, void *user, int level, const char *message) { fn(user, level, message); }

void plugrl__call_episode(plugrl_episode_fn fn, void *user, int64_t env, double ret, int64_t length, int success) {
  fn(user, env, ret, length, success);
}
