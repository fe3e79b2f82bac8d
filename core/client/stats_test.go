package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestStatsCounts runs real exchanges against the reference server and
// checks each counter: exchanges, feedbacks, bytes, the round trip, a
// resync's reconnect, the feedback it dropped, reused rows and an
// interrupt.
func TestStatsCounts(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 4, ActionDim: 2, Features: []string{client.FeatureReuse},
		Faults: refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 3, When: refserver.AfterAction, Code: 1001, Reason: client.ReasonResync}}}})
	_ = s
	c := dial(t, url, nil)
	if st := c.Stats(); st.Exchanges != 0 || st.BytesReceived == 0 || st.BytesSent != 0 || st.RTTMax != 0 {
		t.Fatalf("after dial (metadata received, nothing sent): %+v", st)
	}
	w := newWorld()
	for i := 0; i < 2; i++ {
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	// The second feedback may still be held for the next infer: Feedbacks
	// counts it once it leaves.
	if st.Exchanges != 2 || st.Feedbacks < 1 || st.Feedbacks > 2 || st.Interrupts != 0 || st.FeedbackRowsDropped != 0 {
		t.Fatalf("after 2 exchanges: %+v", st)
	}
	// At least 3 messages out (the fourth may be held), each a 2-14 byte
	// header (masked) plus its msgpack.
	if st.BytesSent < 3*(6+20) || st.BytesReceived < 3*(2+20) {
		t.Fatalf("bytes: %+v", st)
	}
	if st.RTTLast <= 0 || st.RTTMax < st.RTTLast || st.RTTP50 <= 0 || st.RTTP99 < st.RTTP50 || st.RTTMax < st.RTTP99 || st.RTTMax > 5*time.Second {
		t.Fatalf("round trip: %+v", st)
	}
	// Reuse: env 0's last feedback was not terminal, so its row is not sent.
	reuse := &wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &wire.Observation{}, Reuse: []bool{true}}
	if _, err := c.Infer(reuse); err != nil {
		t.Fatal(err)
	}
	// Exchange 3: the server resyncs after the action; the feedback owed
	// for env 0 is dropped, and the client reconnects.
	time.Sleep(50 * time.Millisecond)
	if err := w.feedback(c); !errors.Is(err, client.ErrReconnected) {
		t.Fatalf("feedback after resync: %v, want reconnected", err)
	}
	st = c.Stats()
	want := [client.NumReconnectCauses]uint64{client.CauseResync: 1}
	if st.Exchanges != 3 || st.Feedbacks != 2 || st.RowsReused != 1 || st.FeedbackRowsDropped != 1 || st.Reconnects != want {
		t.Fatalf("after the resync: %+v", st)
	}
	// An interrupt pending before an infer ends it, and is counted.
	c.Interrupt()
	if _, err := w.infer(c); !errors.Is(err, client.ErrInterrupted) {
		t.Fatalf("interrupted infer: %v", err)
	}
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	if before.Interrupts != 1 || before.Exchanges != 4 {
		t.Fatalf("after the interrupt: %+v", before)
	}
	// Counters accumulate across the reconnect and never go down.
	if before.BytesSent <= st.BytesSent || before.BytesReceived <= st.BytesReceived {
		t.Fatalf("bytes went from %+v to %+v", st, before)
	}
	// Close does not reset anything, and Stats works after it.
	c.Close()
	if after := c.Stats(); after.Exchanges != 4 || after.FeedbackRowsDropped != 1 {
		t.Fatalf("after close: %+v", after)
	}
}

// slowPolicy takes a second to answer its second infer.
type slowPolicy struct {
	refserver.ZeroPolicy
	n int
}

func (p *slowPolicy) Act(conn int, ids []int64, o *wire.Observation, out *wire.Array) error {
	if p.n++; p.n == 2 {
		time.Sleep(time.Second)
	}
	return nil
}

// TestStatsReconnectCauses: each way a connection ends is counted under
// its cause when the client reconnects.
func TestStatsReconnectCauses(t *testing.T) {
	closeAt := func(when refserver.Point, reason string, drop bool) refserver.Faults {
		return refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: when, Code: 1001, Reason: reason, Drop: drop}}}
	}
	cases := []struct {
		name    string
		cfg     refserver.Config
		cause   client.ReconnectCause
		dropped uint64 // feedback rows dropped
	}{
		{"resync", refserver.Config{Faults: closeAt(refserver.AfterAction, client.ReasonResync, false)}, client.CauseResync, 1},
		{"feedback timeout", refserver.Config{Faults: closeAt(refserver.AfterAction, client.ReasonFeedbackTimeout, false)}, client.CauseFeedbackTimeout, 1},
		{"drop", refserver.Config{Faults: closeAt(refserver.AtInfer, "", true)}, client.CauseLost, 0},
		{"text frame", refserver.Config{Faults: refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyText}}}}, client.CauseLost, 0},
		{"garbage", refserver.Config{Faults: refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyGarbage}}}}, client.CauseOther, 0},
		{"receive timeout", refserver.Config{Policy: &slowPolicy{}}, client.CauseTimeout, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Horizon, tc.cfg.ActionDim = 4, 2
			_, url := serve(t, tc.cfg)
			c := dial(t, url, func(o *client.Options) { o.ReceiveTimeout = 300 * time.Millisecond })
			w := newWorld()
			if _, err := w.infer(c); err != nil {
				t.Fatal(err)
			}
			if err := w.feedback(c); err != nil {
				t.Fatal(err)
			}
			var err error
			for i := 0; i < 3 && !errors.Is(err, client.ErrReconnected); i++ {
				if _, err = w.infer(c); err == nil {
					time.Sleep(50 * time.Millisecond) // let the close arrive
					err = w.feedback(c)
				}
			}
			if !errors.Is(err, client.ErrReconnected) {
				t.Fatalf("no reconnect: %v", err)
			}
			st := c.Stats()
			var want [client.NumReconnectCauses]uint64
			want[tc.cause] = 1
			if st.Reconnects != want || st.FeedbackRowsDropped != tc.dropped {
				t.Fatalf("reconnects %v (want %v), rows dropped %d (want %d)", st.Reconnects, want, st.FeedbackRowsDropped, tc.dropped)
			}
		})
	}
}

// TestStatsConcurrent reads Stats from another goroutine during exchanges
// (run with -race): counters only grow.
func TestStatsConcurrent(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 4, ActionDim: 2})
	c := dial(t, url, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := newWorld()
		for i := 0; i < 200; i++ {
			if _, err := w.infer(c); err != nil {
				t.Error(err)
				return
			}
			if err := w.feedback(c); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var last client.Stats
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		st := c.Stats()
		if st.Exchanges < last.Exchanges || st.Feedbacks < last.Feedbacks || st.BytesSent < last.BytesSent || st.RTTMax < last.RTTMax {
			t.Fatalf("went backwards: %+v then %+v", last, st)
		}
		last = st
	}
	c.Interrupt() // sends the last feedback if it is held
	if st := c.Stats(); st.Exchanges != 200 || st.Feedbacks != 200 {
		t.Fatalf("final: %+v", st)
	}
}
