/*
** probe_client.c - N probe envs of SPEC 8.1 on libplugrl's LOW LEVEL API
** (plugrl_infer / plugrl_feedback), with the chunk bookkeeping done here:
**
**   - infer only for the envs whose action chunk ran out;
**   - sum each env's rewards over its chunk;
**   - end a chunk early at a terminal step and send that step's (terminal)
**     observation in the feedback;
**   - reuse fed-back observations (SPEC 10.1) when plugrl_can_reuse allows;
**   - on PLUGRL_RECONNECTED drop every chunk (the server kept nothing) and
**     infer again for every env.
**
** Usage:
**   probe_client --url ws://HOST:PORT [--envs N] [--api-key KEY]
**                [--max-reconnects N] [--timeout-ms MS]
**
** It runs until the server stops the run and then exits 0; on any other
** end it prints the library's message (or its own, for an action that does
** not fit the metadata) and exits 1 (2 for a usage error). SIGINT (Ctrl-C)
** or SIGTERM ends the call that waits on the server at once (connecting
** included); the client then closes with a close frame (SPEC 7.5) and the
** program ends by that signal (a shell sees 130 for SIGINT), so that a
** script running it in a loop stops too. A signal the program was started
** with ignored (SIGINT in a script's background job) stays ignored, as the
** shell that started it asks: stop such a program with SIGTERM.
** plugrl-conformance --probe --scenario all --client "probe_client ..."
** checks it.
*/
/* sigaction is POSIX and SA_ONSTACK its XSI option, not C99. */
#define _XOPEN_SOURCE 700

#include <plugrl.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "plugrl_probe_client_c"
#define REUSE_FEATURE "reuse-feedback-obs"

/* SPEC 8.1: env i's episode lasts 3 + 2 * (i mod 3) steps. */
static double episode_length(int64_t i) { return (double)(3 + 2 * (i % 3)); }

typedef struct probe {
  int64_t n; /* envs */
  int64_t d; /* action width */
  int d_known;
  int own_error; /* the probe found a problem itself and printed it */
  double *t; /* [n, 1]: steps taken in the current episode */
  double *a; /* [n, d]: the action applied last */
  char **text;

  /* Chunk bookkeeping, per env. */
  int64_t horizon;    /* H of the stored chunks */
  double *chunks;     /* [n, H, d]: env i's chunk, copied out as float64 */
  int64_t *remaining; /* steps left in the chunk; 0: needs an infer */
  int64_t *step;      /* steps of the chunk already taken */
  double *chunk_sum;  /* reward summed over the chunk so far */
  int64_t *step_id;   /* chunks completed in the current episode */
  double *ep_return;
  int64_t *ep_length;
  uint8_t *done; /* terminated at this step */

  /* Scratch for one request (at most n rows). */
  int64_t *idx, *ids, *rows;
  uint8_t *reuse;
  double *sub_t, *sub_a;
  const char **sub_text;
  float *rewards;
  uint8_t *terminated, *truncated, *mask;
  double *returns;
  int64_t *lengths;
  double *actions; /* [H, k, d] as float64 */
  size_t actions_cap;
} probe;

static void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, PROG ": out of memory\n");
    exit(1);
  }
  return p;
}

static void probe_init(probe *p, int64_t n, int64_t d, int d_known) {
  int64_t i;
  size_t un = (size_t)n;
  memset(p, 0, sizeof *p);
  p->n = n;
  p->d = d;
  p->d_known = d_known;
  p->t = xcalloc(un, sizeof(double));
  p->a = xcalloc(un * (size_t)d, sizeof(double));
  p->text = xcalloc(un, sizeof(char *));
  for (i = 0; i < n; i++) {
    p->text[i] = xcalloc(32, 1);
    snprintf(p->text[i], 32, "probe env %lld", (long long)i);
  }
  p->remaining = xcalloc(un, sizeof(int64_t));
  p->step = xcalloc(un, sizeof(int64_t));
  p->chunk_sum = xcalloc(un, sizeof(double));
  p->step_id = xcalloc(un, sizeof(int64_t));
  p->ep_return = xcalloc(un, sizeof(double));
  p->ep_length = xcalloc(un, sizeof(int64_t));
  p->done = xcalloc(un, 1);
  p->idx = xcalloc(un, sizeof(int64_t));
  p->ids = xcalloc(un, sizeof(int64_t));
  p->rows = xcalloc(un, sizeof(int64_t));
  p->reuse = xcalloc(un, 1);
  p->sub_t = xcalloc(un, sizeof(double));
  p->sub_a = xcalloc(un * (size_t)d, sizeof(double));
  p->sub_text = xcalloc(un, sizeof(char *));
  p->rewards = xcalloc(un, sizeof(float));
  p->terminated = xcalloc(un, 1);
  p->truncated = xcalloc(un, 1);
  p->mask = xcalloc(un, 1);
  p->returns = xcalloc(un, sizeof(double));
  p->lengths = xcalloc(un, sizeof(int64_t));
}

