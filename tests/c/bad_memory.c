/*
** bad_memory.c - a caller that points the library at memory it cannot read
** or write, through the real library.
**
**   bad_memory URL   (a `plugrl serve --action-dim 3 --horizon 4 --policy probe`)
**
** A camera buffer given back to its driver (unmapped), a freed array, a
** GPU's device pointer: reading it used to end the whole process ("fatal
** error: unexpected fault address"). Now the call returns
** PLUGRL_INVALID_ARGUMENT, its message names the address that faulted,
** the connection is dropped (the fault may have come in the middle of a
** message), and the next call with good memory goes on. Each case, on a
** client or a runner that reconnects:
**
**   - plugrl_infer with an array's data unmapped, then with good data:
**     PLUGRL_RECONNECTED, then PLUGRL_OK and a feedback that goes through;
**   - plugrl_feedback with an array's data unmapped, then the next infer;
**   - plugrl_runner_act with an array's data unmapped, then acts that give
**     the probe policy's actions (tests/c/probe_runner.h checks them);
**   - plugrl_runner_act with a text string unmapped;
**   - plugrl_runner_act with the output buffer unmapped (a write that
**     faults), then acts and reports that go through.
**
** A fault in a call that sends nothing, or in what a call reads before it
** begins, changes nothing: the connection stays, and what it owes.
**
**   - plugrl_action_copy, plugrl_metadata_json, plugrl_metadata_int and
**     plugrl_can_reuse given unmapped memory while an action is held: the
**     action copies into good memory, and its feedback goes through on
**     the same connection (the next infer is not PLUGRL_RECONNECTED);
**   - plugrl_runner_chunk, plugrl_runner_step_size and
**     plugrl_runner_report's rewards unmapped in the middle of chunks:
**     the same report goes through, and the chunks go on where they were.
**
** And plugrl_options_init's options, plugrl_open's out and its options
** unmapped (PLUGRL_INVALID_ARGUMENT, without a handle or with one); an
** array's data at 0x10, in the first page, in an infer, a feedback and a
** runner's report (PLUGRL_INTERNAL, as the header says; the connection is
** dropped, and the next infer or act reconnects).
**
** Not in the sanitizer runs (tests/sanitizers.sh): AddressSanitizer and
** ThreadSanitizer take the fault themselves, as they should.
**
** Exit status 0 when every check passed, 1 otherwise.
*/
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "check.h"
#include "probe_runner.h"

#include <stdlib.h>
#include <sys/mman.h>


