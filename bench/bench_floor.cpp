// bench_floor.cpp - the transport floor of `./build.sh bench`: the cheapest
// client that puts the same bytes on the same socket as libplugrl does for
// one infer/action/feedback cycle, with no msgpack and no ndarray work.
//
// Usage:
//   plugrl_bench_floor --url ws://HOST:PORT --infer-bytes I --feedback-bytes F [--chunk B]
//                      [--hold 1] [--handles N] [--window-file PATH] [--mlockall 1]
//
// It connects with a hand-written WebSocket handshake (TCP_NODELAY), reads
// the server's first frame (metadata) and then, until the server closes the
// connection, sends an infer frame of I payload bytes, reads the action
// frame and discards it, and sends a feedback frame of F payload bytes.
// Every frame is masked, as RFC 6455 requires of a client, with a fresh
// random key (xoshiro256** seeded from getrandom): the payload is masked in
// one pass from a source buffer into the send buffer (the one copy any
// client must make), and the frame goes out in one send(). With --chunk B
// the payload is instead masked and sent B bytes at a time from a B-byte
// buffer (the first send carries the header), which keeps the bytes in
// cache between masking and the kernel's copy. With --hold 1 a feedback
// of up to 64 KiB is masked into a buffer of its own and not sent: it
// leaves with the next infer, in the same system call (sendmsg with two
// pieces), as libplugrl does in a tight loop (plugrl_feedback): the floor
// for a client that knows that trick.
//
// I and F are the sizes libplugrl's encoder gives the benchmark workload:
// `plugrl-bench-server --sizes ...` prints them. The server
// (cmd/plugrl-bench-server) measures exchanges/s identically for this
// client and for plugrl_bench_client; this one prints its own count too.
//
// With --handles N it runs N such connections, each on its own thread
// (bench_client's --handles counterpart). At the end it prints its CPU time
// per exchange, "cpu_us_per_exchange X", over the server's window, which
// it reads from PATH (the server's output) after the server has stopped
// it; without --window-file, over the run after its first 20 % of
// exchanges (bench_cpu.hpp).
//
// Built with PLUGRL_FLOOR_VIA_GO it is plugrl_bench_gofloor: the same
// program, its send, sendmsg and recv calls made through
// libplugrl_gofloor.so (bench/gofloor), a Go library that does nothing
// but those system calls, with libplugrl's Ps, yield and thread policy.
// What it costs over this floor is what the Go runtime costs a thread that
// calls in from C; what libplugrl costs over it is libplugrl's own path.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_cpu.hpp"

namespace {

#ifdef PLUGRL_FLOOR_VIA_GO
constexpr const char *kProg = "plugrl_bench_gofloor";
#else
constexpr const char *kProg = "plugrl_bench_floor";
#endif

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "%s: %s: %s\n", kProg, what, errno ? std::strerror(errno) : "unexpected end");
  std::exit(1);
}

// xoshiro256**, seeded from getrandom(2).
struct Rng {
  uint64_t s[4];
  Rng() {
    if (getrandom(s, sizeof s, 0) != ssize_t(sizeof s)) die("getrandom");
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
  }
};

// dst[i] = src[i] ^ key[i % 4] for n bytes; n need not be a multiple of 8.
// key is the mask's four bytes as a little-endian word; dst and src may be
// unaligned.
__attribute__((optimize("O3"))) void mask_copy(uint8_t *dst, const uint8_t *src, size_t n, uint32_t key) {
  const uint64_t k8 = uint64_t(key) | (uint64_t(key) << 32);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, src + i, 8);
    v ^= k8;
    std::memcpy(dst + i, &v, 8);
  }
  for (; i < n; i++) dst[i] = src[i] ^ uint8_t(key >> (8 * (i % 4)));
}