static void probe_free(probe *p) {
  int64_t i;
  for (i = 0; i < p->n; i++) free(p->text[i]);
  free(p->text);
  free(p->t);
  free(p->a);
  free(p->chunks);
  free(p->remaining);
  free(p->step);
  free(p->chunk_sum);
  free(p->step_id);
  free(p->ep_return);
  free(p->ep_length);
  free(p->done);
  free(p->idx);
  free(p->ids);
  free(p->rows);
  free(p->reuse);
  free(p->sub_t);
  free(p->sub_a);
  free(p->sub_text);
  free(p->rewards);
  free(p->terminated);
  free(p->truncated);
  free(p->mask);
  free(p->returns);
  free(p->lengths);
  free(p->actions);
}

/* Learns the action width from the first action when metadata had none. */
static void probe_set_width(probe *p, int64_t d) {
  size_t un = (size_t)p->n;
  free(p->a);
  free(p->sub_a);
  p->d = d;
  p->d_known = 1;
  p->a = xcalloc(un * (size_t)d, sizeof(double));
  p->sub_a = xcalloc(un * (size_t)d, sizeof(double));
  free(p->chunks);
  p->chunks = NULL;
  p->horizon = 0;
}

/* The server kept nothing of the old connection: every env needs a fresh
** chunk, and no feedback is owed. Episodes go on (the envs did not reset). */
static void drop_chunks(probe *p) {
  int64_t i;
  for (i = 0; i < p->n; i++) {
    p->remaining[i] = 0;
    p->step[i] = 0;
    p->chunk_sum[i] = 0;
  }
}

/* Copies rows rows[0..k-1] of t, a and text into the scratch batch and
** fills *obs with it (states t [k,1] f64, a [k,d] f64; text <U). */
static void gather(probe *p, const int64_t *rows, size_t k, plugrl_observation *obs, plugrl_array states[2],
                   int64_t shape_t[2], int64_t shape_a[2]) {
  size_t r;
  for (r = 0; r < k; r++) {
    int64_t i = rows[r];
    p->sub_t[r] = p->t[i];
    memcpy(p->sub_a + r * (size_t)p->d, p->a + i * p->d, (size_t)p->d * sizeof(double));
    p->sub_text[r] = p->text[i];
  }
  shape_t[0] = (int64_t)k;
  shape_t[1] = 1;
  shape_a[0] = (int64_t)k;
  shape_a[1] = p->d;
  states[0].name = "t";
  states[0].data = p->sub_t;
  states[0].dtype = PLUGRL_DTYPE_F64;
  states[0].ndim = 2;
  states[0].shape = shape_t;
  states[1].name = "a";
  states[1].data = p->sub_a;
  states[1].dtype = PLUGRL_DTYPE_F64;
  states[1].ndim = 2;
  states[1].shape = shape_a;
  memset(obs, 0, sizeof *obs);
  obs->images = NULL;
  obs->num_images = 0;
  obs->states = states;
  obs->num_states = 2;
  obs->text = p->sub_text;
  obs->text_as_strings = 0;
}

/* The signal that asked the program to stop (SIGINT, SIGTERM), or 0. */
static volatile sig_atomic_t g_signal = 0;

/* Async-signal-safe: a flag, and an interrupt of whatever call waits on the
** server (or is still connecting), which then returns PLUGRL_INTERRUPTED;
** a client not in a call gets the interrupt pending, and its next infer
** returns it at once. */
static void on_signal(int sig) {
  g_signal = sig;
  plugrl_interrupt_all();
}

/* SA_ONSTACK: the Go runtime in libplugrl needs it (plugrl.h, PROCESS
** FACTS). A signal ignored at start keeps its SIG_IGN (above). */
static int install_signal_handlers(void) {
  static const int sigs[] = {SIGINT, SIGTERM};
  struct sigaction sa, old;
  size_t i;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    if (sigaction(sigs[i], NULL, &old) != 0 || (old.sa_handler != SIG_IGN && sigaction(sigs[i], &sa, NULL) != 0)) {
      fprintf(stderr, PROG ": sigaction: %s\n", strerror(errno));
      return 0;
    }
  }
  return 1;
}

