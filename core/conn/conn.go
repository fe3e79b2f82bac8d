// Package conn is one client WebSocket connection for PlugRL, on gobwas/ws.
//
// It does what SPEC 1 and 7 ask of the transport and what a control loop
// needs from it: binary messages with no size cap and no compression,
// fragmented messages and control frames in between, pings answered even
// while the caller is busy between calls, close frames surfaced as a code
// and a reason, and text frames treated as fatal.
//
// Reading: the caller reads. Receive reads frames on the calling thread
// (on Linux a blocking system call on the socket, see fdConn), answering
// control frames on the way, until a data message is complete. Between
// calls a background poller looks at the socket every pollInterval without
// waiting on it: it answers pings and takes a close frame, so a server's
// keepalive is honoured and a close is seen while the caller steps its
// envs; Poll does the same on demand. The poller also enforces Receive
// timeouts of watchedTimeout or more (to within pollInterval), so that the
// socket needs no timer of its own. No goroutine hand-off sits between the
// socket and the caller.
//
// Memory: outgoing messages are wire.Message segment lists; each array's
// bytes are masked during their one copy into a reusable write buffer
// (maskCopy), which grows to the largest message (up to WriteBufferSize)
// so that a message is one write; no intermediate buffer holds a message's
// arrays. Incoming messages land in
// one reusable buffer whose memory comes from an Allocator, which lets a C
// caller receive straight into C memory. The buffer grows only with bytes
// actually received, so a lying length header cannot make the connection
// allocate.
package conn

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
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

// HeapAllocator allocates receive buffers on the Go heap.
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
	// APIKey, when set, is sent as "Authorization: Api-Key <key>" (SPEC 1.2).
	APIKey string
	// DialTimeout bounds TCP connect, TLS and the WebSocket handshake.
	// Zero means 10 s.
	DialTimeout time.Duration
	// WriteTimeout bounds writing one message. Zero means 30 s.
	WriteTimeout time.Duration
	// TLS configures wss:// connections; nil uses the system roots.
	TLS *tls.Config
	// MaxMessageSize caps one received message in bytes; zero means no cap,
	// as SPEC 1.1 requires by default.
	MaxMessageSize int64
	// Alloc supplies receive memory; nil means the Go heap.
	Alloc Allocator
	// WriteBufferSize caps the masking buffer, which grows to the largest
	// message written up to this size, so that a message goes out in one
	// write as the transport floor's does; a larger message is written in
	// pieces of this size. Zero means 16 MiB.
	WriteBufferSize int
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

// Errors a connection can fail with, besides *CloseError. Match with errors.Is.
var (
	// ErrTextFrame: the server sent a text frame, which SPEC 7.4 makes fatal.
	ErrTextFrame = errors.New("server sent a text frame where a binary message was expected (SPEC 7.4: a server-side error)")
	// ErrProtocol: the server broke RFC 6455 framing.
	ErrProtocol = errors.New("websocket protocol violation by the server")
	// ErrTooBig: a message exceeded Options.MaxMessageSize.
	ErrTooBig = errors.New("message larger than the configured maximum")
	// ErrLost: the connection ended without a close frame.
	ErrLost = errors.New("connection lost")
	// ErrTimeout: a deadline passed.
	ErrTimeout = errors.New("timed out")
	// ErrClosed: the connection was closed by this side.
	ErrClosed = errors.New("connection closed")
)

const (
	minReadChunk   = 64 << 10
	defaultWBuf    = 16 << 20
	minWBuf        = 64 // room for a header and some payload
	initialWBuf    = 4 << 10
	closeWait      = 2 * time.Second
	readBufferSize = 64 << 10
	// pollInterval is how often the poller looks for pings and a close
	// while the caller is away. Servers ping every 20 s or so.
	pollInterval = 25 * time.Millisecond
	// pollGrace: Poll does nothing when the last Receive returned less
	// than this long ago. A caller back this soon pays no system call; one
	// away longer pays one that costs well under 1 % of its time away.
	pollGrace = 100 * time.Microsecond
	// yieldEvery: Receive lets the scheduler run something else this
	// often (see Receive); under the runtime's 10 ms preemption slice.
	yieldEvery = 8 * time.Millisecond
	// watchedTimeout: Receive timeouts this long or longer are enforced
	// by the poller, to within pollInterval, instead of by the socket.
	watchedTimeout = time.Second
)

