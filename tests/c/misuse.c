/*
** misuse.c - libplugrl under misuse, through the real library.
**
**   misuse [ws://HOST:PORT]
**
** Every check calls a function of plugrl.h the wrong way and asserts the
** exact status it returns and, for every status but PLUGRL_OK, that the
** handle's message (plugrl_errmsg / plugrl_runner_errmsg) is non-empty. A
** crash is a failure too, of course.
**
** With a URL (a `plugrl serve` started by tests/run_with_server.sh, offering
** reuse-feedback-obs), the connected cases run against it: wrong shapes,
** calls out of order, feedback for an env without a chunk, reuse that is not
** allowed, a runner used wrongly. PLUGRL_BUSY needs a server that never
** answers an infer; this file has one: a raw TCP listener that completes the
** WebSocket handshake, sends a metadata message and then reads forever.
**
** Exit status 0 when every check passed, 1 otherwise.
*/
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <plugrl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

static int checks, failures;

static void failf(int line, const char *fmt, ...) {
  va_list ap;
  failures++;
  fprintf(stderr, "misuse.c:%d: FAIL: ", line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* msg is the handle's errmsg after the call (NULL if there is no handle). */
static void expect_status(int line, const char *what, plugrl_status got, plugrl_status want, int has_msg,
                          const char *msg) {
  checks++;
  if (got != want) {
    failf(line, "%s\n    returned %s (%d), want %s (%d)\n    errmsg: %s", what, plugrl_status_str(got), (int)got,
          plugrl_status_str(want), (int)want, has_msg ? (msg ? msg : "(NULL)") : "(no handle)");
    return;
  }
  if (want != PLUGRL_OK && has_msg && (msg == NULL || msg[0] == '\0')) {
    failf(line, "%s\n    returned %s as it should, but errmsg is %s", what, plugrl_status_str(got),
          msg ? "empty" : "NULL");
    return;
  }
  /* Every message starts with its status's name: a message left over from
  ** an earlier call with another status does not. (A NULL or dead handle
  ** has its static sentence instead, plugrl_errmsg says.) */
  if (want != PLUGRL_OK && has_msg && strncmp(msg, plugrl_status_str(got), strlen(plugrl_status_str(got))) != 0 &&
      !(got == PLUGRL_CLOSED && strncmp(msg, "not an open handle", 18) == 0)) {
    failf(line, "%s\n    returned %s as it should, but errmsg does not start with \"%s\": %s", what,
          plugrl_status_str(got), plugrl_status_str(got), msg);
    return;
  }
  if (want == PLUGRL_OK)
    printf("ok   %s\n", what);
  else
    printf("ok   %s\n       -> [%s] %s\n", what, plugrl_status_str(got), has_msg && msg ? msg : "(no handle)");
}

/* A call on a client handle c: the message is plugrl_errmsg(c). */
#define EXPECT_C(c, call, want)                                                                     \
  do {                                                                                              \
    plugrl_status s_ = (call);                                                                      \
    expect_status(__LINE__, #call, s_, (want), s_ != PLUGRL_OK, s_ != PLUGRL_OK ? plugrl_errmsg(c) : NULL); \
  } while (0)

/* A call on a runner handle r: the message is plugrl_runner_errmsg(r). */
#define EXPECT_R(r, call, want)                                                                            \
  do {                                                                                                     \
    plugrl_status s_ = (call);                                                                             \
    expect_status(__LINE__, #call, s_, (want), s_ != PLUGRL_OK, s_ != PLUGRL_OK ? plugrl_runner_errmsg(r) : NULL); \
  } while (0)

/* A call with no handle to ask. */
#define EXPECT_N(call, want)                                    \
  do {                                                          \
    plugrl_status s_ = (call);                                  \
    expect_status(__LINE__, #call, s_, (want), 0, NULL);        \
  } while (0)

#define CHECK(cond)                                  \
  do {                                               \
    checks++;                                        \
    if (!(cond)) failf(__LINE__, "CHECK(%s)", #cond); \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------ */
/* A silent WebSocket server: handshake, metadata, then nothing.            */
/* ------------------------------------------------------------------------ */

typedef struct {
  uint32_t h[5];
  uint64_t len;
  unsigned char buf[64];
  size_t used;
} sha1_ctx;

static uint32_t rol(uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

static void sha1_block(sha1_ctx *c, const unsigned char *p) {
  uint32_t w[80], a, b, cc, d, e, f, k, t;
  int i;
  for (i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4];
  for (i = 0; i < 80; i++) {
    if (i < 20)
      f = (b & cc) | (~b & d), k = 0x5A827999;
    else if (i < 40)
      f = b ^ cc ^ d, k = 0x6ED9EBA1;
    else if (i < 60)
      f = (b & cc) | (b & d) | (cc & d), k = 0x8F1BBCDC;
    else
      f = b ^ cc ^ d, k = 0xCA62C1D6;
    t = rol(a, 5) + f + e + k + w[i];
    e = d, d = cc, cc = rol(b, 30), b = a, a = t;
  }
  c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d, c->h[4] += e;
}

static void sha1(const void *data, size_t n, unsigned char out[20]) {
  sha1_ctx c = {{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0}, 0, {0}, 0};
  const unsigned char *p = data;
  size_t i;
  uint64_t bits = (uint64_t)n * 8;
  for (i = 0; i < n; i++) {
    c.buf[c.used++] = p[i];
    if (c.used == 64) sha1_block(&c, c.buf), c.used = 0;
  }
  c.buf[c.used++] = 0x80;
  if (c.used > 56) {
    while (c.used < 64) c.buf[c.used++] = 0;
    sha1_block(&c, c.buf), c.used = 0;
  }
  while (c.used < 56) c.buf[c.used++] = 0;
  for (i = 0; i < 8; i++) c.buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
  sha1_block(&c, c.buf);
  for (i = 0; i < 5; i++) {
    out[4 * i] = (unsigned char)(c.h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(c.h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(c.h[i] >> 8);
    out[4 * i + 3] = (unsigned char)c.h[i];
  }
}

static void base64(const unsigned char *in, size_t n, char *out) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t i, o = 0;
  for (i = 0; i + 2 < n; i += 3) {
    out[o++] = tab[in[i] >> 2];
    out[o++] = tab[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
    out[o++] = tab[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)];
    out[o++] = tab[in[i + 2] & 63];
  }
  if (i + 1 == n) {
    out[o++] = tab[in[i] >> 2];
    out[o++] = tab[(in[i] & 3) << 4];
    out[o++] = '=';
    out[o++] = '=';
  } else if (i + 2 == n) {
    out[o++] = tab[in[i] >> 2];
    out[o++] = tab[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
    out[o++] = tab[(in[i + 1] & 15) << 2];
    out[o++] = '=';
  }
  out[o] = '\0';
}

typedef struct silent_server {
  int listen_fd;
  int port;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cond;
  int messages; /* bytes-bearing reads after a handshake: infers seen */
  int connections;
  int stop;
} silent_server;

static int write_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

static void serve_one(silent_server *s, int fd) {
  char req[8192], accept_key[64], line[256];
  unsigned char digest[20], buf[4096];
  size_t used = 0;
  const char *key = NULL, *end;
  /* {"message_type": "metadata", "data": {"action_horizon": 2, "action_dim": 1}} */
  static const unsigned char metadata[] = {
      0x82, 0xac, 'm', 'e', 's', 's', 'a', 'g', 'e', '_', 't', 'y', 'p', 'e', 0xa8, 'm', 'e', 't', 'a', 'd',
      'a',  't',  'a', 0xa4, 'd', 'a', 't', 'a', 0x82, 0xae, 'a', 'c', 't', 'i', 'o', 'n', '_', 'h', 'o', 'r',
      'i',  'z',  'o', 'n', 0x02, 0xaa, 'a', 'c', 't', 'i', 'o', 'n', '_', 'd', 'i', 'm', 0x01};
  unsigned char frame[2 + sizeof metadata];

  for (;;) { /* read the HTTP upgrade request */
    ssize_t r = read(fd, req + used, sizeof req - 1 - used);
    if (r <= 0) return;
    used += (size_t)r;
    req[used] = '\0';
    if (strstr(req, "\r\n\r\n")) break;
    if (used == sizeof req - 1) return;
  }
  for (end = req; (end = strstr(end, "\r\n")) != NULL; end += 2) {
    if (strncasecmp(end + 2, "Sec-WebSocket-Key:", 18) == 0) {
      key = end + 2 + 18;
      while (*key == ' ') key++;
      break;
    }
  }
  if (!key) return;
  {
    size_t klen = strcspn(key, "\r\n");
    char cat[128];
    if (klen > 60) return;
    memcpy(cat, key, klen);
    memcpy(cat + klen, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
    sha1(cat, klen + 36, digest);
    base64(digest, 20, accept_key);
  }
  snprintf(line, sizeof line,
           "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Accept: %s\r\n\r\n",
           accept_key);
  if (write_all(fd, line, strlen(line))) return;
  frame[0] = 0x82; /* FIN, binary */
  frame[1] = (unsigned char)sizeof metadata;
  memcpy(frame + 2, metadata, sizeof metadata);
  if (write_all(fd, frame, sizeof frame)) return;

  /* Never answer: count what arrives until the client goes away. */
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r <= 0) return;
    pthread_mutex_lock(&s->mu);
    s->messages++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
  }
}

static void *silent_main(void *arg) {
  silent_server *s = arg;
  for (;;) {
    int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->connections++;
    pthread_mutex_unlock(&s->mu);
    serve_one(s, fd);
    close(fd);
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
    pthread_mutex_unlock(&s->mu);
  }
}

static int silent_start(silent_server *s) {
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  int one = 1;
  memset(s, 0, sizeof *s);
  s->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (s->listen_fd < 0) return -1;
  setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(s->listen_fd, (struct sockaddr *)&addr, sizeof addr) || listen(s->listen_fd, 8) ||
      getsockname(s->listen_fd, (struct sockaddr *)&addr, &len))
    return -1;
  s->port = ntohs(addr.sin_port);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cond, NULL);
  return pthread_create(&s->thread, NULL, silent_main, s);
}

/* Waits until more than `seen` messages arrived; 0 on timeout. */
static int silent_wait(silent_server *s, int seen, long timeout_ms) {
  struct timespec deadline;
  int ok;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&s->mu);
  while (s->messages <= seen)
    if (pthread_cond_timedwait(&s->cond, &s->mu, &deadline) != 0) break;
  ok = s->messages > seen;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static int silent_messages(silent_server *s) {
  int n;
  pthread_mutex_lock(&s->mu);
  n = s->messages;
  pthread_mutex_unlock(&s->mu);
  return n;
}

/* ------------------------------------------------------------------------ */
/* Observations                                                             */
/* ------------------------------------------------------------------------ */

/* A states-only observation of n rows: "x" f64 [n, 2]. */
typedef struct {
  double x[64];
  int64_t shape[2];
  plugrl_array states[1];
  plugrl_observation obs;
} obs_x;

static const plugrl_observation *make_obs(obs_x *o, int64_t n) {
  int i;
  memset(o, 0, sizeof *o);
  for (i = 0; i < 64; i++) o->x[i] = i;
  o->shape[0] = n;
  o->shape[1] = 2;
  o->states[0].name = "x";
  o->states[0].data = o->x;
  o->states[0].dtype = PLUGRL_DTYPE_F64;
  o->states[0].ndim = 2;
  o->states[0].shape = o->shape;
  o->obs.states = o->states;
  o->obs.num_states = 1;
  return &o->obs;
}

static plugrl_status open_client(const char *url, int disable_reuse, int32_t receive_timeout_ms,
                                 plugrl_client **c) {
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = url;
  o.connect_timeout_ms = 5000;
  o.metadata_timeout_ms = 5000;
  o.receive_timeout_ms = receive_timeout_ms;
  o.max_reconnects = -1;
  o.disable_reuse = disable_reuse;
  return plugrl_open(&o, c);
}

/* Like open_client, but reconnecting (3 attempts, 10 ms backoff). */
static plugrl_status open_reconnecting(const char *url, int32_t receive_timeout_ms, plugrl_client **c) {
  plugrl_options o;
  plugrl_options_init(&o);
  o.url = url;
  o.connect_timeout_ms = 5000;
  o.metadata_timeout_ms = 5000;
  o.receive_timeout_ms = receive_timeout_ms;
  o.max_reconnects = 3;
  o.reconnect_backoff_ms = 10;
  return plugrl_open(&o, c);
}

/* ------------------------------------------------------------------------ */
/* No server                                                                */
/* ------------------------------------------------------------------------ */

static void test_static(void) {
  CHECK(strcmp(plugrl_version(), PLUGRL_VERSION_STRING) == 0);
  CHECK(plugrl_version_number() == PLUGRL_VERSION_NUMBER);
  CHECK(strcmp(plugrl_status_str((plugrl_status)999), "unknown status") == 0);
  CHECK(strcmp(plugrl_status_str((plugrl_status)-1), "unknown status") == 0);
  CHECK(plugrl_status_str(PLUGRL_BUSY) != NULL && plugrl_status_str(PLUGRL_BUSY)[0] != '\0');
  CHECK(plugrl_dtype_size((plugrl_dtype)0) == 0);
  CHECK(plugrl_dtype_size((plugrl_dtype)99) == 0);
  CHECK(plugrl_dtype_size(PLUGRL_DTYPE_BOOL) == 1);
  CHECK(plugrl_dtype_size(PLUGRL_DTYPE_F16) == 2);
  CHECK(plugrl_dtype_size(PLUGRL_DTYPE_I32) == 4);
  CHECK(plugrl_dtype_size(PLUGRL_DTYPE_F64) == 8);
}

/* A host program's SIGSEGV handler: reaching it means the library faulted. */
static void host_segv(int sig) {
  static const char msg[] = "misuse: the library faulted (SIGSEGV reached the host's handler)\n";
  (void)sig;
  (void)write(2, msg, sizeof msg - 1);
  _exit(3);
}

/* The struct's size travels with it: a caller built against an older
** header (a smaller plugrl_options) or a newer one (a larger) works with
** this library, each side touching only the bytes both know, and a newer
** caller's option this library does not have is refused, not ignored. */
static void test_options_sizes(void) {
  const size_t min = offsetof(plugrl_options, max_backoff_ms) + sizeof(int32_t);
  const size_t v01 = offsetof(plugrl_options, ledger_cpus) + sizeof(const char *);
  const size_t align = offsetof(struct { char c; plugrl_options o; }, o);
  plugrl_client *c = NULL;
  plugrl_options o;
  struct {
    plugrl_options o;
    int64_t newer[3]; /* fields a later header might add */
  } big;
  union {
    plugrl_options o;
    unsigned char b[sizeof(plugrl_options)];
  } old;
  long page = sysconf(_SC_PAGESIZE);

  /* The macro passes this header's size; the function of release 0.1
  ** (binaries built before the macro) fills 0.1's struct. */
  EXPECT_N(plugrl_options_init(&o), PLUGRL_OK);
  CHECK(o.size == sizeof o);
  memset(&o, 0xAA, sizeof o);
  EXPECT_N((plugrl_options_init)(&o), PLUGRL_OK);
  CHECK(o.size == (v01 + align - 1) / align * align);
  CHECK(o.connect_timeout_ms == 10000 && o.ledger_cpus == NULL);
  EXPECT_N((plugrl_options_init)(NULL), PLUGRL_INVALID_ARGUMENT);

  /* Sizes no header declares: refused, nothing written. */
  memset(&o, 0xAA, sizeof o);
  EXPECT_N(plugrl_options_init_size(&o, min - 1), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_options_init_size(&o, 0), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_options_init_size(&big.o, 4097), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_options_init_size(NULL, sizeof o), PLUGRL_INVALID_ARGUMENT);
  CHECK(o.connect_timeout_ms == (int32_t)0xAAAAAAAA);

  /* An older caller's struct: exactly its bytes are written, and it opens
  ** (nothing listens on port 1: CONNECT_FAILED, after the options were
  ** taken). */
  memset(old.b, 0xAA, sizeof old.b);
  EXPECT_N(plugrl_options_init_size(&old.o, min), PLUGRL_OK);
  CHECK(old.o.size == min && old.o.max_backoff_ms == 5000);
  CHECK(old.b[min] == 0xAA && old.b[sizeof old.b - 1] == 0xAA);
  old.o.url = "ws://127.0.0.1:1";
  old.o.max_reconnects = -1;
  EXPECT_C(c, plugrl_open(&old.o, &c), PLUGRL_CONNECT_FAILED);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);

  /* A newer caller's struct: the bytes past ours are zeroed (their
  ** defaults) and accepted; set, they are refused with a message naming
  ** the byte. */
  memset(&big, 0xAA, sizeof big);
  EXPECT_N(plugrl_options_init_size(&big.o, sizeof big), PLUGRL_OK);
  CHECK(big.o.size == sizeof big && big.newer[0] == 0 && big.newer[2] == 0);
  big.o.url = "ws://127.0.0.1:1";
  big.o.max_reconnects = -1;
  EXPECT_C(c, plugrl_open(&big.o, &c), PLUGRL_CONNECT_FAILED);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  big.newer[1] = 7;
  EXPECT_C(c, plugrl_open(&big.o, &c), PLUGRL_INVALID_ARGUMENT);
  CHECK(strstr(plugrl_errmsg(c), "does not have") != NULL);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);

  /* A size that ends inside a field: no header's sizeof does (it is a
  ** multiple of the struct's alignment), so it is a size that was never
  ** set. Refused, naming the size: it used to be taken, and the library
  ** read half a pointer (tls_ca_file's, ledger_path's) as an address and
  ** faulted, ending the process. */
  {
    const size_t odd[] = {min + 4, offsetof(plugrl_options, ledger_path) + 4, sizeof o - 4, sizeof o + 4};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
      plugrl_options_init(&big.o);
      big.o.url = "ws://127.0.0.1:1";
      big.o.max_reconnects = -1;
      big.o.tls_ca_file = "/nonexistent/ca.pem";
      big.o.ledger_path = "/nonexistent/x.ledger";
      big.o.size = odd[i];
      EXPECT_C(c, plugrl_open(&big.o, &c), PLUGRL_INVALID_ARGUMENT);
      CHECK(strstr(plugrl_errmsg(c), "options.size") != NULL);
      EXPECT_N(plugrl_close(c), PLUGRL_OK);
      EXPECT_N(plugrl_options_init_size(&big.o, odd[i]), PLUGRL_INVALID_ARGUMENT);
    }
  }

  /* A size that was never set, at the end of the caller's memory: the
  ** library reads up to 4096 bytes it was told are there, finds an
  ** unmapped page, and says so (it used to be ignored past our struct). */
  {
    char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m != MAP_FAILED) {
      plugrl_options *edge = (plugrl_options *)(m + page - sizeof(plugrl_options));
      CHECK(mprotect(m + page, (size_t)page, PROT_NONE) == 0);
      struct sigaction host, old_segv;
      plugrl_options_init(edge);
      edge->url = "ws://127.0.0.1:1";
      edge->size = 4096;
      /* With a host's own SIGSEGV handler in place (a crash reporter, a
      ** sanitizer), which the Go runtime's fault recovery cannot count on:
      ** the library must not fault at all. */
      memset(&host, 0, sizeof host);
      host.sa_handler = host_segv;
      host.sa_flags = SA_ONSTACK;
      sigemptyset(&host.sa_mask);
      CHECK(sigaction(SIGSEGV, &host, &old_segv) == 0);
      EXPECT_C(c, plugrl_open(edge, &c), PLUGRL_INVALID_ARGUMENT);
      CHECK(sigaction(SIGSEGV, &old_segv, NULL) == 0);
      CHECK(strstr(plugrl_errmsg(c), "could not be read") != NULL);
      EXPECT_N(plugrl_close(c), PLUGRL_OK);
      munmap(m, (size_t)page * 2);
    }
  }
}

static void test_options(void) {
  plugrl_options o;
  plugrl_client *c = NULL;

  EXPECT_N(plugrl_options_init(NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_options_init(&o), PLUGRL_OK);
  CHECK(o.size == sizeof o);

  /* NULL out pointer: nothing to hand a handle to. */
  o.url = "ws://127.0.0.1:1";
  EXPECT_N(plugrl_open(&o, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_open(NULL, NULL), PLUGRL_INVALID_ARGUMENT);

  /* NULL options: a handle that says why, which must still be closed. */
  c = (plugrl_client *)0x1;
  EXPECT_C(c, plugrl_open(NULL, &c), PLUGRL_INVALID_ARGUMENT);
  CHECK(c != NULL && c != (plugrl_client *)0x1);
  EXPECT_C(c, plugrl_metadata_int(c, "action_dim", &(int64_t){0}, &(int){0}), PLUGRL_CONNECT_FAILED);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);

  /* NULL url. */
  plugrl_options_init(&o);
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);

  /* size not set by plugrl_options_init. */
  plugrl_options_init(&o);
  o.url = "ws://127.0.0.1:1";
  o.size = 0;
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);

  /* Nothing listens on port 1: every attempt fails, and the handle says so. */
  plugrl_options_init(&o);
  o.url = "ws://127.0.0.1:1";
  o.connect_timeout_ms = 2000;
  o.max_reconnects = -1;
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_CONNECT_FAILED);
  CHECK(c != NULL);
  {
    int64_t v = 0;
    int present = 0;
    plugrl_action a;
    obs_x ox;
    int64_t env = 0, sid = 0;
    EXPECT_C(c, plugrl_metadata_int(c, "action_dim", &v, &present), PLUGRL_CONNECT_FAILED);
    EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_CONNECT_FAILED);
  }
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  EXPECT_C(c, plugrl_close(c), PLUGRL_CLOSED);

  /* Not a WebSocket URL: a caller error, found before connecting. */
  plugrl_options_init(&o);
  o.max_reconnects = -1;
  o.url = "http://127.0.0.1:1";
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  o.url = "";
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  /* A link-local address's zone written bare: the message says how to
  ** write it (a robot cabled straight to its trainer). */
  o.url = "ws://[fe80::1%eth0]:8000";
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  CHECK(strstr(plugrl_errmsg(c), "%25") != NULL);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);

  /* Credentials in the url are refused: nothing sent them (the server
  ** never saw them), and a user name alone (a token) showed in messages. */
  {
    const char *bad[] = {"ws://robot:s3cret@127.0.0.1:1", "ws://s3cret@127.0.0.1:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      plugrl_options_init(&o);
      o.url = bad[i];
      EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
      CHECK(strstr(plugrl_errmsg(c), "api_key") != NULL);
      CHECK(strstr(plugrl_errmsg(c), "s3") == NULL);
      EXPECT_N(plugrl_close(c), PLUGRL_OK);
    }
  }

  /* An API key an HTTP header field cannot hold (a line ending read from a
  ** file with it): refused, not sent altered, and the message does not
  ** quote it. */
  {
    const char *bad[] = {"s3cret\r\nX-Evil: 1", "s3cret\n", "s3\033cret"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      plugrl_options_init(&o);
      o.url = "ws://127.0.0.1:1";
      o.api_key = bad[i];
      EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
      CHECK(strstr(plugrl_errmsg(c), "api_key") != NULL);
      CHECK(strstr(plugrl_errmsg(c), "s3") == NULL);
      EXPECT_N(plugrl_close(c), PLUGRL_OK);
    }
  }

  /* Negative numbers mean nothing but the documented -1s: refused, naming
  ** the field (they used to become the defaults). */
  {
    int32_t *fields[] = {&o.connect_timeout_ms, &o.metadata_timeout_ms, &o.receive_timeout_ms,
                         &o.reconnect_backoff_ms, &o.max_backoff_ms,     &o.send_timeout_ms,
                         &o.close_timeout_ms,     &o.reconnect_timeout_ms, &o.max_handshake_size,
                         &o.max_reconnects};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
      plugrl_options_init(&o);
      o.url = "ws://127.0.0.1:1";
      *fields[i] = fields[i] == &o.max_reconnects ? -2 : -1;
      EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
      CHECK(strstr(plugrl_errmsg(c), "options.") != NULL);
      EXPECT_N(plugrl_close(c), PLUGRL_OK);
    }
    plugrl_options_init(&o);
    o.url = "ws://127.0.0.1:1";
    o.max_message_size = -2;
    EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
    EXPECT_N(plugrl_close(c), PLUGRL_OK);
    /* dead_peer_timeout_ms: -1 is off, 1..1999 is below the 2 s a
    ** keepalive probe (one a second at most) needs, -2 means nothing. */
    {
      int32_t bad[] = {-2, 1, 1999};
      for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        plugrl_options_init(&o);
        o.url = "ws://127.0.0.1:1";
        o.dead_peer_timeout_ms = bad[i];
        EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
        CHECK(strstr(plugrl_errmsg(c), "options.dead_peer_timeout_ms") != NULL);
        EXPECT_N(plugrl_close(c), PLUGRL_OK);
      }
    }
    /* open_wait_ms: -1 waits until the server answers; -2 means nothing. */
    plugrl_options_init(&o);
    o.url = "ws://127.0.0.1:1";
    o.open_wait_ms = -2;
    EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
    CHECK(strstr(plugrl_errmsg(c), "options.open_wait_ms") != NULL);
    EXPECT_N(plugrl_close(c), PLUGRL_OK);
  }

  /* A CA file that is not a regular file: refused at once. A FIFO with no
  ** writer blocked plugrl_open for ever (no timeout nor interrupt reaches
  ** it), and /dev/zero grew memory until the process aborted. */
  {
    char cafifo[] = "/tmp/plugrl-misuse-ca-XXXXXX";
    int cfd = mkstemp(cafifo);
    plugrl_options_init(&o);
    o.url = "ws://127.0.0.1:1";
    o.max_reconnects = -1;
    o.tls_ca_file = "/dev/zero";
    EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
    EXPECT_N(plugrl_close(c), PLUGRL_OK);
    if (cfd >= 0) {
      close(cfd);
      unlink(cafifo);
      if (mkfifo(cafifo, 0600) == 0) {
        double t0 = now_ms();
        o.tls_ca_file = cafifo;
        EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
        CHECK(now_ms() - t0 < 2000);
        EXPECT_N(plugrl_close(c), PLUGRL_OK);
        unlink(cafifo);
      }
    }
    o.tls_ca_file = NULL;
  }

  /* A ledger that cannot be created, or an unknown ledger level: caller
  ** errors, before connecting. */
  plugrl_options_init(&o);
  o.max_reconnects = -1;
  o.url = "ws://127.0.0.1:1";
  o.ledger_path = "/nonexistent-dir/x.ledger";
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  o.ledger_path = "/tmp/plugrl-misuse.ledger";
  o.ledger_level = 7;
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  /* A writer CPU list that does not parse, one the kernel refuses, and one it
  ** would give only in part (CPU 0 and 1023). */
  o.ledger_level = 0;
  static const char *const bad_cpus[] = {"2-x", "1023", "0,1023"};
  for (size_t i = 0; i < sizeof bad_cpus / sizeof *bad_cpus; i++) {
    o.ledger_cpus = bad_cpus[i];
    EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
    EXPECT_N(plugrl_close(c), PLUGRL_OK);
  }
  /* "" reads PLUGRL_LEDGER_CPUS, as NULL does (plugrl.h). */
  setenv("PLUGRL_LEDGER_CPUS", "1023", 1);
  o.ledger_cpus = "";
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  unsetenv("PLUGRL_LEDGER_CPUS");
  o.ledger_cpus = NULL;
  /* A FIFO is not a file a ledger can be written to: refused at once (its
  ** open used to wait for a reader, and a writer blocked on one made
  ** plugrl_close wait for ever). */
  char fifo[] = "/tmp/plugrl-misuse-fifo-XXXXXX";
  int fd = mkstemp(fifo);
  if (fd >= 0) {
    close(fd);
    unlink(fifo);
    if (mkfifo(fifo, 0600) == 0) {
      o.ledger_path = fifo;
      EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_INVALID_ARGUMENT);
      EXPECT_N(plugrl_close(c), PLUGRL_OK);
      unlink(fifo);
    }
  }
  o.ledger_path = NULL;
}

