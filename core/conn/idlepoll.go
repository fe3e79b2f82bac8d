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

// startPolling hands c, a connection just made, to a poller: the
// process's where its transport never waits (a descriptor, with TLS or
// without), else one of its own (no descriptor: not Linux), whose looks
// can keep only c waiting.
func (c *Conn) startPolling() {
	c.poller = &idle
	if !c.tr.NeverWaits() {
		c.poller = &connTicker{every: idlePoll, look: (*Conn).idleLook}
	}
	c.poller.add(c)
}

// stopPolling takes c, a connection being released (it has failed), from
// its poller's set; a look in progress lets go of it too.
func (c *Conn) stopPolling() {
	if c.poller != nil {
		c.poller.remove(c)
	}
}

// idleLook answers pings and sees a close that arrived while nobody reads,
// and ends a watched Receive at its deadline. It never waits for a lock,
// nor for the socket where the transport never waits (see startPolling).
// It reports how soon c wants the next look, and whether c is still open.
func (c *Conn) idleLook() (time.Duration, bool) {
	if c.Err() != nil {
		return 0, false
	}
	if d := c.recvDeadline.Load(); d != 0 {
		switch now := int64(mono()); {
		case now < d:
		case d&1 == 0 && now-d > int64(lateSlack) && c.recvDeadline.CompareAndSwap(d, (now+int64(lateGrace))|1):
			// This look comes late: the process could not run at the
			// deadline (stopped, or starved), and what arrived meanwhile
			// may be a whole message the reader is taking now. Give it
			// lateGrace, once, as read gives a socket deadline.
		case c.recvDeadline.CompareAndSwap(d, 0):
			// A Receive waits past its deadline: end the connection,
			// which wakes it (it reports the timeout).
			c.fail(fmt.Errorf("%w: no message by the receive deadline", ErrTimeout))
			c.shutdown()
			return 0, false
		}
	}
	gone, due := c.peerGone()
	if gone {
		return 0, false
	}
	// Only with both sides free: a caller is reading, or writing, and
	// over TLS a read may have to write (a key update) and wait for that
	// writer.
	if c.wmu.TryLock() {
		if c.rmu.TryLock() {
			// Both locks held: nothing else reads or writes, so a TLS
			// transport can make its writes (its own, within the read,
			// and the pong's) send only what the socket takes at once.
			lt, _ := c.tr.(looker)
			if lt != nil {
				lt.setLooking(true)
			}
			c.lookerHoldsWmu = true
			if c.Err() == nil {
				c.drain(true)
			}
			c.flushControlLockedAs(true)
			if c.writeReset && c.Err() == nil {
				c.drain(true) // between frames: what came before the reset
			}
			c.lookerHoldsWmu = false
			if lt != nil {
				lt.setLooking(false)
			}
			c.rmu.Unlock()
		} else if _, ok := c.tr.(looker); !ok {
			c.flushControlLocked()
		}
		// (A TLS connection being read is left to its reader, which
		// sends its pongs itself: its read may be writing, and the
		// write here would wait for it.)
		c.wmu.Unlock()
	}
	next := idlePoll
	if d := c.recvDeadline.Load(); d != 0 {
		next = min(next, max(time.Duration(d)-mono(), 0))
	}
	if due > 0 {
		next = min(next, due)
	}
	return next, c.Err() == nil
}

// peerGone ends c, and reports true, when its server's machine has owed
// answers for the dead-peer timeout: data in flight or a probe, nothing
// acknowledged since (peerSilence). Whoever waits on c (a Receive, a
// send) is woken by the shutdown and reports it. Otherwise, while answers
// are owed, due is when the bound will have passed (the next look's time),
// else 0. It takes no lock but fdmu, which orders it with the
// descriptor's release.
func (c *Conn) peerGone() (gone bool, due time.Duration) {
	if c.deadPeer <= 0 {
		return false, 0
	}
	st, ok := c.tr.(silenceTeller)
	if !ok {
		return false, 0
	}
	c.fdmu.Lock()
	if c.released {
		c.fdmu.Unlock()
		return false, 0
	}
	since, owed, known := st.peerSilence()
	c.fdmu.Unlock()
	switch {
	case !known || !owed:
		return false, 0
	case since < c.deadPeer:
		return false, c.deadPeer - since + time.Millisecond // the kernel counts in ms
	}
	c.fail(fmt.Errorf("%w: the server acknowledged nothing for %v, past the dead-peer timeout (%v): its machine, or the network to it, is gone", ErrLost, since.Round(time.Millisecond), c.deadPeer))
	c.shutdown()
	return true, 0
}
