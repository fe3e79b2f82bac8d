package runner_test

import (
	"context"
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
				name := fmt.Sprintf("%s/%v/%d", k.name, p, ex)
				t.Run(name, func(t *testing.T) {
					f := k.f
					f.Exchange, f.When = ex, p
					s := refserver.New(refserver.Config{Horizon: 3, ActionDim: 1, Features: []string{client.FeatureReuse}, FeedbackTimeout: 5 * time.Second,
						Faults: refserver.Faults{Closes: []refserver.CloseFault{f}}})
					url, err := s.Listen("127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond})
					if err != nil {
						t.Fatal(err)
					}
					n := 3
					r, _ := runner.New(c, runner.Config{Envs: n})
					obs := stateObs(n)
					out := &wire.Array{DType: wire.Float64, Data: make([]byte, 8*n)}
					t1 := make([]int, n)
					var lastErr error
					for step := 0; step < 30; step++ {
						if err := r.Act(obs, out); err != nil {
							lastErr = err
							if client.KindOf(err) == client.KindStopped {
								break
							}
							continue
						}
						term := make([]bool, n)
						for i := range term {
							t1[i]++
							if t1[i] == 2+i {
								term[i] = true
								t1[i] = 0
							}
						}
						if err := r.Report(obs, make([]float64, n), term, make([]bool, n), nil); err != nil {
							lastErr = err
							if client.KindOf(err) == client.KindStopped {
								break
							}
						}
					}
					c.Close()
					time.Sleep(30 * time.Millisecond)
					st := s.Stats()
					cs := c.Stats()
					for _, rec := range st.Received {
						if rec.Refused != "" && rec.Refused != "arrived after the server's close frame" {
							t.Errorf("server refused %+v", rec)
						}
						if len(rec.Orphans) > 0 {
							t.Errorf("orphans %+v", rec)
						}
					}
					first := map[int]string{}
					for _, rec := range st.Received {
						if _, ok := first[rec.Conn]; !ok {
							first[rec.Conn] = rec.Type
						}
					}
					for cn, ty := range first {
						if ty != "infer" {
							t.Errorf("conn %d began with %s", cn, ty)
						}
					}
					if cs.Exchanges != uint64(st.Actions) {
						t.Errorf("client exchanges %d, server actions %d", cs.Exchanges, st.Actions)
					}
					acc := 0
					for _, rec := range st.Received {
						if rec.Type == "feedback" && rec.Refused == "" {
							acc++
						}
					}
					t.Logf("last err %v; client %+v; server actions %d fb accepted %d rows %d resyncs %d conns %d", lastErr, cs.Reconnects, st.Actions, acc, st.FeedbackRows, st.Resyncs, st.Connections)
					t.Logf("client feedbacks %d dropped %d reused %d ; server reused %d", cs.Feedbacks, cs.FeedbackRowsDropped, cs.RowsReused, st.ReusedRows)
				})
			}
		}
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
