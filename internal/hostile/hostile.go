// Package hostile is a PlugRL server that misbehaves on purpose, for tests.
//
// A client library promises that the work and memory it spends follow the
// bytes it has received and the limits its caller chose, never numbers a
// server claims, and that every blocking call returns by its deadline. The
// reference server (internal/refserver) is well-behaved, so it cannot show
// either promise. This server can: it listens on 127.0.0.1, speaks just
// enough HTTP and WebSocket to let a client in, and then breaks the protocol
// in exactly one way, chosen by a Scenario — it lies about sizes, floods, or
// stalls.
//
// It is deliberately built from raw TCP rather than on a WebSocket library's
// server: several scenarios (a header line that never ends, a 101 sent one
// byte at a time, a frame cut in half) are things a correct library would
// refuse to produce. What it does send correctly is byte-correct: frame
// headers come from gobwas/ws and messages from core/wire's encoders.
//
// The server is itself bounded, so that a test which forgets it cannot leave
// it spinning: every connection ends after Config.MaxConnTime at the latest,
// every loop stops when the server is closed, and Close returns promptly in
// the middle of any scenario.
//
// With Config.TLS it serves wss://, and every scenario means the same over
// TLS: the TLS handshake is done correctly and at once (bounded, with the
// upgrade request, by the server's own handshake timeout), and then the
// scenario's bytes go into the TLS stream exactly as they would go into
// TCP, each write in records of its own. The faults are of the WebSocket
// and PlugRL layers, never of TLS: EndlessHeader's header line and
// SlowHandshake's bytes come as records (one record per byte for the
// latter, so the client's connect deadline, which covers TLS and the
// upgrade, still meets a steady trickle); StallMidFrame's half frame is a
// whole record the client can decrypt, then nothing; NoRead completes the
// TLS handshake, then never reads a record; PingFlood's pings and
// HugeLength's trickle are records as fast as the socket takes them. A
// record cut short, or a TLS alert, is not a scenario. Stats count the
// plaintext. Close cuts the TCP connection under TLS, with no close_notify,
// as it cuts a plain one.
package hostile

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario names one way of misbehaving. Each description says what the
// server does and what a correct client observes.
type Scenario string