// The floor's system calls: the C library's, or, in plugrl_bench_gofloor,
// libplugrl_gofloor.so's, which return minus the errno on failure.
#ifdef PLUGRL_FLOOR_VIA_GO
extern "C" {
void gf_bind(void);
long gf_send(int fd, void *p, size_t n, int flags);
long gf_sendmsg(int fd, void *msg, size_t total, int flags);
long gf_recv(int fd, void *p, size_t n, int flags);
}
ssize_t via_go(long r) {
  if (r < 0) {
    errno = int(-r);
    return -1;
  }
  return ssize_t(r);
}
// A thread's first call into Go, made alone, as libplugrl makes it
// (capi/exports.c, first_call_mu): the runtime keeps one spare M for a
// thread's first call and makes the next only from inside Go, and a thread
// that finds none waits in 1 us sleeps. 64 SCHED_FIFO threads waiting so on
// one core left the core to nothing else, and every 64-thread SCHED_FIFO
// run of the Go floor hung (2026-12-07). Here they queue asleep instead.
std::mutex first_call_mu;
void bind_thread() {
  std::lock_guard<std::mutex> lock(first_call_mu);
  gf_bind();
}
ssize_t sys_send(int fd, const void *p, size_t n, int flags) { return via_go(gf_send(fd, const_cast<void *>(p), n, flags)); }
ssize_t sys_sendmsg(int fd, msghdr *msg, int flags) {
  size_t total = 0;
  for (size_t i = 0; i < size_t(msg->msg_iovlen); i++) total += msg->msg_iov[i].iov_len;
  return via_go(gf_sendmsg(fd, msg, total, flags));
}
ssize_t sys_recv(int fd, void *p, size_t n, int flags) { return via_go(gf_recv(fd, p, n, flags)); }
#else
void bind_thread() {}
ssize_t sys_send(int fd, const void *p, size_t n, int flags) { return send(fd, p, n, flags); }
ssize_t sys_sendmsg(int fd, msghdr *msg, int flags) { return sendmsg(fd, msg, flags); }
ssize_t sys_recv(int fd, void *p, size_t n, int flags) { return recv(fd, p, n, flags); }
#endif

void send_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t k = sys_send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      die("send");
    }
    p += k;
    n -= size_t(k);
  }
}

// Sends a[0:na] and then b[0:nb], in one system call when the socket takes
// them all.
void send_two(int fd, const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
  while (na > 0) {
    iovec iov[2] = {{const_cast<uint8_t *>(a), na}, {const_cast<uint8_t *>(b), nb}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    ssize_t k = sys_sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      die("sendmsg");
    }
    size_t sent = size_t(k);
    if (sent < na) {
      a += sent;
      na -= sent;
      continue;
    }
    sent -= na;
    na = 0;
    b += sent;
    nb -= sent;
  }
  send_all(fd, b, nb);
}

// A masked binary (or control) frame header for len bytes; returns its size.
size_t put_header(uint8_t *h, uint8_t opcode, uint64_t len, uint32_t key) {
  size_t n = 0;
  h[n++] = uint8_t(0x80 | opcode);
  if (len < 126) {
    h[n++] = uint8_t(0x80 | len);
  } else if (len <= 0xffff) {
    h[n++] = 0x80 | 126;
    h[n++] = uint8_t(len >> 8);
    h[n++] = uint8_t(len);
  } else {
    h[n++] = 0x80 | 127;
    for (int s = 56; s >= 0; s -= 8) h[n++] = uint8_t(len >> s);
  }
  std::memcpy(h + n, &key, 4);  // the key's bytes in wire order
  return n + 4;
}

struct Floor {
  int fd = -1;
  Rng rng;
  size_t chunk = 0;
  bool hold = false;
  std::vector<uint8_t> src;   // the payload's source bytes, filled once
  std::vector<uint8_t> sbuf;  // header + masked payload (or one chunk)
  std::vector<uint8_t> hbuf;  // a held frame (--hold 1), header + payload
  size_t held = 0;            // hbuf[0:held] goes out with the next frame
  std::vector<uint8_t> rbuf = std::vector<uint8_t>(256 << 10);
  size_t rpos = 0, rlen = 0;

  // Sends a frame of len payload bytes from src, masked with a fresh key,
  // after the frame held, if any; with hold, keeps it to go with the next.
  void send_frame(size_t len, bool hold = false) {
    uint32_t key = uint32_t(rng.next());
    if (hold) {
      size_t h = put_header(hbuf.data(), 0x2, len, key);
      mask_copy(hbuf.data() + h, src.data(), len, key);
      held = h + len;
      return;
    }
    size_t h = put_header(sbuf.data(), 0x2, len, key);
    // The first chunk shares the buffer with the header; its payload part
    // is a multiple of 4 bytes, and so is chunk, so every later chunk
    // starts at key byte 0.
    size_t room = chunk == 0 ? len : (chunk - 16) & ~size_t(3);
    size_t first = len <= room ? len : room;
    mask_copy(sbuf.data() + h, src.data(), first, key);
    send_two(fd, hbuf.data(), held, sbuf.data(), h + first);
    held = 0;
    size_t off = first;
    while (off < len) {
      size_t k = len - off < chunk ? len - off : chunk;
      mask_copy(sbuf.data(), src.data() + off, k, key);
      send_all(fd, sbuf.data(), k);
      off += k;
    }
  }