/* A handle's value from another process is no handle here. Each process
** used to number its handles the same way, so another process's first
** handle was this process's first, and a call on it acted on that
** handle: here a plugrl_close of the other process's value closed ours.
** Both first handles come from an open refused for its url (NULL), which
** still sets one, and must run before this process opens any other. */
static void print_first_token(void) {
  plugrl_options o;
  plugrl_client *c = NULL;
  plugrl_options_init(&o);
  (void)plugrl_open(&o, &c); /* url NULL: PLUGRL_INVALID_ARGUMENT, and a handle */
  printf("%llx\n", (unsigned long long)(uintptr_t)c);
  plugrl_close(c);
}

static void test_foreign_handle(void) {
  char self[4096], cmd[4200];
  unsigned long long theirs = 0;
  plugrl_options o;
  plugrl_client *mine = NULL;
  /* PLUGRL_TEST_SELF: how to run this program again where its own file
  ** cannot be run directly (under qemu-user, tests/cross_arm64.sh). */
  const char *via = getenv("PLUGRL_TEST_SELF");
  ssize_t n = via ? (ssize_t)strlen(via) : readlink("/proc/self/exe", self, sizeof self - 1);
  FILE *f;
  if (n <= 0 || (size_t)n >= sizeof self) {
    printf("-- no /proc/self/exe: skipping the other process's handle\n");
    return;
  }
  if (via) memcpy(self, via, (size_t)n);
  self[n] = 0;
  snprintf(cmd, sizeof cmd, "'%s' --first-token", self);
  f = popen(cmd, "r");
  checks++;
  if (f == NULL || fscanf(f, "%llx", &theirs) != 1) {
    failf(__LINE__, "could not read the first handle of another process (%s)", cmd);
    if (f) pclose(f);
    return;
  }
  pclose(f);
  plugrl_options_init(&o);
  EXPECT_C(mine, plugrl_open(&o, &mine), PLUGRL_INVALID_ARGUMENT);
  printf("   the other process's first handle %#llx, this one's %p\n", theirs, (void *)mine);
  EXPECT_N(plugrl_close((plugrl_client *)(uintptr_t)theirs), PLUGRL_CLOSED);
  EXPECT_C(mine, plugrl_close(mine), PLUGRL_OK);
}