// Conn is one WebSocket connection. Receive, Release and Poll belong to one
// goroutine at a time; WriteMessage may be called concurrently with them.
// Close must be called to release the socket.
type Conn struct {
	tr    transport
	alloc Allocator
	max   int64

	// Write side, serialised by wmu.
	wmu      sync.Mutex
	wbuf     []byte
	wmax     int
	rng      *rand.ChaCha8
	wtimeout time.Duration
	sentCls  bool

	// Read side, serialised by rmu: Receive and Poll hold it while they
	// read, the poller only when it gets it without waiting.
	rmu       sync.Mutex
	rb        []byte // bytes read from the transport, rb[rr:rw] not yet parsed
	rr, rw    int
	rbuf      []byte        // the message buffer, from alloc
	lastRecv  time.Duration // monotonic (mono) start of the last Receive
	lastYield time.Duration // mono time of Receive's last yield

	// A Receive with a timeout of watchedTimeout or more stores its
	// deadline (mono) here, and the poller ends the connection when it
	// passes; recvTimedOut then says so.
	recvDeadline atomic.Int64
	recvTimedOut atomic.Bool

	dead chan struct{} // closed once the connection has failed or closed
	err  atomic.Pointer[error]
	done chan struct{} // closed when the poller exits

	closeOnce sync.Once
}

// Dial opens a connection and starts its poller.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var dc *dialConn
	d := ws.Dialer{
		Timeout:   timeout,
		TLSConfig: o.TLS,
		NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if tc, ok := c.(*net.TCPConn); ok {
				// Small messages (an infer of one env) must not wait for Nagle.
				_ = tc.SetNoDelay(true)
			}
			dc = &dialConn{Conn: c}
			return dc, nil
		},
	}
	if o.APIKey != "" {
		d.Header = ws.HandshakeHeaderHTTP(http.Header{"Authorization": []string{"Api-Key " + o.APIKey}})
	}
	nc, br, _, err := d.Dial(ctx, o.URL)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return nil, fmt.Errorf("connect to %s: %w after %v: %v", o.URL, ErrTimeout, timeout, err)
		}
		return nil, fmt.Errorf("connect to %s: %w", o.URL, err)
	}
	if dc == nil { // cannot happen: NetDial made the connection
		nc.Close()
		return nil, fmt.Errorf("connect to %s: no connection from the dialer", o.URL)
	}
	if err := dc.takeover(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to %s: %w", o.URL, err)
	}
	var tr transport = dc
	if tc, ok := nc.(*tls.Conn); ok {
		tr = &tlsTransport{Conn: tc, d: dc}
	}
	c := newConn(tr, o)
	if br != nil && br.Buffered() > 0 {
		// The server spoke before the handshake reply was consumed: those
		// bytes sit in the dialer's reader and come first.
		n, _ := br.Read(c.rb)
		c.rw = n
	}
	go c.pollLoop()
	return c, nil
}

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
	wt := o.WriteTimeout
	if wt <= 0 {
		wt = 30 * time.Second
	}
	alloc := o.Alloc
	if alloc == nil {
		alloc = HeapAllocator{}
	}
	return &Conn{
		tr:       tr,
		alloc:    alloc,
		max:      o.MaxMessageSize,
		wbuf:     make([]byte, min(initialWBuf, wmax)),
		wmax:     wmax,
		rng:      rand.NewChaCha8(seed),
		wtimeout: wt,
		rb:       make([]byte, readBufferSize),
		dead:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Err returns why the connection failed, or nil while it is healthy.
func (c *Conn) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records the first error and marks the connection dead.
func (c *Conn) fail(err error) {
	if c.err.CompareAndSwap(nil, &err) {
		close(c.dead)
	}
}

// Receive waits up to timeout (zero: forever) for the next message and
// returns it. The bytes are the connection's buffer: valid, and writable,
// until Release or the next Receive.
func (c *Conn) Receive(timeout time.Duration) ([]byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.Err(); err != nil {
		return nil, err
	}
	now := mono()
	if now-c.lastYield >= yieldEvery {
		// Go's sysmon retakes the P of a goroutine that has run
		// forcePreemptNS (10 ms) without being rescheduled whenever it is
		// in a system call, and then wakes every 20 us to look again. A C
		// thread that calls in and out never is rescheduled, so yield now
		// and then: it costs a few microseconds every yieldEvery; not
		// yielding cost a sysmon wake-up every few exchanges.
		c.lastYield = now
		runtime.Gosched()
	}
	var deadline time.Time
	switch {
	case timeout >= watchedTimeout:
		// The poller enforces it (see pollLoop): the read blocks with no
		// socket timeout, which spares the kernel a timer on every wait.
		c.recvDeadline.Store(int64(now + timeout))
	case timeout > 0:
		deadline = epoch.Add(now + timeout)
	}
	_ = c.tr.SetReadDeadline(deadline)
	msg, err := c.readMessage()
	if c.recvDeadline.Load() != 0 {
		c.recvDeadline.Store(0)
	}
	if c.recvTimedOut.Load() {
		return nil, fmt.Errorf("%w: no message within %v; the connection was closed", ErrTimeout, timeout)
	}
	if err != nil {
		if errors.Is(err, errBoundaryTimeout) {
			return nil, fmt.Errorf("%w: no message within %v", ErrTimeout, timeout)
		}
		return nil, err
	}
	// The start of the wait, not its end: one clock read fewer, and Poll
	// skips its system call only when less than pollGrace has passed
	// since the Receive began, which is the safe direction.
	c.lastRecv = now
	return msg, nil
}

// Release ends the caller's use of the last received message. The buffer
// is reused by the next Receive; nothing else touches it.
func (c *Conn) Release() {}

// Poll handles, without waiting, what the server sent since the last
// Receive: pings are answered, and a close frame or a lost connection fails
// the connection, so that Err reports it. It does nothing when the last
// Receive returned less than pollGrace ago.
func (c *Conn) Poll() {
	// lastRecv is Receive's, and Receive runs on Poll's goroutine.
	if mono()-c.lastRecv < pollGrace {
		return
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.Err() == nil {
		c.drain()
	}
}

// pollLoop answers pings and sees closes while nobody reads.
func (c *Conn) pollLoop() {
	defer close(c.done)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-c.dead:
			return
		case <-t.C:
			if d := c.recvDeadline.Load(); d != 0 && int64(mono()) > d {
				// A Receive waits past its deadline: end the connection,
				// which wakes it (it reports the timeout).
				c.recvTimedOut.Store(true)
				c.fail(fmt.Errorf("%w: no message by the receive deadline", ErrTimeout))
				c.tr.Shutdown()
				continue
			}
			if c.rmu.TryLock() { // else the caller is reading
				if c.Err() == nil {
					c.drain()
				}
				c.rmu.Unlock()
			}
		}
	}
}

