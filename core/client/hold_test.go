package client_test

import (
	"testing"
	"time"

	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestFeedbackHeldInTightLoops: in a loop that calls infer right after
// feedback, a feedback is held back to leave with the next infer; if that
// infer does not come, the kernel still sends it (about 200 ms, within the
// documented bound). A feedback after a slow step, or one that ends an
// episode, goes out at once.
func TestFeedbackHeldInTightLoops(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Policy: refserver.ZeroPolicy{}})
	c := dial(t, url, nil)
	w := newWorld()
	exchanges := 0
	// arrival sends a feedback and returns how long the server took to
	// have it, the client doing nothing meanwhile.
	arrival := func(ends bool) time.Duration {
		t.Helper()
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		w.f[0] = ends
		defer func() { w.f[0] = false }()
		t0 := time.Now()
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
		exchanges++
		st := waitStats(s, func(st refserver.Stats) bool { return st.Exchanges == exchanges })
		if st.Exchanges != exchanges {
			t.Fatalf("the server has %d exchanges after 5 s, want %d: a held feedback was never sent", st.Exchanges, exchanges)
		}
		return time.Since(t0)
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

	// A held feedback waits for TCP's retransmission timer (200 ms and
	// more); one sent at once is there in well under that.
	const heldAtLeast = 150 * time.Millisecond
	// A pause of the test's own thread (a GC, a busy machine) between a
	// feedback and the next infer makes the loop look slow, and the
	// feedback is rightly not held: try a few loops before failing.
	var d time.Duration
	for try := 0; try < 3 && d < heldAtLeast; try++ {
		tightLoop()
		if d = arrival(false); d > 2*time.Second {
			t.Fatalf("a held feedback reached the server after %v, want about 200 ms", d)
		}
	}
	if d < heldAtLeast {
		t.Fatalf("a feedback in a tight loop, no infer after it: the server had it after %v in 3 tries, want it held about 200 ms", d)
	}
	// The last gap was long: the next feedback is not held.
	if d := arrival(false); d >= heldAtLeast {
		t.Fatalf("a feedback after a slow step reached the server after %v: it was held", d)
	}
	tightLoop()
	if d := arrival(true); d >= heldAtLeast {
		t.Fatalf("a feedback ending an episode reached the server after %v: it was held", d)
	}
}
