package conn

import (
	"time"

	"github.com/gobwas/ws"
)

// Close sends a close frame with status 1000 (SPEC 7.5) unless the
// connection already failed, waits up to wait for the server's answer,
// then releases everything. Interrupt ends the wait early. It is safe to
// call more than once.
func (c *Conn) Close(wait time.Duration) error {
	c.closeOnce.Do(func() {
		deadline := time.Now().Add(wait)
		if c.Err() == nil && c.writeClose(ws.StatusNormalClosure, wait) == nil && wait > 0 {
			// Read (and drop) until the server's close, EOF or the deadline.
			c.rmu.Lock()
			c.setReadDeadline(deadline)
			for c.Err() == nil {
				if _, err := c.readMessage(); err != nil {
					break
				}
			}
			c.rmu.Unlock()
		}
		c.release()
	})
	return nil
}

// Abort ends the connection without waiting for anything: a close frame
// with status 1000 is sent if the socket takes it at once, then the socket
// and the buffers are released. It is for a connection that is out of step
// (a timeout, an interrupt, a malformed message), where waiting for the
// server's answer would only add to the caller's delay.
func (c *Conn) Abort() {
	c.closeOnce.Do(func() {
		if c.Err() == nil {
			c.tryClose(ws.StatusNormalClosure)
		}
		c.release()
	})
}

// release ends the connection and frees the socket and the receive buffer.
func (c *Conn) release() {
	c.fail(ErrClosed)
	c.shutdown()
	c.stopPolling()
	// Nothing reads or writes any more (the poller neither: it takes
	// these locks only by trying, and reads only a connection that has
	// not failed): release the socket and buffer.
	c.rmu.Lock()
	c.wmu.Lock()
	c.fdmu.Lock()
	c.released = true
	_ = c.tr.Close()
	c.fdmu.Unlock()
	if c.held > 0 {
		c.heldLost.Store(true) // it never left
	}
	c.held, c.heldEnds = 0, c.heldEnds[:0] // the sweeper's next look lets go of c
	if c.rbuf != nil {
		c.alloc.Free(c.rbuf)
		c.rbuf = nil
	}
	c.wmu.Unlock()
	c.rmu.Unlock()
}

// writeClose sends a close frame, waiting up to wait for the socket.
func (c *Conn) writeClose(code ws.StatusCode, wait time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.sentCls {
		return ErrClosed
	}
	c.sentCls = true
	var body [2]byte
	ws.PutCloseFrameBody(body[:], code, "")
	if !c.queueControl(ws.OpClose, body[:]) {
		return ErrClosed
	}
	if wait <= 0 {
		if !c.tryWriteControl() {
			return ErrTimeout
		}
		c.sentCode.Store(int32(code))
		return nil
	}
	c.tr.BeginWrite(wait)
	if err := c.flushHeld(); err != nil {
		return err
	}
	n, err := c.tr.Write(c.ctl.bytes())
	c.counters.Sent.Add(uint64(n))
	c.ctl.reset()
	c.ctlQueued.Store(false)
	if err == nil {
		c.sentCode.Store(int32(code))
	} else if c.Err() == nil && !isTimeout(err) {
		// Handled as a message's write failing (flushCounted), as it
		// already was when a held message went first (flushHeld):
		// a server that closed and then reset the connection (a stop,
		// SPEC 7.1) makes this write fail with its close still in the
		// socket, ahead of the reset. Close skips its read on an error,
		// and released the connection with the stop unread (ErrClosed,
		// PeerClosedFirst false: the client's ledger recorded a close of
		// its own that never left). writeFailed reads what came first.
		err = c.writeFailed("writing the close frame", err, false)
	}
	return err
}

// Interrupt ends the connection from any goroutine, at once: a Receive or
// WriteMessage blocked on it returns ErrInterrupted (within microseconds:
// the socket is shut down, which wakes the system call; a write under way
// is given up to interruptCloseWait to end first), and so does every later
// call. Only a close frame (1000) is sent, and only where it cuts no frame
// short. Close or Abort must still be called to release it.
func (c *Conn) Interrupt() {
	if c.fail(ErrInterrupted) == ErrInterrupted {
		// The caller stops waiting, and the connection ends here. When
		// the message the caller waits on went out whole (or a write
		// under way ends whole within a moment), say so with 1000 first,
		// so that the server sees this client end the connection (SPEC
		// 7.5) rather than lose it; a writer stopped mid-frame leaves no
		// room for a close frame.
		c.tryCloseAfterWrite(ws.StatusNormalClosure)
	}
	c.shutdown()
}

// shutdown shuts the socket down in both directions, which wakes any
// system call blocked on it; safe from any goroutine until release.
func (c *Conn) shutdown() {
	c.fdmu.Lock()
	if !c.released {
		c.tr.Shutdown()
	}
	c.fdmu.Unlock()
}