/* Every function on a handle that is NULL, made up, or closed. */
static void test_dead_handle(plugrl_client *c, plugrl_runner *r) {
  int64_t v = 0, env = 0, sid = 0;
  int present = 0;
  size_t len = 0;
  char buf[16];
  plugrl_action a;
  obs_x ox;
  float rew = 0;
  uint8_t flag = 0;
  double out[8];
  const char *msg = plugrl_errmsg(c);

  checks++;
  if (!msg || !msg[0]) failf(__LINE__, "plugrl_errmsg(%p) is empty or NULL for a dead handle", (void *)c);
  /* Results read 0 after a failure, never what the caller left there
  ** (plugrl.h, Results): an unset "present" read as a found key. */
  v = -1, present = -1;
  EXPECT_C(c, plugrl_metadata_int(c, "action_dim", &v, &present), PLUGRL_CLOSED);
  CHECK(v == 0 && present == 0);
  len = 99, present = -1;
  EXPECT_C(c, plugrl_metadata_string(c, "server", buf, sizeof buf, &len, &present), PLUGRL_CLOSED);
  CHECK(len == 0 && present == 0);
  present = -1;
  EXPECT_C(c, plugrl_metadata_has_feature(c, "reuse-feedback-obs", &present), PLUGRL_CLOSED);
  CHECK(present == 0);
  len = 99, present = -1;
  EXPECT_C(c, plugrl_metadata_json(c, NULL, buf, sizeof buf, &len, &present), PLUGRL_CLOSED);
  CHECK(len == 0 && present == 0);
  memset(&a, 0x5a, sizeof a); /* a stale view: what the caller left there */
  EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_CLOSED);
  CHECK(a.data == NULL && a.shape == NULL && a.env_ids == NULL && a.horizon == 0 && a.num_envs == 0);
  EXPECT_C(c, plugrl_action_copy(c, out, sizeof out, PLUGRL_DTYPE_F64), PLUGRL_CLOSED);
  EXPECT_C(c, plugrl_feedback(c, &env, &sid, 1, make_obs(&ox, 1), &rew, &flag, &flag, NULL), PLUGRL_CLOSED);
  present = -1;
  EXPECT_C(c, plugrl_can_reuse(c, 0, &present), PLUGRL_CLOSED);
  CHECK(present == 0);
  {
    plugrl_statistics st;
    st.size = sizeof st;
    EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_CLOSED);
    EXPECT_C(c, plugrl_stats(c, NULL), PLUGRL_CLOSED);
    EXPECT_R(r, plugrl_runner_stats(r, &st), PLUGRL_CLOSED);
  }
  EXPECT_C(c, plugrl_close(c), PLUGRL_CLOSED);
  {
    plugrl_runner *nr = (plugrl_runner *)0x1;
    EXPECT_C(c, plugrl_runner_new(c, 1, &nr), PLUGRL_CLOSED);
    CHECK(nr == NULL);
    if (nr != NULL && nr != (plugrl_runner *)0x1) plugrl_runner_free(nr);
  }

  msg = plugrl_runner_errmsg(r);
  checks++;
  if (!msg || !msg[0]) failf(__LINE__, "plugrl_runner_errmsg(%p) is empty or NULL for a dead handle", (void *)r);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 1), out, sizeof out, PLUGRL_DTYPE_F64), PLUGRL_CLOSED);
  {
    double rw = 0;
    EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 1), &rw, &flag, &flag, NULL), PLUGRL_CLOSED);
  }
  v = -1, present = -1;
  EXPECT_R(r, plugrl_runner_step_size(r, &v, &present), PLUGRL_CLOSED);
  CHECK(v == 0 && present == 0);
  v = -1;
  EXPECT_R(r, plugrl_runner_chunk(r, 0, out, sizeof out, PLUGRL_DTYPE_F64, &v), PLUGRL_CLOSED);
  CHECK(v == 0);
  EXPECT_R(r, plugrl_runner_on_episode(r, NULL, NULL), PLUGRL_CLOSED);
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_CLOSED);
}

