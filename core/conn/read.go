package conn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// The process-wide yield of Receive (see there): lastYield is the mono
// time of the last one, receiving counts the Receives in progress (their
// threads hold or wait for Ps), and procs is GOMAXPROCS, refreshed at
// each yield.
var (
	lastYield atomic.Int64
	receiving atomic.Int32
	procs     atomic.Int32
)

func init() { procs.Store(int32(runtime.GOMAXPROCS(0))) }

// yieldGap is the time between two yields of the process when busy
// Receives are in progress and the runtime has procs Ps: yieldEvery per P
// in use.
func yieldGap(busy, procs int32) time.Duration {
	return yieldEvery / time.Duration(max(1, min(busy, procs)))
}

// yieldDue reports whether the Receive of c that starts at now, with busy
// Receives in progress (its own among them) and procs Ps, yields first,
// and notes the yield. The schedule that counts is a P's, and the runtime keeps about
// one yield every yieldEvery per P in use:
//
//   - While the Receives in progress are fewer than the Ps, each thread
//     keeps a P of its own from one exchange to the next, so each
//     connection yields every yieldEvery. A process-wide turn, landing on
//     whichever thread came next, left some Ps without a yield for 10 ms:
//     sysmon then retook them, and one retake keeps it waking every 20 us
//     instead of sleeping (8 handles on the server's core: about 3,600
//     sysmon wake-ups a second against 300-470 with a turn per
//     connection, at the same number of yields; docs/PERFORMANCE.md).
//   - Else the threads share the Ps, and the process yields once every
//     yieldGap, whatever the number of connections: a yield per
//     connection cost 64 connections a thread hand-off 8000 times a
//     second, and one per P whether used or not would cost a lone
//     connection on a 64-core host as much.
//
// It runs under c.rmu, which guards c.lastYield.
func (c *Conn) yieldDue(now time.Duration, busy, procs int32) bool {
	if busy < procs {
		if now-c.lastYield < yieldEvery {
			return false
		}
		c.lastYield = now
		lastYield.Store(int64(now))
		return true
	}
	last := time.Duration(lastYield.Load())
	if now-last < yieldGap(busy, procs) || !lastYield.CompareAndSwap(int64(last), int64(now)) {
		return false
	}
	c.lastYield = now
	return true
}

// Receive waits up to timeout (zero: forever) for the next message and
// returns it. The bytes are the connection's buffer: valid, and writable,
// until Release or the next Receive. A message the caller waits for must
// have been announced with ExpectMessage (the first, the metadata, is
// expected from the start): one that arrives unannounced fails the
// connection at the next look between calls.
func (c *Conn) Receive(timeout time.Duration) ([]byte, error) {
	return c.ReceiveFrom(mono(), timeout)
}

// ReceiveFrom is Receive for a caller that read the clock (Mono) as the
// wait began, now: the timeout and ReceiveStarted count from it.
func (c *Conn) ReceiveFrom(now, timeout time.Duration) ([]byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.Err(); err != nil {
		return nil, err
	}
	busy := receiving.Add(1)
	defer receiving.Add(-1)
	if c.yieldDue(now, busy, procs.Load()) {
		// Go's sysmon retakes the P of a goroutine that has run
		// forcePreemptNS (10 ms) without being rescheduled whenever it is
		// in a system call, and then wakes every 20 us to look again. A C
		// thread that calls in and out never is rescheduled, so yield now
		// and then: it costs a few microseconds; not yielding cost a
		// sysmon wake-up every few exchanges (yieldDue says how often).
		procs.Store(int32(runtime.GOMAXPROCS(0)))
		runtime.Gosched()
	}
	var deadline time.Time
	watched := timeout >= watchedTimeout
	switch {
	case watched:
		// The poller enforces it (see idleLook): the read blocks with no
		// socket timeout, which spares the kernel a timer on every wait.
		// Even: the poller's grace is marked by an odd deadline.
		c.recvDeadline.Store(int64(now+min(timeout, math.MaxInt64-1-now)) &^ 1) // a huge timeout saturates
	case timeout > 0:
		deadline = epoch.Add(now + timeout)
	}
	c.setReadDeadline(deadline)
	msg, err := c.readMessage()
	// Whoever takes the deadline first decides: this Receive (it ended in
	// time) or the poller (it ends the connection: a timeout, even if a
	// message arrived at the last moment).
	if watched && c.recvDeadline.Swap(0) == 0 {
		return nil, fmt.Errorf("%w: no message within %v; the connection was closed", ErrTimeout, timeout)
	}
	if err != nil {
		if errors.Is(err, errBoundaryTimeout) {
			return nil, fmt.Errorf("%w: no message within %v", ErrTimeout, timeout)
		}
		return nil, err
	}
	c.replyDue.Store(false)
	// The start of the wait, not its end: one clock read fewer, and the
	// safe direction for Poll's grace. A caller that reads the clock
	// after the Receive anyway moves it to the end (ReceiveEnded).
	c.lastRecv = now
	c.lastLook = now
	return msg, nil
}

