package conn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/maskcopy"
	"github.com/plugrl/libplugrl/core/wire"
)

// WriteMessage sends m as one binary frame, masked as RFC 6455 requires
// with a fresh key. Each segment is masked during its one copy into the
// write buffer, which is written whenever it is full and at the end. A
// write that has to wait for the server to read waits at most SendTimeout;
// then the connection fails with ErrTimeout.
func (c *Conn) WriteMessage(m *wire.Message) error { return c.WriteMessageObserved(m, nil) }

// CopyObserver sees a message's bytes as WriteMessageObserved copies them:
// every byte of segment i, in order, in pieces of at most observedPiece
// bytes, each just after it was copied into the write buffer. The piece is
// then still in the cache, so an observer that reads it (the ledger
// digests observation rows) does not pay for a second pass over the
// caller's memory: a digest read from memory ran at a third of the speed
// of one read from the cache. It must not keep b. A small message (up to
// smallMessage bytes) is not shown at all: it is copied in one go, and
// stays in the cache for whoever reads it after the send.
type CopyObserver interface {
	Copied(segment int, b []byte)
}

// A MaskCopier is a CopyObserver that makes the masked copies of long
// segments itself, so that it sees their bytes in the very pass that
// copies them (the ledger digests observation rows that way, at the
// speed of the copy). Short segments still go to Copied.
type MaskCopier interface {
	CopyObserver
	// MaskCopy must do maskcopy.Copy(dst, src, key): src is the next
	// bytes of segment, dst as long, key aligned to src[0].
	MaskCopy(segment int, dst, src []byte, key uint32)
}

// observedPiece bounds the pieces a CopyObserver sees: small enough to stay
// in the second-level cache between the observer's read and the copy's.
const observedPiece = 32 << 10

// WriteMessageObserved is WriteMessage, showing each byte to ob (if not
// nil) as it is copied.
func (c *Conn) WriteMessageObserved(m *wire.Message, ob CopyObserver) error {
	return c.writeMessage(m, ob, false)
}

// WriteHeldMessage is WriteMessageObserved for a message the caller will
// follow at once with another (a feedback, then the next infer): its
// frame stays in the connection's write buffer, and the next message's
// write sends both with one system call, in one TCP segment, so that the
// server wakes once for the two. If no write comes within one to two
// ticks of heldDelay (10-20 ms), a timer sends it; Close, Abort and
// Interrupt send it first, if the socket takes it without waiting. Until
// it leaves, it is lost if the connection fails or the process exits
// without closing. A message over heldMax, or on a
// transport that cannot hold (TLS), is sent as WriteMessageObserved sends
// it: most of a long one would leave anyway.
func (c *Conn) WriteHeldMessage(m *wire.Message, ob CopyObserver) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	defer c.endBrokenFrame()
	c.heldPath = true
	err := c.writeLocked(m, ob, m.Len() <= heldMax && c.canHold)
	c.heldPath = false
	return err
}

// SendHeld sends a held message now, if no write is under way and the
// socket takes it without waiting, and reports whether nothing is held any
// more, and, if something is, whether only the write lock stood in the
// way (another goroutine held it: a writer, or the poller's or the
// timer's brief look). Any goroutine: for an interrupt between calls,
// after which the program may exit at once (plugrl_interrupt from a
// SIGINT handler).
func (c *Conn) SendHeld() (done, busy bool) {
	if !c.wmu.TryLock() {
		return false, true
	}
	defer c.wmu.Unlock()
	if c.held == 0 {
		return true, false
	}
	if c.Err() != nil || c.released {
		return false, false
	}
	return c.tryWriteHeld(), false
}

const (
	// heldMax bounds the messages WriteHeldMessage holds back.
	heldMax = 64 << 10
	// heldDelay is the tick of the timer that sends a held message no
	// write has taken along: it goes after one to two ticks (see
	// heldTick). While any caller keeps holding, the timer fires once a
	// tick, for every connection at once (heldsweep.go): a wake-up cheap
	// enough at 100 a second.
	heldDelay = 10 * time.Millisecond
)