const (
	// EndlessHeader reads the client's upgrade request, answers "HTTP/1.1 101
	// Switching Protocols\r\n" and then the header line "X-Junk: aaaa..."
	// that never ends: 'a' bytes in 64 KiB writes, as fast as the client
	// reads, until Config.HeaderBound bytes (4 GiB), the client disconnects,
	// or MaxConnTime. A correct client caps the handshake response it will
	// buffer and fails the connect with an error well before its deadline,
	// its memory bounded by that cap; at worst the connect fails at its
	// deadline, and memory never grows with what the server sends.
	EndlessHeader Scenario = "endless-header"

	// SlowHandshake sends a valid 101 response one byte every
	// Config.ByteEvery (100 ms): about 13 s for the whole of it. If the
	// client is still there once it is complete, the connection continues as
	// Normal. A correct client's connect returns at its connect deadline with
	// a timeout, however steadily bytes keep arriving.
	SlowHandshake Scenario = "slow-handshake"

	// NoMetadata completes the handshake correctly and then sends nothing at
	// all, not even a pong or an answer to a close frame; it keeps reading
	// and discarding whatever the client sends. A correct client's wait for
	// the metadata (its connect, or its first call) returns at its deadline,
	// and its close returns at its close deadline.
	NoMetadata Scenario = "no-metadata"

	// ZeroDimAction sends metadata WITHOUT action_horizon and action_dim, and
	// answers every infer with an action of shape [Config.ZeroDimH, n, 0]
	// (4e18 by default), dtype "<f4", no data bytes, and env_ids equal to the
	// infer's env_indices; n is the number of env_indices in the infer. The
	// message is consistent (prod(shape) is 0, and so is the data), but a
	// client that sizes anything by H — a buffer per step, a loop over steps
	// — allocates or spins without bound. A correct client refuses the
	// action (H beyond what its caller allowed, or a zero action width) or
	// accepts it doing work that follows the bytes received, never H. Note
	// that the non-zero dimensions multiply past int64 (4e18 * n * 4 bytes >
	// 2^63 for every n; the element count 4e18 * n does for n >= 3): a
	// decoder that multiplies the shape must refuse, not crash or wrap.
	ZeroDimAction Scenario = "zero-dim-action"

	// BigActionOneEnv sends metadata without action_horizon and action_dim,
	// and answers every infer with a true, complete action of shape
	// [H, n, Config.D] "<f4" zeros, with H chosen so that one env's share,
	// H*D*4 bytes, is about Config.ActionBytes (8 MiB). Everything in the
	// message is honest; it is just bigger than a caller may have allowed. A
	// correct client either takes it (the bytes really arrived) or refuses it
	// by its own configured message or horizon limit, promptly and without
	// first allocating the whole of it. An infer naming so many envs that
	// the action would pass 1 GiB ends the connection instead, to keep this
	// server's own memory bounded.
	BigActionOneEnv Scenario = "big-action-one-env"

	// HugeLength sends metadata (action_horizon Config.H, action_dim
	// Config.D) and answers the first infer with the header of a binary frame
	// claiming 2^62 bytes of payload, then trickles zero bytes of payload,
	// Config.TrickleBytes every Config.TrickleEvery (64 KiB every 10 ms),
	// until the client disconnects or MaxConnTime. After the header it
	// answers nothing: a control frame would corrupt the frame in flight. A
	// correct client refuses the frame on its header (more than its message
	// limit), or fails once the bytes actually received pass its limit; its
	// memory follows the bytes received, never the 2^62 claimed; and its call
	// returns by its deadline even though bytes never stop arriving.
	HugeLength Scenario = "huge-length"

	// StallMidFrame sends metadata (Config.H, Config.D) and answers the first
	// infer with the first half of a valid action frame (header included),
	// then nothing more, ever: no pong, no answer to a close frame. It keeps
	// reading and discarding what the client sends, so the connection stays
	// open. A correct client's call returns by its deadline, and its close
	// by its close deadline.
	StallMidFrame Scenario = "stall-mid-frame"

	// NoRead sends metadata (Config.H, Config.D) and never reads from the
	// socket again; its receive buffer is set to Config.RecvBuffer (4 KiB)
	// so that, past the client's own send buffer (a few MiB on Linux), next
	// to nothing more fits. It
	// keeps the connection open until MaxConnTime or Close. A correct client
	// whose send blocks returns at its deadline; it never blocks forever in
	// a write, nor in its close (whose close frame cannot be delivered
	// either).
	NoRead Scenario = "no-read"

	// PingFlood sends metadata (Config.H, Config.D) and then ping frames with
	// a 125-byte payload as fast as the socket takes them, never reading: the
	// client's pongs, like its infers, pile up unread in a receive buffer of
	// Config.RecvBuffer bytes. No infer is ever answered. A correct client
	// neither queues pongs without bound nor lets pongs it cannot send block
	// its call past its deadline; its memory stays flat however many pings
	// it has read.
	PingFlood Scenario = "ping-flood"

	// SlowAction is Normal, but each action is sent Config.ActionDelay (10 s)
	// after its infer arrived. It keeps reading meanwhile: pings are answered
	// and a close frame is answered at once, abandoning the pending action.
	// It puts a client's call in a long, legitimate wait, to check that the
	// wait honours the call's deadline and can be interrupted.
	SlowAction Scenario = "slow-action"

	// Normal is a correct minimal server: metadata with action_horizon
	// Config.H and action_dim Config.D (1 and 1), every infer answered at
	// once with a zero "<f4" action [H, n, D] whose env_ids are the infer's
	// env_indices, feedbacks read and counted, pings answered, a close frame
	// echoed. It is the control run, and what interrupt latency is measured
	// against. It does not check the alternation of infer and feedback.
	Normal Scenario = "normal"

	// DoubleAction is Normal, but every infer is answered twice: its action,
	// then the same action again, Config.StrayGap later (0: in the same
	// write, so that both arrive together). The second is a message out of
	// turn (SPEC 2, 4.2): a client that took it as the reply to its next
	// infer would act on every later action one request late, with env_ids
	// that match. A correct client fails the connection with a protocol
	// error once it sees it.
	DoubleAction Scenario = "double-action"

	// CloseNoReply is Normal until the client sends a close frame, which it
	// never answers; it keeps reading, so the connection stays open until the
	// client drops it (or MaxConnTime). A correct client's close returns at
	// its close deadline and then drops the TCP connection.
	CloseNoReply Scenario = "close-no-reply"

	// WidthChange alternates two servers, as one restarted with another
	// policy would: its odd connections (the first, third, ...) are Normal
	// with action_dim Config.D until their second infer, the first after a
	// feedback, which they leave unanswered and close with 1001
	// plugrl-server-resync (SPEC 7.2), then read, never answer, until the
	// client answers the close or drops the connection; its even ones are
	// Normal with action_dim Config.D+2. A runner's act is waiting for that
	// infer's action when the close comes, so it rides a reconnect inside
	// the act (SPEC 7.6: fresh metadata, a fresh infer) and gets actions of
	// a width its caller's buffer was not sized for. A correct client
	// reconnects and drops the feedback it held; a correct runner neither
	// writes past nor short of the caller's buffer, but says the new width
	// (libplugrl: PLUGRL_INVALID_ARGUMENT, the chunk kept), and acts at it
	// when asked again. A client that connects again (a second test in the
	// same program) meets the narrow server, and the change, again.
	WidthChange Scenario = "width-change"

	// Garble is Normal (metadata with action_horizon Config.H and
	// action_dim Config.D), but its actions are drawn by a random generator
	// seeded with Config.Seed and the connection's number (counted from 1
	// in the order of their first infer): about one in five an honest
	// "<f4" action of random values, the others with lies drawn one by one
	// (about one in eight tells none, and some are lies SPEC allows) in
	// their message type, env_ids, ndarray keys, shape, dtype or data
	// length, or with bytes flipped, cut or added, each in one or several
	// of a few ways (garble.go). Frames are always whole, and the server
	// answers every infer at once. A correct client refuses each action it
	// cannot take whole and true to SPEC 5.3 (a protocol error that says
	// what, the connection dropped and the next infer on a new one), takes
	// the rest, and never reads or writes outside what it was given,
	// whatever the draw.
	Garble Scenario = "garble"

	// GarbleMetadata is Normal, but each connection's metadata is drawn by
	// a random generator seeded with Config.Seed and the connection's
	// number (counted from 1 in the order their metadata is sent): about
	// one in five honest (action_horizon Config.H, action_dim Config.D and
	// every other key of SPEC 5.1), the others with keys absent, in other
	// encodings of their value, with other values or of other types,
	// strings empty, long, not UTF-8 or holding a NUL, extra keys of every
	// msgpack type and numpy's, nested deeper than JSON readers keep, and
	// some not metadata at all (a message_type, a data, a key twice, a key
	// that is no string, a map's count, bytes flipped, cut or added;
	// garble_metadata.go). Actions are honest: [Config.H, n, Config.D]
	// zeros. A correct client refuses what is not a metadata message (a
	// protocol error that says what) and takes the rest, reads every key
	// as SPEC 5.1 has it (an odd type is the key absent), shows every
	// value as JSON or says why it cannot, and refuses an action that
	// disagrees with the action_horizon or action_dim it read.
	GarbleMetadata Scenario = "garble-metadata"

	// GarbleFrames is Normal, but each infer's step_ids[0] chooses how its
	// action is framed (garble_frames.go): 0, as RFC 6455 allows, cut into
	// 1 to 8 fragments (some empty) with pings and unsolicited pongs
	// between them; 1 to 8, the same with one fault before the last
	// fragment is whole (a reserved bit, a masked frame, a reserved opcode, a ping
	// over 125 bytes, a fragmented ping, a continuation first, a binary
	// frame inside the message, the action as text). Its step_ids[1] is
	// the nonce its values start from: "<f4" of shape [Config.H, n,
	// Config.D], element k being nonce + k. Every answer is written in
	// pieces, half of them 1 to 8 bytes, with now and then a pause. The
	// cuts, the control frames and the pieces are drawn by a generator
	// seeded with Config.Seed and the connection's number (counted from
	// 1 in the order of their first infer). A pong that echoes no ping
	// sent ends the connection, and so does a message from the client
	// before it has answered the pings of the last action (a client may
	// answer only the latest). A correct client takes every legal action
	// whole, each byte where it belongs, answers its pings, and refuses
	// each fault (a protocol error; the text frame a server error).
	GarbleFrames Scenario = "garble-frames"

	// Vanish is Normal on every connection but the first, which answers
	// Config.VanishAfter infers (2) and then vanishes as a server whose
	// machine lost power or whose network went away: once it has read the
	// next infer (its kernel has acknowledged those bytes), a socket filter
	// drops every packet the client sends on that connection before TCP
	// sees it, so nothing is acknowledged, no keepalive probe is answered,
	// no RST comes back, and the server sends nothing more (Linux only).
	// The client waits for an action with nothing of its own unacknowledged:
	// only TCP keepalive can tell it the peer is gone. A correct client
	// notices within its own dead-peer bound, not at its receive deadline,
	// and reconnects (to a Normal connection).
	// With Config.VanishFor the connection comes back after that long, as
	// a network that returns: a correct client whose bound is longer keeps
	// it and gets its action.
	Vanish Scenario = "vanish"

	// VanishUnacked is Vanish, but the first connection vanishes as it
	// sends its Config.VanishAfter-th action: from just before it is
	// written, what the client sends is dropped but for its
	// acknowledgements, and once the action is acknowledged, everything.
	// The client's next feedback and infer are never acknowledged, and its
	// kernel retransmits them; a client that sends nothing more meets a
	// silent connection. A correct client gives up within its dead-peer
	// bound, where the kernel's own retransmissions would last some 15
	// minutes.
	VanishUnacked Scenario = "vanish-unacked"

	// Lossy is Normal over a lossy link: on every connection, a socket
	// filter drops Config.LossPercent (20) of the segments the client
	// sends, at random, before TCP sees them (Linux only). TCP sends
	// again what was lost, backing off (0.2, 0.4, 0.8 s, ...). A correct
	// client goes on, slower, and keeps its connection unless the losses
	// in a row outlast its dead-peer bound.
	Lossy Scenario = "lossy"

	// RateLimited is Normal behind a proxy that limits how fast clients
	// may come: it answers an upgrade request "429 Too Many Requests" with
	// "Retry-After: 1" unless the request comes at least that second after
	// its last such answer, and after serving one connection it refuses
	// the next request again. A client that honours Retry-After is refused
	// once per connection; one that retries sooner is refused until its
	// backoff alone has grown past a second.
	RateLimited Scenario = "rate-limited"
)

