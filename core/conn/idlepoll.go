package conn

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// The process's open connections share one poller: while any is open, a
// timer looks at each of them every idlePoll (answering pings, seeing
// closes while nobody reads) or sooner, at the earliest deadline of a
// watched Receive, which it enforces. A poller goroutine per connection,
// as before, woke once a second each: 64 idle handles, 64 wake-ups a
// second, each needing one of the runtime's Ps; a process with thousands
// of handles paid a few percent of a core for doing nothing. One look at
// every connection is one wake-up, and its system calls (a read that does
// not wait, per connection) are the same as before.
var idle idlePoller

// idlePoller is that timer and the connections it looks at.
type idlePoller struct {
	mu      sync.Mutex
	conns   []*Conn // open connections, each once, but for those in looking
	looking []*Conn // the look's own list: conns as it began (the look's alone, without mu)
	timer   *time.Timer
	ticking bool // the timer is set, or its look is running
	looks   int  // looks so far (for tests)
}

// add has the poller look at c, a connection just made, from its next
// look on (within idlePoll); the first connection starts the timer.
func (p *idlePoller) add(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
	if p.ticking {
		return
	}
	p.ticking = true
	if p.timer == nil {
		p.timer = time.AfterFunc(idlePoll, p.look)
		return
	}
	p.timer.Reset(idlePoll)
}

// remove lets go of c, a connection being released, at once: with many
// handles closed and opened, none waits for a look to be let go of. One in
// the running look's list is let go of by the look (it has failed).
func (p *idlePoller) remove(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.conns, c); i >= 0 {
		last := len(p.conns) - 1
		p.conns[i] = p.conns[last]
		p.conns[last] = nil
		p.conns = p.conns[:last]
	}
}

// look is the timer's tick. It takes the list, looks at each connection
// without the poller's lock (a look makes a system call, and a Dial may
// be waiting to add), puts back those still open, after the ones added
// meanwhile, and sets the timer for the earliest next look any of them
// wants.
func (p *idlePoller) look() {
	p.mu.Lock()
	p.looking, p.conns = p.conns, p.looking[:0]
	p.mu.Unlock()

	next := idlePoll
	keep := p.looking[:0]
	for _, c := range p.looking {
		if wait, open := c.idleLook(); open {
			keep = append(keep, c)
			next = min(next, wait)
		}
	}
	clear(p.looking[len(keep):]) // no released connection stays reachable from here

	p.mu.Lock()
	defer p.mu.Unlock()
	p.looks++
	p.conns = append(p.conns, keep...)
	clear(keep)
	p.looking = p.looking[:0]
	if len(p.conns) == 0 {
		p.ticking = false
		return
	}
	p.timer.Reset(next)
}

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