/* ------------------------------------------------------------------------ */
/* Connected to `plugrl serve` (reuse-feedback-obs offered)                 */
/* ------------------------------------------------------------------------ */

static void test_metadata(plugrl_client *c) {
  int64_t v = -1;
  int present = -1;
  size_t len = 0;
  char buf[4096];

  present = -1;
  EXPECT_C(c, plugrl_metadata_int(c, NULL, &v, &present), PLUGRL_INVALID_ARGUMENT);
  CHECK(present == 0);
  EXPECT_C(c, plugrl_metadata_int(c, "action_dim", NULL, &present), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_int(c, "action_dim", &v, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_int(c, "action_dim", &v, &present), PLUGRL_OK);
  CHECK(present == 1 && v == 2);
  present = -1;
  EXPECT_C(c, plugrl_metadata_int(c, "no such key", &v, &present), PLUGRL_OK);
  CHECK(present == 0);

  EXPECT_C(c, plugrl_metadata_string(c, NULL, buf, sizeof buf, &len, &present), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_string(c, "server", buf, sizeof buf, &len, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_string(c, "server", NULL, 16, &len, &present), PLUGRL_INVALID_ARGUMENT);
  /* length may be NULL (the caller does not want it). */
  EXPECT_C(c, plugrl_metadata_string(c, "server", buf, sizeof buf, NULL, &present), PLUGRL_OK);
  /* buf NULL with size 0 asks for the length: a query, so PLUGRL_OK. */
  len = 0;
  EXPECT_C(c, plugrl_metadata_string(c, "server", NULL, 0, &len, &present), PLUGRL_OK);
  CHECK(present == 1 && len > 0);
  EXPECT_C(c, plugrl_metadata_string(c, "server", buf, 1, &len, &present), PLUGRL_BUFFER_TOO_SMALL);
  /* Exactly the string's length leaves no room for its NUL: too small, by
  ** one byte (an off-by-one in the size check passed the first check above
  ** and wrote the NUL one past the buffer); one more byte fits. */
  {
    size_t need = len;
    EXPECT_C(c, plugrl_metadata_string(c, "server", buf, need, &len, &present), PLUGRL_BUFFER_TOO_SMALL);
    CHECK(strstr(plugrl_errmsg(c), "buffer too small") != NULL);
    EXPECT_C(c, plugrl_metadata_string(c, "server", buf, need + 1, &len, &present), PLUGRL_OK);
    CHECK(len == need && strlen(buf) == need);
  }
  /* A size no buffer can have (a negative number passed as a size). */
  EXPECT_C(c, plugrl_metadata_string(c, "server", buf, SIZE_MAX, &len, &present), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_string(c, "server", buf, sizeof buf, &len, &present), PLUGRL_OK);
  CHECK(present == 1 && strlen(buf) == len);
  EXPECT_C(c, plugrl_metadata_string(c, "no such key", buf, sizeof buf, &len, &present), PLUGRL_OK);
  CHECK(present == 0);

  EXPECT_C(c, plugrl_metadata_has_feature(c, NULL, &present), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_has_feature(c, "reuse-feedback-obs", NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_has_feature(c, "reuse-feedback-obs", &present), PLUGRL_OK);
  CHECK(present == 1);

  EXPECT_C(c, plugrl_metadata_json(c, NULL, buf, sizeof buf, &len, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_metadata_json(c, NULL, buf, 2, &len, &present), PLUGRL_BUFFER_TOO_SMALL);
  EXPECT_C(c, plugrl_metadata_json(c, NULL, NULL, 0, &len, &present), PLUGRL_OK);
  CHECK(present == 1 && len > 2);
  EXPECT_C(c, plugrl_metadata_json(c, NULL, buf, sizeof buf, &len, &present), PLUGRL_OK);
  CHECK(present == 1 && buf[0] == '{' && strlen(buf) == len);
}

/* Infer arguments, each wrong in one way: all PLUGRL_INVALID_ARGUMENT, and
** the connection is unchanged (a good infer works afterwards). */
static void test_infer_args(plugrl_client *c) {
  int64_t env[2] = {0, 1}, sid[2] = {0, 0}, dup[2] = {1, 1}, neg[1] = {-1};
  int64_t shape[PLUGRL_MAX_DIMS + 2];
  uint8_t img[2 * 4 * 4 * 3] = {0};
  double x[64] = {0};
  plugrl_action a;
  obs_x ox;
  plugrl_observation obs;
  plugrl_array arr;
  const char *text2[2] = {"a", NULL};
  const char *bad_utf8[2] = {"ok", "\xff\xfe"};
  uint8_t reuse[2] = {1, 0};
  int i;

  /* NULL arguments. */
  /* The message names the NULL pointers (without the C layer's check the
  ** core still refuses them, for their length, saying nothing of NULL). */
  EXPECT_C(c, plugrl_infer(c, NULL, sid, 2, make_obs(&ox, 2), NULL, &a), PLUGRL_INVALID_ARGUMENT);
  CHECK(strstr(plugrl_errmsg(c), "env_indices and step_ids must point to") != NULL);
  EXPECT_C(c, plugrl_infer(c, env, NULL, 2, make_obs(&ox, 2), NULL, &a), PLUGRL_INVALID_ARGUMENT);
  CHECK(strstr(plugrl_errmsg(c), "env_indices and step_ids must point to") != NULL);
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, NULL, NULL, &a), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, make_obs(&ox, 2), NULL, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_infer(c, env, sid, 0, make_obs(&ox, 0), NULL, &a), PLUGRL_INVALID_ARGUMENT);

  /* Env indices: negative, repeated. */
  EXPECT_C(c, plugrl_infer(c, neg, sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_infer(c, dup, sid, 2, make_obs(&ox, 2), NULL, &a), PLUGRL_INVALID_ARGUMENT);

  /* Leading dimension is not n. */
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, make_obs(&ox, 3), NULL, &a), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, make_obs(&ox, 1), NULL, &a), PLUGRL_INVALID_ARGUMENT);
  /* ... with text: exactly n = 2 pointers are read, not as many as the
  ** leading dimension (3) claims. The two sit at the end of a page whose next
  ** page is not mapped, so a third read would kill the process. */
  {
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m != MAP_FAILED) {
      const char **tail = (const char **)(m + page) - 2;
      CHECK(mprotect(m + page, (size_t)page, PROT_NONE) == 0);
      tail[0] = "a";
      tail[1] = "b";
      make_obs(&ox, 3);
      ox.obs.text = tail;
      EXPECT_C(c, plugrl_infer(c, env, sid, 2, &ox.obs, NULL, &a), PLUGRL_INVALID_ARGUMENT);
      munmap(m, (size_t)page * 2);
    }
  }

  /* A state whose shape, data, name, ndim or dtype is wrong. */
#define STATE_CASE(setup)                                                                 \
  do {                                                                                    \
    make_obs(&ox, 2);                                                                     \
    setup;                                                                                \
    EXPECT_C(c, plugrl_infer(c, env, sid, 2, &ox.obs, NULL, &a), PLUGRL_INVALID_ARGUMENT); \
  } while (0)
  STATE_CASE(ox.states[0].shape = NULL);
  STATE_CASE(ox.states[0].data = NULL);
  STATE_CASE(ox.states[0].name = NULL);
  STATE_CASE(ox.states[0].ndim = 0);
  STATE_CASE(ox.states[0].ndim = -1);
  STATE_CASE(ox.shape[1] = -2);
  STATE_CASE(ox.states[0].dtype = (plugrl_dtype)0);
  STATE_CASE(ox.states[0].dtype = (plugrl_dtype)99);
  STATE_CASE(ox.obs.states = NULL);                /* num_states 1, states NULL */
  STATE_CASE(ox.obs.text = text2);                 /* a NULL string in text */
  STATE_CASE(ox.obs.text = bad_utf8);              /* text that is not UTF-8 */
  STATE_CASE((ox.obs.text = bad_utf8, ox.obs.text_as_strings = 1));
  STATE_CASE(ox.states[0].name = "\xc3(");         /* a name that is not UTF-8 */
  STATE_CASE(ox.obs.num_images = 1);               /* images NULL */
  /* Garbage counts (a negative number passed as a size_t): refused before
  ** a single array is read, not sliced into a panic or a fault. */
  STATE_CASE(ox.obs.num_states = (size_t)1 << 62);
  STATE_CASE(ox.obs.num_states = SIZE_MAX);
  STATE_CASE((ox.obs.images = ox.states, ox.obs.num_images = (size_t)1 << 62));
  /* ndim > PLUGRL_MAX_DIMS: [2, 1, 1, ...]. */
  for (i = 0; i < PLUGRL_MAX_DIMS + 2; i++) shape[i] = i == 0 ? 2 : 1;
  STATE_CASE((ox.states[0].shape = shape, ox.states[0].ndim = PLUGRL_MAX_DIMS + 1));
  STATE_CASE((ox.states[0].shape = shape, ox.states[0].ndim = 1 << 30));
