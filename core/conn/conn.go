// Package conn is one client WebSocket connection for PlugRL, on gobwas/ws.
//
// It does what SPEC 1 and 7 ask of the transport and what a control loop
// needs from it: binary messages without compression, fragmented messages
// and control frames in between, pings answered even while the caller is
// busy between calls, close frames surfaced as a code and a reason, and
// text frames treated as fatal.
//
// It also holds the library's promises against a hostile or broken server:
// memory follows bytes actually received and the limits the caller chose
// (a message size cap, a handshake size cap), never a length a server
// claims; no lock is held across a write that can block, so a server that
// floods pings or stops reading cannot stall a second goroutine; and any
// goroutine can Interrupt a blocked call.
//
// Files: conn.go (options, errors, Dial), dial.go (the TCP connection: a
// name's addresses raced), read.go (Receive, the frame reader),
// idlepoll.go (the poller), write.go (WriteMessage and control frames),
// heldsweep.go (held messages' timer), ticker.go (the timer both share),
// close.go (Close, Abort, Interrupt), transport.go and fd_*.go (the
// socket).
//
// Reading: the caller reads. Receive reads frames on the calling thread
// (on Linux a blocking system call on the socket, see fdConn), answering
// control frames on the way, until a data message is complete. Between
// calls a background poller (one for the process, TLS connections
// included; without a descriptor, not on Linux, a TLS connection has its
// own) looks at every socket about once a second without waiting on it:
// it answers pings and takes a close frame, so a server's keepalive is
// honoured and a close is seen while the caller steps its envs; Poll does
// the same on demand. The poller also enforces Receive timeouts of
// watchedTimeout or more, waking at the deadline, so that the socket needs
// no timer of its own. No goroutine hand-off sits between the
// socket and the caller.
//
// Memory: outgoing messages are wire.Message segment lists; each array's
// bytes are masked during their one copy into a reusable write buffer
// (maskCopy), which grows to the largest message (up to WriteBufferSize)
// so that a message is one write. Incoming messages land in one buffer
// whose memory comes from an Allocator, which lets a C caller receive
// straight into C memory; it grows only with bytes actually received, up
// to the message size cap, and Release gives a large one back.
package conn

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/gobwas/ws"
)

// Allocator supplies the memory that messages are received into.
type Allocator interface {
	// Grow returns a buffer of at least size bytes whose first keep bytes
	// are those of buf (nil at first); buf must not be used afterwards.
	// It returns nil when memory is exhausted, and buf stays valid. It runs
	// on the goroutine that calls Receive and must not panic.
	Grow(buf []byte, keep, size int) []byte
	// Free releases a buffer returned by Grow.
	Free(buf []byte)
}

// HeapAllocator allocates receive buffers on the Go heap. The Go runtime
// aborts the process when the heap cannot grow, so a caller that must
// survive exhausted memory gives the connection a fallible allocator (the
// C API uses malloc).
type HeapAllocator struct{}

// Grow implements Allocator.
func (HeapAllocator) Grow(buf []byte, keep, size int) []byte {
	nb := make([]byte, size)
	copy(nb, buf[:keep])
	return nb
}

// Free implements Allocator.
func (HeapAllocator) Free([]byte) {}

