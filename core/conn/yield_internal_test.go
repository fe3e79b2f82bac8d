package conn

import (
	"testing"
	"time"
)

// TestYieldGap: the process yields once per yieldEvery per P in use: a
// lone connection every yieldEvery however many Ps the host has, 64 on 2
// Ps twice as often, 8 on 64 Ps once per connection.
func TestYieldGap(t *testing.T) {
	for _, tc := range []struct {
		busy, procs int32
		want        time.Duration
	}{
		{1, 64, yieldEvery},
		{1, 2, yieldEvery},
		{64, 2, yieldEvery / 2},
		{8, 64, yieldEvery / 8},
		{0, 2, yieldEvery},
	} {
		if got := yieldGap(tc.busy, tc.procs); got != tc.want {
			t.Errorf("yieldGap(%d busy, %d procs) = %v, want %v", tc.busy, tc.procs, got, tc.want)
		}
	}
}

// TestYieldDue: while the Receives in progress are fewer than the Ps,
// each connection yields every yieldEvery on its own, whatever the
// others did (a process-wide turn left some Ps without one for sysmon's
// 10 ms); with more Receives than Ps the process takes turns, once per
// yieldGap, and a connection whose turn another took does not yield.
func TestYieldDue(t *testing.T) {
	lastYield.Store(0)
	a, b := new(Conn), new(Conn)
	base := 100 * yieldEvery
	if !a.yieldDue(base, 2, 9) || !b.yieldDue(base, 2, 9) {
		t.Fatal("two connections with Ps of their own: each should yield at its first Receive")
	}
	if a.yieldDue(base+yieldEvery-1, 2, 9) {
		t.Error("a connection yielded again before yieldEvery had passed")
	}
	if !a.yieldDue(base+yieldEvery, 2, 9) || !b.yieldDue(base+yieldEvery, 2, 9) {
		t.Error("each connection should yield once yieldEvery has passed since its own last yield, whatever the other did")
	}

	// More Receives in progress than Ps: turns, process-wide.
	lastYield.Store(0)
	at := 200 * yieldEvery
	gap := yieldGap(64, 2)
	if !a.yieldDue(at, 64, 2) {
		t.Fatal("the first Receive after the gap should take the process's turn")
	}
	if b.yieldDue(at+gap-1, 64, 2) {
		t.Error("another connection yielded before the process's gap had passed")
	}
	if !b.yieldDue(at+gap, 64, 2) {
		t.Error("another connection should take the next turn once the gap has passed")
	}
}
