// Package conn is one client WebSocket connection for PlugRL, on gobwas/ws.
//
// It does what SPEC 1 and 7 ask of the transport and what a control loop
// needs from it: binary messages with no size cap and no compression,
// fragmented messages and control frames in between, pings answered by a
// background reader even while the caller is busy between calls, close
// frames surfaced as a code and a reason, and text frames treated as fatal.
//
// Memory: outgoing messages are wire.Message segment lists; each segment is
// copied once into a reusable write buffer and masked there while it is hot
// in cache, so no intermediate buffer ever holds a whole message. Incoming
// messages land in one reusable buffer whose memory comes from an Allocator,
// which lets a C caller receive straight into C memory. The buffer grows only
// with bytes actually received, so a lying length header cannot make the
// connection allocate.
package conn

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
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
	// on the connection's reader goroutine and must not panic.
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
	// WriteBufferSize is the size of the masking buffer; zero means 128 KiB.
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
	defaultWBuf    = 128 << 10
	closeWait      = 2 * time.Second
	readBufferSize = 64 << 10
)

// Conn is one WebSocket connection. Receive and Release belong to one
// goroutine at a time; WriteMessage may be called concurrently with them.
type Conn struct {
	nc    net.Conn
	br    *bufio.Reader
	alloc Allocator
	max   int64

	// Write side, serialised by wmu.
	wmu      sync.Mutex
	wbuf     []byte
	rng      *rand.ChaCha8
	wtimeout time.Duration
	hdr      [ws.MaxHeaderSize]byte
	sentCls  bool

	// Read side: the reader goroutine owns rbuf while free is empty.
	rbuf  []byte
	rhdr  [ws.MaxHeaderSize]byte
	ctrl  [ws.MaxControlFramePayloadSize]byte
	msgs  chan []byte   // a received message, handing rbuf to the caller
	free  chan struct{} // the caller hands rbuf back
	held  bool          // the caller holds rbuf (caller side)
	dead  chan struct{} // closed once the connection has failed or closed
	err   atomic.Pointer[error]
	done  chan struct{} // closed when the reader goroutine exits
	timer *time.Timer

	closeOnce sync.Once
}

// Dial opens a connection and starts its background reader.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

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
			return c, nil
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
	return newConn(nc, br, o), nil
}

func newConn(nc net.Conn, br *bufio.Reader, o Options) *Conn {
	var src io.Reader = nc
	if br != nil && br.Buffered() > 0 {
		// The server spoke before the handshake reply was consumed: those
		// bytes sit in the dialer's reader and come first.
		src = io.MultiReader(br, nc)
	}
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	wsize := o.WriteBufferSize
	if wsize <= 0 {
		wsize = defaultWBuf
	}
	wt := o.WriteTimeout
	if wt <= 0 {
		wt = 30 * time.Second
	}
	alloc := o.Alloc
	if alloc == nil {
		alloc = HeapAllocator{}
	}
	c := &Conn{
		nc:       nc,
		br:       bufio.NewReaderSize(src, readBufferSize),
		alloc:    alloc,
		max:      o.MaxMessageSize,
		wbuf:     make([]byte, 0, wsize),
		rng:      rand.NewChaCha8(seed),
		wtimeout: wt,
		msgs:     make(chan []byte, 1),
		free:     make(chan struct{}, 1),
		dead:     make(chan struct{}),
		done:     make(chan struct{}),
		timer:    time.NewTimer(time.Hour),
	}
	c.timer.Stop()
	c.free <- struct{}{}
	go c.readLoop()
	return c
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
	c.Release()
	var expired <-chan time.Time
	if timeout > 0 {
		c.timer.Reset(timeout)
		defer c.timer.Stop()
		expired = c.timer.C
	}
	select {
	case m := <-c.msgs:
		c.held = true
		return m, nil
	case <-c.dead:
		select { // a message that arrived before the failure comes first
		case m := <-c.msgs:
			c.held = true
			return m, nil
		default:
		}
		return nil, c.Err()
	case <-expired:
		return nil, fmt.Errorf("%w: no message within %v", ErrTimeout, timeout)
	}
}

// Release hands the last received message's buffer back to the reader.
func (c *Conn) Release() {
	if c.held {
		c.held = false
		c.free <- struct{}{}
	}
}