// Options configure Dial.
type Options struct {
	// URL is ws://host:port/path or wss://...
	URL string
	// APIKey, when set, is sent as "Authorization: Api-Key <key>" (SPEC 1.2),
	// in the clear over ws://. A key with a control character (a line
	// ending), or ending in a space or tab, is refused (ErrBadAPIKey; see
	// CheckAPIKey).
	APIKey string
	// DialTimeout bounds the host name's lookup, the TCP connect (a name's
	// addresses race, see dial.go), TLS and the WebSocket handshake.
	// Zero means 10 s. Cancelling Dial's context ends the dial at once.
	DialTimeout time.Duration
	// PreferAddr, an IP and port (the RemoteAddr of the last connection
	// to the same URL), goes first in the race when the URL's host is a
	// name that still resolves to it: a reconnect does not wait behind an
	// address that led nowhere last time.
	PreferAddr string
	// SendTimeout bounds writing one message once a write has to wait for
	// the server to read. Zero means 10 s.
	SendTimeout time.Duration
	// DeadPeerTimeout bounds how long the server's machine may leave this
	// side's bytes, or its TCP keepalive probes, unacknowledged before the
	// connection fails with ErrLost: a server whose machine lost power, or
	// the network to it, is noticed then, whether a call is waiting or
	// not. Keepalive probes go after a quarter of it in silence and every
	// quarter after; the poller's looks, once a second, read the kernel's
	// TCP_INFO and end a connection that has owed answers (data in flight,
	// a probe) for the bound (Linux 5.4 on; elsewhere the kernel ends an
	// idle connection after 8 unanswered probes, 9 intervals: 2.25 times
	// the bound, 9 s at 2 s; with data in flight, Linux sends no probe,
	// and the call's deadline or the kernel's retransmission limit ends
	// it). A server that is slow,
	// busy, or not reading still answers at the TCP level, and is not
	// affected. Zero means DefaultDeadPeerTimeout; below MinDeadPeerTimeout
	// (2 s), that; negative turns it off: no keepalive, and
	// data unacknowledged waits for the kernel's own limit (some 15
	// minutes) or the call's deadline.
	DeadPeerTimeout time.Duration
	// TLS configures wss:// connections; nil uses the system roots.
	TLS *tls.Config
	// MaxMessageSize caps one received message in bytes (the caller may
	// change it between messages with SetMaxMessageSize); zero or negative
	// means no cap.
	MaxMessageSize int64
	// MaxHandshakeSize caps the bytes read before the WebSocket handshake
	// completes (the TLS handshake included), so that a server answering
	// with an endless header cannot grow memory. Zero means 256 KiB.
	MaxHandshakeSize int
	// Alloc supplies receive memory; nil means the Go heap.
	Alloc Allocator
	// WriteBufferSize caps the masking buffer, which grows to the largest
	// message written up to this size, so that a message goes out in one
	// write as the transport floor's does; a larger message is written in
	// pieces of this size. Zero means 16 MiB.
	WriteBufferSize int
	// Counters, if set, is added to as bytes go out and come in; it may be
	// shared by several connections in turn (a client's reconnects).
	Counters *Counters
}

// Counters count the bytes a connection wrote to and read from its
// transport once the WebSocket handshake was done: whole frames, headers
// and control frames included (not the HTTP handshake, not TLS records'
// overhead). Any goroutine may read them.
type Counters struct {
	Sent, Received atomic.Uint64
	// HeldPathSent counts the messages written through WriteHeldMessage
	// whose last byte went to the kernel: at once when not held, else when
	// they left (with the next write, the timer, a close or SendHeld). One
	// that never left is never counted.
	HeldPathSent atomic.Uint64
	// PollReads counts the looks between calls (Poll, PollNow) that
	// read, or would have but for a full read buffer: most make one
	// system call, finding nothing; a look may read more than once (see
	// drain), and over TLS a read that finds a record crypto/tls held
	// makes none. It counts looks, not reads.
	PollReads atomic.Uint64
}

// CloseError is a close frame received from the server.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("server closed the connection with code %d", e.Code)
	}
	return fmt.Sprintf("server closed the connection with code %d (%q)", e.Code, e.Reason)
}

// DefaultDeadPeerTimeout is Options.DeadPeerTimeout's default: as long as a
// Python websockets server waits for the pong to its ping before it drops
// a client (its ping_timeout), so the client does not give up on a server
// that would still keep it.
const DefaultDeadPeerTimeout = 20 * time.Second

// MinDeadPeerTimeout is the shortest dead-peer timeout: keepalive probes go
// at most once a second, and a bound no longer than their interval would
// count a probe that is on its way, answered a round trip later, as owed
// for the whole bound (found by review). At 2 s an answer has a second.
const MinDeadPeerTimeout = 2 * time.Second

// deadPeerTimeout is Options.DeadPeerTimeout with its default and floor
// applied; 0 when it is off.
func deadPeerTimeout(t time.Duration) time.Duration {
	switch {
	case t < 0:
		return 0
	case t == 0:
		return DefaultDeadPeerTimeout
	}
	return max(t, MinDeadPeerTimeout)
}

