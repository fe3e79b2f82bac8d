package client

import (
	"errors"
	"testing"

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
			c, _, infer, _ := lateInterruptClient(t, refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 1, Kind: kind}}})
			if interrupt {
				testActionRead = func(c *Client) { c.Interrupt() }
			}
			_, err := infer()
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
		}
	}
}