  void fill() {
    if (rpos == rlen) rpos = rlen = 0;
    if (rlen == rbuf.size()) {
      std::memmove(rbuf.data(), rbuf.data() + rpos, rlen - rpos);
      rlen -= rpos;
      rpos = 0;
    }
    for (;;) {
      ssize_t k = sys_recv(fd, rbuf.data() + rlen, rbuf.size() - rlen, 0);
      if (k > 0) {
        rlen += size_t(k);
        return;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k == 0) errno = 0;
      die("recv");
    }
  }
  void need(size_t n) {
    while (rlen - rpos < n) fill();
  }
  uint8_t byte() {
    need(1);
    return rbuf[rpos++];
  }

  // Reads one frame and discards its payload; returns its opcode.
  int read_frame() {
    uint8_t b0 = byte(), b1 = byte();
    uint64_t len = b1 & 0x7f;
    int ext = len == 126 ? 2 : len == 127 ? 8 : 0;
    if (ext) {
      len = 0;
      for (int i = 0; i < ext; i++) len = (len << 8) | byte();
    }
    if (b1 & 0x80) {
      need(4);
      rpos += 4;
    }
    while (len > 0) {
      if (rpos == rlen) fill();
      size_t k = rlen - rpos < len ? rlen - rpos : size_t(len);
      rpos += k;
      len -= k;
    }
    return b0 & 0x0f;
  }

  void close_frame() {
    uint8_t f[8 + 2];
    uint32_t key = uint32_t(rng.next());
    size_t h = put_header(f, 0x8, 2, key);
    const uint8_t body[2] = {0x03, 0xe8};  // 1000
    mask_copy(f + h, body, 2, key);
    send_two(fd, hbuf.data(), held, f, h + 2);
    held = 0;
  }
};

int connect_to(const std::string &url) {
  if (url.rfind("ws://", 0) != 0) {
    std::fprintf(stderr, "%s: --url %s: want ws://HOST:PORT\n", kProg, url.c_str());
    std::exit(2);
  }
  std::string hostport = url.substr(5);
  if (size_t slash = hostport.find('/'); slash != std::string::npos) hostport.resize(slash);
  size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "%s: --url %s: no port\n", kProg, url.c_str());
    std::exit(2);
  }
  std::string host = hostport.substr(0, colon), port = hostport.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); e != 0) {
    std::fprintf(stderr, "%s: %s: %s\n", kProg, host.c_str(), gai_strerror(e));
    std::exit(1);
  }
  int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) die("connect");
  freeaddrinfo(res);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  std::string req = "GET / HTTP/1.1\r\nHost: " + hostport +
                    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  send_all(fd, reinterpret_cast<const uint8_t *>(req.data()), req.size());
  return fd;
}

// Reads the handshake reply into f's buffer and leaves what follows it there.
void read_handshake(Floor &f) {
  for (;;) {
    f.fill();
    const char *p = reinterpret_cast<const char *>(f.rbuf.data());
    std::string head(p, f.rlen);
    size_t end = head.find("\r\n\r\n");
    if (end == std::string::npos) continue;
    if (head.compare(0, 12, "HTTP/1.1 101") != 0) {
      std::fprintf(stderr, "%s: handshake refused: %s\n", kProg, head.substr(0, head.find('\r')).c_str());
      std::exit(1);
    }
    f.rpos = end + 4;
    return;
  }
}

bool parse_size(const char *flag, const char *s, size_t &out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || end == s || *end || v > (1ULL << 34)) {
    std::fprintf(stderr, "%s: %s wants a byte count, got \"%s\"\n", kProg, flag, s);
    return false;
  }
  out = size_t(v);
  return true;
}

