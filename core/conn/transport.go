package conn

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname
)

// transport is what a Conn reads and writes once the handshake is done: the
// TCP connection, or TLS over it. All of a Conn's reads happen under its
// read lock and all writes under its write lock; Read and Write run on the
// calling goroutine's thread.
type transport interface {
	// Read blocks until some bytes arrive, the read deadline passes (an
	// error whose Timeout() is true) or the connection ends.
	Read(p []byte) (int, error)
	// TryRead reads what has already arrived without waiting for more:
	// (0, nil) when nothing has.
	TryRead(p []byte) (int, error)
	// Write writes all of p or fails, by the deadline BeginWrite set.
	Write(p []byte) (int, error)
	// TryWrite writes what the socket takes of p without waiting (maybe
	// nothing).
	TryWrite(p []byte) (int, error)
	// BeginWrite starts a message: its Writes must be done within timeout.
	BeginWrite(timeout time.Duration)
	// Holds reports whether a Conn may keep a message in its write
	// buffer, to go out with the next one (see WriteHeldMessage): true
	// where TryWrite never waits and a partial TryWrite leaves the stream
	// usable, so that the held bytes can be sent later from any
	// goroutine. TLS cannot: a write that stops at its deadline ends it.
	Holds() bool
	// NeverWaits reports whether TryRead and TryWrite never wait at all
	// (a descriptor's MSG_DONTWAIT): then a look at the connection costs
	// the process's other connections nothing, and it shares their
	// poller (see startPolling).
	NeverWaits() bool
	SetReadDeadline(t time.Time) error
	// Shutdown ends the connection in both directions (the peer sees the
	// end) and wakes a blocked Read or Write; Close then releases it.
	Shutdown()
	Close() error
}

// dialConn is the net.Conn the handshakes (WebSocket, and TLS for wss://)
// run on, with Go's own deadlines and cancellation. takeover then moves the
// connection to an fdConn where the platform has one (Linux): a descriptor
// in blocking mode, read and written with system calls on the calling
// thread. A C thread blocked in Receive is then woken by the kernel itself
// when the action arrives, with no Go scheduler hand-off between threads on
// the way (the hand-off cost more than the rest of a small exchange).
type dialConn struct {
	net.Conn         // the *net.TCPConn; unused after takeover
	fd       *fdConn // nil before takeover, or where there is none

	// Before takeover, reads stop with errHandshakeTooBig after limit
	// bytes: gobwas/ws reads the handshake response's lines without a
	// bound of its own.
	limit, read int
	overLimit   bool
}

// errHandshakeTooBig ends a handshake whose response exceeds the cap.
var errHandshakeTooBig = errors.New("handshake response larger than the cap")

func (d *dialConn) Read(p []byte) (int, error) {
	if d.fd != nil {
		return d.fd.Read(p)
	}
	if d.limit > 0 {
		if d.read >= d.limit {
			d.overLimit = true
			return 0, errHandshakeTooBig
		}
		if len(p) > d.limit-d.read {
			p = p[:d.limit-d.read]
		}
		n, err := d.Conn.Read(p)
		d.read += n
		return n, err
	}
	return d.Conn.Read(p)
}

func (d *dialConn) TryWrite(p []byte) (int, error) {
	if d.fd != nil {
		return d.fd.tryWrite(p)
	}
	// No non-blocking write in net.Conn: a deadline just ahead is the
	// nearest thing.
	_ = d.Conn.SetWriteDeadline(time.Now().Add(tryReadWait))
	n, err := d.Conn.Write(p)
	if err != nil && isTimeout(err) {
		err = nil
	}
	return n, err
}

func (d *dialConn) Write(p []byte) (int, error) {
	if d.fd != nil {
		return d.fd.Write(p)
	}
	return d.Conn.Write(p)
}

// WriteMore is Write for bytes of a message that more of its bytes follow
// (see moreWriter).
func (d *dialConn) WriteMore(p []byte) (int, error) {
	if d.fd != nil {
		return d.fd.writeMore(p)
	}
	return d.Conn.Write(p)
}

// moreWriter is a transport that is told which of a message's Writes are
// not its last (dialConn: see fdConn.writeMore); others get Write.
type moreWriter interface{ WriteMore(p []byte) (int, error) }

func (d *dialConn) SetDeadline(t time.Time) error {
	if d.fd != nil {
		d.fd.rdl.set(t)
		d.fd.setWriteDeadline(t)
		return nil
	}
	return d.Conn.SetDeadline(t)
}