#undef STATE_CASE

  /* Images: must be u8 [n, h, w, c]. */
  memset(&obs, 0, sizeof obs);
  shape[0] = 2, shape[1] = 4, shape[2] = 4, shape[3] = 3;
  arr.name = "cam";
  arr.data = img;
  arr.dtype = PLUGRL_DTYPE_U8;
  arr.shape = shape;
  obs.images = &arr;
  obs.num_images = 1;
  arr.ndim = 3;
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, &obs, NULL, &a), PLUGRL_INVALID_ARGUMENT);
  arr.ndim = 5;
  shape[4] = 1;
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, &obs, NULL, &a), PLUGRL_INVALID_ARGUMENT);
  arr.ndim = 4;
  arr.dtype = PLUGRL_DTYPE_F32;
  arr.data = x; /* big enough for 2*4*4*3 floats? no: use a 1x1x1 image */
  shape[1] = 1, shape[2] = 1, shape[3] = 1;
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, &obs, NULL, &a), PLUGRL_INVALID_ARGUMENT);
  arr.dtype = PLUGRL_DTYPE_U8;
  arr.data = NULL;
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, &obs, NULL, &a), PLUGRL_INVALID_ARGUMENT);

  /* Reuse for an env that was never fed back on this connection. */
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, make_obs(&ox, 2), reuse, &a), PLUGRL_INVALID_ARGUMENT);

  /* After all that, nothing was sent: a good infer works, then its feedback. */
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, make_obs(&ox, 2), NULL, &a), PLUGRL_OK);
  CHECK(a.num_envs == 2 && a.step_size == 2 && a.horizon >= 1 && a.env_ids && a.env_ids[0] == 0 &&
        a.env_ids[1] == 1);
  {
    float rew[2] = {1, 1};
    uint8_t no[2] = {0, 0};
    EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OK);
    /* ndim == PLUGRL_MAX_DIMS is allowed: [2, 1, 1, ..., 1]. */
    for (i = 0; i < PLUGRL_MAX_DIMS + 2; i++) shape[i] = i == 0 ? 2 : 1;
    make_obs(&ox, 2);
    ox.states[0].shape = shape;
    ox.states[0].ndim = PLUGRL_MAX_DIMS;
    EXPECT_C(c, plugrl_infer(c, env, sid, 2, &ox.obs, NULL, &a), PLUGRL_OK);
    EXPECT_C(c, plugrl_feedback(c, env, sid, 2, &ox.obs, rew, no, no, NULL), PLUGRL_OK);
  }
}

static void test_order(plugrl_client *c) {
  int64_t env[2] = {0, 1}, sid[2] = {0, 0}, other[1] = {7};
  float rew[2] = {1, 1};
  uint8_t no[2] = {0, 0}, yes[2] = {1, 1}, reuse[2] = {1, 1};
  double out[256];
  plugrl_action a;
  obs_x ox;
  int can = -1;

  /* Feedback with no action outstanding. */
  EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OUT_OF_ORDER);

  /* Envs 0 and 1 were fed back without ending: they may reuse. */
  EXPECT_C(c, plugrl_can_reuse(c, 0, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_can_reuse(c, 0, &can), PLUGRL_OK);
  CHECK(can == 1);
  EXPECT_C(c, plugrl_can_reuse(c, 5, &can), PLUGRL_OK);
  CHECK(can == 0);
  can = 1;
  EXPECT_C(c, plugrl_can_reuse(c, -1, &can), PLUGRL_INVALID_ARGUMENT);
  CHECK(can == 0);
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, make_obs(&ox, 0), reuse, &a), PLUGRL_OK);

  /* action_copy: NULL, too small, unknown dtype; then the right size. */
  {
    size_t need = (size_t)(a.horizon * a.num_envs * a.step_size) * sizeof(double);
    CHECK(need <= sizeof out);
    EXPECT_C(c, plugrl_action_copy(c, NULL, need, PLUGRL_DTYPE_F64), PLUGRL_INVALID_ARGUMENT);
    EXPECT_C(c, plugrl_action_copy(c, out, need, (plugrl_dtype)42), PLUGRL_INVALID_ARGUMENT);
    /* 0 is below the enum (1..12), not a dtype of size 0: the message says so. */
    EXPECT_C(c, plugrl_action_copy(c, out, need, (plugrl_dtype)0), PLUGRL_INVALID_ARGUMENT);
    CHECK(strstr(plugrl_errmsg(c), "is not a plugrl_dtype") != NULL);
    EXPECT_C(c, plugrl_action_copy(c, out, 8, PLUGRL_DTYPE_F64), PLUGRL_BUFFER_TOO_SMALL);
    /* One byte or one element short is too small too: a size check off by
    ** an element would write the last one past the caller's buffer. The
    ** message is this call's (the one before, for dtype 42, was still
    ** there when a refusal set none). */
    EXPECT_C(c, plugrl_action_copy(c, out, need - 1, PLUGRL_DTYPE_F64), PLUGRL_BUFFER_TOO_SMALL);
    CHECK(strstr(plugrl_errmsg(c), "buffer too small") != NULL);
    EXPECT_C(c, plugrl_action_copy(c, out, need - sizeof(double), PLUGRL_DTYPE_F64), PLUGRL_BUFFER_TOO_SMALL);
    EXPECT_C(c, plugrl_action_copy(c, out, SIZE_MAX, PLUGRL_DTYPE_F64), PLUGRL_INVALID_ARGUMENT);
    EXPECT_C(c, plugrl_action_copy(c, out, need, PLUGRL_DTYPE_F64), PLUGRL_OK);
  }

  /* Infer twice. */
  EXPECT_C(c, plugrl_infer(c, env, sid, 2, make_obs(&ox, 2), NULL, &a), PLUGRL_OUT_OF_ORDER);
  /* Any infer ends the last action's life, a refused one too: a refused
  ** infer may have reconnected, freeing the buffer the action viewed, so
  ** copying it now is out of order, not a copy of freed memory. */
  EXPECT_C(c, plugrl_action_copy(c, out, sizeof out, PLUGRL_DTYPE_F64), PLUGRL_OUT_OF_ORDER);

  /* Feedback arguments, each wrong in one way. */
  EXPECT_C(c, plugrl_feedback(c, other, sid, 1, make_obs(&ox, 1), rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, NULL, sid, 2, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, env, NULL, 2, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, env, sid, 2, NULL, rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), NULL, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, NULL, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, no, NULL, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 3), rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_feedback(c, env, sid, 0, make_obs(&ox, 0), rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  {
    plugrl_episode ep = {NULL, NULL, NULL, NULL};
    EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, yes, no, &ep), PLUGRL_INVALID_ARGUMENT);
  }
  {
    /* One of the three NULL at a time (all NULL at once passed with a
    ** check that had forgotten one, which then panicked: INTERNAL). */
    double ret[2] = {0, 0};
    int64_t lens[2] = {0, 0};
    uint8_t mask[2] = {1, 1};
    plugrl_episode no_ret = {NULL, lens, NULL, mask}, no_len = {ret, NULL, NULL, mask}, no_mask = {ret, lens, NULL, NULL};
    EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, yes, no, &no_ret), PLUGRL_INVALID_ARGUMENT);
    EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, yes, no, &no_len), PLUGRL_INVALID_ARGUMENT);
    EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, yes, no, &no_mask), PLUGRL_INVALID_ARGUMENT);
    CHECK(strstr(plugrl_errmsg(c), "mask") != NULL);
  }
  /* Feedback for env 0 only, ending its episode: env 1 still holds its chunk. */
  {
    double ret = 3;
    int64_t len = 3;
    uint8_t mask = 1;
    plugrl_episode ep = {&ret, &len, NULL, &mask};
    EXPECT_C(c, plugrl_feedback(c, env, sid, 1, make_obs(&ox, 1), rew, yes, no, &ep), PLUGRL_OK);
  }
  /* A second feedback for the same action. */
  EXPECT_C(c, plugrl_feedback(c, env + 1, sid, 1, make_obs(&ox, 1), rew, no, no, NULL), PLUGRL_OUT_OF_ORDER);

  /* Env 0's last feedback ended its episode: it may not reuse. */
  EXPECT_C(c, plugrl_can_reuse(c, 0, &can), PLUGRL_OK);
  CHECK(can == 0);
  EXPECT_C(c, plugrl_infer(c, env, sid, 1, make_obs(&ox, 0), reuse, &a), PLUGRL_INVALID_ARGUMENT);
  /* Env 0 again; then feedback for env 1 from the earlier chunk is allowed. */
  EXPECT_C(c, plugrl_infer(c, env, sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_OK);
  EXPECT_C(c, plugrl_feedback(c, env + 1, sid, 1, make_obs(&ox, 1), rew, no, no, NULL), PLUGRL_OK);
  /* Env 0 still holds a chunk; feed it back after another infer for env 1. */
  EXPECT_C(c, plugrl_infer(c, env + 1, sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_OK);
  EXPECT_C(c, plugrl_feedback(c, env, sid, 2, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OK);
}

static void test_runner(plugrl_client *c) {
  plugrl_runner *r = NULL;
  obs_x ox;
  double actions[16], rew[2] = {1, 1};
  uint8_t no[2] = {0, 0};
  int64_t step = 0;
  int known = -1;

  EXPECT_C(c, plugrl_runner_new(c, 0, &r), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_runner_new(c, 2, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_C(c, plugrl_runner_new(c, 2, &r), PLUGRL_OK);

  EXPECT_R(r, plugrl_runner_step_size(r, NULL, &known), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_step_size(r, &step, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_step_size(r, &step, &known), PLUGRL_OK);
  CHECK(known == 1 && step == 2);

  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OUT_OF_ORDER);
  {
    double plan[16];
    int64_t steps = -1;
    EXPECT_R(r, plugrl_runner_chunk(r, 0, plan, sizeof plan, PLUGRL_DTYPE_F64, &steps), PLUGRL_OUT_OF_ORDER);
  }
  EXPECT_R(r, plugrl_runner_act(r, NULL, actions, 4 * sizeof(double), PLUGRL_DTYPE_F64), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), NULL, 4 * sizeof(double), PLUGRL_DTYPE_F64),
           PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 3), actions, 4 * sizeof(double), PLUGRL_DTYPE_F64),
           PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, 3 * sizeof(double), PLUGRL_DTYPE_F64),
           PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, 4 * sizeof(double), (plugrl_dtype)77),
           PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, SIZE_MAX, PLUGRL_DTYPE_F64), PLUGRL_INVALID_ARGUMENT);
  {
    /* A buffer larger than num_envs * step_size is a wrong size too
    ** (plugrl.h), and with the step size known (metadata action_dim) it
    ** is refused before anything is sent; a size of 0 is named as such. */
    plugrl_statistics before, after;
    before.size = after.size = sizeof before;
    EXPECT_R(r, plugrl_runner_stats(r, &before), PLUGRL_OK);
    EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, 5 * sizeof(double), PLUGRL_DTYPE_F64),
             PLUGRL_INVALID_ARGUMENT);
    EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, 0, PLUGRL_DTYPE_F64), PLUGRL_INVALID_ARGUMENT);
    CHECK(strstr(plugrl_runner_errmsg(r), "actions_size is 0") != NULL);
    EXPECT_R(r, plugrl_runner_stats(r, &after), PLUGRL_OK);
    CHECK(after.exchanges == before.exchanges && after.bytes_sent == before.bytes_sent);
  }
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, 4 * sizeof(double), PLUGRL_DTYPE_F64), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, 4 * sizeof(double), PLUGRL_DTYPE_F64),
           PLUGRL_OUT_OF_ORDER);
  {
    /* The rest of env 1's chunk (H = 8 steps of 2), after its first step. */
    double plan[16];
    float tiny[3];
    int64_t steps = -1;
    EXPECT_R(r, plugrl_runner_chunk(r, 1, plan, sizeof plan, PLUGRL_DTYPE_F64, NULL), PLUGRL_INVALID_ARGUMENT);
    EXPECT_R(r, plugrl_runner_chunk(r, 2, plan, sizeof plan, PLUGRL_DTYPE_F64, &steps), PLUGRL_INVALID_ARGUMENT);
    EXPECT_R(r, plugrl_runner_chunk(r, -1, plan, sizeof plan, PLUGRL_DTYPE_F64, &steps), PLUGRL_INVALID_ARGUMENT);
    EXPECT_R(r, plugrl_runner_chunk(r, 1, plan, sizeof plan, (plugrl_dtype)77, &steps), PLUGRL_INVALID_ARGUMENT);
    EXPECT_R(r, plugrl_runner_chunk(r, 1, NULL, 8, PLUGRL_DTYPE_F64, &steps), PLUGRL_INVALID_ARGUMENT);
    EXPECT_R(r, plugrl_runner_chunk(r, 1, plan, SIZE_MAX, PLUGRL_DTYPE_F64, &steps), PLUGRL_INVALID_ARGUMENT);
    EXPECT_R(r, plugrl_runner_chunk(r, 1, NULL, 0, PLUGRL_DTYPE_F64, &steps), PLUGRL_BUFFER_TOO_SMALL);
    CHECK(steps == 8);
    steps = -1;
    EXPECT_R(r, plugrl_runner_chunk(r, 1, tiny, sizeof tiny, PLUGRL_DTYPE_F32, &steps), PLUGRL_BUFFER_TOO_SMALL);
    CHECK(steps == 8);
    steps = -1;
    EXPECT_R(r, plugrl_runner_chunk(r, 1, plan, sizeof plan, PLUGRL_DTYPE_F64, &steps), PLUGRL_OK);
    /* (The zero policy: the values are checked in Go TestChunk and hpp_test.) */
    CHECK(steps == 8 && plan[0] == actions[2] && plan[1] == actions[3]);
  }
  EXPECT_R(r, plugrl_runner_report(r, NULL, rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), NULL, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rew, NULL, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rew, no, NULL, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 1), rew, no, no, NULL), PLUGRL_INVALID_ARGUMENT);
  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_on_episode(r, NULL, NULL), PLUGRL_OK);

  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_OK);
  test_dead_handle((plugrl_client *)0x1234, r); /* r is dead now */
}

