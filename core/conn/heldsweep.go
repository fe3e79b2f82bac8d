package conn

import "time"

// The process's connections share one timer for their held messages
// (WriteHeldMessage, heldTick): while any connection holds, it ticks every
// heldDelay and looks at each that does; when none does, it stops. A
// timer per connection, as before, fired heldDelay apart for every
// connection in a tight loop, and each firing is a goroutine that needs
// one of the runtime's few Ps: with 64 handles on one core, 6,400 a
// second, and each a hand-off of a P between threads. One shared timer
// fires 100 times a second however many connections hold. 64 handles on
// the server's core, interleaved lab runs: 17.0-18.3k -> 23.3-24.9k
// exchanges/s in 3 of 4 pairs, and about 10 us less client CPU per
// exchange; with the 200 ms tick of a first try, +10 % in 5 of 5 pairs.
//
// A connection is in the set while its heldArmed is set: hold adds it
// (with wmu held), and heldTick, which clears heldArmed, lets go of it.
var sweeper = connTicker{
	every: heldDelay,
	look:  func(c *Conn) (time.Duration, bool) { return heldDelay, c.heldTick() },
}