// watchPeer sets tc's dead-peer bound, timeout (0: off): TCP keepalive
// probes after a quarter of it in silence and every quarter after, which
// the poller's looks weigh (idleLook, peerSilence: answers owed for
// timeout end the connection), and after which the kernel itself ends an
// idle connection (ETIMEDOUT) once keepaliveCount of them go unanswered,
// nine intervals (2.25 times the bound, 9 s at 2 s): where there is no
// TCP_INFO, that is the bound.
func watchPeer(tc *net.TCPConn, timeout time.Duration) error {
	if timeout == 0 {
		if err := tc.SetKeepAlive(false); err != nil {
			return fmt.Errorf("turning TCP keepalive off: %w", err)
		}
		return nil
	}
	// Linux refuses a keepalive idle time or interval over 32767 s
	// (MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL).
	every := min(max(timeout/4, time.Second), maxKeepAlive)
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: every, Interval: every, Count: keepaliveCount}); err != nil {
		return fmt.Errorf("setting TCP keepalive for the dead-peer timeout: %w", err)
	}
	return nil
}

// keepaliveCount is how many unanswered keepalive probes make the kernel
// end a connection: with probes every quarter of the bound, the kernel
// gives up at 2.25 times it (more where the 1 s floor on the interval
// applies), after the poller (where it can tell).
const keepaliveCount = 8

// maxKeepAlive is the longest keepalive idle time and interval Linux
// takes (MAX_TCP_KEEPIDLE and MAX_TCP_KEEPINTVL, in seconds).
const maxKeepAlive = 32767 * time.Second