// Release ends the caller's use of the last received message. A buffer of
// up to keepReceiveBuffer bytes is kept for the next Receive; a larger one
// is freed, so that one big message does not pin its memory.
func (c *Conn) Release() {
	// rbuf changes only on this goroutine (Receive), so a buffer small
	// enough to keep costs no lock: the common case, twice an exchange.
	if cap(c.rbuf) <= keepReceiveBuffer {
		return
	}
	c.rmu.Lock()
	if cap(c.rbuf) > keepReceiveBuffer {
		c.alloc.Free(c.rbuf)
		c.rbuf = nil
	}
	c.rmu.Unlock()
}

// ExpectMessage tells the connection that a data message is now due from
// the server: call it before sending a request the server answers. Until
// then, and again once a Receive has returned the message, a data frame
// that Poll or the poller finds fails the connection (see replyDue).
func (c *Conn) ExpectMessage() { c.replyDue.Store(true) }

// Poll handles, without waiting, what the server sent since the last
// Receive: pings are answered, and a close frame, a data message out of
// turn (see ExpectMessage) or a lost connection fails the connection, so
// that Err reports it. When the connection last read its socket less than
// pollGrace ago (the end of a Receive the caller marked with
// ReceiveEnded, else its start; or a Poll that read), it looks only at
// what it has already read, without a system call: a second reply sent in
// the same write as the first is caught, one that arrived since is not
// (it is seen only by the next look, or taken by the next Receive). So a
// caller that sends right after a Receive it marked with ReceiveEnded, or
// after a Poll that read, pays no system call for the look, however long
// the server took to answer.
//
// Over TLS every Poll reads (tlsBuffers): crypto/tls takes from the
// socket whatever has arrived but returns one record, and keeps the
// records after it (a close, or a second reply, sent with the message),
// where only a read finds them. A read that finds them costs no system
// call; one that finds nothing costs one. A look reads on past the
// control frames it handled (see drain): a close behind a ping is seen by
// the same look.
func (c *Conn) Poll() {
	// lastLook is Receive's and Poll's, which run on one goroutine.
	now := mono()
	read := c.tlsBuffers || now-c.lastLook >= pollGrace
	c.poll(read)
	if read {
		c.lastLook = now // the read came after now: the safe direction
	}
}

// ReceiveEnded tells the connection that its owner read the clock (Mono)
// at now, after the last Receive returned a message: Poll's grace then
// counts from now, the end of the wait, rather than from its start. A
// Receive that waited longer than pollGrace for a slow server would
// otherwise cost the caller's next look a system call that finds nothing.
// What arrives between the Receive's last read and now is seen by the
// look after the grace, as anything that arrives within it. It belongs to
// the goroutine that calls Receive; a now before the last look changes
// nothing. Over TLS it changes nothing that matters: every Poll reads
// there (see Poll).
func (c *Conn) ReceiveEnded(now time.Duration) {
	if now > c.lastLook {
		c.lastLook = now
	}
}