// One connection's run, until the server closes it.
void run_one(const std::string &url, size_t infer, size_t feedback, size_t chunk, bool hold, bench::Counter &count) {
  bind_thread();
  Floor f;
  f.chunk = chunk;
  f.hold = hold && feedback <= (64 << 10);
  // libplugrl's infer and feedback carry the same observation arrays, so
  // one source buffer serves both, as the caller's memory does there.
  size_t most = infer > feedback ? infer : feedback;
  f.src.resize(most);
  for (size_t i = 0; i < most; i++) f.src[i] = uint8_t(i * 7);
  f.sbuf.resize(chunk ? chunk : most + 14);
  if (f.hold) f.hbuf.resize(feedback + 14);
  f.fd = connect_to(url);
  read_handshake(f);
  if (f.read_frame() != 0x2) {
    std::fprintf(stderr, "%s: the server's first frame is not binary (metadata)\n", kProg);
    std::exit(1);
  }
  for (;;) {
    f.send_frame(infer);
    int op;
    while ((op = f.read_frame()) == 0x9 || op == 0xa) {
    }  // a ping is not answered: the bench server sends none
    if (op == 0x8) break;
    f.send_frame(feedback, f.hold);
    count.add();
  }
  f.close_frame();
  close(f.fd);
}

}  // namespace

int main(int argc, char **argv) {
  std::string url, window_file;
  size_t infer = 0, feedback = 0, chunk = 0, handles = 1, hold = 0, lock = 0;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) {
      std::fprintf(stderr,
                   "usage: %s --url ws://HOST:PORT --infer-bytes I --feedback-bytes F [--chunk B]\n"
                   "       [--hold 1] [--handles N] [--window-file PATH] [--mlockall 1]\n",
                   kProg);
      return 2;
    }
    const char *arg = argv[i], *val = argv[++i];
    bool ok = true;
    if (!std::strcmp(arg, "--url")) {
      url = val;
    } else if (!std::strcmp(arg, "--infer-bytes")) {
      ok = parse_size(arg, val, infer);
    } else if (!std::strcmp(arg, "--feedback-bytes")) {
      ok = parse_size(arg, val, feedback);
    } else if (!std::strcmp(arg, "--chunk")) {
      ok = parse_size(arg, val, chunk);
    } else if (!std::strcmp(arg, "--hold")) {
      ok = parse_size(arg, val, hold) && hold <= 1;
      if (!ok) std::fprintf(stderr, "%s: --hold wants 0 or 1\n", kProg);
    } else if (!std::strcmp(arg, "--handles")) {
      ok = parse_size(arg, val, handles) && handles >= 1 && handles <= 4096;
      if (!ok) std::fprintf(stderr, "%s: --handles wants 1..4096\n", kProg);
    } else if (!std::strcmp(arg, "--window-file")) {
      window_file = val;
    } else if (!std::strcmp(arg, "--mlockall")) {
      ok = parse_size(arg, val, lock) && lock <= 1;
      if (!ok) std::fprintf(stderr, "%s: --mlockall wants 0 or 1\n", kProg);
    } else {
      std::fprintf(stderr, "%s: unknown option: %s\n", kProg, arg);
      return 2;
    }
    if (!ok) return 2;
  }
  if (url.empty() || infer == 0 || feedback == 0) {
    std::fprintf(stderr, "%s: --url, --infer-bytes and --feedback-bytes are required\n", kProg);
    return 2;
  }
  if (chunk != 0 && (chunk < 64 || chunk % 8 != 0)) {
    std::fprintf(stderr, "%s: --chunk must be 0 or a multiple of 8 of at least 64\n", kProg);
    return 2;
  }

  if (lock && !bench::lock_memory(kProg)) return 1;

  std::vector<bench::Counter> counts(handles);
  bench::CpuMeter meter(counts);
  meter.start();
  auto t0 = std::chrono::steady_clock::now();
  if (handles == 1) {
    run_one(url, infer, feedback, chunk, hold != 0, counts[0]);
  } else {
    std::vector<std::thread> threads;
    for (size_t h = 0; h < handles; h++) {
      threads.emplace_back(run_one, std::cref(url), infer, feedback, chunk, hold != 0, std::ref(counts[h]));
    }
    for (std::thread &t : threads) t.join();
  }
  meter.stop();
  long long exchanges = bench::total(counts);
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%lld exchanges in %.3f s\n", exchanges, elapsed);
  std::printf("exchanges/s %.1f\n", elapsed > 0 ? double(exchanges) / elapsed : 0.0);
  meter.print(window_file);
  if (lock) bench::print_memory();
  return 0;
}