// readLoop reads frames until the connection fails: control frames are
// answered at once, data frames are assembled into rbuf.
func (c *Conn) readLoop() {
	defer close(c.done)
	var (
		n          int  // bytes of the message assembled so far
		fragmented bool // inside a fragmented message
		owned      bool // rbuf is ours
	)
	for {
		state := ws.StateClientSide
		if fragmented {
			state |= ws.StateFragmented
		}
		h, err := ws.ReadHeaderBuffer(c.br, c.rhdr[:])
		if err != nil {
			c.readFailed(err)
			return
		}
		if err := ws.CheckHeader(h, state); err != nil {
			c.protocolFail(ws.StatusProtocolError, fmt.Errorf("%w: %v", ErrProtocol, err))
			return
		}
		if h.OpCode.IsControl() {
			if !c.control(h) {
				return
			}
			continue
		}
		if h.OpCode == ws.OpText {
			c.protocolFail(ws.StatusUnsupportedData, ErrTextFrame)
			return
		}
		if !owned {
			select {
			case <-c.free:
			case <-c.dead:
				return
			}
			owned, n = true, 0
		}
		if c.max > 0 && int64(n)+h.Length > c.max {
			c.protocolFail(ws.StatusMessageTooBig, fmt.Errorf("%w: a message of more than %d bytes, the maximum is %d", ErrTooBig, int64(n)+h.Length, c.max))
			return
		}
		if n, err = c.readPayload(n, h.Length); err != nil {
			c.readFailed(err)
			return
		}
		fragmented = !h.Fin
		if h.Fin {
			owned = false
			c.msgs <- c.rbuf[:n:n]
		}
	}
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
		k, err := c.br.Read(c.rbuf[n : n+want])
		n += k
		length -= int64(k)
		if err != nil {
			if err == io.EOF && length > 0 {
				err = io.ErrUnexpectedEOF
			}
			if length > 0 {
				return n, err
			}
		}
	}
	return n, nil
}

// control handles a ping, pong or close; it reports whether to keep reading.
func (c *Conn) control(h ws.Header) bool {
	p := c.ctrl[:h.Length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		c.readFailed(err)
		return false
	}
	switch h.OpCode {
	case ws.OpPing:
		if err := c.writeControl(ws.OpPong, p); err != nil {
			c.fail(fmt.Errorf("%w: answering a ping: %v", ErrLost, err))
			_ = c.nc.Close()
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
		_ = c.nc.Close()
		return false
	}
	return true
}

func (c *Conn) readFailed(err error) {
	if c.Err() == nil {
		if isTimeout(err) {
			err = fmt.Errorf("%w: %v", ErrLost, err)
		} else if errors.Is(err, net.ErrClosed) {
			err = ErrClosed
		} else {
			err = fmt.Errorf("%w: %v", ErrLost, err)
		}
	}
	c.fail(err)
	_ = c.nc.Close()
}

// protocolFail closes with code after a violation by the server.
func (c *Conn) protocolFail(code ws.StatusCode, err error) {
	c.fail(err)
	_ = c.writeClose(code, "")
	_ = c.nc.Close()
}

// writer adapts the write buffer to io.Writer for ws.WriteHeaderBuffer.
type writer Conn

func (w *writer) Write(p []byte) (int, error) {
	w.wbuf = append(w.wbuf, p...)
	return len(p), nil
}

// WriteMessage sends m as one binary frame, masked as RFC 6455 requires
// with a fresh key. Each segment is copied once into the write buffer and
// masked there.
func (c *Conn) WriteMessage(m *wire.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.Err(); err != nil {
		return err
	}
	if c.sentCls {
		return ErrClosed
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.wtimeout))
	mask := c.newMask()
	c.wbuf = c.wbuf[:0]
	h := ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Mask: mask, Length: int64(m.Len())}
	if err := ws.WriteHeaderBuffer((*writer)(c), h, c.hdr[:]); err != nil {
		return err
	}
	pos := 0
	for i := 0; i < m.Segments(); i++ {
		seg := m.Segment(i)
		for len(seg) > 0 {
			if len(c.wbuf) == cap(c.wbuf) {
				if err := c.flush(); err != nil {
					return err
				}
			}
			k := cap(c.wbuf) - len(c.wbuf)
			if k > len(seg) {
				k = len(seg)
			}
			start := len(c.wbuf)
			c.wbuf = append(c.wbuf, seg[:k]...)
			ws.Cipher(c.wbuf[start:], mask, pos)
			pos += k
			seg = seg[k:]
		}
	}
	return c.flush()
}

func (c *Conn) flush() error {
	_, err := c.nc.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	if err != nil {
		err = fmt.Errorf("%w: writing: %v", ErrLost, err)
		c.fail(err)
		_ = c.nc.Close()
	}
	return err
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
	return c.writeControlLocked(op, payload)
}

func (c *Conn) writeControlLocked(op ws.OpCode, payload []byte) error {
	if c.sentCls {
		return ErrClosed
	}
	if op == ws.OpClose {
		c.sentCls = true
	}
	mask := c.newMask()
	c.wbuf = c.wbuf[:0]
	h := ws.Header{Fin: true, OpCode: op, Masked: true, Mask: mask, Length: int64(len(payload))}
	if err := ws.WriteHeaderBuffer((*writer)(c), h, c.hdr[:]); err != nil {
		return err
	}
	start := len(c.wbuf)
	c.wbuf = append(c.wbuf, payload...)
	ws.Cipher(c.wbuf[start:], mask, 0)
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.wtimeout))
	_, err := c.nc.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
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
				select { // the reader sees the server's close or EOF
				case <-c.dead:
				case <-time.After(closeWait):
				}
			}
		}
		c.fail(ErrClosed)
		_ = c.nc.Close()
		<-c.done
		// The reader has exited; the buffer is no longer shared.
		if c.rbuf != nil {
			c.alloc.Free(c.rbuf)
			c.rbuf = nil
		}
	})
	return nil
}

// Done is closed once the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.dead }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