// rateLimitWait is RateLimited's Retry-After.
const rateLimitWait = time.Second

// Scenarios lists every scenario, in the order of their documentation.
func Scenarios() []Scenario {
	return []Scenario{
		EndlessHeader, SlowHandshake, NoMetadata, ZeroDimAction, BigActionOneEnv,
		HugeLength, StallMidFrame, NoRead, PingFlood, SlowAction, Normal, DoubleAction, CloseNoReply,
		WidthChange, Garble, GarbleMetadata, GarbleFrames, Vanish, VanishUnacked, Lossy, RateLimited,
	}
}

// ParseScenario returns the scenario named s.
func ParseScenario(s string) (Scenario, error) {
	for _, sc := range Scenarios() {
		if string(sc) == s {
			return sc, nil
		}
	}
	names := make([]string, 0, len(Scenarios()))
	for _, sc := range Scenarios() {
		names = append(names, string(sc))
	}
	return "", fmt.Errorf("hostile: unknown scenario %q (want one of %s)", s, strings.Join(names, ", "))
}

// Config chooses the scenario and its numbers. Zero fields take the
// defaults given.
type Config struct {
	Scenario Scenario
	// Addr is where to listen: "127.0.0.1:0" (a free port) by default. Only
	// an IPv4 loopback address (127.0.0.0/8) is accepted: this server must
	// never face a network. tests/names.sh serves on 127.0.0.2, a name's
	// second address.
	Addr string
	// H and D are the action_horizon and action_dim that metadata declares,
	// and the shape of the actions Normal, SlowAction, DoubleAction,
	// CloseNoReply, StallMidFrame and WidthChange (its odd connections)
	// send: 1 and 1. D is also BigActionOneEnv's action width; WidthChange's
	// even connections declare and send D+2.
	H, D int
	// ZeroDimH is the horizon ZeroDimAction claims: 4e18.
	ZeroDimH int64
	// ActionBytes is BigActionOneEnv's action size per env: 8 MiB.
	ActionBytes int
	// TrickleBytes are sent every TrickleEvery after HugeLength's header:
	// 64 KiB every 10 ms.
	TrickleBytes int
	TrickleEvery time.Duration
	// ActionDelay is how long SlowAction holds each action: 10 s.
	ActionDelay time.Duration
	// SlowEvery makes SlowAction hold only every SlowEvery-th infer of a
	// connection (the others are answered at once): a server that stalls
	// now and then, after a client has started acting. 0 or 1: every one.
	SlowEvery int
	// StrayGap is how long after its action DoubleAction sends the same
	// action again: 0, in the same write.
	StrayGap time.Duration
	// VanishAfter is how many infers Vanish's and VanishUnacked's first
	// connection answers before it vanishes: 2.
	VanishAfter int
	// LossPercent is the share of the client's segments Lossy drops, 1
	// to 100; 0 takes the default, 20 (no loss at all is Normal).
	LossPercent int
	// VanishFor, when set, brings the vanished connection back after that
	// long, as a network that comes back would: the filter is removed, the
	// client's retransmissions get through, and the connection goes on as
	// Normal (Vanish answers the infer it vanished on). 0: gone for good.
	VanishFor time.Duration
	// Seed seeds Garble's, GarbleMetadata's and GarbleFrames' draws (with
	// each connection's number, counted from 1 in the order of their
	// first infer, or of their metadata): the same seed gives the same
	// actions to the same requests from one client, and the same metadata
	// to the same sequence of connections.
	Seed uint64
	// ByteEvery paces SlowHandshake's response: 100 ms a byte.
	ByteEvery time.Duration
	// HeaderBound ends EndlessHeader's header line: 4 GiB.
	HeaderBound int64
	// RecvBuffer is the SO_RCVBUF of NoRead's and PingFlood's connections:
	// 4 KiB (the kernel may round it up).
	RecvBuffer int
	// MaxConnTime bounds every connection, whatever it is doing: 3 minutes.
	MaxConnTime time.Duration
	// MaxMessage bounds one message the server reads from a client (it grows
	// its buffer only as bytes arrive): 256 MiB. A longer one ends the
	// connection.
	MaxMessage int64
	// MaxConns bounds the connections served at once: 64. Further ones are
	// closed as soon as they are accepted.
	MaxConns int
	// TLS, when set, makes the server speak wss://: the listener is
	// wrapped by tls.NewListener with this configuration (its
	// certificates), URL says wss, and every scenario runs inside the TLS
	// stream, its bytes (a header cut short, a frame cut in half, a
	// response a byte at a time) each sent as they are, in TLS records of
	// their own. The TLS handshake is done first, within the same
	// handshakeTimeout as the upgrade request, so that a client which
	// connects and sends nothing cannot hold a connection. The package
	// documentation says what the scenarios mean over TLS.
	TLS *tls.Config
	// Logf, when set, receives one line per notable event.
	Logf func(format string, args ...any)
}

