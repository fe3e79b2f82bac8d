package refserver_test

import (
	"testing"

	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestRefusedInferNotNumbered: an infer the server refuses takes no
// exchange number: Stats.Infers counts accepted infers, and a fault keyed
// by exchange k fires at the k-th accepted one. A refused reuse used to
// take number 1, so the next client's first infer was exchange 2.
func TestRefusedInferNotNumbered(t *testing.T) {
	s, url := start(t, refserver.Config{
		Features: []string{refserver.FeatureReuseFeedbackObs},
		Faults:   refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 1, When: refserver.AfterAction, Code: 1000, Reason: "exchange 1"}}},
	})
	c := dial(t, url)
	c.sendInfer([]int64{0}, []bool{true}) // reuses what it never fed back
	c.expectClose(1001, refserver.ResyncReason)
	st := waitFor(t, s, "the resync", func(st refserver.Stats) bool { return st.Resyncs == 1 })
	if st.Infers != 0 || st.Received[0].Exchange != 0 || st.Received[0].Refused == "" {
		t.Fatalf("after one refused infer: Infers %d, record %+v; want no exchange number", st.Infers, st.Received[0])
	}
	c2 := dial(t, url)
	c2.infer([]int64{0}, nil)
	c2.expectClose(1000, "exchange 1")
	if st := s.Stats(); st.Infers != 1 || st.Received[1].Exchange != 1 {
		t.Fatalf("the first accepted infer: Infers %d, record %+v; want exchange 1", st.Infers, st.Received[1])
	}
}