// PollNow is Poll with the system call made however recent the last
// Receive: for a caller about to close, to whom what the server sent
// meanwhile (its own close) matters more than a microsecond.
func (c *Conn) PollNow() { c.poll(true) }

func (c *Conn) poll(read bool) {
	c.rmu.Lock()
	if c.Err() == nil {
		if read {
			c.counters.PollReads.Add(1)
		}
		c.drain(read)
	}
	c.rmu.Unlock()
	c.flushControl()
}

// errBoundaryTimeout: the read deadline passed between messages; the
// connection is still usable.
var errBoundaryTimeout = errors.New("read deadline between messages")

// drain reads what has arrived without waiting (if read) and handles the
// control frames at the front of it; it stops at a data frame, which
// Receive reads if one is due (with any read error behind it: see
// replyAhead), and which fails the connection if not. rmu must be held.
func (c *Conn) drain(read bool) {
	if c.rr == c.rw {
		c.rr, c.rw = 0, 0
	} else if c.rw == len(c.rb) && c.rr > 0 {
		c.compact()
	}
	for reads := 0; ; reads++ {
		n := 0
		if read && c.rw < len(c.rb) {
			var err error
			n, err = c.tr.TryRead(c.rb[c.rw:])
			c.rw += n
			c.counters.Received.Add(uint64(n))
			if err != nil {
				// The bytes that came with the end first: over TLS 1.2
				// crypto/tls returns a close frame with io.EOF when the
				// close_notify came with it, and the frame (a stop, SPEC
				// 7.1) is the end to report, not a lost connection.
				c.drainFrames()
				if c.Err() == nil && !c.replyAhead() {
					c.readFailed(err)
				}
				return
			}
		}
		cutShort := c.drainFrames()
		// A read over TLS returns one record, and a server may write a
		// control frame's header and payload as two (gobwas/ws's
		// WriteFrame on a tls.Conn does): read on while the last read
		// brought bytes and a control frame is cut short, so that one
		// look sees a close whole (a stop or a resync before a
		// feedback is sent). Over TLS read on, too, while the last read
		// brought bytes and all of them were handled: crypto/tls took
		// from the socket whatever had arrived, and the records after
		// the one it returned (a close behind a keepalive ping) wait in
		// it, where only a read finds them; that read costs no system
		// call, and the one that finds nothing more costs one. Not past
		// a data frame: that and what follows it are Receive's.
		more := cutShort || c.tlsBuffers && c.rr == c.rw
		if !more || n == 0 || reads == maxDrainReads-1 || c.Err() != nil {
			return
		}
	}
}

// replyAhead reports whether the unparsed bytes begin with a due data
// frame, whole or in part. A read error behind it (the server sent its
// reply, maybe its stop, and reset the connection) is then Receive's to
// meet, after the reply: failing the connection at the error would lose
// the reply, and the stop behind it, that the server sent before it. The
// socket reports the end again to the read that follows (EOF after a
// reset; crypto/tls keeps a read error, EOF or reset), so nothing waits
// on it. (An alert crypto/tls raised itself fails only its writes: such
// a connection ends at its next write, and a reply cut short waits, as
// for a silent server, until Receive's timeout.) rmu must be held.
func (c *Conn) replyAhead() bool {
	return c.rr < c.rw && c.replyDue.Load() && !ws.OpCode(c.rb[c.rr]&0x0f).IsControl()
}

// maxDrainReads bounds the reads of one look (drain), so that a server
// that floods cannot keep it reading: a frame's header and payload, a
// record cut at the socket, and over TLS the records of a ping or two
// ahead of a close (two each where the server writes a frame's header and
// payload apart).
const maxDrainReads = 8

