package client

import (
	"errors"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestInterruptedActionCountsAsExchange: an action that arrives and passes
// the checks as an interrupt lands is an exchange (Stats.Exchanges: infers
// answered), whose feedback is then dropped; it used to be counted as
// dropped only, for an exchange the counters did not show.
func TestInterruptedActionCountsAsExchange(t *testing.T) {
	c, s, infer, _ := lateInterruptClient(t, refserver.Faults{})
	testActionRead = func(c *Client) { c.Interrupt() }
	_, err := infer()
	testActionRead = nil
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("infer: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	st := c.Stats()
	if st.FeedbackRowsDropped != 1 {
		t.Fatalf("rows dropped %d", st.FeedbackRowsDropped)
	}
	if int(st.Exchanges) != s.Stats().Actions {
		t.Fatalf("Stats.Exchanges = %d, FeedbackRowsDropped = %d; the server sent %d action(s), which passed the checks and whose feedback is counted as dropped", st.Exchanges, st.FeedbackRowsDropped, s.Stats().Actions)
	}
}