// errBoundaryTimeout: the read deadline passed between messages; the
// connection is still usable.
var errBoundaryTimeout = errors.New("read deadline between messages")

// drain reads what has arrived without waiting and handles the control
// frames at the front of it; it stops at a data frame, which Receive reads.
// rmu must be held.
func (c *Conn) drain() {
	if c.rr == c.rw {
		c.rr, c.rw = 0, 0
	} else if c.rw == len(c.rb) && c.rr > 0 {
		c.compact()
	}
	if c.rw < len(c.rb) {
		n, err := c.tr.TryRead(c.rb[c.rw:])
		c.rw += n
		if err != nil {
			c.readFailed(err)
			return
		}
	}
	for c.Err() == nil {
		h, hl, ok, err := parseHeader(c.rb[c.rr:c.rw])
		if err != nil {
			c.readFailed(err)
			return
		}
		if !ok || !h.OpCode.IsControl() || int64(c.rw-c.rr-hl) < h.Length {
			return // a data frame, or not all here yet
		}
		if err := ws.CheckHeader(h, ws.StateClientSide); err != nil {
			c.protocolFail(ws.StatusProtocolError, fmt.Errorf("%w: %v", ErrProtocol, err))
			return
		}
		p := c.rb[c.rr+hl : c.rr+hl+int(h.Length)]
		c.rr += hl + int(h.Length)
		c.control(h, p)
	}
}

// compact moves the unparsed bytes to the front of rb.
func (c *Conn) compact() {
	n := copy(c.rb, c.rb[c.rr:c.rw])
	c.rr, c.rw = 0, n
}

// fill reads until rb holds at least need unparsed bytes (need <= len(rb)).
func (c *Conn) fill(need int) error {
	if c.rr == c.rw {
		c.rr, c.rw = 0, 0
	}
	if len(c.rb)-c.rr < need {
		c.compact()
	}
	for c.rw-c.rr < need {
		n, err := c.tr.Read(c.rb[c.rw:])
		c.rw += n
		if err != nil && c.rw-c.rr < need {
			return err
		}
	}
	return nil
}