// drainFrames handles the control frames at the front of rb[rr:rw], as
// drain says, and reports whether it stopped at a control frame that has
// not all arrived. rmu must be held.
func (c *Conn) drainFrames() (cutShort bool) {
	for c.Err() == nil {
		if c.rr == c.rw {
			return false // nothing unparsed: a look's usual case
		}
		h, hl, ok, err := parseHeader(c.rb[c.rr:c.rw])
		if err != nil { // the server's violation (ErrProtocol), not the transport's
			c.protocolFail(ws.StatusProtocolError, err)
			return false
		}
		if !ok { // not all here yet
			return c.rr < c.rw && ws.OpCode(c.rb[c.rr]&0x0f).IsControl()
		}
		if !h.OpCode.IsControl() {
			switch {
			case c.replyDue.Load(): // Receive reads it
			case h.OpCode == ws.OpText: // a traceback (SPEC 7.4), as Receive reports it
				c.protocolFail(ws.StatusUnsupportedData, fmt.Errorf("%w (while no reply was due)", ErrTextFrame))
			default:
				c.protocolFail(ws.StatusProtocolError, fmt.Errorf("%w: the server sent a %d-byte data message when none was due "+
					"(a second reply to one request, or a message out of turn: SPEC 2, 4.2); taken as the next reply, "+
					"it would have answered the wrong request", ErrProtocol, h.Length))
			}
			return false
		}
		if err := ws.CheckHeader(h, ws.StateClientSide); err != nil {
			c.protocolFail(ws.StatusProtocolError, fmt.Errorf("%w: %v", ErrProtocol, err))
			return false
		}
		if int64(c.rw-c.rr-hl) < h.Length {
			return true // not all here yet
		}
		p := c.rb[c.rr+hl : c.rr+hl+int(h.Length)]
		c.rr += hl + int(h.Length)
		c.control(h, p)
	}
	return false
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
		// A pong owed goes out before the read, if that needs no
		// waiting: here rather than after each ping, so that the pings
		// one read brought share one pong (RFC 6455 5.5.3).
		c.flushControlReading()
		if c.ctlQueued.Load() && c.readerSendsControl() {
			if err := c.fillSliced(); err != nil && c.rw-c.rr < need {
				return err
			}
			continue
		}
		n, err := c.read(c.rb[c.rw:])
		c.rw += n
		c.counters.Received.Add(uint64(n))
		if err != nil && c.rw-c.rr < need {
			return err
		}
	}
	return nil
}

// setReadDeadline sets the deadline of the reads that follow (a Receive's,
// or Close's wait for the server's close), and with it a new last look
// (see read). rmu must be held.
func (c *Conn) setReadDeadline(t time.Time) {
	_ = c.tr.SetReadDeadline(t)
	if b, ok := c.tr.(writeBounder); ok {
		b.boundWrites(t) // crypto/tls's writes within the reads too
	}
	c.readDeadline = t
	c.lateUntil = time.Time{}
}

// read reads into p, waiting up to the Receive's socket deadline. Once
// that has passed it takes one last look: it reads only what has already
// arrived, without waiting, and for at most lateGrace. So a message that
// came while the caller's thread could not run (stopped in a debugger,
// SIGSTOP, starved) is returned rather than thrown away with the
// connection, and a message still on its way still times out. rmu must
// be held.
func (c *Conn) read(p []byte) (int, error) {
	if !c.lateUntil.IsZero() {
		return c.lateRead(p)
	}
	n, err := c.tr.Read(p)
	switch {
	case err == nil || !isTimeout(err):
		return n, err
	case n > 0:
		return n, nil // the next read looks
	}
	return c.lateRead(p)
}

// lateRead is read once the deadline has passed: the first call opens the
// last look's window, and each reads, without waiting, what has arrived
// until the window closes. rmu must be held.
func (c *Conn) lateRead(p []byte) (int, error) {
	if c.lateUntil.IsZero() {
		c.lateUntil = time.Now().Add(lateGrace)
	} else if time.Now().After(c.lateUntil) {
		return 0, os.ErrDeadlineExceeded
	}
	n, err := c.tr.TryRead(p)
	if n == 0 && err == nil {
		return 0, os.ErrDeadlineExceeded // nothing more has arrived
	}
	return n, err
}