/* unmapped returns an address of pages that cannot be read or written: a
** PROT_NONE mapping, never given back. Pages given back with munmap were
** not safe to reuse: in a CI run the feedback case, given an address
** unmapped before the infer case's reconnection, read memory the Go
** runtime had mapped there meanwhile, and succeeded. A PROT_NONE page
** faults as an unmapped one does (SIGSEGV; only the si_code differs,
** which the library does not read), and no other mapping can take it. */
static void *unmapped(void) {
  void *p = mmap(NULL, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  return p;
}

/* expect_fault checks that a call given memory at addr that faults (what)
** returned PLUGRL_INVALID_ARGUMENT and that its message msg names addr. */
static void expect_fault(int line, const char *what, plugrl_status s, const char *msg, const void *addr) {
  char want[64];
  snprintf(want, sizeof want, "faulted at address %#lx", (unsigned long)(uintptr_t)addr);
  if (s != PLUGRL_INVALID_ARGUMENT) {
    failures++;
    fprintf(stderr, "bad_memory.c:%d: FAIL: %s: %s, want PLUGRL_INVALID_ARGUMENT\n", line, what, plugrl_status_str(s));
  }
  if (msg == NULL || strstr(msg, want) == NULL) {
    failures++;
    fprintf(stderr, "bad_memory.c:%d: FAIL: %s: message '%s' does not name %p\n", line, what, msg ? msg : "(null)",
            addr);
  }
}
#define EXPECT_FAULT(what, s, msg, addr) expect_fault(__LINE__, what, s, msg, addr)

static plugrl_status open_reconnecting(const char *url, plugrl_client **c) {
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = url;
  o.max_reconnects = 3;
  o.reconnect_backoff_ms = 10;
  return plugrl_open(&o, c);
}

static void test_client(const char *url) {
  plugrl_client *c = NULL;
  plugrl_status s = open_reconnecting(url, &c);
  CHECK(s == PLUGRL_OK, "open: %s", plugrl_status_str(s));
  if (s != PLUGRL_OK) {
    plugrl_close(c);
    return;
  }
  double state[2] = {1, 2};
  int64_t shape[2] = {1, 2}, env = 0, step = 0;
  plugrl_array arr = {"s", state, PLUGRL_DTYPE_F64, 2, shape};
  plugrl_observation obs;
  memset(&obs, 0, sizeof obs);
  obs.states = &arr;
  obs.num_states = 1;
  plugrl_action a;
  float reward = 1;
  uint8_t no = 0;

  void *bad = unmapped();
  arr.data = bad;
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  EXPECT_FAULT("infer, unmapped data", s, plugrl_errmsg(c), bad);
  arr.data = state;
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_RECONNECTED, "infer after the fault: %s, want PLUGRL_RECONNECTED", plugrl_status_str(s));
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_OK, "infer again: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));

  arr.data = bad;
  s = plugrl_feedback(c, &env, &step, 1, &obs, &reward, &no, &no, NULL);
  EXPECT_FAULT("feedback, unmapped data", s, plugrl_errmsg(c), bad);
  arr.data = state;
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_RECONNECTED, "infer after the feedback's fault: %s, want PLUGRL_RECONNECTED", plugrl_status_str(s));
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_OK, "infer: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));
  s = plugrl_feedback(c, &env, &step, 1, &obs, &reward, &no, &no, NULL);
  CHECK(s == PLUGRL_OK, "feedback: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));

  /* plugrl_stats's out unwritable: it reads beside other calls, so it
  ** leaves the connection alone (the next infer goes through). */
  bad = unmapped();
  s = plugrl_stats(c, bad);
  EXPECT_FAULT("stats, unmapped out", s, plugrl_errmsg(c), bad);
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_OK, "infer after stats' fault: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));

  /* The calls that send nothing change nothing when their memory faults:
  ** the action is still held (a copy into good memory gets it), and its
  ** feedback goes through on the same connection (the infer after it is
  ** PLUGRL_OK, not PLUGRL_RECONNECTED). */
  s = plugrl_action_copy(c, bad, 4096, PLUGRL_DTYPE_F32);
  EXPECT_FAULT("action_copy, unmapped dst", s, plugrl_errmsg(c), bad);
  CHECK(strstr(plugrl_errmsg(c), "nothing was changed") != NULL, "action_copy's message does not say nothing was changed: %s",
        plugrl_errmsg(c));
  float got[16] = {0}; /* the action: horizon 4 x action dim 3 */
  s = plugrl_action_copy(c, got, sizeof got, PLUGRL_DTYPE_F32);
  CHECK(s == PLUGRL_OK, "action_copy after its fault: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));
  int64_t len;
  int present, yes;
  s = plugrl_metadata_json(c, NULL, bad, 1 << 16, NULL, &present);
  EXPECT_FAULT("metadata_json, unmapped buf", s, plugrl_errmsg(c), bad);
  s = plugrl_metadata_int(c, bad, &len, &present);
  EXPECT_FAULT("metadata_int, unmapped key", s, plugrl_errmsg(c), bad);
  s = plugrl_can_reuse(c, 0, bad);
  EXPECT_FAULT("can_reuse, unmapped yes", s, plugrl_errmsg(c), bad);
  s = plugrl_can_reuse(c, 0, &yes);
  CHECK(s == PLUGRL_OK, "can_reuse after its fault: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));
  s = plugrl_feedback(c, &env, &step, 1, &obs, &reward, &no, &no, NULL);
  CHECK(s == PLUGRL_OK, "feedback after the getters' faults: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_OK, "infer after the getters' faults: %s, want PLUGRL_OK on the same connection: %s",
        plugrl_status_str(s), plugrl_errmsg(c));
  s = plugrl_feedback(c, &env, &step, 1, &obs, &reward, &no, &no, NULL);
  CHECK(s == PLUGRL_OK, "feedback: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));

  /* A pointer into the first page in the middle of a message: the
  ** library cannot tell it from a nil dereference of its own, so it is
  ** PLUGRL_INTERNAL (the header says so), and the frame it broke off ends
  ** the connection all the same: the next infer reconnects and goes on. */
  arr.data = (void *)(uintptr_t)0x10;
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_INTERNAL, "infer, data at 0x10: %s, want PLUGRL_INTERNAL", plugrl_status_str(s));
  arr.data = state;
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_RECONNECTED, "infer after data at 0x10: %s, want PLUGRL_RECONNECTED: %s", plugrl_status_str(s),
        plugrl_errmsg(c));
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_OK, "infer again: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));

  /* The same in the middle of a feedback, whose envs' chunks the client
  ** had already let go of when the frame broke: the connection and what
  ** it owed are dropped, so the next infer reconnects (it was refused as
  ** out of order for ever, and the feedback again as naming envs that
  ** hold no chunk). */
  arr.data = (void *)(uintptr_t)0x10;
  s = plugrl_feedback(c, &env, &step, 1, &obs, &reward, &no, &no, NULL);
  CHECK(s == PLUGRL_INTERNAL, "feedback, data at 0x10: %s, want PLUGRL_INTERNAL", plugrl_status_str(s));
  arr.data = state;
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_RECONNECTED, "infer after a feedback's data at 0x10: %s, want PLUGRL_RECONNECTED: %s",
        plugrl_status_str(s), plugrl_errmsg(c));
  s = plugrl_infer(c, &env, &step, 1, &obs, NULL, &a);
  CHECK(s == PLUGRL_OK, "infer again: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));
  s = plugrl_feedback(c, &env, &step, 1, &obs, &reward, &no, &no, NULL);
  CHECK(s == PLUGRL_OK, "feedback: %s: %s", plugrl_status_str(s), plugrl_errmsg(c));
  s = plugrl_close(c);
  CHECK(s == PLUGRL_OK, "close: %s", plugrl_status_str(s));
}

/* steps runs n good acts and reports on p, checking every action. */
static void steps(probe_runner *p, int n, const char *after) {
  char why[256];
  for (int i = 0; i < n; i++) {
    plugrl_status s = probe_act(p);
    CHECK(s == PLUGRL_OK, "act %d after %s: %s: %s", i, after, plugrl_status_str(s), probe_errmsg(p));
    if (s != PLUGRL_OK) {
      return;
    }
    if (!probe_check(p, why, sizeof why)) {
      CHECK(0, "after %s: %s", after, why);
      return;
    }
    s = probe_report(p);
    CHECK(s == PLUGRL_OK, "report %d after %s: %s: %s", i, after, plugrl_status_str(s), probe_errmsg(p));
  }
}

static void test_runner(const char *url) {
  plugrl_options opt;
  plugrl_options_init(&opt);
  opt.url = url;
  opt.max_reconnects = 3;
  opt.reconnect_backoff_ms = 10;
  probe_runner p;
  plugrl_status s = probe_open(&p, &opt, "bad memory", 5);
  CHECK(s == PLUGRL_OK, "runner open: %s", plugrl_status_str(s));
  if (s != PLUGRL_OK) {
    probe_close(&p);
    return;
  }
  steps(&p, 6, "the start");

  /* An array's data unmapped, at an act that infers (a fresh chunk). */
  while (p.next_k[0] != 0 || p.next_k[1] != 0) {
    steps(&p, 1, "waiting for a fresh chunk");
  }
  void *bad = unmapped();
  p.arr.data = bad;
  s = plugrl_runner_act(p.runner, &p.obs, p.actions, sizeof p.actions, PLUGRL_DTYPE_F64);
  EXPECT_FAULT("act, unmapped data", s, plugrl_runner_errmsg(p.runner), bad);
  p.arr.data = p.state;
  steps(&p, 12, "an act with unmapped data");

  /* A text string unmapped, at an act that infers. */
  while (p.next_k[0] != 0 || p.next_k[1] != 0) {
    steps(&p, 1, "waiting for a fresh chunk");
  }
  bad = unmapped();
  const char *good = p.text[1];
  p.text[1] = bad;
  s = plugrl_runner_act(p.runner, &p.obs, p.actions, sizeof p.actions, PLUGRL_DTYPE_F64);
  EXPECT_FAULT("act, unmapped text", s, plugrl_runner_errmsg(p.runner), bad);
  p.text[1] = good;
  steps(&p, 12, "an act with unmapped text");
  /* The output buffer unmapped: the library's write into it faults. */
  bad = unmapped();
  s = plugrl_runner_act(p.runner, &p.obs, bad, sizeof p.actions, PLUGRL_DTYPE_F64);
  EXPECT_FAULT("act, unmapped output", s, plugrl_runner_errmsg(p.runner), bad);
  /* The runner forgot its chunks with the connection: every env starts
  ** a fresh one (step 0), as after any reconnect. */
  p.next_k[0] = p.next_k[1] = 0;
  steps(&p, 12, "an act with an unmapped output");

  /* In the middle of chunks: a chunk's dst, the step size's out and a
  ** report's rewards unmapped change nothing. The same report with good
  ** rewards goes through, and the chunks go on where they were (the
  ** probe policy's actions checked): no step was counted twice, and no
  ** chunk was forgotten. */
  while (p.next_k[0] == 0) {
    steps(&p, 1, "waiting for the middle of a chunk");
  }
  s = probe_act(&p);
  CHECK(s == PLUGRL_OK, "act: %s: %s", plugrl_status_str(s), probe_errmsg(&p));
  bad = unmapped();
  int64_t n = -1, size;
  int known;
  s = plugrl_runner_chunk(p.runner, 0, bad, 4096, PLUGRL_DTYPE_F64, &n);
  EXPECT_FAULT("runner_chunk, unmapped dst", s, plugrl_runner_errmsg(p.runner), bad);
  double chunk[PROBE_HORIZON][PROBE_DIM];
  s = plugrl_runner_chunk(p.runner, 0, chunk, sizeof chunk, PLUGRL_DTYPE_F64, &n);
  CHECK(s == PLUGRL_OK && n == PROBE_HORIZON - p.next_k[0], "runner_chunk after its fault: %s, %lld steps, want %d: %s",
        plugrl_status_str(s), (long long)n, PROBE_HORIZON - p.next_k[0], probe_errmsg(&p));
  s = plugrl_runner_step_size(p.runner, bad, &known);
  EXPECT_FAULT("runner_step_size, unmapped step_size", s, plugrl_runner_errmsg(p.runner), bad);
  s = plugrl_runner_step_size(p.runner, &size, &known);
  CHECK(s == PLUGRL_OK && known && size == PROBE_DIM, "runner_step_size after its fault: %s, %lld (known %d)",
        plugrl_status_str(s), (long long)size, known);
  s = plugrl_runner_report(p.runner, &p.obs, bad, p.terminated, p.truncated, NULL);
  EXPECT_FAULT("runner_report, unmapped rewards", s, plugrl_runner_errmsg(p.runner), bad);
  s = probe_report(&p);
  CHECK(s == PLUGRL_OK, "report after its fault: %s: %s", plugrl_status_str(s), probe_errmsg(&p));
  steps(&p, 12, "the faults in the middle of chunks");

  /* A report's observation in the first page, at the step that ends env
  ** 0's chunk, so that its feedback is sent: PLUGRL_INTERNAL, and the
  ** runner drops the connection and its chunks, as after a fault with an
  ** address (it was left owing a feedback the client had let go of: every
  ** act after it was refused as out of order). */
  while (p.next_k[0] != PROBE_HORIZON - 1) {
    steps(&p, 1, "waiting for the end of a chunk");
  }
  s = probe_act(&p);
  CHECK(s == PLUGRL_OK, "act: %s: %s", plugrl_status_str(s), probe_errmsg(&p));
  p.arr.data = (void *)(uintptr_t)0x10;
  s = probe_report(&p);
  CHECK(s == PLUGRL_INTERNAL, "report, data at 0x10: %s, want PLUGRL_INTERNAL", plugrl_status_str(s));
  p.arr.data = p.state;
  p.next_k[0] = p.next_k[1] = 0;
  steps(&p, 12, "a report with data at 0x10");
  probe_close(&p);
}

/* expect_open_failed checks a call on c, whose plugrl_open faulted at
** addr: PLUGRL_CONNECT_FAILED, as for any failed open, with a message that
** says why the open failed (it used to say "plugrl_open failed (<nil>)"). */
static void expect_open_failed(int line, plugrl_client *c, const void *addr) {
  char want[64];
  int64_t v = 0;
  int present = 0;
  plugrl_status s = plugrl_metadata_int(c, "action_dim", &v, &present);
  const char *msg = plugrl_errmsg(c);
  snprintf(want, sizeof want, "faulted at address %#lx", (unsigned long)(uintptr_t)addr);
  if (s != PLUGRL_CONNECT_FAILED) {
    failures++;
    fprintf(stderr, "bad_memory.c:%d: FAIL: a call after the open's fault: %s, want PLUGRL_CONNECT_FAILED\n", line,
            plugrl_status_str(s));
  }
  if (msg == NULL || strstr(msg, want) == NULL || strstr(msg, "<nil>") != NULL) {
    failures++;
    fprintf(stderr, "bad_memory.c:%d: FAIL: a call after the open's fault: message '%s' does not say why the open "
                    "failed (%s)\n",
            line, msg ? msg : "(null)", want);
  }
}

/* The calls without a usable handle yet: plugrl_options_init's options
** and plugrl_open's out unmapped are PLUGRL_INVALID_ARGUMENT (there is no
** handle for a message); plugrl_open's options unmapped is too, with the
** address in the new handle's message. */
static void test_plain(const char *url) {
  void *bad = unmapped();
  plugrl_status s = plugrl_options_init((plugrl_options *)bad);
  CHECK(s == PLUGRL_INVALID_ARGUMENT, "options_init, unmapped options: %s, want PLUGRL_INVALID_ARGUMENT",
        plugrl_status_str(s));
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = url;
  s = plugrl_open(&o, (plugrl_client **)bad);
  CHECK(s == PLUGRL_INVALID_ARGUMENT, "open, unmapped client: %s, want PLUGRL_INVALID_ARGUMENT", plugrl_status_str(s));
  plugrl_client *c = NULL;
  s = plugrl_open((const plugrl_options *)bad, &c);
  EXPECT_FAULT("open, unmapped options", s, plugrl_errmsg(c), bad);
  expect_open_failed(__LINE__, c, bad);
  s = plugrl_close(c);
  CHECK(s == PLUGRL_OK, "close after the open's fault: %s", plugrl_status_str(s));
  /* The url unmapped: the fault comes as the options are read. */
  o.url = (const char *)bad;
  c = NULL;
  s = plugrl_open(&o, &c);
  EXPECT_FAULT("open, unmapped url", s, plugrl_errmsg(c), bad);
  expect_open_failed(__LINE__, c, bad);
  s = plugrl_close(c);
  CHECK(s == PLUGRL_OK, "close after the open's fault: %s", plugrl_status_str(s));
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  test_client(argv[1]);
  test_runner(argv[1]);
  test_plain(argv[1]);
  if (failures) {
    fprintf(stderr, "bad_memory: %d checks failed\n", failures);
    return 1;
  }
  printf("bad_memory: every call given unreadable or unwritable memory returned PLUGRL_INVALID_ARGUMENT naming "
         "the address, and the next calls went on\n");
  return 0;
}