/* plugrl_stats and plugrl_runner_stats: bad arguments, a size from an
** older (smaller) struct, and the counts of real exchanges. */
static void test_stats(const char *url) {
  plugrl_client *c = NULL;
  plugrl_runner *r = NULL;
  plugrl_statistics st, part;
  obs_x ox;
  int64_t env = 0, sid = 0;
  float rew = 1;
  uint8_t no = 0, no2[2] = {0, 0}, none2[2] = {0, 0};
  double actions[4], rw[2] = {1, 1};
  plugrl_action a;
  int i;

  EXPECT_C(c, open_client(url, 0, 10000, &c), PLUGRL_OK);
  CHECK(PLUGRL_STATS_SIZE_V1 == sizeof(plugrl_statistics)); /* the first version */
  EXPECT_C(c, plugrl_stats(c, NULL), PLUGRL_INVALID_ARGUMENT);
  st.size = 0;
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_INVALID_ARGUMENT);
  st.size = PLUGRL_STATS_SIZE_V1 - 8;
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_INVALID_ARGUMENT);
  memset(&st, 0xff, sizeof st);
  st.size = sizeof st;
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_OK);
  CHECK(st.size == sizeof st && st.exchanges == 0 && st.feedbacks == 0 && st.bytes_sent == 0 &&
        st.bytes_received > 0 && st.reconnects == 0 && st.interrupts == 0 && st.rtt_max_us == 0 &&
        st.episodes == 0 && st.env_steps == 0);

  for (i = 0; i < 3; i++) {
    EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_OK);
    EXPECT_C(c, plugrl_feedback(c, &env, &sid, 1, make_obs(&ox, 1), &rew, &no, &no, NULL), PLUGRL_OK);
  }
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_OK);
  /* The third feedback may still be held for the next infer: counted when it leaves. */
  CHECK(st.exchanges == 3 && st.feedbacks >= 2 && st.feedbacks <= 3 && st.bytes_sent > 5 * 10 &&
        st.bytes_received > 3 * 10);
  CHECK(st.rtt_last_us > 0 && st.rtt_p50_us > 0 && st.rtt_p50_us <= st.rtt_p99_us && st.rtt_p99_us <= st.rtt_max_us &&
        st.rtt_last_us <= st.rtt_max_us && st.rtt_max_us < 10e6);
  CHECK(st.reconnects == 0 && st.feedback_rows_dropped == 0 && st.rows_reused == 0 && st.interrupts == 0);
  printf("       exchanges %llu, sent %llu B, received %llu B, rtt last %.1f p50 %.1f p99 %.1f max %.1f us\n",
         (unsigned long long)st.exchanges, (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_received,
         st.rtt_last_us, st.rtt_p50_us, st.rtt_p99_us, st.rtt_max_us);

  /* A size no header ever had (smaller than the first version's): refused,
  ** and nothing is written. */
  memset(&part, 0xab, sizeof part);
  part.size = offsetof(plugrl_statistics, rtt_last_us);
  EXPECT_C(c, plugrl_stats(c, &part), PLUGRL_INVALID_ARGUMENT);
  CHECK(part.exchanges == 0xababababababababULL);
  /* A newer caller's larger struct: the fields this library knows are
  ** written, the bytes beyond them are not. */
  {
    unsigned char big[sizeof(plugrl_statistics) + 16];
    plugrl_statistics *bs = (plugrl_statistics *)(void *)big;
    memset(big, 0xab, sizeof big);
    bs->size = sizeof big;
    EXPECT_C(c, plugrl_stats(c, bs), PLUGRL_OK);
    CHECK(bs->size == sizeof big && bs->exchanges == 3 && big[sizeof(plugrl_statistics)] == 0xab &&
          big[sizeof big - 1] == 0xab);
  }

  /* An interrupt that ends the next infer: counted. */
  EXPECT_N(plugrl_interrupt(c), PLUGRL_OK);
  EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_INTERRUPTED);
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_OK);
  CHECK(st.interrupts == 1 && st.exchanges == 3);

  /* A runner: its client's numbers plus its own. */
  EXPECT_C(c, plugrl_runner_new(c, 2, &r), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_stats(r, NULL), PLUGRL_INVALID_ARGUMENT);
  st.size = 8;
  EXPECT_R(r, plugrl_runner_stats(r, &st), PLUGRL_INVALID_ARGUMENT);
  for (i = 0; i < 3; i++) {
    EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
    no2[1] = (uint8_t)(i == 2); /* env 1's episode ends at the third step */
    EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rw, no2, none2, NULL), PLUGRL_OK);
  }
  st.size = sizeof st;
  EXPECT_R(r, plugrl_runner_stats(r, &st), PLUGRL_OK);
  CHECK(st.env_steps == 6 && st.episodes == 1 && st.exchanges >= 4 && st.interrupts == 1);
  memset(&part, 0, sizeof part);
  part.size = sizeof part;
  EXPECT_C(c, plugrl_stats(c, &part), PLUGRL_OK);
  CHECK(part.exchanges == st.exchanges && part.episodes == 0 && part.env_steps == 0);
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_stats(r, &st), PLUGRL_CLOSED);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  EXPECT_N(plugrl_stats(c, &st), PLUGRL_CLOSED);
}

/* A runner whose client was closed first. */
static void test_runner_after_close(const char *url) {
  plugrl_client *c = NULL;
  plugrl_runner *r = NULL;
  obs_x ox;
  double actions[4];
  int64_t step = 0;
  int known = 0;

  EXPECT_C(c, open_client(url, 0, 10000, &c), PLUGRL_OK);
  EXPECT_C(c, plugrl_runner_new(c, 2, &r), PLUGRL_OK);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_CLOSED);
  EXPECT_R(r, plugrl_runner_step_size(r, &step, &known), PLUGRL_CLOSED);
  {
    /* Stats too: the runner's numbers are its client's, which is gone. */
    plugrl_statistics st;
    st.size = sizeof st;
    EXPECT_N(plugrl_runner_stats(r, &st), PLUGRL_CLOSED);
  }
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_CLOSED);
}

/* What a runner's life must not break: a runner freed while it owes
** feedback leaves its client usable (the connection is dropped, SPEC 7.6;
** a new runner's infers were refused as out of order for ever); an
** interrupt ends an act in the middle of a chunk (it gave the rest of the
** chunk first); a free or close from the episode callback is BUSY (it
** waited for the report it is inside of, for ever). */
static plugrl_runner *cb_runner;
static plugrl_client *cb_client;
static plugrl_status cb_free, cb_close;
static int cb_calls, cb_msg_ok = 1;
static void free_from_callback(void *user, int64_t env, double ret, int64_t length, int success) {
  (void)user, (void)env, (void)ret, (void)length, (void)success;
  cb_calls++;
  cb_free = plugrl_runner_free(cb_runner);
  cb_close = plugrl_close(cb_client);
  /* The refusal names this thread's callback, not another thread. */
  if (plugrl_runner_act(cb_runner, NULL, NULL, 0, PLUGRL_DTYPE_F64) != PLUGRL_BUSY ||
      strstr(plugrl_runner_errmsg(cb_runner), "inside a callback") == NULL)
    cb_msg_ok = 0;
}

