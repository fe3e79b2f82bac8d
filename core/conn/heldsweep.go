package conn

import (
	"sync/atomic"
	"time"
)

// The process's connections share one timer for their held messages
// (WriteHeldMessage, heldTick): while any connection holds, it ticks every
// heldDelay and looks at each that does; when none does, it stops. A
// timer per connection, as before, fired heldDelay apart for every
// connection in a tight loop, and each firing is a goroutine that needs
// one of the runtime's few Ps: with 64 handles on one core, 6,400 a
// second, and each a hand-off of a P between threads (perf: about 2 % of
// the client's samples). One shared timer fires 100 times a second
// however many connections hold. What that buys is below this VM's noise:
// 14 interleaved pairs with 64 handles on the server's core were a tie.
//
// A connection is in the set while its heldArmed is set: hold adds it
// (with wmu held), and heldTick, which clears heldArmed, lets go of it.
// sweeperPaused, set by tests, makes the sweeper's looks send nothing, so
// that what sends a held message can be told apart without timing it.
var sweeperPaused atomic.Bool

var sweeper = connTicker{
	every: heldDelay,
	look:  func(c *Conn) (time.Duration, bool) { return heldDelay, c.heldTick() },
}
