package client

// Interrupt and the blocking sections it can end.

import (
	"context"
	"time"

	"github.com/plugrl/libplugrl/core/conn"
)

// Interrupt makes the call running on this client return KindInterrupted
// at once, or, if none is blocked, the next Infer (before it sends
// anything). It may be called from any goroutine, any number of times. A
// call interrupted while it waited on the server drops the connection
// (the stream may be mid-message); SPEC 7.6 holds: feedback owed on it is
// never sent, and the next Infer reconnects. One interrupt ends at most
// one call.
func (c *Client) Interrupt() { c.interrupt(true) }

// InterruptBlocked interrupts the call that is blocked now, if any, and
// leaves nothing pending otherwise: for a closer that waits for a call to
// end and must not leave an interrupt behind for the next user.
func (c *Client) InterruptBlocked() { c.interrupt(false) }

// InterruptClose ends Close's wait for the server's close frame, whether
// Close is waiting now or gets there later (a program's Ctrl-C while it
// closes), and interrupts the call Close waits for, if any. Any goroutine.
func (c *Client) InterruptClose() {
	c.closeIntr.Store(true)
	c.interrupt(true)
}

func (c *Client) interrupt(pending bool) {
	c.imu.Lock()
	if !c.blocking {
		var cn *conn.Conn
		if pending {
			c.intr.Store(true)
			cn = c.live
		}
		c.imu.Unlock()
		if cn != nil {
			sendHeldNow(cn)
		}
		return
	}
	defer c.imu.Unlock()
	c.intr.Store(true)
	if c.live != nil {
		c.live.Interrupt()
	}
	if c.dialCancel != nil {
		c.dialCancel()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// sendHeldNow sends a feedback held for the next infer, which an interrupt
// between calls ends before it sends, if the socket takes it: the program
// may exit next (a SIGINT handler's interrupt). The poller's and the
// timer's looks hold the write lock for microseconds, so a busy lock is
// tried again, 100 us apart, for up to a millisecond; a writer's call
// takes the feedback along itself. Outside imu: the caller's next call
// does not wait for it. A connection closed meanwhile sends nothing.
func sendHeldNow(cn *conn.Conn) {
	for i := 0; i < 10; i++ {
		if done, busy := cn.SendHeld(); done || !busy {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TakeInterrupt takes an interrupt pending for this client's next call,
// and reports whether there was one: for a caller whose call may not
// reach a blocking section (the runner's Act in the middle of a chunk
// sends nothing), so that an interrupt still ends it. The call it ends is
// counted as interrupted (Stats, the ledger), as the client's own are.
// One atomic load when none is pending.
func (c *Client) TakeInterrupt() bool {
	if !c.intr.Load() {
		return false
	}
	c.imu.Lock()
	took := c.intr.Swap(false)
	c.imu.Unlock()
	if took {
		c.countInterrupted()
	}
	return took
}

// block begins a blocking section of a call that an interrupt pending
// from before may refuse: it returns KindInterrupted (taking the
// interrupt) when one is.
func (c *Client) block() error {
	c.imu.Lock()
	defer c.imu.Unlock()
	if c.intr.Swap(false) {
		return newErr(KindInterrupted, nil, "an interrupt was pending: nothing was sent")
	}
	c.beginBlocking()
	return nil
}

// blockOwed begins a blocking section that a pending interrupt does not
// refuse (a feedback is owed): only one that comes during it, or a
// reconnect it needs, is interrupted.
func (c *Client) blockOwed() {
	c.imu.Lock()
	c.beginBlocking()
	c.imu.Unlock()
}

// beginBlocking marks the section; imu must be held.
func (c *Client) beginBlocking() {
	c.blocking = true
	// A wake-up left by an interrupt of an earlier section is taken. The
	// interrupt leaves it under imu, as this runs, and the only other
	// receiver (sleep, connection.go) runs on this goroutine, so its length
	// is exact here and the receive cannot block; reading it costs a load,
	// where the select took the channel's lock on every call. A receiver
	// on another goroutine would break this.
	if len(c.wake) > 0 {
		<-c.wake
	}
}

// endBlocking ends a blocking section whose wait completed, and reports
// whether an interrupt landed in it all the same: that interrupt has ended
// the connection (Interrupt shuts it down), and the caller reports it
// through lost, which takes it.
func (c *Client) endBlocking() bool {
	c.imu.Lock()
	defer c.imu.Unlock()
	c.blocking = false
	return c.intr.Load()
}

func (c *Client) unblock() {
	if !c.blocking {
		// Ended already (endBlocking): only this goroutine writes
		// blocking, so its read needs no lock, and the lock's cold line
		// is not touched a second time.
		return
	}
	c.imu.Lock()
	c.blocking = false
	c.imu.Unlock()
}

// setLive publishes the connection a blocking section waits on; one that
// an interrupt already hit during the section is interrupted at once.
func (c *Client) setLive(cn *conn.Conn) {
	c.imu.Lock()
	defer c.imu.Unlock()
	c.live = cn
	if cn != nil && c.blocking && c.intr.Load() {
		cn.Interrupt()
	}
}

// setDialCancel publishes (or, with nil, withdraws) the cancel of a dial
// in progress, as setLive does a connection.
func (c *Client) setDialCancel(cancel context.CancelFunc) {
	c.imu.Lock()
	defer c.imu.Unlock()
	c.dialCancel = cancel
	if cancel != nil && c.blocking && c.intr.Load() {
		cancel()
	}
}