func (c *Conn) writeMessage(m *wire.Message, ob CopyObserver, hold bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	defer c.endBrokenFrame()
	return c.writeLocked(m, ob, hold)
}

// endBrokenFrame ends the connection when a message's write left without
// ending its frame and without failing the connection: a panic in the
// middle of the copy, as a fault reading the caller's memory is under
// debug.SetPanicOnFault (the C API's), whose recover sees no error. Part
// of the frame may be on the wire already (all but the last write
// buffer's worth of a long message): the next message would be read as
// the rest of its payload, and its caller would wait for an answer that
// never comes. Deferred with wmu held.
func (c *Conn) endBrokenFrame() {
	if c.inFrame && c.Err() == nil {
		c.fail(fmt.Errorf("%w: a message's write broke off in the middle of its frame", ErrLost))
		c.shutdown()
	}
}

// writeLocked is writeMessage with wmu held.
func (c *Conn) writeLocked(m *wire.Message, ob CopyObserver, hold bool) error {
	if err := c.Err(); err != nil {
		return err
	}
	if c.sentCls {
		return ErrClosed
	}
	c.inFrame = true // until end: an error on the way may leave part of a frame on the wire
	c.tr.BeginWrite(c.wtimeout)
	if c.pongOwed.Load() {
		// A pong the reader could not send (another held wmu) goes
		// first too: read.go promises it before the next message.
		c.queueOwedPong()
	}
	if c.ctl.n > 0 { // control frames that could not go out earlier go first
		if err := c.flushHeld(); err != nil { // after a held message, though
			return err
		}
		if err := c.flush(c.ctl.bytes()); err != nil {
			return err
		}
		c.ctl.reset()
		c.ctlQueued.Store(false)
	}
	mask := c.newMask()
	total := m.Len()
	h := ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Mask: mask, Length: int64(total)}
	frame := ws.HeaderSize(h) + total
	if need := c.held + frame; need > len(c.wbuf) && len(c.wbuf) < c.wmax {
		// Grow once to what the workload needs (up to wmax); steady
		// state allocates nothing.
		b := make([]byte, min(need, c.wmax))
		copy(b, c.wbuf[:c.held])
		c.wbuf = b
	}
	if hold && c.held+frame > len(c.wbuf) || c.held+ws.MaxHeaderSize > len(c.wbuf) {
		// No room to hold it, or for its header after what is held (a
		// small write buffer): send what is held first.
		if err := c.flushHeld(); err != nil {
			return err
		}
		hold = hold && frame <= len(c.wbuf)
	}
	// The message follows what is held: the two leave together.
	w := c.held + putHeader(c.wbuf[c.held:], h)
	if total <= smallMessage && w+total <= len(c.wbuf) {
		// A small message: one plain copy, then the mask in place over
		// it, both in the first-level cache (not shown to ob: see
		// CopyObserver).
		n := m.CopyTo(c.wbuf[w:])
		maskCopy(c.wbuf[w:w+n], c.wbuf[w:w+n], mask, 0)
		return c.end(w+n, hold)
	}
	pos := 0
	// Short segments (the msgpack structure, ids, flags) are copied as
	// they are and masked afterwards in one pass over the run they form,
	// which costs less than a masked copy per segment; long ones (array
	// data) are masked during their one copy.
	run, runPos := -1, 0 // wbuf[run:w] is copied but not yet masked
	mc, _ := ob.(MaskCopier)
	for i := 0; i < m.Segments(); i++ {
		seg := m.Segment(i)
		for len(seg) > 0 {
			if w == len(c.wbuf) {
				if run >= 0 {
					maskCopy(c.wbuf[run:w], c.wbuf[run:w], mask, runPos)
					run = -1
				}
				if err := c.flushBuf(w, true); err != nil {
					return err
				}
				w = 0
			}
			k := min(len(c.wbuf)-w, len(seg))
			if ob != nil && mc == nil {
				k = min(k, observedPiece)
			}
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
				if mc != nil {
					mc.MaskCopy(i, c.wbuf[w:w+k], seg[:k], maskcopy.Key(mask, pos))
					w, pos, seg = w+k, pos+k, seg[k:]
					continue
				}
				maskCopy(c.wbuf[w:], seg[:k], mask, pos)
			}
			if ob != nil {
				ob.Copied(i, seg[:k]) // just read by the copy: in the cache
			}
			w += k
			pos += k
			seg = seg[k:]
		}
	}
	if run >= 0 {
		maskCopy(c.wbuf[run:w], c.wbuf[run:w], mask, runPos)
	}
	return c.end(w, hold) // held: all of it is in wbuf, there was room (see above)
}

