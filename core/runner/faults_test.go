package runner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestFaultMatrix: a resync, a stop, a dropped connection and a plain
// close, each at an infer, after an action and after a feedback, on
// exchanges 2 to 5, under a runner of 3 envs out of step with reuse on.
// Every connection begins with an infer, no feedback goes out for an
// action of an earlier connection (SPEC 7.6), the server refuses nothing
// but what crossed its close, and the client's exchanges are the
// server's actions.
func TestFaultMatrix(t *testing.T) {
	kinds := []struct {
		name string
		f    refserver.CloseFault
	}{
		{"resync", refserver.CloseFault{Code: 1001, Reason: client.ReasonResync}},
		{"stop", refserver.CloseFault{Code: 1001, Reason: client.ReasonStop}},
		{"drop", refserver.CloseFault{Drop: true}},
		{"1000", refserver.CloseFault{Code: 1000}},
	}
	for _, k := range kinds {
		for _, p := range []refserver.Point{refserver.AtInfer, refserver.AfterAction, refserver.AfterFeedback} {
			for ex := 2; ex <= 5; ex++ {
				f := k.f
				f.Exchange, f.When = ex, p
				t.Run(fmt.Sprintf("%s/%v/%d", k.name, p, ex), func(t *testing.T) { runFaulted(t, f) })
			}
		}
	}
}

// runFaulted steps a runner of 3 envs, each ending its episodes at its
// own pace, for 30 steps (or until the server stops) against a server
// that makes fault f, and checks what the server received.
func runFaulted(t *testing.T, f refserver.CloseFault) {
	s, c := dialRef(t, refserver.Config{Horizon: 3, ActionDim: 1, Features: []string{client.FeatureReuse},
		FeedbackTimeout: 5 * time.Second, Faults: refserver.Faults{Closes: []refserver.CloseFault{f}}})
	const n = 3
	r, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	obs := stateObs(n)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 8*n)}
	rewards, trunc, term := make([]float64, n), make([]bool, n), make([]bool, n)
	age := make([]int, n)
	for range 30 {
		err := r.Act(obs, out)
		if err == nil {
			for i := range term {
				age[i]++
				if term[i] = age[i] == 2+i; term[i] {
					age[i] = 0
				}
			}
			err = r.Report(obs, rewards, term, trunc, nil)
		}
		if client.KindOf(err) == client.KindStopped {
			break
		}
	}
	c.Close()
	time.Sleep(30 * time.Millisecond) // the server takes in the close
	st, cs := s.Stats(), c.Stats()
	began := map[int]bool{}
	for _, rec := range st.Received {
		if rec.Refused != "" && rec.Refused != "arrived after the server's close frame" {
			t.Errorf("server refused %+v", rec)
		}
		if len(rec.Orphans) > 0 {
			t.Errorf("feedback for an action of an earlier connection (SPEC 7.6): %+v", rec)
		}
		if !began[rec.Conn] {
			began[rec.Conn] = true
			if rec.Type != "infer" {
				t.Errorf("connection %d began with a %s", rec.Conn, rec.Type)
			}
		}
	}
	if cs.Exchanges != uint64(st.Actions) {
		t.Errorf("client exchanges %d, server actions %d", cs.Exchanges, st.Actions)
	}
}

// TestReconnectsInReportBounded: a server that answers one infer per
// connection and closes with plugrl-server-resync right after the action
// makes every Report reconnect, and no feedback ever reaches it. Report
// fails with KindConnect once MaxRestarts connections in a row have ended
// so; it used to swallow each reconnect, for ever.
func TestReconnectsInReportBounded(t *testing.T) {
	var closes []refserver.CloseFault
	for k := 1; k <= 40; k++ {
		closes = append(closes, refserver.CloseFault{Exchange: k, When: refserver.AfterAction, Code: 1001, Reason: client.ReasonResync})
	}
	s, c := dialRef(t, refserver.Config{Horizon: 1, ActionDim: 1, Faults: refserver.Faults{Closes: closes}})
	r, _ := runner.New(c, runner.Config{Envs: 1, MaxRestarts: 3})
	obs := stateObs(1)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}
	f := []bool{false}
	var firstErr error
	steps := 0
	for ; steps < 20 && firstErr == nil; steps++ {
		if err := r.Act(obs, out); err != nil {
			firstErr = err
			break
		}
		time.Sleep(2 * time.Millisecond) // the env steps; the server's close arrives
		if err := r.Report(obs, []float64{1}, f, f, nil); err != nil {
			firstErr = err
		}
	}
	st := s.Stats()
	t.Logf("steps %d, restarts %d, server feedbacks %d, actions %d, err %v", steps, r.Restarts(), st.FeedbackRows, st.Actions, firstErr)
	if client.KindOf(firstErr) != client.KindConnect || st.FeedbackRows != 0 || r.Restarts() > 4 {
		t.Fatalf("%d steps, %d restarts (MaxRestarts 3), %d feedback rows at the server, first error %v; want KindConnect after at most 4 restarts",
			steps, r.Restarts(), st.FeedbackRows, firstErr)
	}
}