// lostError is the connection's failure for a transport error err met
// while doing what: ErrLost, and for ETIMEDOUT, what it means.
func (c *Conn) lostError(what string, err error) error {
	if errors.Is(err, syscall.ETIMEDOUT) {
		return fmt.Errorf("%w: %s: the kernel gave up on the server: it acknowledged none of the keepalive probes or data sent (dead-peer timeout %v): its machine, or the network to it, is gone (%v)", ErrLost, what, c.deadPeer, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrLost, what, err)
}

// Errors a connection can fail with, besides *CloseError. Match with errors.Is.
var (
	// ErrTextFrame: the server sent a text frame, which SPEC 7.4 makes fatal.
	ErrTextFrame = errors.New("server sent a text frame where a binary message was expected (SPEC 7.4: a server-side error)")
	// ErrClosedBeforeHandshake: the TCP connection was made and then
	// closed without a handshake answer: a server restarting, a proxy
	// whose backend is down, or a TLS port (for a ws:// URL).
	ErrClosedBeforeHandshake = errors.New("the server closed the connection before it answered the WebSocket handshake")
	// ErrClockBehind: the server's certificate is not valid yet by this
	// machine's clock: a machine without a battery-backed clock (a
	// Raspberry Pi, most robots' computers) that has not had the time
	// from NTP yet since it booted. Waiting mends it once the clock is
	// set; the certificate is still checked in full.
	ErrClockBehind = errors.New("this machine's clock is before the server's certificate becomes valid")
	// ErrProtocol: the server broke RFC 6455 framing or the handshake.
	ErrProtocol = errors.New("websocket protocol violation by the server")
	// ErrTooBig: a message exceeded the message size cap.
	ErrTooBig = errors.New("message larger than the maximum")
	// ErrNoMemory: memory for a message could not be allocated.
	ErrNoMemory = errors.New("out of memory")
	// ErrLost: the connection ended without a close frame.
	ErrLost = errors.New("connection lost")
	// ErrTimeout: a deadline passed.
	ErrTimeout = errors.New("timed out")
	// ErrClosed: the connection was closed by this side.
	ErrClosed = errors.New("connection closed")
	// ErrInterrupted: Interrupt ended the connection, or Dial's context
	// was cancelled.
	ErrInterrupted = errors.New("interrupted")
)

const (
	minReadChunk   = 64 << 10
	defaultWBuf    = 16 << 20
	minWBuf        = 64 // room for a header and some payload
	initialWBuf    = 4 << 10
	readBufferSize = 64 << 10
	// defaultHandshake is MaxHandshakeSize's default: an HTTP 101 answer
	// is a few hundred bytes, a TLS certificate chain a few KiB.
	defaultHandshake = 256 << 10
	// keepReceiveBuffer: Release frees a receive buffer larger than this,
	// so a server cannot make an idle connection hold what one big message
	// needed.
	keepReceiveBuffer = 1 << 20
	// idlePoll is how often the poller looks for pings and a close while
	// the caller is away. Servers ping every 20 s or so and wait as long
	// for the pong; waking once a second costs an idle client well under
	// 0.1 % of a core.
	idlePoll = time.Second
	// pollGrace: Poll reads nothing when the connection's last look at
	// the socket (a Receive's end as its owner marked it, else its start;
	// or a Poll that read) was less than this long ago; over TLS it always
	// reads (see Poll). A caller back this soon pays no system call; one
	// away longer pays one that costs well under 1 % of its time away.
	pollGrace = 100 * time.Microsecond
	// yieldEvery: Receive lets the scheduler run something else this
	// often (see Receive); under the runtime's 10 ms preemption slice.
	yieldEvery = 8 * time.Millisecond
	// lateGrace bounds a Receive's last look past its deadline: it then
	// reads, without waiting, what has already arrived, for at most this
	// long. A process stopped past a deadline (a debugger's breakpoint,
	// SIGSTOP and SIGCONT, a frozen container) finds the server's answer
	// waiting in its socket when it runs again; the look takes it instead
	// of throwing it away with the connection. A server that floods
	// cannot stretch the look past this.
	lateGrace = 50 * time.Millisecond
	// lateSlack: a poller look at a watched deadline that runs later than
	// this was held up (the process was stopped, or starved); the Receive
	// then gets lateGrace to take what arrived meanwhile.
	lateSlack = 10 * time.Millisecond
	// watchedTimeout: Receive timeouts this long or longer are enforced
	// by the poller, which wakes at the deadline, instead of by the
	// socket. It must be at least idlePoll, so that a poller asleep when
	// the Receive begins wakes before the deadline.
	watchedTimeout = idlePoll
)

// Conn is one WebSocket connection. Receive, Release, Poll, Close and
// Abort belong to one goroutine at a time; WriteMessage may be called
// concurrently with them, and Interrupt from any goroutine.
// Close or Abort must be called to release the socket.
type Conn struct {
	tr     transport
	alloc  Allocator
	max    int64  // message size cap; <= 0: none
	remote string // the server's IP and port (RemoteAddr)

	// Write side, serialised by wmu, which is never waited for by the
	// read side or the poller (they TryLock it).
	wmu      sync.Mutex
	wbuf     []byte
	wmax     int
	rng      *rand.ChaCha8
	wtimeout time.Duration
	// deadPeer is the dead-peer timeout in force (0: off), for messages.
	deadPeer time.Duration
	sentCls  bool
	// readerFlushes: the holder of wmu is a reader, holding rmu too,
	// that sends the pong or control frames owed between two of its
	// reads (flushControlReading); writeReset: such a send, or one
	// nobody waits on while a reader holds rmu, met the server's reset,
	// and a reader's next read gives what came before it (see
	// writeFailed); nothing more is written. Both guarded by wmu.
	readerFlushes, writeReset bool
	// lookerHoldsWmu: the holder of rmu is the idle poller's look, which
	// holds wmu too, so its answer to a close needs no try for wmu
	// (answerClose). Guarded by rmu.
	lookerHoldsWmu bool
	// inFrame: a message's write began and has not ended whole (its
	// bytes sent, or held whole in wbuf), so the wire may be inside its
	// frame, where a close frame must not go (tryClose). Guarded by wmu.
	inFrame bool
	// sentCode is the close code of the close frame this side began to
	// send (SentCloseCode), or 0.
	sentCode atomic.Int32
	// peerFirst: the peer's close frame came before this side had sent
	// one (see PeerClosedFirst).
	peerFirst atomic.Bool
	ctlQueued atomic.Bool // ctl holds bytes: flushControl's look without wmu
	// wbuf[:held] is a held message (WriteHeldMessage), or the unsent
	// rest of one: owed to the wire before any other byte. Where the
	// transport can hold (canHold, set before the Conn is shared), the
	// sweeper (heldsweep.go) sends it if no write has within two of its
	// ticks; heldArmed says the sweeper looks at c, holds counts the
	// holds and heldSeen is that count at its last look. Guarded by wmu.
	held            int
	holds, heldSeen uint64
	heldArmed       bool
	canHold         bool
	// heldEnds are the ends, in wbuf, of the messages wbuf[:held] holds
	// (a client holds one at a time; its capacity is kept); heldPath says
	// the write under way came through WriteHeldMessage, held or not.
	// Both are for Counters.HeldPathSent. Guarded by wmu.
	heldEnds []int
	heldPath bool
	// heldLost says a held message did not leave whole: its write failed
	// before its last byte, or the connection ended with it held. Set
	// under wmu, read by HeldLost once the connection is over.
	heldLost atomic.Bool
	// A ping's payload waiting for its pong (pongData, at the end),
	// guarded by pmu (held only to copy these few bytes): the reader
	// records it, whoever holds wmu next writes the pong. RFC 6455
	// 5.5.3 allows answering only the latest of several pings.
	pmu      sync.Mutex
	pongOwed atomic.Bool
	pongLen  int

	// Read side, serialised by rmu: Receive and Poll hold it while they
	// read, the poller only when it gets it without waiting.
	rmu      sync.Mutex
	rb       []byte // bytes read from the transport, rb[rr:rw] not yet parsed
	rr, rw   int
	rbuf     []byte        // the message buffer, from alloc
	counters *Counters     // never nil
	lastRecv time.Duration // monotonic (mono) start of the last Receive
	// lastLook is when the owner last knew the socket read (mono): the
	// start of the last Receive, moved to its end by ReceiveEnded, or the
	// start of the last Poll that read. Poll's grace counts from it. The
	// idle poller's reads do not move it (the safe direction: the next
	// Poll reads). It belongs to the goroutine that calls Receive and
	// Poll.
	lastLook time.Duration
	// tlsBuffers: the transport is crypto/tls, whose read takes from the
	// socket whatever has arrived but returns one record; the records
	// after it (a close or a second reply sent with the action) wait in
	// crypto/tls, where a Poll without a read does not look. So every
	// Poll reads there (see Poll).
	tlsBuffers bool
	// lastYield is when a Receive of this connection last yielded (mono;
	// see yieldDue).
	lastYield time.Duration

	// A Receive with a timeout of watchedTimeout or more stores its
	// deadline (mono) here, and the poller ends the connection when it
	// passes. Each takes it with a swap, so exactly one of them decides.
	// An even value is the Receive's own deadline; an odd one, the
	// lateGrace the poller gave it once (see idleLook).
	recvDeadline atomic.Int64
	// readDeadline is the socket deadline of the Receive under way (zero:
	// none, or the poller's): fill's shorter waits, while control frames
	// are queued on TLS, put it back. Guarded by rmu.
	readDeadline time.Time
	// lateUntil is zero until the Receive under way meets its socket
	// deadline; from then on it reads only what has already arrived,
	// until lateUntil (see read). Guarded by rmu.
	lateUntil time.Time

	// replyDue is set while the server owes a data message: from the
	// start (the metadata), and from ExpectMessage (an infer about to go
	// out) until a Receive returns one. A data frame that arrives while it
	// is clear is out of turn (SPEC 2, 4.2), and a look between calls
	// (Poll, the poller) fails the connection on it: taken by the next
	// Receive, it would be the reply to the wrong infer, and every reply
	// after it too.
	replyDue atomic.Bool

	// The socket may be shut down from any goroutine (Interrupt) but
	// must not be once Close released it (its descriptor number may
	// belong to another file by then): fdmu orders the two.
	fdmu     sync.Mutex
	released bool

	// poller looks at the socket between calls (startPolling); set before
	// the Conn is shared, nil for a Conn made without Dial.
	poller *connTicker

	dead chan struct{} // closed once the connection has failed or closed
	err  atomic.Pointer[error]

	closeOnce sync.Once

	// The control frames' buffers, last: an exchange touches neither, and
	// placed among the fields it does touch they spread those over more
	// cache lines.
	//
	// ctl holds control frames that could not be written without waiting
	// (the rest of a pong or close frame): they go out, in order, before
	// the next message. Guarded by wmu.
	ctl pending
	// pongData is the ping's payload of pongOwed (pmu).
	pongData [ws.MaxControlFramePayloadSize]byte
}

// Dial opens a connection and hands it to the poller. Cancelling ctx ends a
// dial in progress with ErrInterrupted.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	limit := o.MaxHandshakeSize
	if limit <= 0 {
		limit = defaultHandshake
	}
	if err := CheckAPIKey(o.APIKey); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", RedactedURL(o.URL), err)
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var dc *dialConn
	var filter *connectionFilter
	d := ws.Dialer{
		Timeout:   timeout,
		TLSConfig: o.TLS,
		// Above TLS, where the response is text (see connectionFilter).
		WrapConn: func(c net.Conn) net.Conn {
			filter = &connectionFilter{Conn: c}
			return filter
		},
		NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := netDial(ctx, network, addr, o.PreferAddr)
			if err != nil {
				return nil, err
			}
			if tc, ok := c.(*net.TCPConn); ok {
				// Small messages (an infer of one env) must not wait for Nagle.
				_ = tc.SetNoDelay(true)
				if err := watchPeer(tc, deadPeerTimeout(o.DeadPeerTimeout)); err != nil {
					c.Close()
					return nil, err
				}
			}
			dc = &dialConn{Conn: c, limit: limit}
			return dc, nil
		},
	}
	if o.APIKey != "" {
		d.Header = ws.HandshakeHeaderHTTP(http.Header{"Authorization": []string{"Api-Key " + o.APIKey}})
	}
	if err := CheckURL(o.URL); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", RedactedURL(o.URL), err)
	}
	if host, name, ok := unzoned(o.URL); ok {
		// An IPv6 literal with a zone (see unzoned): the Host field and
		// the certificate's check take the address without it.
		d.Host = host
		if cfg := o.TLS; cfg == nil || cfg.ServerName == "" {
			if cfg == nil {
				cfg = &tls.Config{}
			} else {
				cfg = cfg.Clone()
			}
			cfg.ServerName = name
			d.TLSConfig = cfg
		}
	}
	// Whether the server asked for a client certificate (mutual TLS),
	// which this client has none of unless the caller's configuration
	// gives one: a refusal then says so (certificateHint).
	var certAsked atomic.Bool
	if strings.HasPrefix(strings.ToLower(o.URL), "wss:") {
		if cfg := d.TLSConfig; cfg == nil || len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil {
			if cfg == nil {
				cfg = &tls.Config{}
			} else if cfg == o.TLS {
				cfg = cfg.Clone()
			}
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				certAsked.Store(true)
				return &tls.Certificate{}, nil // none, as crypto/tls sends without this
			}
			d.TLSConfig = cfg
		}
	}
	nc, br, _, err := d.Dial(dctx, requestURL(o.URL))
	shown := RedactedURL(o.URL) // messages go to logs and ledgers: no password
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		// Its text repeats the URL whole, and its cause (an escape error)
		// may quote part of a password.
		err = errors.New("the URL does not parse")
	}
	if err != nil {
		// Looked at once: the clock may be stepped (NTP) at any moment, and
		// a second look could find the certificate valid after the first
		// found it not yet.
		behind, now := clockBehind(err, o.TLS)
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("connect to %s: %w", shown, ErrInterrupted)
		case dc != nil && dc.overLimit:
			return nil, fmt.Errorf("connect to %s: %w: the handshake response is larger than %d bytes (the handshake size cap)", shown, ErrProtocol, limit)
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			return nil, fmt.Errorf("connect to %s: %w after %v: %v", shown, ErrTimeout, timeout, err)
		case dc != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && filter != nil && filter.statusLine != nil:
			// A status line came: the server answered, and cut its answer
			// short (no TLS port sends one; the hint below would mislead).
			return nil, fmt.Errorf("connect to %s: %w", shown, &cutShortError{statusLine: filter.statusLine, err: err})
		case dc != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
			// A bare "EOF" says nothing; the likeliest cause for a plain
			// client is a TLS port (which drops a request it cannot read).
			hint := ""
			if strings.HasPrefix(strings.ToLower(o.URL), "ws:") {
				hint = "; a wss:// (TLS) server does that to a ws:// client: check the URL's scheme"
			}
			return nil, fmt.Errorf("connect to %s: %w (%v)%s", shown, ErrClosedBeforeHandshake, err, hint)
		case behind != nil:
			return nil, fmt.Errorf("connect to %s: %w: the clock says %s, and the certificate (%q) is valid from %s: is the clock set? A machine without a battery-backed clock has the time only once NTP (or systemd-timesyncd) has set it after boot; a wait for the server (open_wait_ms, Options.OpenWait) waits for it (%v)",
				shown, ErrClockBehind, now.UTC().Format(time.RFC3339), behind.Subject.CommonName, behind.NotBefore.UTC().Format(time.RFC3339), err)
		}
		if filter != nil {
			err = filter.refusal(err)
		}
		return nil, fmt.Errorf("connect to %s: %w%s%s", shown, err, trustHint(err, o.TLS), certificateHint(err, certAsked.Load()))
	}
	if dc == nil || filter == nil || nc != net.Conn(filter) { // cannot happen: NetDial and WrapConn made it
		nc.Close()
		return nil, fmt.Errorf("connect to %s: no connection from the dialer", shown)
	}
	nc = filter.Conn
	dc.limit = 0 // the handshake is over: messages have their own cap
	if err := dc.takeover(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to %s: %w", shown, err)
	}
	var tr transport = dc
	if tc, ok := nc.(*tls.Conn); ok {
		tr = &tlsTransport{Conn: tc, d: dc}
	}
	c := newConn(tr, o)
	if a := dc.Conn.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	// The server may speak in the same packet as its handshake reply: the
	// bytes the filter read past the reply come first (less than its one
	// 4 KiB read; rb is 64 KiB), then any the dialer's reader holds (none,
	// as the filter hands on a line a read).
	c.rw = copy(c.rb, filter.Rest())
	if br != nil && br.Buffered() > 0 {
		n, _ := br.Read(c.rb[c.rw:])
		c.rw += n
	}
	c.counters.Received.Add(uint64(c.rw))
	c.startPolling()
	return c, nil
}