func (d *dialConn) SetReadDeadline(t time.Time) error {
	if d.fd != nil {
		d.fd.rdl.set(t)
		return nil
	}
	return d.Conn.SetReadDeadline(t)
}

func (d *dialConn) SetWriteDeadline(t time.Time) error {
	if d.fd != nil {
		d.fd.setWriteDeadline(t)
		return nil
	}
	return d.Conn.SetWriteDeadline(t)
}

func (d *dialConn) BeginWrite(timeout time.Duration) {
	if d.fd != nil {
		d.fd.beginWrite(timeout)
		return
	}
	_ = d.Conn.SetWriteDeadline(time.Now().Add(timeout))
}

func (d *dialConn) Holds() bool { return d.fd != nil }

func (d *dialConn) NeverWaits() bool { return d.fd != nil }

func (d *dialConn) TryRead(p []byte) (int, error) {
	n, err := d.tryRead(p)
	if err == os.ErrDeadlineExceeded || err != nil && isTimeout(err) {
		err = nil // nothing there yet
	}
	return n, err
}

// tryRead reads without waiting; nothing to read is a timeout error.
func (d *dialConn) tryRead(p []byte) (int, error) {
	if d.fd != nil {
		return d.fd.tryRead(p)
	}
	// Go's net.Conn has no non-blocking read: a deadline just ahead is
	// the nearest thing (one already past would not read at all).
	_ = d.Conn.SetReadDeadline(time.Now().Add(tryReadWait))
	n, err := d.Conn.Read(p)
	_ = d.Conn.SetReadDeadline(time.Time{})
	return n, err
}

// tryReadWait bounds TryRead where there is no non-blocking read.
const tryReadWait = 200 * time.Microsecond

func (d *dialConn) Shutdown() {
	if d.fd != nil {
		d.fd.shutdown()
		return
	}
	_ = d.Conn.Close()
}

func (d *dialConn) Close() error {
	if d.fd != nil {
		return d.fd.close()
	}
	return d.Conn.Close()
}

// tlsTransport is TLS over a dialConn.
type tlsTransport struct {
	*tls.Conn
	d *dialConn
	// looking is set during a poller's look (setLooking), which holds
	// both of the Conn's locks: no write then waits.
	looking bool
}

// looker is a transport whose writes can be told not to wait during a
// poller's look (tlsTransport: crypto/tls writes on its own from within a
// read).
type looker interface{ setLooking(on bool) }

// silenceTeller is a transport that can say how long its peer has owed
// answers (fdConn.peerSilence); the poller weighs it against the
// dead-peer timeout.
type silenceTeller interface {
	peerSilence() (since time.Duration, owed, ok bool)
}

func (d *dialConn) peerSilence() (time.Duration, bool, bool) {
	if d.fd == nil {
		return 0, false, false
	}
	return d.fd.peerSilence()
}

func (t *tlsTransport) peerSilence() (time.Duration, bool, bool) { return t.d.peerSilence() }

// setLooking begins (on) or ends a poller's look, during which the
// Conn's read and write locks are held, so that nothing else reads or
// writes: crypto/tls's own writes within TryRead (a key update's answer,
// an alert) and TryWrite then send what the socket takes at once, and a
// write the socket does not take whole fails instead of waiting (a TLS
// record cannot be left half written). TryWrite asks the socket first,
// so a full socket leaves its bytes queued rather than failing. The
// message's write deadline is kept aside and restored at the end.
func (t *tlsTransport) setLooking(on bool) {
	if t.d.fd == nil {
		return
	}
	t.looking = on
	t.d.fd.noWait(on)
}

// Read reads records, waiting by the read deadline. A write crypto/tls
// makes on its own meanwhile (an alert, the answer to a KeyUpdate) waits
// no longer than the Receive's deadline (boundWrites; see fdConn.reads).
func (t *tlsTransport) Read(p []byte) (int, error) {
	if t.d.fd == nil {
		return t.Conn.Read(p)
	}
	t.d.fd.reads.Add(1)
	defer t.d.fd.reads.Add(-1)
	return t.Conn.Read(p)
}

// Write is the Conn's own write of a message's bytes, by the deadline
// BeginWrite set (see fdConn.writes).
func (t *tlsTransport) Write(p []byte) (int, error) {
	if t.d.fd == nil {
		return t.Conn.Write(p)
	}
	t.d.fd.writes.Add(1)
	defer t.d.fd.writes.Add(-1)
	return t.Conn.Write(p)
}