// Defaults.
const (
	DefaultAddr         = "127.0.0.1:0"
	DefaultZeroDimH     = int64(4e18)
	DefaultActionBytes  = 8 << 20
	DefaultTrickleBytes = 64 << 10
	DefaultTrickleEvery = 10 * time.Millisecond
	DefaultActionDelay  = 10 * time.Second
	DefaultByteEvery    = 100 * time.Millisecond
	DefaultHeaderBound  = int64(4) << 30
	DefaultRecvBuffer   = 4 << 10
	DefaultMaxConnTime  = 3 * time.Minute
	DefaultMaxMessage   = int64(256) << 20
	DefaultMaxConns     = 64
	DefaultVanishAfter  = 2
	DefaultLossPercent  = 20
)

// withDefaults fills the zero fields of cfg and checks the rest.
func (cfg Config) withDefaults() (Config, error) {
	if _, err := ParseScenario(string(cfg.Scenario)); err != nil {
		return cfg, err
	}
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	set(&cfg.H, 1)
	set(&cfg.D, 1)
	set64(&cfg.ZeroDimH, DefaultZeroDimH)
	set(&cfg.ActionBytes, DefaultActionBytes)
	set(&cfg.TrickleBytes, DefaultTrickleBytes)
	setD(&cfg.TrickleEvery, DefaultTrickleEvery)
	setD(&cfg.ActionDelay, DefaultActionDelay)
	setD(&cfg.ByteEvery, DefaultByteEvery)
	set64(&cfg.HeaderBound, DefaultHeaderBound)
	set(&cfg.RecvBuffer, DefaultRecvBuffer)
	setD(&cfg.MaxConnTime, DefaultMaxConnTime)
	set64(&cfg.MaxMessage, DefaultMaxMessage)
	set(&cfg.MaxConns, DefaultMaxConns)
	set(&cfg.VanishAfter, DefaultVanishAfter)
	set(&cfg.LossPercent, DefaultLossPercent)
	switch {
	case cfg.H < 0 || cfg.D < 0:
		return cfg, fmt.Errorf("hostile: H %d and D %d must not be negative", cfg.H, cfg.D)
	case cfg.ZeroDimH < 0 || cfg.ActionBytes < 0 || cfg.TrickleBytes < 0 || cfg.HeaderBound < 0 ||
		cfg.RecvBuffer < 0 || cfg.MaxMessage < 0 || cfg.MaxConns < 0 || cfg.SlowEvery < 0 || cfg.VanishAfter < 0 || cfg.LossPercent < 0:
		return cfg, errors.New("hostile: sizes and counts must not be negative")
	case cfg.TrickleEvery < 0 || cfg.ActionDelay < 0 || cfg.StrayGap < 0 || cfg.ByteEvery < 0 || cfg.MaxConnTime < 0 || cfg.VanishFor < 0:
		return cfg, errors.New("hostile: durations must not be negative")
	case cfg.LossPercent > 100:
		return cfg, fmt.Errorf("hostile: a loss of %d %%: want 1 to 100 (0: the default, 20)", cfg.LossPercent)
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return cfg, fmt.Errorf("hostile: address %q: %v", cfg.Addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return cfg, fmt.Errorf("hostile: address %q: only a loopback address, 127.0.0.0/8, is allowed", cfg.Addr)
	}
	return cfg, nil
}

// Stats are the server's counters since Listen.
type Stats struct {
	Connections  int64 // TCP connections accepted
	Active       int64 // connections being served now
	BytesRead    int64 // bytes read from clients, the HTTP handshake included (over TLS: the plaintext)
	BytesWritten int64 // bytes written to clients, the HTTP handshake included (over TLS: the plaintext)
	Infers       int64 // infer messages received
	Feedbacks    int64 // feedback messages received
	Actions      int64 // action messages sent, or begun (HugeLength, StallMidFrame)
	Pings        int64 // ping frames sent
	CloseFrames  int64 // close frames received
}

// Server is a running hostile server.
type Server struct {
	cfg  Config
	ln   net.Listener
	done chan struct{} // closed by Close: every loop watches it
	wg   sync.WaitGroup
	meta []byte // the metadata message, encoded once
	// wideMeta is the metadata of WidthChange's even connections:
	// action_dim D+2.
	wideMeta []byte

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	zeros  []byte // read-only zeros shared by every action; grown, never written

	connections, active, read, written atomic.Int64
	infers, feedbacks, actions, pings  atomic.Int64
	closeFrames                        atomic.Int64
	metaSent                           atomic.Int64  // connections that got a metadata (WidthChange's count)
	garbled                            atomic.Uint64 // connections the garble scenarios drew for: each one's seed

	// RateLimited's state: when it last refused a request, and whether it
	// has since served one (the next request is then refused again).
	limitMu      sync.Mutex
	limitRefused time.Time
	limitServed  bool
}

// admit is RateLimited's decision on an upgrade request that comes at now:
// true to serve it, false to refuse it with 429 (see RateLimited).
func (s *Server) admit(now time.Time) bool {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if !s.limitServed && !s.limitRefused.IsZero() && now.Sub(s.limitRefused) >= rateLimitWait {
		s.limitServed = true
		return true
	}
	s.limitRefused, s.limitServed = now, false
	return false
}

// Listen starts a server for cfg. It serves until Close.
func Listen(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	meta, err := metadataMessage(&cfg, cfg.D)
	if err != nil {
		return nil, err
	}
	var wideMeta []byte
	if cfg.Scenario == WidthChange {
		if wideMeta, err = metadataMessage(&cfg, cfg.D+2); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp4", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("hostile: %v", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{}), meta: meta, wideMeta: wideMeta, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// URL is the server's address as a client dials it: "ws://127.0.0.1:PORT"
// (by default), or "wss://127.0.0.1:PORT" with Config.TLS.
func (s *Server) URL() string {
	if s.cfg.TLS != nil {
		return "wss://" + s.ln.Addr().String()
	}
	return "ws://" + s.ln.Addr().String()
}

// Addr is the listening address, "127.0.0.1:PORT" by default.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Scenario is the scenario being served.
func (s *Server) Scenario() Scenario { return s.cfg.Scenario }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{
		Connections:  s.connections.Load(),
		Active:       s.active.Load(),
		BytesRead:    s.read.Load(),
		BytesWritten: s.written.Load(),
		Infers:       s.infers.Load(),
		Feedbacks:    s.feedbacks.Load(),
		Actions:      s.actions.Load(),
		Pings:        s.pings.Load(),
		CloseFrames:  s.closeFrames.Load(),
	}
}

// Close stops listening, drops every connection with no close frame, and
// waits for the server's goroutines, which all end promptly once their
// connection is closed. Calling it again returns nil.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for nc := range s.conns {
		_ = tcpOf(nc).Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of file descriptors and the like: back off rather than
			// spin, and try again until Close.
			s.logf("accept: %v", err)
			select {
			case <-s.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		number := s.connections.Add(1)
		s.mu.Lock()
		if s.closed || len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			s.logf("refused a connection from %s: closed or %d connections already", nc.RemoteAddr(), s.cfg.MaxConns)
			_ = nc.Close()
			continue
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.active.Add(1)
		go s.serve(nc, number)
	}
}

// serve runs the scenario on one connection, the number-th accepted
// (counted from 1).
func (s *Server) serve(raw net.Conn, number int64) {
	defer s.wg.Done()
	defer func() {
		// The TCP connection, not the TLS one: a close_notify could wait
		// on a client that does not read (NoRead, PingFlood) for
		// crypto/tls's 5 s, and no scenario says goodbye anyway.
		_ = tcpOf(raw).Close()
		s.mu.Lock()
		delete(s.conns, raw)
		s.mu.Unlock()
		s.active.Add(-1)
	}()
	// The one bound on everything this connection does: once it passes,
	// every blocked read and write fails and the scenario ends.
	now := time.Now()
	deadline := now.Add(s.cfg.MaxConnTime)
	// The bound on the handshakes: TLS (with Config.TLS) and the upgrade
	// request together.
	handshake := earliest(deadline, now.Add(handshakeTimeout))
	_ = raw.SetDeadline(deadline)
	if s.cfg.Scenario == NoRead || s.cfg.Scenario == PingFlood {
		// Set before the client can send much, so the window it sees
		// closes after a few KiB.
		if tc, ok := tcpOf(raw).(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(s.cfg.RecvBuffer)
		}
	}
	if s.cfg.Scenario == Lossy {
		if err := dropSome(tcpOf(raw), s.cfg.LossPercent); err != nil {
			s.logf("%s: connection from %s ended: %v", s.cfg.Scenario, raw.RemoteAddr(), err)
			return
		}
	}
	s.logf("%s: connection from %s", s.cfg.Scenario, raw.RemoteAddr())
	if tc, ok := raw.(*tls.Conn); ok {
		// Done here, not in the first read, so that it is bounded like
		// the request (its writes too) and a scenario that never reads
		// (NoRead, PingFlood) still completes it.
		_ = tc.SetDeadline(handshake)
		err := tc.Handshake()
		_ = tc.SetDeadline(deadline)
		if err != nil {
			s.logf("%s: connection from %s ended: TLS handshake: %v", s.cfg.Scenario, raw.RemoteAddr(), err)
			return
		}
	}
	nc := &countingConn{Conn: raw, s: s}
	c := &conn{
		s:         s,
		nc:        nc,
		br:        bufio.NewReaderSize(nc, 64<<10),
		bw:        bufio.NewWriterSize(nc, 64<<10),
		deadline:  deadline,
		handshake: handshake,
		first:     number == 1,
	}
	err := c.run()
	s.logf("%s: connection from %s ended: %v", s.cfg.Scenario, raw.RemoteAddr(), err)
}

// tcpOf is the TCP connection under nc: nc itself, or a TLS connection's.
func tcpOf(nc net.Conn) net.Conn {
	if tc, ok := nc.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return nc
}

// countingConn counts the bytes that cross it into the server's Stats. Over
// TLS it sits above the TLS connection: it counts the WebSocket stream's
// bytes, not the records'.
type countingConn struct {
	net.Conn
	s *Server
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.s.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.s.written.Add(int64(n))
	return n, err
}

// zeroBytes returns n zero bytes from a shared buffer. Nothing writes to it,
// so connections read it concurrently, and one buffer serves every action
// instead of a fresh 8 MiB per infer.
func (s *Server) zeroBytes(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.zeros) < n {
		s.zeros = make([]byte, n)
	}
	return s.zeros[:n:n]
}