// clockBehind is the certificate err refused for not being valid yet, or
// nil, and the TLS configuration's time it looked at. Go says "expired or
// not yet valid" for both; only a clock before the certificate's start can
// be mended by waiting (an expired certificate cannot). The look comes
// after the verification: a clock that NTP set in between is past the
// start by now, so Go's own verifier's word ("current time ... is before
// ...") counts too; the platform verifiers (macOS, Windows) do not say
// which end it was, and the clock's time then decides.
func clockBehind(err error, cfg *tls.Config) (*x509.Certificate, time.Time) {
	var invalid x509.CertificateInvalidError
	if !errors.As(err, &invalid) || invalid.Reason != x509.Expired || invalid.Cert == nil {
		return nil, time.Time{}
	}
	now := tlsNow(cfg)
	if now.Before(invalid.Cert.NotBefore) || strings.Contains(invalid.Detail, " is before ") {
		return invalid.Cert, now
	}
	return nil, now
}

// trustHint says what to do about a server certificate that this side
// does not trust (err), or "". Go's messages name the failure, not the
// option that mends it; the likeliest cause on a robot is a trainer with a
// self-signed certificate, or a container image without CA certificates.
func trustHint(err error, cfg *tls.Config) string {
	const noCAs = "; this machine has no CA certificates (a container image without ca-certificates?): install them, or give the PEM of the server's certificate, or of its CA, as tls_ca_file (Options.TLS.RootCAs)"
	var unknown x509.UnknownAuthorityError
	var noRoots x509.SystemRootsError
	switch {
	case errors.As(err, &noRoots):
		return noCAs
	case errors.As(err, &unknown) && (cfg == nil || cfg.RootCAs == nil) && noSystemRoots():
		return noCAs
	case errors.As(err, &unknown):
		trusted := "the system's CA certificates"
		if cfg != nil && cfg.RootCAs != nil {
			trusted = "the CA file given (tls_ca_file, Options.TLS.RootCAs)"
		}
		issuer := "?"
		if unknown.Cert != nil {
			issuer = unknown.Cert.Issuer.String()
		}
		return fmt.Sprintf("; the server's certificate (issued by %q) is signed by none of %s: give the PEM of the server's certificate (a self-signed one), or of its CA, as tls_ca_file", issuer, trusted)
	}
	return ""
}