// end ends a message write whose bytes are wbuf[:n]: they are held, or
// sent. wmu must be held.
func (c *Conn) end(n int, hold bool) error {
	if hold {
		c.hold(n)
		c.inFrame = false // whole in wbuf: it goes before any control frame
		return nil
	}
	err := c.flushBuf(n, false)
	if err == nil {
		c.inFrame = false
		if c.heldPath {
			c.counters.HeldPathSent.Add(1) // one WriteHeldMessage did not hold
		}
	}
	return c.finish(err)
}

// flushBuf writes wbuf[:n], which starts with what is held, and so ends the
// hold; more says more of the message follows in a later write (see
// moreWriter). wmu must be held.
func (c *Conn) flushBuf(n int, more bool) error {
	held := c.held
	c.held = 0
	sent, err := c.flushCounted(c.wbuf[:n], more)
	if err != nil && sent < held {
		c.heldLost.Store(true)
	}
	c.countHeldSent(sent)
	c.heldEnds = c.heldEnds[:0] // the rest never leaves
	return err
}

// flushHeld writes the held message, waiting as BeginWrite allowed. wmu
// must be held.
func (c *Conn) flushHeld() error {
	if c.held == 0 {
		return nil
	}
	return c.flushBuf(c.held, true) // something follows: why it is sent now
}

// hold keeps wbuf[:n] back until the next write, or until the sweeper
// finds it held at two ticks in a row (see heldTick). wmu must be held.
func (c *Conn) hold(n int) {
	c.held = n
	c.heldEnds = append(c.heldEnds, n)
	c.holds++
	if c.heldArmed {
		return
	}
	c.heldArmed = true
	sweeper.add(c)
}

// heldTick is the sweeper's look at c, once a heldDelay while c.heldArmed
// is set; it reports whether to look again at the next tick. A message
// held since before the last look is overdue: it is sent, if the socket
// takes it without waiting. One held since then belongs to a caller still
// between its feedback and its next infer, whose write will take it
// along: the tick only looks again later, and a caller in a tight loop
// never finds the sweeper in its way (it holds wmu for a few loads, and
// never writes). A writer holding wmu sends what is held with its own
// message.
func (c *Conn) heldTick() bool {
	if sweeperPaused.Load() {
		return c.Err() == nil
	}
	if !c.wmu.TryLock() {
		return c.Err() == nil
	}
	defer c.wmu.Unlock()
	switch {
	case c.held == 0 || c.Err() != nil || c.released:
		c.heldArmed = false // the next hold arms it
	case c.holds != c.heldSeen:
		c.heldSeen = c.holds
	default:
		c.heldArmed = !c.tryWriteHeld() && c.Err() == nil // the socket took part of it
	}
	return c.heldArmed
}

// countHeldSent counts, in Counters.HeldPathSent, the held messages whose
// last byte is among the first sent bytes of wbuf, and forgets them. wmu
// must be held.
func (c *Conn) countHeldSent(sent int) {
	k := 0
	for k < len(c.heldEnds) && c.heldEnds[k] <= sent {
		k++
	}
	if k > 0 {
		c.counters.HeldPathSent.Add(uint64(k))
		c.heldEnds = append(c.heldEnds[:0], c.heldEnds[k:]...)
	}
}