// readMessage reads frames until a data message is complete, handling
// control frames on the way. rmu must be held.
func (c *Conn) readMessage() ([]byte, error) {
	var (
		n          int  // bytes of the message assembled so far
		fragmented bool // inside a fragmented message
	)
	for {
		h, hl, err := c.readHeader()
		if err != nil {
			return nil, c.readError(err, n == 0 && !fragmented)
		}
		state := ws.StateClientSide
		if fragmented {
			state |= ws.StateFragmented
		}
		if err := ws.CheckHeader(h, state); err != nil {
			return nil, c.protocolFail(ws.StatusProtocolError, fmt.Errorf("%w: %v", ErrProtocol, err))
		}
		if h.OpCode.IsControl() {
			if err := c.fill(hl + int(h.Length)); err != nil {
				return nil, c.readError(err, n == 0 && !fragmented)
			}
			p := c.rb[c.rr+hl : c.rr+hl+int(h.Length)]
			c.rr += hl + int(h.Length)
			if !c.control(h, p) {
				return nil, c.Err()
			}
			continue
		}
		c.rr += hl
		if h.OpCode == ws.OpText {
			return nil, c.protocolFail(ws.StatusUnsupportedData, ErrTextFrame)
		}
		if c.max > 0 && int64(n)+h.Length > c.max {
			return nil, c.protocolFail(ws.StatusMessageTooBig, fmt.Errorf("%w: a message of more than %d bytes, the maximum is %d", ErrTooBig, int64(n)+h.Length, c.max))
		}
		if n, err = c.readPayload(n, h.Length); err != nil {
			return nil, c.readError(err, false)
		}
		fragmented = !h.Fin
		if h.Fin {
			return c.rbuf[:n:n], nil
		}
	}
}

// readHeader waits for a whole frame header and parses it without
// consuming it; it returns the header's length in bytes.
func (c *Conn) readHeader() (ws.Header, int, error) {
	for {
		h, hl, ok, err := parseHeader(c.rb[c.rr:c.rw])
		if err != nil || ok {
			return h, hl, err
		}
		need := hl // 0 until the first two bytes say
		if need == 0 {
			need = 2
		}
		if err := c.fill(need); err != nil {
			return h, 0, err
		}
	}
}

// readError turns a read error into the connection's failure, except a
// deadline that passed between messages, which leaves it usable.
func (c *Conn) readError(err error, boundary bool) error {
	if e := c.Err(); e != nil {
		return e
	}
	if isTimeout(err) {
		if boundary {
			return errBoundaryTimeout
		}
		err = fmt.Errorf("%w in the middle of a message: %v", ErrTimeout, err)
		c.fail(err)
		c.tr.Shutdown()
		return err
	}
	c.readFailed(err)
	return c.Err()
}

// readPayload appends length bytes to rbuf[:n], growing it only as bytes
// actually arrive.
func (c *Conn) readPayload(n int, length int64) (int, error) {
	for length > 0 {
		if n == len(c.rbuf) {
			size := 2 * len(c.rbuf)
			if size < minReadChunk {
				size = minReadChunk
			}
			if int64(size-n) > length {
				size = n + int(length)
			}
			nb := c.alloc.Grow(c.rbuf, n, size)
			if len(nb) < size {
				return n, fmt.Errorf("%w: no memory for a %d-byte receive buffer", ErrTooBig, size)
			}
			c.rbuf = nb[:cap(nb)]
		}
		want := len(c.rbuf) - n
		if int64(want) > length {
			want = int(length)
		}
		var k int
		switch {
		case c.rr < c.rw: // bytes already read
			k = copy(c.rbuf[n:n+want], c.rb[c.rr:c.rw])
			c.rr += k
		case want >= len(c.rb)/2: // a big payload: straight into rbuf
			var err error
			k, err = c.tr.Read(c.rbuf[n : n+want])
			if err != nil && k == 0 {
				return n, err
			}
		default:
			if err := c.fill(1); err != nil {
				return n, err
			}
		}
		n += k
		length -= int64(k)
	}
	return n, nil
}

