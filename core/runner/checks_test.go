package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
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
	s, c := dialRef(t, refserver.Config{Horizon: 1, ActionDim: 1, Faults: refserver.Faults{Closes: closes}})
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
		// The env steps while the server's close arrives: wait until the
		// server has ended this connection (it counts the close just
		// before writing it), then a moment for the frame. A loaded
		// machine may still let a feedback through first: the streak
		// then starts again, and there are steps to spare.
		for end := time.Now().Add(5 * time.Second); s.Stats().Resyncs < r.Restarts()+1 && time.Now().Before(end); {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond)
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

// TestWidthChangeMidChunk: a server that changes the per-step action shape
// on one connection, while another env is in the middle of a chunk of the
// old shape, is a protocol error: that env's steps cannot be read at the
// new width (with a wider one its next step runs past its chunk's end).
// The hostile WidthChange scenario changes width across a reconnect only,
// where every chunk is forgotten, and a mutant that dropped the mid-chunk
// check survived. The server here is a few lines over the wire package: it
// declares no action_dim, so the client's metadata check cannot catch the
// change first, and answers the first infer with [3, n, 1] chunks and
// every later one with [3, n, 2].
func TestWidthChangeMidChunk(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer nc.Close()
		var m wire.Message
		if err := wire.EncodeMetadata(&m, &wire.Metadata{}); err != nil {
			t.Error(err)
			return
		}
		if wsutil.WriteServerBinary(nc, m.AppendTo(nil)) != nil {
			return
		}
		for infers := 0; ; {
			msg, err := wsutil.ReadClientBinary(nc)
			if err != nil {
				return
			}
			in, err := wire.DecodeInfer(msg)
			if err != nil {
				continue // a feedback
			}
			infers++
			da := 1
			if infers > 1 {
				da = 2
			}
			n := len(in.EnvIndices)
			chunk := wire.Array{DType: wire.Float64, Shape: []int{3, n, da}, Data: make([]byte, 8*3*n*da)}
			if err := wire.EncodeAction(&m, in.EnvIndices, &chunk); err != nil {
				t.Error(err)
				return
			}
			if wsutil.WriteServerBinary(nc, m.AppendTo(nil)) != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, err := client.Dial(context.Background(), client.Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http"), ReceiveTimeout: 5 * time.Second, MaxReconnects: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, _ := runner.New(c, runner.Config{Envs: 2})
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 2*8)}
	if err := r.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	// Env 0's episode ends at its first step; env 1 has 2 steps of its
	// chunk left.
	if err := r.Report(obs, []float64{1, 1}, []bool{true, false}, []bool{false, false}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Act(obs, out); client.KindOf(err) != client.KindProtocol {
		t.Fatalf("an action 2 wide while env 1 holds a chunk 1 wide: %v, want a protocol error", err)
	}
}