// tryWriteHeld writes what the socket takes of the held message without
// waiting, and reports whether all of it went: never after a write met
// the server's reset that a reader is left to see (writeReset). wmu must
// be held.
func (c *Conn) tryWriteHeld() bool {
	if c.held == 0 {
		return true
	}
	if c.writeReset {
		return false
	}
	n, err := c.tr.TryWrite(c.wbuf[:c.held])
	c.counters.Sent.Add(uint64(n))
	if err != nil {
		c.heldLost.Store(true)
		c.heldEnds = c.heldEnds[:0]
		c.writeFailed("writing a held message", err, true)
		return false
	}
	c.held = copy(c.wbuf, c.wbuf[n:c.held])
	c.countHeldSent(n)
	for i := range c.heldEnds { // what is left moved to the front
		c.heldEnds[i] -= n
	}
	return c.held == 0
}

// finish ends a message write: a pong owed meanwhile goes out if that
// needs no waiting. wmu must be held.
func (c *Conn) finish(err error) error {
	if err == nil && c.pongOwed.Load() {
		c.flushControlLocked()
	}
	return err
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

// flush writes p, waiting as BeginWrite allowed; a failure fails the
// connection. wmu must be held.
func (c *Conn) flush(p []byte) error {
	_, err := c.flushCounted(p, true) // the message follows
	return err
}

// write is the transport's Write, or its WriteMore when more of the
// message follows and it has one: a message's last write (every SMALL
// exchange's only one) asks nothing of the transport's type.
func (c *Conn) write(p []byte, more bool) (int, error) {
	if more {
		if mw, ok := c.tr.(moreWriter); ok {
			return mw.WriteMore(p)
		}
	}
	return c.tr.Write(p)
}

// flushCounted is flush, which also says how many bytes of p went; more
// says more of the message follows in a later write (see moreWriter).
func (c *Conn) flushCounted(p []byte, more bool) (int, error) {
	n, err := c.write(p, more)
	c.counters.Sent.Add(uint64(n))
	if err != nil {
		if e := c.Err(); e != nil {
			return n, e // interrupted, or failed by the reader meanwhile
		}
		if !isTimeout(err) {
			return n, c.writeFailed("writing", err, false)
		}
		err = c.fail(fmt.Errorf("%w: sending a message took longer than the send timeout (%v): the server is not reading", ErrTimeout, c.wtimeout))
		c.shutdown()
		return n, err
	}
	return n, nil
}

// writeFailed fails the connection for err, a transport error met while
// writing what, and returns the connection's error. A server that closes
// (SPEC 7.1's stop, a resync) and then resets or ends the connection
// makes a write after its close frame fail (ECONNRESET, EPIPE); the close
// frame came first and is in the socket, which returns it ahead of the
// error, and it is the end to report: taken for a lost connection, a
// stop was reconnected from, where SPEC 7.1 says to exit. So what has
// arrived is handled first (drain: without waiting), when no reader holds
// the read side. A close found there fails the connection first; its echo
// is skipped, as wmu is held. A reader's own send between two of its reads
// (its pong, over wss:// behind a ping's record with the stop's record
// still in crypto/tls's hands) leaves a reset to the reader instead: its
// next read gives the bytes that came first, then the error, and it may
// be inside a message, where drain would take payload for frames. So is a
// reset met by a write nobody waits on (nobodyWaits: a control frame, a
// held message's rest, sent by the poller or the sweeper) while a reader
// holds the read side: it may have taken a ping and not yet the stop
// behind it; nor can drain run then. wmu must be held.
func (c *Conn) writeFailed(what string, err error, nobodyWaits bool) error {
	reset := c.Err() == nil && peerReset(err)
	if reset && c.readerFlushes {
		c.writeReset = true
		return c.lostError(what, err)
	}
	if c.rmu.TryLock() {
		if c.Err() == nil {
			c.drain(true)
		}
		c.rmu.Unlock()
	} else if reset && nobodyWaits {
		c.writeReset = true
		return c.lostError(what, err)
	}
	err = c.fail(c.lostError(what, err))
	c.shutdown()
	return err
}

// SentCloseCode is the code of the close frame this side sent whole (1000
// from Close and Abort; 1002, 1003 or 1009 after a server's violation; or
// the server's code echoed), or 0 if none left: one still queued when the
// connection ended did not.
func (c *Conn) SentCloseCode() int { return int(c.sentCode.Load()) }

// PeerClosedFirst reports whether the connection ended by the peer's close
// frame, read before this side had sent a close frame of its own: the
// peer's close, which this side only answered (with SentCloseCode). False
// when this side's close went first and the peer's was its answer.
func (c *Conn) PeerClosedFirst() bool { return c.peerFirst.Load() }

// HeldLost reports whether a message given to WriteHeldMessage did not
// leave whole: its write failed before its last byte, or the connection
// ended (Close, Abort, or a failure nothing wrote after) while it was
// held. Only the last held message can be: the next write sends it first.
// Ask once the connection is over.
func (c *Conn) HeldLost() bool { return c.heldLost.Load() }

func (c *Conn) newMask() (m [4]byte) {
	v := c.rng.Uint64()
	m[0], m[1], m[2], m[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return m
}

// pending holds control frames, or the unsent rest of them, that could not
// be written without waiting: room for a pong and a close frame.
type pending struct {
	buf  [2 * (ws.MaxHeaderSize + ws.MaxControlFramePayloadSize)]byte
	r, n int // buf[r:n] is unsent
}

func (p *pending) bytes() []byte { return p.buf[p.r:p.n] }
func (p *pending) reset()        { p.r, p.n = 0, 0 }

// room makes room for size more bytes at the end, if it can.
func (p *pending) room(size int) bool {
	if p.r == p.n {
		p.reset()
	}
	if p.n+size > len(p.buf) && p.r > 0 {
		p.n = copy(p.buf[:], p.buf[p.r:p.n])
		p.r = 0
	}
	return p.n+size <= len(p.buf)
}

// queueControl masks a control frame into c.ctl; false if there is no
// room. wmu must be held.
func (c *Conn) queueControl(op ws.OpCode, payload []byte) bool {
	if !c.ctl.room(ws.MaxHeaderSize + len(payload)) {
		return false
	}
	mask := c.newMask()
	n := putHeader(c.ctl.buf[c.ctl.n:], ws.Header{Fin: true, OpCode: op, Masked: true, Mask: mask, Length: int64(len(payload))})
	maskCopy(c.ctl.buf[c.ctl.n+n:], payload, mask, 0)
	c.ctl.n += n + len(payload)
	c.ctlQueued.Store(true)
	return true
}

// tryWriteControl writes what it can of c.ctl without waiting, and reports
// whether all of it went. wmu must be held.
func (c *Conn) tryWriteControl() bool {
	if !c.tryWriteHeld() {
		return false // a control frame must not cut into a held message
	}
	n, err := c.tr.TryWrite(c.ctl.bytes())
	c.ctl.r += n
	c.counters.Sent.Add(uint64(n))
	if err != nil {
		c.writeFailed("writing a control frame", err, true)
		return false
	}
	if c.ctl.r < c.ctl.n {
		return false
	}
	c.ctl.reset()
	c.ctlQueued.Store(false)
	return true
}

// flushControl writes the pong owed and any control frames queued, if the
// write lock is free and the socket takes them without waiting: a server
// that floods pings and reads nothing gets fewer pongs, and nobody waits.
func (c *Conn) flushControl() { c.tryFlushControl(false) }

// flushControlReading is flushControl for a reader that holds rmu, between
// two of its reads: a reset its send meets is left to its next read (see
// writeFailed).
func (c *Conn) flushControlReading() { c.tryFlushControl(true) }

func (c *Conn) tryFlushControl(reader bool) {
	if !c.ctlQueued.Load() && !c.pongOwed.Load() {
		return
	}
	if !c.wmu.TryLock() {
		return // the writer sends them after its message
	}
	c.flushControlLockedAs(reader)
	c.wmu.Unlock()
}

// flushControlLockedAs is flushControlLocked, by a reader holding rmu too
// if reader (see readerFlushes).
func (c *Conn) flushControlLockedAs(reader bool) {
	c.readerFlushes = reader
	c.flushControlLocked()
	c.readerFlushes = false
}

// peerReset reports whether a write's err says the server reset the
// connection: what it sent before is still to be read, and a read gives
// that, then the error, without waiting.
func peerReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// flushControlLocked is flushControl with wmu held.
func (c *Conn) flushControlLocked() {
	if c.Err() != nil || c.writeReset || c.sentCls || c.ctl.r == c.ctl.n && !c.pongOwed.Load() {
		return // nothing to send (a held message waits for the sweeper)
	}
	if !c.tryWriteHeld() {
		return
	}
	if c.ctl.r < c.ctl.n && !c.tryWriteControl() {
		return
	}
	if c.pongOwed.Load() && c.queueOwedPong() {
		c.tryWriteControl()
	}
}

// queueOwedPong moves the pong owed into c.ctl; false if there was none,
// or no room. wmu must be held.
func (c *Conn) queueOwedPong() bool {
	var p [ws.MaxControlFramePayloadSize]byte
	c.pmu.Lock()
	if !c.pongOwed.Load() || !c.ctl.room(ws.MaxHeaderSize+c.pongLen) {
		c.pmu.Unlock()
		return false
	}
	n := copy(p[:], c.pongData[:c.pongLen])
	c.pongOwed.Store(false)
	c.pmu.Unlock()
	return c.queueControl(ws.OpPong, p[:n])
}

// tryClose sends a close frame with code if that needs no waiting (used
// where the connection is failing anyway: a courtesy, not a handshake).
func (c *Conn) tryClose(code ws.StatusCode) (locked bool) {
	if !c.wmu.TryLock() {
		return false
	}
	defer c.wmu.Unlock()
	c.closeLocked(code)
	return true
}

// closeLocked is tryClose with wmu held.
func (c *Conn) closeLocked(code ws.StatusCode) {
	// released: the descriptor may be another's now; inFrame: a write
	// that failed partway left the wire inside its frame.
	if c.sentCls || c.released || c.inFrame {
		return
	}
	c.sentCls = true
	var body [2]byte
	ws.PutCloseFrameBody(body[:], code, "")
	if c.queueControl(ws.OpClose, body[:]) && c.tryWriteControl() {
		c.sentCode.Store(int32(code))
	}
}

// answerClose is tryClose for a holder of rmu answering what the server
// sent (its close, its violation). The idle poller's look holds wmu as
// well (lookerHoldsWmu), where tryClose's try for it would fail, and the
// server's close went unanswered (RFC 6455 5.5.1) whenever the look, not
// a Receive, found it: every close that came while the caller was away.
func (c *Conn) answerClose(code ws.StatusCode) {
	if c.lookerHoldsWmu {
		c.closeLocked(code)
		return
	}
	c.tryClose(code)
}

// interruptCloseWait bounds Interrupt's wait for a write under way (see
// tryCloseAfterWrite; a variable for tests).
var interruptCloseWait = 300 * time.Microsecond

// tryCloseAfterWrite is tryClose for Interrupt, which may land while the
// caller's message is being written: it waits up to interruptCloseWait,
// asleep, for that write to end, so that a message that goes out whole
// (a small one takes microseconds) is followed by the close frame instead
// of a connection that ends without one (the demo's Ctrl-C in training
// did so 1 time in 12-30). A write that takes longer (a peer that stops
// reading, a large message) is cut by the socket's shutdown, as before,
// and a write that ended partway leaves no room for a close frame.
func (c *Conn) tryCloseAfterWrite(code ws.StatusCode) {
	wait := interruptCloseWait
	// A try after each sleep, the last one too: a sleep that overran the
	// deadline (a loaded machine) still looks once more.
	for deadline := time.Now().Add(wait); !c.tryClose(code); {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(min(wait/6, 50*time.Microsecond))
	}
}
