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

// TestLooksAfterASlowAnswerReadNothing: the looks at the connection before
// a feedback and before the next infer (what the server sent while the
// caller was away) count their grace from the end of the wait for the
// action, not its start. With a server that takes 2 ms to answer and a
// caller that sends feedback and the next infer at once, they make no
// system call; counted from the wait's start, they made two per exchange.
// A test thread descheduled for longer than the grace between two calls
// rightly pays one, so the bound is loose: under half the exchanges.
func TestLooksAfterASlowAnswerReadNothing(t *testing.T) {
	const exchanges = 40
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Policy: thinkingPolicy{2 * time.Millisecond}})
	c := dial(t, url, nil)
	w := newWorld()
	before := client.PollReads(c)
	for i := 0; i < exchanges; i++ {
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
	}
	if reads := client.PollReads(c) - before; reads >= exchanges/2 {
		t.Fatalf("the looks between calls read the socket %d times in %d exchanges with a 2 ms server; want almost none", reads, exchanges)
	}
}
