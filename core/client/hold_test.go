package client_test

import (
	"testing"

	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestFeedbackHeldInTightLoops: in a loop that calls infer right after
// feedback, a feedback is held back (no byte sent) to leave with the next
// infer; if that infer does not come, it is still sent, after the
// connection's sweeper finds it overdue (10-20 ms). A feedback after a
// slow step, or one that ends an episode, goes out at once.
func TestFeedbackHeldInTightLoops(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Policy: refserver.ZeroPolicy{}})
	c := dial(t, url, nil)
	w := newWorld()
	exchanges := 0
	// held sends a feedback, says whether it was held (no byte of it
	// sent when Feedback returned), and waits for the server to have
	// it, the client doing nothing meanwhile.
	held := func(ends bool) bool {
		t.Helper()
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		w.f[0] = ends
		defer func() { w.f[0] = false }()
		before := c.Stats().BytesSent
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
		kept := c.Stats().BytesSent == before
		exchanges++
		st := waitStats(s, func(st refserver.Stats) bool { return st.Exchanges == exchanges })
		if st.Exchanges != exchanges {
			t.Fatalf("the server has %d exchanges after 5 s, want %d: a held feedback was never sent", st.Exchanges, exchanges)
		}
		return kept
	}
	tightLoop := func() {
		t.Helper()
		for i := 0; i < 5; i++ {
			if _, err := w.infer(c); err != nil {
				t.Fatal(err)
			}
			if err := w.feedback(c); err != nil {
				t.Fatal(err)
			}
			exchanges++
		}
	}

	// A pause of the test's own thread (a GC, a busy machine) between a
	// feedback and the next infer makes the loop look slow, and the
	// feedback is rightly not held: try a few loops before failing.
	kept := false
	for try := 0; try < 3 && !kept; try++ {
		tightLoop()
		kept = held(false)
	}
	if !kept {
		t.Fatal("a feedback in a tight loop was sent at once in 3 tries; want it held for the next infer")
	}
	// The last gap was long (the server's having it was waited for): the
	// next feedback is not held.
	if held(false) {
		t.Fatal("a feedback after a slow step was held")
	}
	tightLoop()
	if held(true) {
		t.Fatal("a feedback ending an episode was held")
	}
}