// readerSendsControl reports whether only this connection's reader can
// send the control frames it queued while it waits: over TLS the poller
// leaves a connection being read alone (see idleLook).
func (c *Conn) readerSendsControl() bool {
	_, ok := c.tr.(looker)
	return ok
}

// ctlRetry is how often a reader with control frames queued (a pong the
// full socket did not take) tries them again while it waits.
const ctlRetry = 20 * time.Millisecond

// fillSliced is one read of fill's, while control frames are queued on a
// connection whose reader alone can send them: it waits at most ctlRetry
// (or to the Receive's own deadline, if sooner), then tries them again. A
// server that reads its socket empty and then waits for the pong before
// it answers would otherwise wait until the Receive's deadline.
func (c *Conn) fillSliced() error {
	var n int
	var err error
	if c.lateUntil.IsZero() {
		until := time.Now().Add(ctlRetry)
		if !c.readDeadline.IsZero() && c.readDeadline.Before(until) {
			until = c.readDeadline
		}
		_ = c.tr.SetReadDeadline(until)
		n, err = c.tr.Read(c.rb[c.rw:])
		_ = c.tr.SetReadDeadline(c.readDeadline)
		if err != nil && isTimeout(err) {
			switch {
			case n > 0, c.readDeadline.IsZero() || time.Now().Before(c.readDeadline):
				err = nil // bytes came, or only the slice ended
			default:
				n, err = c.lateRead(c.rb[c.rw:]) // the deadline passed: the last look
			}
		}
	} else {
		n, err = c.lateRead(c.rb[c.rw:])
	}
	c.rw += n
	c.counters.Received.Add(uint64(n))
	c.flushControlReading()
	return err
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
		if errors.Is(err, ErrProtocol) { // parseHeader's: the bytes break RFC 6455
			return nil, c.protocolFail(ws.StatusProtocolError, err)
		}
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
			// The pong goes out before the next read (see fill) or as the
			// message is returned, if that needs no waiting; otherwise
			// before the next message or from the poller.
			continue
		}
		c.rr += hl
		if h.OpCode == ws.OpText {
			return nil, c.protocolFail(ws.StatusUnsupportedData, ErrTextFrame)
		}
		// The cap is checked against the length the header claims before
		// a byte of it is read or allocated.
		if c.max > 0 && h.Length > c.max-int64(n) { // (a sum could overflow)
			return nil, c.protocolFail(ws.StatusMessageTooBig, fmt.Errorf("%w: the server sent a frame header announcing a message of %d bytes; the limit is %d (max_message_size, or the size the request's action can have)", ErrTooBig, int64(n)+h.Length, c.max))
		}
		if n, err = c.readPayload(n, h.Length); err != nil {
			if errors.Is(err, ErrNoMemory) {
				return nil, c.protocolFail(ws.StatusMessageTooBig, err)
			}
			return nil, c.readError(err, false)
		}
		fragmented = !h.Fin
		if h.Fin {
			c.flushControlReading() // pings read with the message
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
		err = c.fail(fmt.Errorf("%w in the middle of a message: %v", ErrTimeout, err))
		c.shutdown()
		return err
	}
	c.readFailed(err)
	return c.Err()
}