// control handles a ping, pong or close whose payload is p; it reports
// whether the connection goes on.
func (c *Conn) control(h ws.Header, p []byte) bool {
	switch h.OpCode {
	case ws.OpPing:
		if err := c.writeControl(ws.OpPong, p); err != nil {
			c.fail(fmt.Errorf("%w: answering a ping: %v", ErrLost, err))
			c.tr.Shutdown()
			return false
		}
	case ws.OpClose:
		code, reason := ws.ParseCloseFrameData(p)
		ce := &CloseError{Code: int(code), Reason: reason}
		if code.Empty() {
			ce.Code = int(ws.StatusNoStatusRcvd)
		}
		c.fail(ce)
		// RFC 6455 5.5.1: answer a close with a close, then let TCP go.
		echo := code
		if code.Empty() {
			echo = ws.StatusNormalClosure
		}
		_ = c.writeClose(echo, "")
		c.tr.Shutdown()
		return false
	}
	return true
}

func (c *Conn) readFailed(err error) {
	if c.Err() == nil {
		if errors.Is(err, net.ErrClosed) {
			err = ErrClosed
		} else {
			err = fmt.Errorf("%w: %v", ErrLost, err)
		}
	}
	c.fail(err)
	c.tr.Shutdown()
}

// protocolFail closes with code after a violation by the server; it
// returns the connection's error.
func (c *Conn) protocolFail(code ws.StatusCode, err error) error {
	c.fail(err)
	_ = c.writeClose(code, "")
	c.tr.Shutdown()
	return c.Err()
}

// parseHeader parses the frame header at the front of b. ok is false when b
// holds only part of it; hl is then the length needed when known (else 0).
func parseHeader(b []byte) (h ws.Header, hl int, ok bool, err error) {
	if len(b) < 2 {
		return h, 0, false, nil
	}
	h.Fin = b[0]&0x80 != 0
	h.Rsv = (b[0] & 0x70) >> 4
	h.OpCode = ws.OpCode(b[0] & 0x0f)
	h.Masked = b[1]&0x80 != 0
	hl = 2
	switch l := b[1] & 0x7f; l {
	case 126:
		hl += 2
	case 127:
		hl += 8
	default:
		h.Length = int64(l)
	}
	if h.Masked {
		hl += 4
	}
	if len(b) < hl {
		return h, hl, false, nil
	}
	switch b[1] & 0x7f {
	case 126:
		h.Length = int64(binary.BigEndian.Uint16(b[2:]))
	case 127:
		if b[2]&0x80 != 0 {
			return h, hl, false, ws.ErrHeaderLengthMSB
		}
		h.Length = int64(binary.BigEndian.Uint64(b[2:]))
	}
	if h.Masked {
		copy(h.Mask[:], b[hl-4:hl])
	}
	return h, hl, true, nil
}

// WriteMessage sends m as one binary frame, masked as RFC 6455 requires
// with a fresh key. Each segment is masked during its one copy into the
// write buffer, which is written whenever it is full and at the end.
func (c *Conn) WriteMessage(m *wire.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.Err(); err != nil {
		return err
	}
	if c.sentCls {
		return ErrClosed
	}
	c.tr.BeginWrite(c.wtimeout)
	mask := c.newMask()
	total := m.Len()
	h := ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Mask: mask, Length: int64(total)}
	if need := ws.HeaderSize(h) + total; need > len(c.wbuf) && len(c.wbuf) < c.wmax {
		// Grow once to what the workload needs (up to wmax); steady
		// state allocates nothing.
		c.wbuf = make([]byte, min(need, c.wmax))
	}
	w := putHeader(c.wbuf, h)
	if total <= smallMessage && w+total <= len(c.wbuf) {
		// A small message: one plain copy, then the mask in place over
		// it, both in the first-level cache.
		n := m.CopyTo(c.wbuf[w:])
		maskCopy(c.wbuf[w:w+n], c.wbuf[w:w+n], mask, 0)
		return c.flush(w + n)
	}
	pos := 0
	// Short segments (the msgpack structure, ids, flags) are copied as
	// they are and masked afterwards in one pass over the run they form,
	// which costs less than a masked copy per segment; long ones (array
	// data) are masked during their one copy.
	run, runPos := -1, 0 // wbuf[run:w] is copied but not yet masked
	for i := 0; i < m.Segments(); i++ {
		seg := m.Segment(i)
		for len(seg) > 0 {
			if w == len(c.wbuf) {
				if run >= 0 {
					maskCopy(c.wbuf[run:w], c.wbuf[run:w], mask, runPos)
					run = -1
				}
				if err := c.flush(w); err != nil {
					return err
				}
				w = 0
			}
			k := min(len(c.wbuf)-w, len(seg))
			if k < shortSegment {
				if run < 0 {
					run, runPos = w, pos
				}
				copy(c.wbuf[w:], seg[:k])
			} else {
				if run >= 0 {
					maskCopy(c.wbuf[run:w], c.wbuf[run:w], mask, runPos)
					run = -1
				}
				maskCopy(c.wbuf[w:], seg[:k], mask, pos)
			}
			w += k
			pos += k
			seg = seg[k:]
		}
	}
	if run >= 0 {
		maskCopy(c.wbuf[run:w], c.wbuf[run:w], mask, runPos)
	}
	return c.flush(w)
}