static void test_runner_lifecycle(const char *url) {
  plugrl_client *c = NULL;
  plugrl_runner *r = NULL;
  plugrl_statistics st;
  obs_x ox;
  double actions[4], rew[2] = {1, 1};
  uint8_t no[2] = {0, 0}, yes[2] = {1, 1};

  EXPECT_C(c, open_reconnecting(url, 10000, &c), PLUGRL_OK);
  if (!c) return;
  EXPECT_C(c, plugrl_runner_new(c, 2, &r), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_OK); /* between act and report */
  EXPECT_C(c, plugrl_runner_new(c, 2, &r), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OK);
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  EXPECT_R(r, plugrl_runner_stats(r, &st), PLUGRL_OK);
  CHECK(st.reconnects_other == 1);

  EXPECT_N(plugrl_interrupt(c), PLUGRL_OK); /* mid-chunk: no infer needed */
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_INTERRUPTED);
  EXPECT_R(r, plugrl_runner_stats(r, &st), PLUGRL_OK);
  CHECK(st.interrupts == 1);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);

  cb_runner = r, cb_client = c;
  EXPECT_R(r, plugrl_runner_on_episode(r, free_from_callback, NULL), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rew, yes, no, NULL), PLUGRL_OK);
  checks++;
  CHECK(cb_msg_ok);
  if (cb_calls != 2 || cb_free != PLUGRL_BUSY || cb_close != PLUGRL_BUSY)
    failf(__LINE__, "from the episode callback (%d calls): plugrl_runner_free %s, plugrl_close %s; want busy", cb_calls,
          plugrl_status_str(cb_free), plugrl_status_str(cb_close));
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_OK);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
}

