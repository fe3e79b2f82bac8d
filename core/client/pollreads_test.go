package client_test

import (
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// thinkingPolicy answers every infer with zeros after think, as a policy
// that computes does.
type thinkingPolicy struct{ think time.Duration }

func (p thinkingPolicy) Act(int, []int64, *wire.Observation, *wire.Array) error {
	time.Sleep(p.think)
	return nil
}
func (thinkingPolicy) Feedback(int, *wire.FeedbackMsg) error { return nil }

// TestLooksAfterASlowAnswerReadNothing: the look at the connection before
// a feedback (what the server sent while the caller stepped its envs)
// counts its grace from the end of the wait for the action, not its
// start. With a server that takes 2 ms to answer and a caller that sends
// the feedback at once, most such looks make no system call; counted from
// the wait's start, every one did, the wait having begun 2 ms before. A
// look that comes more than the grace after the action rightly reads (a
// descheduled test thread, or an emulated CPU: cross_arm64 runs this under
// qemu-user), so the test asks only that a quarter of them did not.
func TestLooksAfterASlowAnswerReadNothing(t *testing.T) {
	const exchanges = 40
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Policy: thinkingPolicy{2 * time.Millisecond}})
	c := dial(t, url, nil)
	w := newWorld()
	skipped := 0 // feedback looks that made no read
	for i := 0; i < exchanges; i++ {
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		before := client.PollReads(c)
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
		if client.PollReads(c) == before {
			skipped++
		}
	}
	t.Logf("%d of %d looks before a feedback made no read", skipped, exchanges)
	if skipped < exchanges/4 {
		t.Fatalf("the look before the feedback read the socket in %d of %d exchanges with a 2 ms server; want at least a quarter without a read", exchanges-skipped, exchanges)
	}
}