// shortSegment: segments shorter than this are masked in runs (see
// WriteMessage); a message of up to smallMessage bytes is copied whole and
// then masked.
const (
	shortSegment = 256
	smallMessage = 4 << 10
)

// putHeader writes h at the front of b (which has room for it) and returns
// its length.
func putHeader(b []byte, h ws.Header) int {
	b[0] = byte(h.OpCode) & 0x0f
	if h.Fin {
		b[0] |= 0x80
	}
	n := 2
	switch {
	case h.Length < 126:
		b[1] = byte(h.Length)
	case h.Length <= 0xffff:
		b[1] = 126
		binary.BigEndian.PutUint16(b[2:], uint16(h.Length))
		n = 4
	default:
		b[1] = 127
		binary.BigEndian.PutUint64(b[2:], uint64(h.Length))
		n = 10
	}
	if h.Masked {
		b[1] |= 0x80
		n += copy(b[n:], h.Mask[:])
	}
	return n
}

func (c *Conn) flush(n int) error {
	if _, err := c.tr.Write(c.wbuf[:n]); err != nil {
		err = fmt.Errorf("%w: writing: %v", ErrLost, err)
		c.fail(err)
		c.tr.Shutdown()
		return err
	}
	return nil
}

func (c *Conn) newMask() (m [4]byte) {
	v := c.rng.Uint64()
	m[0], m[1], m[2], m[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return m
}

// writeControl sends one control frame; it serialises with WriteMessage.
func (c *Conn) writeControl(op ws.OpCode, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.sentCls {
		return ErrClosed
	}
	if op == ws.OpClose {
		c.sentCls = true
	}
	var f [ws.MaxHeaderSize + ws.MaxControlFramePayloadSize]byte
	mask := c.newMask()
	n := putHeader(f[:], ws.Header{Fin: true, OpCode: op, Masked: true, Mask: mask, Length: int64(len(payload))})
	maskCopy(f[n:], payload, mask, 0)
	c.tr.BeginWrite(c.wtimeout)
	_, err := c.tr.Write(f[:n+len(payload)])
	return err
}

func (c *Conn) writeClose(code ws.StatusCode, reason string) error {
	var body [ws.MaxControlFramePayloadSize]byte
	if len(reason) > len(body)-2 {
		reason = reason[:len(body)-2]
	}
	p := body[:2+len(reason)]
	ws.PutCloseFrameBody(p, code, reason)
	return c.writeControl(ws.OpClose, p)
}

// Close sends a close frame with status 1000 (SPEC 7.5) unless the
// connection already failed, waits briefly for the server's answer, then
// releases everything. It is safe to call more than once.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		if c.Err() == nil {
			if err := c.writeClose(ws.StatusNormalClosure, ""); err == nil {
				// Read (and drop) until the server's close or EOF.
				c.rmu.Lock()
				_ = c.tr.SetReadDeadline(time.Now().Add(closeWait))
				for c.Err() == nil {
					if _, err := c.readMessage(); err != nil {
						break
					}
				}
				c.rmu.Unlock()
			}
		}
		c.fail(ErrClosed)
		c.tr.Shutdown()
		<-c.done
		// Nothing reads or writes any more: release the socket and buffer.
		c.rmu.Lock()
		c.wmu.Lock()
		_ = c.tr.Close()
		if c.rbuf != nil {
			c.alloc.Free(c.rbuf)
			c.rbuf = nil
		}
		c.wmu.Unlock()
		c.rmu.Unlock()
	})
	return nil
}

// Done is closed once the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.dead }

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true // the common case, without errors.As's allocation
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