/* Two runners over one client, the first used again after the second's
** first act gave up what it owed (a reconnect): the first's chunks went
** with that connection (SPEC 7.6). Its act is refused, saying why, and it
** sends nothing: its feedback used to go out on the new connection as the
** answer to the second runner's chunks, and the two runners' feedback
** then answered each other's infers, all with PLUGRL_OK. Freeing the
** first does not give up the second's chunks either. */
static void test_two_runners(const char *url) {
  plugrl_client *c = NULL;
  plugrl_runner *r1 = NULL, *r2 = NULL;
  plugrl_statistics st;
  obs_x ox;
  double actions[4], rew[2] = {1, 1};
  uint8_t no[2] = {0, 0};
  int i;

  EXPECT_C(c, open_reconnecting(url, 10000, &c), PLUGRL_OK);
  if (!c) return;
  EXPECT_C(c, plugrl_runner_new(c, 2, &r1), PLUGRL_OK);
  EXPECT_R(r1, plugrl_runner_act(r1, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
  EXPECT_R(r1, plugrl_runner_report(r1, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OK);
  EXPECT_C(c, plugrl_runner_new(c, 2, &r2), PLUGRL_OK);
  EXPECT_R(r2, plugrl_runner_act(r2, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
  EXPECT_R(r2, plugrl_runner_report(r2, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OK);
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_OK);
  CHECK(st.reconnects == 1 && st.feedbacks == 0);
  /* r1's chunks (8 steps) were dropped with the first connection. */
  EXPECT_R(r1, plugrl_runner_act(r1, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OUT_OF_ORDER);
  CHECK(strstr(plugrl_runner_errmsg(r1), "one runner at a time") != NULL);
  EXPECT_R(r1, plugrl_runner_report(r1, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OUT_OF_ORDER);
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_OK);
  CHECK(st.feedbacks == 0 && st.exchanges == 2);
  /* Freed while r2 owes: r2's chunks are not given up. */
  EXPECT_R(r1, plugrl_runner_free(r1), PLUGRL_OK);
  for (i = 0; i < 9; i++) { /* past the end of r2's chunk: its feedback, then an infer */
    EXPECT_R(r2, plugrl_runner_act(r2, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
    EXPECT_R(r2, plugrl_runner_report(r2, make_obs(&ox, 2), rew, no, no, NULL), PLUGRL_OK);
  }
  EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_OK);
  CHECK(st.reconnects == 1 && st.feedbacks == 1 && st.exchanges == 3);
  if (st.reconnects != 1 || st.feedbacks != 1 || st.exchanges != 3)
    failf(__LINE__, "two runners: %llu reconnects, %llu feedbacks, %llu exchanges; want 1, 1, 3",
          (unsigned long long)st.reconnects, (unsigned long long)st.feedbacks, (unsigned long long)st.exchanges);
  EXPECT_R(r2, plugrl_runner_free(r2), PLUGRL_OK);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
}

/* A runner's acts are infers on its client: the action of the client's
** own plugrl_infer before them is gone (its connection, dropped by the
** runner's first act to give up its feedback, freed the buffer it
** viewed), and plugrl_action_copy afterwards is out of order. It used to
** copy from that freed buffer: garbage, or, for an action of over 128
** KiB (malloc's mmap threshold), a fault that ended the process. */
static void test_action_after_runner(const char *url) {
  plugrl_client *c = NULL;
  plugrl_runner *r = NULL;
  plugrl_action a;
  obs_x ox;
  int64_t env = 0, sid = 0;
  double out[64], actions[2];

  EXPECT_C(c, open_reconnecting(url, 10000, &c), PLUGRL_OK);
  if (!c) return;
  EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_OK);
  CHECK((size_t)(a.horizon * a.num_envs * a.step_size) <= sizeof out / sizeof *out);
  EXPECT_C(c, plugrl_action_copy(c, out, sizeof out, PLUGRL_DTYPE_F64), PLUGRL_OK);
  EXPECT_C(c, plugrl_runner_new(c, 1, &r), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 1), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_OK);
  EXPECT_C(c, plugrl_action_copy(c, out, sizeof out, PLUGRL_DTYPE_F64), PLUGRL_OUT_OF_ORDER);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
}

/* A log callback that, against plugrl.h, closes its own client: refused
** with PLUGRL_BUSY (it used to wait for ever for the plugrl_open it runs
** inside of). */
typedef struct {
  plugrl_client **c;
  int calls;
  plugrl_status got;
} log_close;

static void close_from_log(void *user, int level, const char *message) {
  log_close *l = user;
  (void)level, (void)message;
  if (*l->c && l->calls++ == 0) l->got = plugrl_close(*l->c);
}

static void test_close_from_log(const char *url) {
  plugrl_options o;
  plugrl_client *c = NULL;
  log_close l = {&c, 0, PLUGRL_OK};
  char path[] = "/tmp/plugrl-misuse-log-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    failf(__LINE__, "mkstemp: %s", strerror(errno));
    return;
  }
  close(fd);
  plugrl_options_init(&o);
  o.url = url;
  o.max_reconnects = -1;
  o.ledger_path = path; /* plugrl_open logs that it records one */
  o.log = close_from_log;
  o.log_user = &l;
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_OK);
  CHECK(l.calls > 0);
  EXPECT_N(l.got, PLUGRL_BUSY);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  unlink(path);
}

/* A log callback of a runner's client runs inside the runner's call (here
** the reconnect of its first act, which gives up the feedback the client's
** own infer left owed): a call on the runner from it is refused with
** PLUGRL_BUSY, and plugrl_runner_errmsg says this thread's callback is
** inside the call, as plugrl_errmsg does for the client. It used to say
** that another thread was inside a call on the runner. */
typedef struct {
  plugrl_runner *r;
  int calls;
  plugrl_status act, free;
  char msg[512];
} log_runner;

static void runner_from_log(void *user, int level, const char *message) {
  log_runner *l = user;
  (void)level, (void)message;
  if (l->r && l->calls++ == 0) {
    l->act = plugrl_runner_act(l->r, NULL, NULL, 0, PLUGRL_DTYPE_F64);
    snprintf(l->msg, sizeof l->msg, "%s", plugrl_runner_errmsg(l->r));
    l->free = plugrl_runner_free(l->r);
  }
}

static void test_runner_errmsg_from_log(const char *url) {
  plugrl_options o;
  plugrl_client *c = NULL;
  log_runner l;
  obs_x ox;
  plugrl_action a;
  int64_t env = 0, sid = 0;
  double actions[2];
  memset(&l, 0, sizeof l);
  plugrl_options_init(&o);
  o.url = url;
  o.max_reconnects = 3;
  o.reconnect_backoff_ms = 10;
  o.log = runner_from_log;
  o.log_user = &l;
  EXPECT_C(c, plugrl_open(&o, &c), PLUGRL_OK);
  if (!c) return;
  EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_OK); /* owes its feedback */
  EXPECT_C(c, plugrl_runner_new(c, 1, &l.r), PLUGRL_OK);
  EXPECT_R(l.r, plugrl_runner_act(l.r, make_obs(&ox, 1), actions, sizeof actions, PLUGRL_DTYPE_F64), PLUGRL_OK);
  CHECK(l.calls > 0);
  EXPECT_N(l.act, PLUGRL_BUSY);
  EXPECT_N(l.free, PLUGRL_BUSY);
  checks++;
  if (strstr(l.msg, "inside a callback") == NULL)
    failf(__LINE__, "plugrl_runner_errmsg from the client's log callback inside the runner's act: \"%s\"; want "
                    "the message that names this thread's callback",
          l.msg);
  EXPECT_R(l.r, plugrl_runner_free(l.r), PLUGRL_OK);
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
}

static void test_connected(const char *url) {
  plugrl_client *c = NULL, *c2 = NULL;
  obs_x ox;
  int64_t env = 0, sid = 0;
  uint8_t reuse = 1;
  plugrl_action a;

  printf("-- connected to %s\n", url);
  EXPECT_C(c, open_client(url, 0, 10000, &c), PLUGRL_OK);
  if (!c) return;
  test_metadata(c);
  test_infer_args(c);
  test_order(c);
  test_runner(c);
  test_stats(url);
  test_runner_lifecycle(url);
  test_two_runners(url);
  test_action_after_runner(url);
  test_close_from_log(url);
  test_runner_errmsg_from_log(url);

  /* A closed handle: dead, and its value is not handed out again. */
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  test_dead_handle(c, (plugrl_runner *)0x5678);
  EXPECT_C(c2, open_client(url, 1, 10000, &c2), PLUGRL_OK);
  CHECK(c2 != c);
  /* c2 took c's slot (freed slots are reused last in, first out, and no
  ** handle was made in between): c's token, of the slot's older
  ** generation, must still name nothing, and above all not c2. (The
  ** slot is not visible from C: should the registry stop reusing the
  ** last slot freed, this still passes, without testing the reuse.) */
  {
    int64_t v = 0;
    int present = 0;
    EXPECT_C(c, plugrl_metadata_int(c, "action_dim", &v, &present), PLUGRL_CLOSED);
    EXPECT_C(c, plugrl_close(c), PLUGRL_CLOSED);
    EXPECT_C(c2, plugrl_metadata_int(c2, "action_dim", &v, &present), PLUGRL_OK);
    CHECK(present == 1 && v == 2);
  }
  /* Reuse when the client was told not to use the feature. */
  {
    float rew = 1;
    uint8_t no = 0;
    EXPECT_C(c2, plugrl_infer(c2, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_OK);
    EXPECT_C(c2, plugrl_feedback(c2, &env, &sid, 1, make_obs(&ox, 1), &rew, &no, &no, NULL), PLUGRL_OK);
    EXPECT_C(c2, plugrl_infer(c2, &env, &sid, 1, make_obs(&ox, 0), &reuse, &a), PLUGRL_INVALID_ARGUMENT);
  }
  EXPECT_N(plugrl_close(c2), PLUGRL_OK);
  test_runner_after_close(url);
}

/* ------------------------------------------------------------------------ */
/* PLUGRL_BUSY: one thread blocked in a call, another calling in.           */
/* ------------------------------------------------------------------------ */

typedef struct {
  plugrl_client *c;
  plugrl_runner *r;
  plugrl_status status;
  double took_ms;
} blocked_call;

static void *blocked_infer(void *arg) {
  blocked_call *b = arg;
  int64_t env = 0, sid = 0;
  obs_x ox;
  plugrl_action a;
  double t0 = now_ms();
  b->status = plugrl_infer(b->c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a);
  b->took_ms = now_ms() - t0;
  return NULL;
}

static void *blocked_act(void *arg) {
  blocked_call *b = arg;
  obs_x ox;
  double actions[2];
  double t0 = now_ms();
  b->status = plugrl_runner_act(b->r, make_obs(&ox, 2), actions, sizeof actions, PLUGRL_DTYPE_F64);
  b->took_ms = now_ms() - t0;
  return NULL;
}

static void test_busy(void) {
  silent_server srv;
  char url[64];
  plugrl_client *c = NULL;
  plugrl_runner *r = NULL;
  pthread_t th;
  blocked_call b;
  int64_t v = 0, env = 0, sid = 0;
  int present = 0, seen;
  obs_x ox;
  plugrl_action a;
  float rew = 0;
  uint8_t no = 0;
  double out[8];
  const int32_t timeout_ms = 3000;

  if (silent_start(&srv) != 0) {
    failf(__LINE__, "could not start the silent server: %s", strerror(errno));
    return;
  }
  snprintf(url, sizeof url, "ws://127.0.0.1:%d", srv.port);
  printf("-- a server that never answers, at %s\n", url);

  /* The client: one thread blocks in plugrl_infer, this one calls in. */
  EXPECT_C(c, open_reconnecting(url, timeout_ms, &c), PLUGRL_OK);
  EXPECT_C(c, plugrl_metadata_int(c, "action_horizon", &v, &present), PLUGRL_OK);
  CHECK(present == 1 && v == 2);
  memset(&b, 0, sizeof b);
  b.c = c;
  seen = silent_messages(&srv);
  pthread_create(&th, NULL, blocked_infer, &b);
  if (!silent_wait(&srv, seen, 10000)) {
    failf(__LINE__, "the blocked thread's infer never reached the server");
  } else {
    v = -1, present = -1;
    EXPECT_C(c, plugrl_metadata_int(c, "action_horizon", &v, &present), PLUGRL_BUSY);
    CHECK(v == 0 && present == 0); /* the caller's own results, not the handle */
    EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_BUSY);
    EXPECT_C(c, plugrl_feedback(c, &env, &sid, 1, make_obs(&ox, 1), &rew, &no, &no, NULL), PLUGRL_BUSY);
    EXPECT_C(c, plugrl_action_copy(c, out, sizeof out, PLUGRL_DTYPE_F64), PLUGRL_BUSY);
    EXPECT_C(c, plugrl_can_reuse(c, 0, &present), PLUGRL_BUSY);
    {
      /* plugrl_stats is the exception: any thread, during a call. */
      plugrl_statistics st;
      int tries;
      st.size = sizeof st;
      EXPECT_C(c, plugrl_stats(c, &st), PLUGRL_OK);
      /* The server may see the infer an instant before the sending
      ** thread, back from its send, counts its bytes. */
      for (tries = 0; st.bytes_sent == 0 && tries < 100; tries++) {
        sleep_ms(10);
        plugrl_stats(c, &st);
      }
      CHECK(st.exchanges == 0 && st.bytes_sent > 0);
    }
  }
  pthread_join(th, NULL);
  /* The blocked call ends at its deadline, not before and not never. */
  expect_status(__LINE__, "plugrl_infer on a server that never answers", b.status, PLUGRL_TIMEOUT, 1,
                plugrl_errmsg(c));
  CHECK(b.took_ms >= timeout_ms * 0.9 && b.took_ms < timeout_ms + 500);
  /* The timeout closed the connection: the next infer reconnects first. */
  EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_RECONNECTED);

  /* plugrl_interrupt from another thread ends a blocked infer at once. */
  memset(&b, 0, sizeof b);
  b.c = c;
  seen = silent_messages(&srv);
  pthread_create(&th, NULL, blocked_infer, &b);
  if (!silent_wait(&srv, seen, 10000)) {
    failf(__LINE__, "the blocked thread's infer never reached the server");
  }
  EXPECT_N(plugrl_interrupt(c), PLUGRL_OK);
  pthread_join(th, NULL);
  expect_status(__LINE__, "plugrl_infer interrupted while it waits", b.status, PLUGRL_INTERRUPTED, 1, plugrl_errmsg(c));
  CHECK(b.took_ms < timeout_ms * 0.5);
  /* The interrupted wait dropped the connection: the next infer reconnects. */
  EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_RECONNECTED);
  /* An interrupt with no call running ends the next infer before it sends. */
  EXPECT_N(plugrl_interrupt(c), PLUGRL_OK);
  seen = silent_messages(&srv);
  EXPECT_C(c, plugrl_infer(c, &env, &sid, 1, make_obs(&ox, 1), NULL, &a), PLUGRL_INTERRUPTED);
  sleep_ms(50);
  CHECK(silent_messages(&srv) == seen);
  /* plugrl_close from another thread during a blocked call: the call is
  ** interrupted and waited for; close never returns PLUGRL_BUSY. */
  memset(&b, 0, sizeof b);
  b.c = c;
  seen = silent_messages(&srv);
  pthread_create(&th, NULL, blocked_infer, &b);
  if (!silent_wait(&srv, seen, 10000)) {
    failf(__LINE__, "the blocked thread's infer never reached the server");
  }
  {
    double t0 = now_ms();
    EXPECT_N(plugrl_close(c), PLUGRL_OK);
    CHECK(now_ms() - t0 < timeout_ms * 0.5);
  }
  pthread_join(th, NULL);
  CHECK(b.status == PLUGRL_INTERRUPTED || b.status == PLUGRL_CLOSED);
  CHECK(b.took_ms < timeout_ms * 0.5);
  EXPECT_N(plugrl_interrupt(c), PLUGRL_CLOSED);
  EXPECT_N(plugrl_close(c), PLUGRL_CLOSED);

  /* The runner: one thread blocks in plugrl_runner_act. */
  c = NULL;
  EXPECT_C(c, open_reconnecting(url, timeout_ms, &c), PLUGRL_OK);
  EXPECT_C(c, plugrl_runner_new(c, 2, &r), PLUGRL_OK);
  /* A handle of the other kind is no handle here (it used to raise an
  ** interrupt, which the blocked act below would have taken at once). */
  EXPECT_N(plugrl_interrupt((plugrl_client *)r), PLUGRL_CLOSED);
  EXPECT_N(plugrl_runner_interrupt((plugrl_runner *)c), PLUGRL_CLOSED);
  memset(&b, 0, sizeof b);
  b.r = r;
  seen = silent_messages(&srv);
  pthread_create(&th, NULL, blocked_act, &b);
  if (!silent_wait(&srv, seen, 10000)) {
    failf(__LINE__, "the blocked thread's runner_act never reached the server");
  } else {
    double rw[2] = {0, 0};
    uint8_t f[2] = {0, 0};
    EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), out, 4 * sizeof(double), PLUGRL_DTYPE_F64), PLUGRL_BUSY);
    EXPECT_R(r, plugrl_runner_report(r, make_obs(&ox, 2), rw, f, f, NULL), PLUGRL_BUSY);
    /* Its client is busy too: the runner's call is running on it. */
    v = -1, present = -1;
    EXPECT_C(c, plugrl_metadata_int(c, "action_horizon", &v, &present), PLUGRL_BUSY);
    CHECK(v == 0 && present == 0); /* the caller's own results, not the handle */
  }
  EXPECT_N(plugrl_runner_interrupt(r), PLUGRL_OK);
  pthread_join(th, NULL);
  expect_status(__LINE__, "plugrl_runner_act interrupted while it waits", b.status, PLUGRL_INTERRUPTED, 1,
                plugrl_runner_errmsg(r));
  CHECK(b.took_ms < timeout_ms * 0.5);
  /* Blocked again (the runner reconnects by itself), then the client is
  ** closed under it: close interrupts the runner's call and waits for it. */
  memset(&b, 0, sizeof b);
  b.r = r;
  seen = silent_messages(&srv);
  pthread_create(&th, NULL, blocked_act, &b);
  if (!silent_wait(&srv, seen, 10000)) {
    failf(__LINE__, "the blocked thread's runner_act never reached the server");
  }
  EXPECT_N(plugrl_close(c), PLUGRL_OK);
  pthread_join(th, NULL);
  CHECK(b.status == PLUGRL_INTERRUPTED || b.status == PLUGRL_CLOSED);
  CHECK(b.took_ms < timeout_ms * 0.5);
  EXPECT_R(r, plugrl_runner_act(r, make_obs(&ox, 2), out, 2 * sizeof(double), PLUGRL_DTYPE_F64), PLUGRL_CLOSED);
  EXPECT_N(plugrl_runner_interrupt(r), PLUGRL_CLOSED); /* its client is gone */
  EXPECT_R(r, plugrl_runner_free(r), PLUGRL_OK);
  EXPECT_N(plugrl_runner_interrupt(r), PLUGRL_CLOSED);

  pthread_mutex_lock(&srv.mu);
  srv.stop = 1;
  pthread_mutex_unlock(&srv.mu);
  shutdown(srv.listen_fd, SHUT_RDWR);
  close(srv.listen_fd);
  /* The accept loop may still sit in accept() on some systems: detach. */
  pthread_detach(srv.thread);
  sleep_ms(10);
}

int main(int argc, char **argv) {
  const char *url = argc > 1 ? argv[1] : getenv("PLUGRL_TEST_URL");

  if (argc > 1 && strcmp(argv[1], "--first-token") == 0) {
    print_first_token(); /* for test_foreign_handle, in a process of its own */
    return 0;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("libplugrl %s (header %s)\n", plugrl_version(), PLUGRL_VERSION_STRING);
  test_static();
  printf("-- another process's handle\n");
  test_foreign_handle();
  printf("-- no server\n");
  test_options();
  test_options_sizes();
  printf("-- NULL and made-up handles\n");
  test_dead_handle(NULL, NULL);
  test_dead_handle((plugrl_client *)0x1234, (plugrl_runner *)0x1234);
  test_dead_handle((plugrl_client *)(uintptr_t)-8, (plugrl_runner *)(uintptr_t)-8);
  if (url && *url)
    test_connected(url);
  else
    printf("-- no server URL given: skipping the connected cases\n");
  test_busy();

  printf("\n%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
