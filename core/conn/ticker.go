package conn

import (
	"slices"
	"sync"
	"time"
)

// A connTicker looks at a set of connections from one timer: the held
// messages' sweeper (heldsweep.go) and the idle poller (idlepoll.go) are
// each one for the whole process. A timer or goroutine per connection
// woke as often for each: with 64 handles, 64 times as many wake-ups,
// each needing one of the runtime's few Ps, handed between the callers'
// threads. The timer runs while the set is not empty.
type connTicker struct {
	every time.Duration // the longest time between two looks
	// look looks at one connection without waiting for anything, and
	// reports how soon it wants the next look and whether to keep it.
	look func(*Conn) (next time.Duration, keep bool)

	mu      sync.Mutex
	conns   []*Conn // the set, each once, but for those in looking
	looking []*Conn // the tick's own list: conns as it began (the tick's alone, without mu)
	timer   *time.Timer
	ticking bool // the timer is set, or its tick is running
	running bool // a tick has taken the list (for tests: conns is then not all)
	ticks   int  // ticks so far (for tests)
}

// add puts c in the set; the first connection starts the timer, whose
// first tick comes every later. c is looked at from the next tick on.
func (t *connTicker) add(c *Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns = append(t.conns, c)
	if t.ticking {
		return
	}
	t.ticking = true
	if t.timer == nil {
		t.timer = time.AfterFunc(t.every, t.tick)
		return
	}
	t.timer.Reset(t.every)
}

// remove takes c, which has failed, out of the set now, if a tick is not
// looking at it; a tick that is does not put a failed connection back.
func (t *connTicker) remove(c *Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.conns, c); i >= 0 {
		last := len(t.conns) - 1
		t.conns[i] = t.conns[last]
		t.conns[last] = nil
		t.conns = t.conns[:last]
	}
}

// tick is the timer's. It takes the set and looks at each connection
// without the lock (a look may make a system call, and a caller may be
// waiting to add), puts back those to keep, after the ones added
// meanwhile, and sets the timer for the soonest look any of them wants,
// counted from the tick's start (a long tick does not make a deadline
// late). The timer is set only here, at the end: ticks never overlap.
func (t *connTicker) tick() {
	start := time.Now()
	t.mu.Lock()
	t.looking, t.conns = t.conns, t.looking[:0]
	t.running = true
	t.mu.Unlock()

	next := t.every
	keep := t.looking[:0]
	for _, c := range t.looking {
		if wait, ok := t.look(c); ok {
			keep = append(keep, c)
			next = min(next, wait)
		}
	}
	clear(t.looking[len(keep):]) // no connection let go of stays reachable from here

	t.mu.Lock()
	defer t.mu.Unlock()
	t.ticks++
	for _, c := range keep {
		// One released during the tick is not put back: release fails
		// it, then removes it (under mu), so either remove found it
		// here, or this sees the failure.
		if c.Err() == nil {
			t.conns = append(t.conns, c)
		}
	}
	clear(keep)
	t.looking = t.looking[:0]
	t.running = false
	if len(t.conns) == 0 {
		t.ticking = false
		return
	}
	t.timer.Reset(max(0, next-time.Since(start)))
}