// certificateHint says, for err, the server's refusal of the TLS
// handshake (a TLS alert it sent) after it asked for a client certificate
// (asked), that this client presents none, or "". crypto/tls's words name
// only the alert: "handshake failure" under TLS 1.2 says nothing of the
// cause; "certificate required" (TLS 1.3) does not say that this client
// cannot give one.
func certificateHint(err error, asked bool) string {
	var op *net.OpError
	if !asked || !errors.As(err, &op) || op.Op != "remote error" {
		return ""
	}
	return "; the server asked for a client certificate (mutual TLS) and refused the connection without one: this client presents none (plugrl_options has no option for one)"
}

// noSystemRoots reports whether the system's CA certificates are none:
// Go takes missing files (SSL_CERT_FILE, /etc/ssl/certs...) as an empty
// set, not an error. On macOS and Windows the system pool lists nothing
// (the platform verifies against its own store; Subjects is deprecated
// for that): there it is never "none", or every untrusted certificate
// would be said to be a machine without CA certificates.
func noSystemRoots() bool {
	switch runtime.GOOS {
	case "darwin", "ios", "windows":
		return false
	}
	pool, err := x509.SystemCertPool()
	return err != nil || pool == nil || len(pool.Subjects()) == 0
}

// tlsNow is the time a TLS configuration verifies certificates at.
func tlsNow(cfg *tls.Config) time.Time {
	if cfg != nil && cfg.Time != nil {
		return cfg.Time()
	}
	return time.Now()
}

