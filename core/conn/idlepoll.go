package conn

import (
	"fmt"
	"time"
)

// The process's open connections share one poller (a connTicker): while
// any is open, a timer looks at each of them every idlePoll (answering
// pings, seeing closes while nobody reads) or sooner, at the earliest
// deadline of a watched Receive, which it enforces. A poller goroutine
// per connection, as before, woke once a second each: 64 idle handles,
// 64 wake-ups a second, each needing one of the runtime's Ps, and a
// process with thousands of handles paid a few percent of a core for
// doing nothing. One look at every connection is one wake-up, and its
// system calls (a read that does not wait, per connection) are the same
// as before. Dial adds a connection, release removes it (and a look lets
// go of one that has failed).
var idle = connTicker{every: idlePoll, look: (*Conn).idleLook}

// idleLook answers pings and sees a close that arrived while nobody reads,
// and ends a watched Receive at its deadline; it never waits for a lock or
// for the socket. It reports how soon c wants the next look, and whether
// c is still open.
func (c *Conn) idleLook() (time.Duration, bool) {
	if c.Err() != nil {
		return 0, false
	}
	if d := c.recvDeadline.Load(); d != 0 && int64(mono()) >= d && c.recvDeadline.CompareAndSwap(d, 0) {
		// A Receive waits past its deadline: end the connection, which
		// wakes it (it reports the timeout).
		c.fail(fmt.Errorf("%w: no message by the receive deadline", ErrTimeout))
		c.shutdown()
		return 0, false
	}
	// Only with both sides free: a caller is reading, or writing, and
	// over TLS a read may have to write (a key update) and wait for that
	// writer.
	if c.wmu.TryLock() {
		if c.rmu.TryLock() {
			if c.Err() == nil {
				c.drain()
			}
			c.rmu.Unlock()
		}
		c.flushControlLocked()
		c.wmu.Unlock()
	}
	next := idlePoll
	if d := c.recvDeadline.Load(); d != 0 {
		next = min(next, max(time.Duration(d)-mono(), 0))
	}
	return next, c.Err() == nil
}