/* Ends the program by the signal that asked it to stop, with a line
** saying so, once the client (if any) is closed: a process that exits
** with a status instead leaves the shell that started it to go on, as if
** the user had not pressed Ctrl-C. */
static int die_by_signal(void) {
  printf(PROG ": interrupted (%s)\n", g_signal == SIGINT ? "SIGINT" : "SIGTERM");
  fflush(stdout);
  signal(g_signal, SIG_DFL);
  raise(g_signal);
  return 128 + g_signal; /* not reached */
}

/* Prints the library's message (with the status's name, unless the message
** starts with it already) and returns the exit status. */
static int fail(plugrl_client *c, plugrl_status s, const char *during) {
  const char *name = plugrl_status_str(s), *msg = plugrl_errmsg(c);
  if (strncmp(msg, name, strlen(name)) == 0)
    fprintf(stderr, PROG ": %s: %s\n", during, msg);
  else
    fprintf(stderr, PROG ": %s: %s: %s\n", during, name, msg);
  return 1;
}

static void log_fn(void *user, int level, const char *message) {
  static const char *names[] = {"debug", "info", "warn", "error"};
  (void)user;
  if (level < PLUGRL_LOG_INFO) return;
  fprintf(stderr, PROG ": [%s] %s\n", names[level >= 0 && level <= 3 ? level : 3], message);
}

/* Infers for every env whose chunk ran out. Returns PLUGRL_OK with the new
** chunks stored, or the status to act on. */
static plugrl_status infer_needed(probe *p, plugrl_client *c) {
  plugrl_status s;
  plugrl_observation obs;
  plugrl_array states[2];
  int64_t shape_t[2], shape_a[2];
  plugrl_action act;
  size_t k = 0, sent = 0, j, need;
  int64_t i, kk, h, d;
  int any_reuse = 0;

  for (i = 0; i < p->n; i++) {
    int yes = 0;
    if (p->remaining[i] > 0) continue;
    p->idx[k] = i;
    p->ids[k] = p->step_id[i];
    s = plugrl_can_reuse(c, i, &yes);
    if (s != PLUGRL_OK) return s;
    p->reuse[k] = (uint8_t)(yes != 0);
    any_reuse |= yes != 0;
    k++;
  }
  if (k == 0) return PLUGRL_OK;

  /* Send only the rows that are not reused (plugrl.h allows all rows too). */
  for (j = 0; j < k; j++)
    if (!p->reuse[j]) p->rows[sent++] = p->idx[j];
  gather(p, p->rows, sent, &obs, states, shape_t, shape_a);

  s = plugrl_infer(c, p->idx, p->ids, k, &obs, any_reuse ? p->reuse : NULL, &act);
  if (s != PLUGRL_OK) return s;

  if (act.num_envs != (int64_t)k || act.horizon < 1) {
    fprintf(stderr, PROG ": the library returned an action of %lld envs and horizon %lld for %zu envs\n",
            (long long)act.num_envs, (long long)act.horizon, k);
    p->own_error = 1;
    return PLUGRL_INTERNAL;
  }
  h = act.horizon;
  d = act.step_size;
  if (d != p->d) {
    if (p->d_known) {
      fprintf(stderr, PROG ": the server's actions have %lld values per step, metadata action_dim said %lld\n",
              (long long)d, (long long)p->d);
      p->own_error = 1;
      return PLUGRL_PROTOCOL_ERROR;
    }
    /* No action_dim in the metadata: this is the first action. */
    probe_set_width(p, d);
  }
  p->d_known = 1;

  /* Copy the whole chunk out as float64 ([H, k, d]), whatever its dtype. */
  need = (size_t)(h * (int64_t)k * d);
  if (need > p->actions_cap) {
    free(p->actions);
    p->actions = xcalloc(need, sizeof(double));
    p->actions_cap = need;
  }
  s = plugrl_action_copy(c, p->actions, need * sizeof(double), PLUGRL_DTYPE_F64);
  if (s != PLUGRL_OK) return s;

  if (h != p->horizon || !p->chunks) {
    /* Chunks of another horizon cannot be stepped with these: only a
    ** reconnect can change it, and that dropped them already. */
    free(p->chunks);
    p->chunks = xcalloc((size_t)(p->n * h * d), sizeof(double));
    p->horizon = h;
    for (i = 0; i < p->n; i++) p->remaining[i] = 0;
  }
  /* Time-major: step kk of the request's j-th env is at (kk * k + j) * d. */
  for (j = 0; j < k; j++) {
    int64_t env = p->idx[j];
    for (kk = 0; kk < h; kk++)
      memcpy(p->chunks + (env * h + kk) * d, p->actions + (kk * (int64_t)k + (int64_t)j) * d,
             (size_t)d * sizeof(double));
    p->remaining[env] = h;
    p->step[env] = 0;
    p->chunk_sum[env] = 0;
  }
  return PLUGRL_OK;
}

