package runner_test

import (
	"slices"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestReportFailsAfterMaxRestartsEnds: Report fails with KindConnect when
// the connection has ended MaxRestarts+1 times in a row before a feedback
// went through (Config.MaxRestarts: "how many connections in a row may
// end"), not one sooner. TestReconnectsInReportBounded bounds the count
// from above only, and a mutant that failed at MaxRestarts ends survived.
// The streak is counted from Restarts, so when the server's close arrives
// after a feedback was sent (which then went through) the test only takes
// more steps; it asserts no timing.
func TestReportFailsAfterMaxRestartsEnds(t *testing.T) {
	const maxRestarts = 3
	var closes []refserver.CloseFault
	for k := 1; k <= 60; k++ {
		closes = append(closes, refserver.CloseFault{Exchange: k, When: refserver.AfterAction, Code: 1001, Reason: client.ReasonResync})
	}
	_, c := dialRef(t, refserver.Config{Horizon: 1, ActionDim: 1, Faults: refserver.Faults{Closes: closes}})
	r, _ := runner.New(c, runner.Config{Envs: 1, MaxRestarts: maxRestarts})
	obs := stateObs(1)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}
	f := []bool{false}
	streak := 0 // connections ended since a feedback went through
	for step := 0; step < 50; step++ {
		before := r.Restarts()
		if err := r.Act(obs, out); err != nil {
			t.Fatalf("step %d: Act: %v", step, err)
		}
		streak += r.Restarts() - before
		time.Sleep(2 * time.Millisecond) // the env steps; the server's close arrives
		before = r.Restarts()
		err := r.Report(obs, []float64{1}, f, f, nil)
		streak += r.Restarts() - before
		switch {
		case err == nil && r.Restarts() == before:
			streak = 0 // the feedback went through
		case err == nil:
		case client.KindOf(err) == client.KindConnect:
			if streak != maxRestarts+1 {
				t.Fatalf("Report failed after %d connections in a row ended; want %d (MaxRestarts %d)", streak, maxRestarts+1, maxRestarts)
			}
			return
		default:
			t.Fatalf("step %d: Report: %v", step, err)
		}
	}
	t.Fatal("Report never failed against a server that ends every connection after its action")
}

// TestStepIDsAndSuccess: the runner fills step_ids with the chunks
// completed in the episode so far, reset when it ends (SPEC 5.2), and an
// episode's success with the caller's flag at its last step. Mutants that
// never advanced step_ids, or called every finished episode a success
// whenever a success slice was given, survived every other test.
func TestStepIDsAndSuccess(t *testing.T) {
	s, c := dialRef(t, refserver.Config{Horizon: 2, ActionDim: 1})
	var episodes []runner.Episode
	r, _ := runner.New(c, runner.Config{Envs: 1, OnEpisode: func(e runner.Episode) { episodes = append(episodes, e) }})
	obs := stateObs(1)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}
	no := []bool{false}
	// Episode 1 ends at step 5, failed (though success said true on its
	// earlier steps); episode 2 at step 3, succeeded.
	for _, st := range []struct{ done, success bool }{
		{false, true}, {false, true}, {false, true}, {false, true}, {true, false},
		{false, false}, {false, false}, {true, true},
	} {
		if err := r.Act(obs, out); err != nil {
			t.Fatal(err)
		}
		if err := r.Report(obs, []float64{1}, []bool{st.done}, no, []bool{st.success}); err != nil {
			t.Fatal(err)
		}
	}
	if len(episodes) != 2 || episodes[0].Success || !episodes[1].Success || episodes[0].Length != 5 || episodes[1].Length != 3 {
		t.Fatalf("episodes %+v; want lengths 5 and 3, the first failed, the second succeeded", episodes)
	}
	// Feedbacks: chunks of 2, 2, then 1 (flushed at the done), then 2, 1.
	deadline := time.Now().Add(5 * time.Second) // against a hang only
	var ids []int64
	for {
		ids = ids[:0]
		for _, m := range s.Stats().Received {
			if m.Type == wire.TypeFeedback {
				ids = append(ids, m.StepIDs...)
			}
		}
		if len(ids) >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if want := []int64{0, 1, 2, 0, 1}; !slices.Equal(ids, want) {
		t.Fatalf("feedback step_ids %v, want %v", ids, want)
	}
}