// boundWrites sets the deadline of the Receive under way (zero: none),
// past which a write crypto/tls makes within its reads does not wait.
func (t *tlsTransport) boundWrites(d time.Time) {
	if t.d.fd != nil {
		t.d.fd.rbound.set(d)
	}
}

// writeBounder is a transport whose reads may write (tlsTransport).
type writeBounder interface{ boundWrites(d time.Time) }

// TryRead reads records that have already arrived: the descriptor reads
// without waiting meanwhile, and crypto/tls keeps a partial record for the
// next read (a timeout is not fatal to a tls.Conn's reads).
func (t *tlsTransport) TryRead(p []byte) (int, error) {
	var n int
	var err error
	if f := t.d.fd; f != nil {
		// A write crypto/tls makes within it (see Read) waits at most
		// tlsTryWriteWait, as TryWrite's: not until the send deadline
		// the last message left (a Poll before an infer waited 9.7 s on
		// a socket the server did not empty). Readers hold the Conn's
		// read lock, so no Receive's bound is in force meanwhile.
		bound := f.rbound.ns.Load()
		f.rbound.set(time.Now().Add(tlsTryWriteWait))
		f.reads.Add(1)
		f.nonblock = true
		n, err = t.Conn.Read(p)
		f.nonblock = false
		f.reads.Add(-1)
		f.rbound.ns.Store(bound)
	} else {
		_ = t.Conn.SetReadDeadline(time.Now().Add(tryReadWait))
		n, err = t.Conn.Read(p)
		_ = t.Conn.SetReadDeadline(time.Time{})
	}
	if err != nil && isTimeout(err) {
		err = nil
	}
	return n, err
}

// TryWrite writes p (a few control frames) if the socket has room for it,
// else nothing. A TLS record cannot be left half written, so a record the
// socket does not take fails the connection (crypto/tls refuses further
// writes after a timeout): where there is a descriptor, the socket is
// asked first (POLLOUT: its send queue is under its limit), and a full
// one leaves p to the caller's queue, for a later try, instead of failing
// a connection whose server is only slow to read. The write itself is
// bounded by tlsTryWriteWait, or, in a poller's look, does not wait at
// all.
func (t *tlsTransport) TryWrite(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if t.d.fd != nil && !t.d.fd.writable() {
		return 0, nil
	}
	if !t.looking {
		_ = t.Conn.SetWriteDeadline(time.Now().Add(tlsTryWriteWait))
	}
	return t.Write(p)
}

// tlsTryWriteWait bounds a tlsTransport's TryWrite outside a poller's look.
const tlsTryWriteWait = 20 * time.Millisecond

func (t *tlsTransport) BeginWrite(timeout time.Duration) {
	_ = t.Conn.SetWriteDeadline(time.Now().Add(timeout))
}

func (t *tlsTransport) Holds() bool { return false }

// NeverWaits: where there is a descriptor, a poller's look (setLooking)
// neither reads nor writes with waiting, so TLS connections share the
// process's poller. Without one (not Linux), a TLS read may write (a key
// update's answer) and wait for the socket: such a connection has a
// poller of its own.
func (t *tlsTransport) NeverWaits() bool { return t.d.fd != nil }

func (t *tlsTransport) Shutdown() { t.d.Shutdown() }

func (t *tlsTransport) Close() error {
	_ = t.Conn.Close() // close_notify, if the socket still takes it
	return t.d.Close()
}

// deadline is a deadline that one goroutine may set while another reads it
// (crypto/tls writes on its own during a read): monotonic nanoseconds since
// epoch, 0 for none.
type deadline struct{ ns atomic.Int64 }

var epoch = time.Now()

// epochNano is epoch as the runtime's monotonic clock read it (to within
// the few nanoseconds between the two reads here).
var epochNano = nanotime() - int64(time.Since(epoch))

// mono is the monotonic time since epoch: one clock read. It reads the
// runtime's clock itself, which time.Since reads too, through two more
// calls (about 45 instructions of the 90 a read costs; an exchange reads
// it five times).
func mono() time.Duration { return time.Duration(nanotime() - epochNano) }

// nanotime is the runtime's monotonic clock, the one time.Now and
// time.Since read: the runtime publishes it for linkname, as many
// packages use it so.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

func (d *deadline) set(t time.Time) {
	if t.IsZero() {
		d.ns.Store(0)
		return
	}
	ns := int64(t.Sub(epoch))
	if ns <= 0 {
		ns = 1 // long past, but set
	}
	d.ns.Store(ns)
}

func (d *deadline) get() (time.Time, bool) {
	ns := d.ns.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return epoch.Add(time.Duration(ns)), true
}