// RemoteAddr is the server's IP and port: of a name's addresses, the one
// this connection went to ("" for a Conn made without Dial).
func (c *Conn) RemoteAddr() string { return c.remote }

// netDial makes the TCP connection (dial.go); the handshake fuzz test
// replaces it.
var netDial = dialAddrs

func newConn(tr transport, o Options) *Conn {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	wmax := o.WriteBufferSize
	if wmax <= 0 {
		wmax = defaultWBuf
	}
	if wmax < minWBuf {
		wmax = minWBuf
	}
	wt := o.SendTimeout
	if wt <= 0 {
		wt = 10 * time.Second
	}
	alloc := o.Alloc
	if alloc == nil {
		alloc = HeapAllocator{}
	}
	counters := o.Counters
	if counters == nil {
		counters = new(Counters)
	}
	c := &Conn{
		counters: counters,
		tr:       tr,
		alloc:    alloc,
		max:      o.MaxMessageSize,
		wbuf:     make([]byte, min(initialWBuf, wmax)),
		wmax:     wmax,
		rng:      rand.NewChaCha8(seed),
		wtimeout: wt,
		deadPeer: deadPeerTimeout(o.DeadPeerTimeout),
		rb:       make([]byte, readBufferSize),
		dead:     make(chan struct{}),
	}
	c.replyDue.Store(true) // the metadata
	c.canHold = tr.Holds()
	_, c.tlsBuffers = tr.(*tlsTransport)
	return c
}