// readPayload appends length bytes to rbuf[:n], growing it only as bytes
// actually arrive (at most doubling, from minReadChunk), so the memory a
// message takes follows the bytes received, not its header's claim.
func (c *Conn) readPayload(n int, length int64) (int, error) {
	laterFrame := n > 0 // a continuation of a fragmented message
	for length > 0 {
		if n == len(c.rbuf) {
			size := max(2*len(c.rbuf), minReadChunk) // len(c.rbuf) == n: at most doubling what has arrived
			if end := int64(n) + length; int64(size) > end {
				// More than this frame needs. A message's first frame
				// gets what it needs; a later one (a fragmented message)
				// keeps the doubling, within the message cap, so that a
				// message sent in one-byte fragments is not copied once
				// per fragment (256 KiB took 2.9 s of CPU, 512 KiB 57 s).
				switch {
				case !laterFrame:
					size = int(end)
				case c.max > 0 && int64(size) > c.max:
					size = int(max(end, c.max))
				}
			}
			nb := c.alloc.Grow(c.rbuf, n, size)
			if len(nb) < size {
				return n, fmt.Errorf("%w: could not allocate a %d-byte receive buffer for the server's message", ErrNoMemory, size)
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
			c.flushControlReading() // as fill does
			k, err = c.read(c.rbuf[n : n+want])
			c.counters.Received.Add(uint64(k))
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
// whether the connection goes on. It never writes: a pong is recorded for
// flushControl, a close is echoed only if that needs no waiting.
func (c *Conn) control(h ws.Header, p []byte) bool {
	switch h.OpCode {
	case ws.OpPing:
		c.pmu.Lock()
		c.pongOwed.Store(true)
		c.pongLen = copy(c.pongData[:], p)
		c.pmu.Unlock()
	case ws.OpClose:
		code, reason := ws.ParseCloseFrameData(p)
		ce := &CloseError{Code: int(code), Reason: reason}
		// No body is no code (1005). A body of code 0 is a code, one no
		// endpoint may send: ws.StatusCode.Empty took it for none, and
		// the close was answered 1000.
		noCode := len(p) == 0
		if noCode {
			ce.Code = int(ws.StatusNoStatusRcvd)
		}
		c.fail(ce)
		if c.sentCode.Load() == 0 {
			c.peerFirst.Store(true)
		}
		// RFC 6455 5.5.1: answer a close with a close, then let TCP go:
		// with the server's code, unless that is one no endpoint may
		// send (1005, 1006, 1015, unassigned ones: SendableCloseCode),
		// its reason is not UTF-8 (7.4, 5.5.1), or the body is one byte,
		// half a code; a protocol error is then the answer.
		echo := code
		switch {
		case len(p) == 1:
			echo = ws.StatusProtocolError
		case noCode:
			echo = ws.StatusNormalClosure
		case !SendableCloseCode(code) || !utf8.ValidString(reason):
			echo = ws.StatusProtocolError
		}
		c.answerClose(echo)
		c.shutdown()
		return false
	}
	return true
}

// SendableCloseCode reports whether an endpoint may send code in a close
// frame: the codes RFC 6455 7.4.1 defines for sending and those IANA has
// registered since (1012-1014: service restart, try again later, bad
// gateway; uvicorn closes with 1012 on shutdown), and the ranges for
// libraries and applications (3000-4999).
func SendableCloseCode(code ws.StatusCode) bool {
	return code >= 1000 && code <= 1003 || code >= 1007 && code <= 1014 || code >= 3000 && code <= 4999
}

func (c *Conn) readFailed(err error) {
	if c.Err() == nil {
		if errors.Is(err, net.ErrClosed) {
			err = ErrClosed
		} else {
			err = c.lostError("reading", err)
		}
	}
	c.fail(err)
	c.shutdown()
}

// protocolFail closes with code after a violation by the server, without
// waiting; it returns the connection's error.
func (c *Conn) protocolFail(code ws.StatusCode, err error) error {
	err = c.fail(err)
	c.answerClose(code)
	c.shutdown()
	return err
}

// parseHeader parses the frame header at the front of b. ok is false when b
// holds only part of it; hl is then the length needed when known (else 0).
// Its only error, a 64-bit length with the top bit set (RFC 6455 5.2), is
// an ErrProtocol: the server broke framing, which its callers must report
// as such (and answer with 1002), not as a lost connection.
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
			return h, hl, false, fmt.Errorf("%w: %v", ErrProtocol, ws.ErrHeaderLengthMSB)
		}
		h.Length = int64(binary.BigEndian.Uint64(b[2:]))
	}
	if h.Masked {
		copy(h.Mask[:], b[hl-4:hl])
	}
	return h, hl, true, nil
}
