package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestInterruptAsInvalidReplyArrivesOwesNothing: a reply that is no valid
// action for the infer's envs (garbage, other env_ids) owes nothing, so
// FeedbackRowsDropped stays 0, whether or not an interrupt lands as it is
// read: the count follows what the server sent, not the interrupt's
// timing. (Found by review: Infer first marked the envs owed before
// looking at the reply.)
func TestInterruptAsInvalidReplyArrivesOwesNothing(t *testing.T) {
	for _, kind := range []refserver.ReplyKind{refserver.ReplyGarbage, refserver.ReplyWrongEnvIDs} {
		for _, interrupt := range []bool{false, true} {
			s := refserver.New(refserver.Config{Horizon: 2, ActionDim: 1, FeedbackTimeout: 5 * time.Second,
				Faults: refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 1, Kind: kind}}}})
			url, err := s.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c, err := Dial(context.Background(), Options{URL: url, ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
			if err != nil {
				s.Close()
				t.Fatal(err)
			}
			obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 4}, Data: make([]byte, 64)}}}}
			if interrupt {
				testActionRead = func(c *Client) { c.Interrupt() }
			}
			_, err = c.Infer(&wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs})
			testActionRead = nil
			want := ErrProtocol
			if interrupt {
				want = ErrInterrupted
			}
			if !errors.Is(err, want) {
				t.Errorf("%s, interrupt %v: infer: %v, want %v", kind, interrupt, err, want)
			}
			if got := c.Stats().FeedbackRowsDropped; got != 0 {
				t.Errorf("%s, interrupt %v: %d feedback rows dropped, want 0: the server sent no valid action, so no feedback was owed", kind, interrupt, got)
			}
			c.Close()
			s.Close()
		}
	}
}