// SetMaxMessageSize sets the cap on the next received messages; zero or
// negative removes it. It belongs to the goroutine that calls Receive.
func (c *Conn) SetMaxMessageSize(n int64) { c.max = n }

// ReceiveStarted is the monotonic time (see Mono) at which the last
// successful Receive began: for a message that answers one just written,
// when the wait for it began. It belongs to the goroutine that calls
// Receive.
func (c *Conn) ReceiveStarted() time.Duration { return c.lastRecv }

// Mono is the monotonic clock ReceiveStarted reads: one clock read.
func Mono() time.Duration { return mono() }

// Err returns why the connection failed, or nil while it is healthy.
func (c *Conn) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records the first error and marks the connection dead. It returns
// the connection's error, which is err only if it was the first.
func (c *Conn) fail(err error) error {
	if c.err.CompareAndSwap(nil, &err) {
		close(c.dead)
		return err
	}
	return c.Err()
}

// RedactedURL is u as messages show it: a password in it (ws://user:
// secret@host) is replaced by xxxxx, as net/url's Redacted does, and so is
// a user name without one (ws://token@host); the API key is never in a
// message either.
func RedactedURL(u string) string {
	if p, err := url.Parse(u); err == nil && !strings.Contains(p.Opaque+p.Path+p.RawQuery+p.Fragment, "@") {
		if p.User != nil {
			if pw, _ := p.User.Password(); pw == "" {
				// A user name with no password is a token as often as
				// not (wss://TOKEN@host): hidden too.
				p.User = url.User("xxxxx")
			}
		}
		return p.Redacted()
	}
	// Unparseable (a typo, or a password whose characters are not
	// escaped), or an @ that url.Parse did not take for the user's end
	// (scheme:user:pass@host is opaque to it; ws://user:12#pw@host makes
	// "user:12" the host and the rest a fragment; ws:/user:pw@host, a
	// path): keep nothing before the last @.
	if j := strings.LastIndexByte(u, '@'); j >= 0 {
		if i := strings.Index(u, "://"); i >= 0 && i < j {
			return escapeControls(u[:i+3] + "xxxxx" + u[j:])
		}
		return escapeControls("xxxxx" + u[j:])
	}
	return escapeControls(u)
}

// escapeControls writes the control characters of an unparseable URL
// (CR, LF, NUL; url.Parse refuses them) as Go escapes, so that a message
// quoting the URL cannot start a line of its own in the caller's log.
func escapeControls(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Done is closed once the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.dead }

// isTimeout reports whether err is one of this package's deadlines
// passing. Not ETIMEDOUT, which Go counts as a timeout too: that is the
// kernel giving up on the peer (DeadPeerTimeout), and ends the connection
// (lostError).
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true // the common case, without errors.As's allocation
	}
	if errors.Is(err, syscall.ETIMEDOUT) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