/* Steps every env once with the next action of its chunk (SPEC 8.1). */
static void step_envs(probe *p) {
  int64_t i;
  for (i = 0; i < p->n; i++) {
    const double *action = p->chunks + (i * p->horizon + p->step[i]) * p->d;
    memcpy(p->a + i * p->d, action, (size_t)p->d * sizeof(double));
    p->t[i] += 1;
    p->chunk_sum[i] += 1.0; /* reward 1 per step */
    p->ep_return[i] += 1.0;
    p->ep_length[i] += 1;
    p->step[i]++;
    p->remaining[i]--;
    p->done[i] = p->t[i] == episode_length(i);
  }
}

/* Sends the feedback for every env whose chunk ended at this step (ran out,
** or ended early at a terminal step). */
static plugrl_status feedback_ended(probe *p, plugrl_client *c) {
  plugrl_observation obs;
  plugrl_array states[2];
  int64_t shape_t[2], shape_a[2];
  plugrl_episode ep;
  size_t m = 0;
  int any_done = 0;
  int64_t i;

  for (i = 0; i < p->n; i++) {
    if (p->remaining[i] > 0 && !p->done[i]) continue;
    p->idx[m] = i;
    p->ids[m] = p->step_id[i];
    p->rewards[m] = (float)p->chunk_sum[i];
    p->terminated[m] = p->done[i];
    p->truncated[m] = 0; /* the probe env never truncates */
    p->mask[m] = p->done[i];
    p->returns[m] = p->done[i] ? p->ep_return[i] : 0;
    p->lengths[m] = p->done[i] ? p->ep_length[i] : 0;
    any_done |= p->done[i];
    if (p->done[i]) {
      p->step_id[i] = 0;
      p->ep_return[i] = 0;
      p->ep_length[i] = 0;
    } else {
      p->step_id[i]++;
    }
    p->remaining[i] = 0;
    p->step[i] = 0;
    p->chunk_sum[i] = 0;
    m++;
  }
  if (m == 0) return PLUGRL_OK; /* every env is still inside its chunk */

  /* t and a are not reset yet: a terminated env sends its terminal obs. */
  gather(p, p->idx, m, &obs, states, shape_t, shape_a);
  ep.returns = p->returns;
  ep.lengths = p->lengths;
  ep.success = NULL;
  ep.mask = p->mask;
  return plugrl_feedback(c, p->idx, p->ids, m, &obs, p->rewards, p->terminated, p->truncated,
                         any_done ? &ep : NULL);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " --url ws://HOST:PORT [--envs N] [--api-key KEY]\n"
          "                    [--max-reconnects N] [--timeout-ms MS]\n"
          "                    [--ca-file PEM] [--tls-insecure 1]\n"
          "Runs N probe envs (SPEC 8.1) on libplugrl's low-level API until the server\n"
          "stops the run (exit 0); any other end exits 1 with the library's message.\n"
          "For wss://, --ca-file names the PEM of the CAs to trust (default: the\n"
          "system's), and --tls-insecure 1 skips verifying the server (tests only).\n");
}

static int parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out) {
  char *end = NULL;
  long long v;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno || !end || *end || end == s || v < lo || v > hi) {
    fprintf(stderr, PROG ": %s wants an integer in [%lld, %lld], got \"%s\"\n", flag, lo, hi, s);
    return 0;
  }
  *out = v;
  return 1;
}

