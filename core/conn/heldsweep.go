package conn

import (
	"sync"
	"time"
)

// The process's connections share one timer for their held messages
// (WriteHeldMessage): while any connection holds, it ticks every
// heldDelay and looks at each of them (heldTick); when none does, it
// stops. A timer per connection, as before, fired heldDelay apart for
// every connection in a tight loop, and each firing is a goroutine that
// needs one of the runtime's few Ps: with 64 handles on one core, 6,400
// a second, and each a hand-off of a P between threads. One shared timer
// fires 100 times a second however many connections hold. 64 handles on
// the server's core, interleaved lab runs: 17.0-18.3k -> 23.3-24.9k
// exchanges/s in 3 of 4 pairs, and about 10 us less client CPU per
// exchange; with the 200 ms tick of a first try, +10 % in 5 of 5 pairs.
var sweeper heldSweeper

// heldSweeper is that timer, and the connections it looks at.
type heldSweeper struct {
	mu       sync.Mutex
	conns    []*Conn // connections to look at, each once (heldArmed is set), but for those in looking
	looking  []*Conn // the sweep's own list: conns as it began (the sweep's alone, without mu)
	timer    *time.Timer
	ticking  bool // the timer is set, or its sweep is running
	sweeping bool // a sweep has taken the list (for tests: conns is then not all)
}

// enlist has the sweeper look at c from its next tick on; c's wmu must be
// held, and c.heldArmed just set. The first connection to hold starts the
// timer: its message leaves one to two heldDelays after its last hold,
// as with a timer of its own.
func (s *heldSweeper) enlist(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
	if s.ticking {
		return
	}
	s.ticking = true
	if s.timer == nil {
		s.timer = time.AfterFunc(heldDelay, s.sweep)
		return
	}
	s.timer.Reset(heldDelay)
}

// sweep is the timer's tick. It takes the list and looks at each
// connection without the sweeper's lock (a look may make a system call,
// and a caller's hold may be waiting to enlist), then puts back those
// still to look at, after the ones enlisted meanwhile.
func (s *heldSweeper) sweep() {
	s.mu.Lock()
	s.looking, s.conns = s.conns, s.looking[:0]
	s.sweeping = true
	s.mu.Unlock()

	keep := s.looking[:0]
	for _, c := range s.looking {
		if c.heldTick() {
			keep = append(keep, c)
		}
	}
	clear(s.looking[len(keep):]) // no closed connection stays reachable from here

	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, keep...)
	clear(keep)
	s.looking = s.looking[:0]
	s.sweeping = false
	if len(s.conns) == 0 {
		s.ticking = false
		return
	}
	s.timer.Reset(heldDelay)
}