int main(int argc, char **argv) {
  const char *url = NULL, *api_key = NULL, *ca_file = NULL;
  long long envs = 3, max_reconnects = 5, timeout_ms = 30000, tls_insecure = 0;
  plugrl_options opts;
  plugrl_client *c = NULL;
  plugrl_status s;
  probe p;
  int64_t d = 1, i;
  int present = 0, rc = 0, argi;

  for (argi = 1; argi < argc; argi += 2) { /* an option and its value */
    const char *arg = argv[argi];
    const char *val = argi + 1 < argc ? argv[argi + 1] : NULL;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!val) {
      fprintf(stderr, PROG ": unknown option or missing value: %s\n", arg);
      usage(stderr);
      return 2;
    }
    if (!strcmp(arg, "--url")) {
      url = val;
    } else if (!strcmp(arg, "--api-key")) {
      api_key = val;
    } else if (!strcmp(arg, "--ca-file")) {
      ca_file = val;
    } else if (!strcmp(arg, "--tls-insecure")) {
      if (!parse_int(arg, val, 0, 1, &tls_insecure)) return 2;
    } else if (!strcmp(arg, "--envs")) {
      if (!parse_int(arg, val, 1, 999, &envs)) return 2;
    } else if (!strcmp(arg, "--max-reconnects")) {
      if (!parse_int(arg, val, -1, 1000000, &max_reconnects)) return 2;
    } else if (!strcmp(arg, "--timeout-ms")) {
      if (!parse_int(arg, val, 1, 2147483647LL, &timeout_ms)) return 2;
    } else {
      fprintf(stderr, PROG ": unknown option: %s\n", arg);
      usage(stderr);
      return 2;
    }
  }
  if (!url) {
    fprintf(stderr, PROG ": --url is required\n");
    usage(stderr);
    return 2;
  }

  s = plugrl_options_init(&opts);
  if (s != PLUGRL_OK) {
    fprintf(stderr, PROG ": plugrl_options_init: %s\n", plugrl_status_str(s));
    return 1;
  }
  opts.url = url;
  opts.api_key = api_key;
  opts.tls_ca_file = ca_file;
  opts.tls_insecure = (int32_t)tls_insecure;
  opts.connect_timeout_ms = (int32_t)timeout_ms;
  opts.metadata_timeout_ms = (int32_t)timeout_ms;
  opts.receive_timeout_ms = (int32_t)timeout_ms;
  /* 0 means the library's default; the flag's 0 means "no reconnects". */
  opts.max_reconnects = max_reconnects == 0 ? -1 : (int32_t)max_reconnects;
  opts.log = log_fn;

  if (!install_signal_handlers()) return 1;
  /* A signal from here on ends plugrl_open, but not one that came before
  ** it began: look first. */
  if (g_signal) return die_by_signal();
  s = plugrl_open(&opts, &c);
  if (g_signal) {
    plugrl_close(c);
    return die_by_signal();
  }
  if (s == PLUGRL_STOPPED) {
    printf(PROG ": the server stopped the run\n");
    plugrl_close(c);
    return 0;
  }
  if (s != PLUGRL_OK) {
    rc = fail(c, s, "connecting");
    plugrl_close(c);
    return rc;
  }

  {
    int64_t dim = 0;
    s = plugrl_metadata_int(c, "action_dim", &dim, &present);
    if (s != PLUGRL_OK) {
      rc = fail(c, s, "reading metadata");
      plugrl_close(c);
      return rc;
    }
    if (present && dim > 0) d = dim;
  }
  probe_init(&p, (int64_t)envs, d, present && d > 0);

  for (;;) {
    if (g_signal) break; /* the signal came between calls */
    s = infer_needed(&p, c);
    if (s == PLUGRL_RECONNECTED) {
      drop_chunks(&p);
      continue;
    }
    if (s != PLUGRL_OK) break;

    step_envs(&p);

    s = feedback_ended(&p, c);
    if (s == PLUGRL_RECONNECTED) drop_chunks(&p); /* the feedback was dropped, not sent */
    else if (s != PLUGRL_OK) break;

    for (i = 0; i < p.n; i++)
      if (p.done[i]) p.t[i] = 0; /* reset the envs that ended */
  }

  if (g_signal) {
    rc = 128 + g_signal; /* ends by the signal below, once the client is closed */
  } else if (s == PLUGRL_STOPPED) {
    printf(PROG ": the server stopped the run\n");
    rc = 0;
  } else if (p.own_error) {
    rc = 1; /* printed already; plugrl_errmsg(c) would be a stale message */
  } else {
    rc = fail(c, s, "running the probe envs");
  }
  probe_free(&p);
  plugrl_close(c);
  if (g_signal) return die_by_signal();
  return rc;
}
