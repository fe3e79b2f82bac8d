package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// These tests hold what a hostile review of the runner found missing: an
// interrupt ends Act in the middle of a chunk, a server that ends every
// connection is not PLUGRL_RECONNECTED, the step size follows the
// connection, and a runner closed while it owes feedback leaves its
// client usable.

func stateObs(n int) *wire.Observation {
	return &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{DType: wire.Float64, Shape: []int{n, 1}, Data: make([]byte, 8*n)}}}}
}

// steps acts and reports k steps of r's envs, none of which ends.
func steps(t *testing.T, r *runner.Runner, obs *wire.Observation, out *wire.Array, k int) {
	t.Helper()
	n := obs.Rows()
	rewards, done := make([]float64, n), make([]bool, n)
	for range k {
		if err := r.Act(obs, out); err != nil {
			t.Fatal(err)
		}
		if err := r.Report(obs, rewards, done, done, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func dialRef(t *testing.T, cfg refserver.Config) (*refserver.Server, *client.Client) {
	t.Helper()
	s := refserver.New(cfg)
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, c
}

// TestInterruptMidChunk: an interrupt with no call running ends the next
// Act, though every env is in the middle of its chunk and Act would send
// nothing (it gave 7 more steps of an 8-step chunk); the Act after it goes
// on with the chunk.
func TestInterruptMidChunk(t *testing.T) {
	_, c := dialRef(t, refserver.Config{Horizon: 8, ActionDim: 1})
	r, err := runner.New(c, runner.Config{Envs: 1})
	if err != nil {
		t.Fatal(err)
	}
	obs, out := stateObs(1), &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}
	steps(t, r, obs, out, 1)
	c.Interrupt()
	if err := r.Act(obs, out); client.KindOf(err) != client.KindInterrupted {
		t.Fatalf("Act after an interrupt, mid-chunk: %v; want KindInterrupted", err)
	}
	if n := c.Stats().Interrupts; n != 1 {
		t.Fatalf("Stats().Interrupts = %d; want the interrupted Act counted", n)
	}
	sent := c.Stats().BytesSent
	if err := r.Act(obs, out); err != nil {
		t.Fatalf("the Act after: %v", err)
	}
	if c.Stats().BytesSent != sent {
		t.Fatal("the Act after the interrupt sent something: the chunk was lost")
	}
}

// TestRestartsRunOut: a server that ends every connection makes Act fail
// with KindConnect once its restarts run out, naming why the last
// connection ended; never ErrReconnected, which a runner's caller cannot
// act on (it never infers).
func TestRestartsRunOut(t *testing.T) {
	var closes []refserver.CloseFault
	for k := 1; k <= 8; k++ {
		closes = append(closes, refserver.CloseFault{Exchange: k, When: refserver.AtInfer, Code: 1001, Reason: client.ReasonResync})
	}
	_, c := dialRef(t, refserver.Config{Horizon: 2, ActionDim: 1, Faults: refserver.Faults{Closes: closes}})
	r, err := runner.New(c, runner.Config{Envs: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Act(stateObs(1), &wire.Array{DType: wire.Float64, Data: make([]byte, 8)})
	if errors.Is(err, client.ErrReconnected) || client.KindOf(err) != client.KindConnect {
		t.Fatalf("Act against a server that resyncs every infer: %v; want KindConnect", err)
	}
	t.Logf("Act: %v", err)
}

// dimServer serves actions of per-step width dims[k] on its k-th
// connection (metadata action_dim says so, action_horizon 2), and ends its
// first connection with a resync at the first feedback: a server
// restarted with another policy.
func dimServer(t *testing.T, dims []int) string {
	scripts := make([]script, len(dims))
	for k, d := range dims {
		scripts[k] = script{
			meta:     wire.Metadata{ActionHorizon: wire.Opt[int64]{Value: 2, Set: true}, ActionDim: wire.Opt[int64]{Value: int64(d), Set: true}},
			horizons: []int{2}, width: d, resyncAtFeedback: k == 0,
		}
	}
	return scriptedServer(t, scripts...)
}

// TestStepSizeAcrossReconnect: after a reconnect to a server whose
// action_dim changed, StepSize gives the new width (it gave the old
// connection's). When the reconnect happens inside Act, the caller's
// buffer, sized before, is refused saying the width changed, and an Act
// with the new size gets the kept chunk, as plugrl.hpp's act does.
func TestStepSizeAcrossReconnect(t *testing.T) {
	c, err := client.Dial(context.Background(), client.Options{URL: dimServer(t, []int{1, 2}), ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := runner.New(c, runner.Config{Envs: 1})
	if err != nil {
		t.Fatal(err)
	}
	obs, f := stateObs(1), []bool{false}
	widths := map[int]bool{}
	for step := 0; step < 6; step++ {
		per, ok := r.StepSize()
		if !ok {
			t.Fatalf("step %d: no step size, with action_dim in metadata", step)
		}
		widths[per] = true
		err := r.Act(obs, &wire.Array{DType: wire.Float64, Data: make([]byte, 8*per)})
		if now, _ := r.StepSize(); client.KindOf(err) == client.KindInvalid && now != per {
			t.Logf("step %d: %v", step, err)
			sent := c.Stats().BytesSent
			err = r.Act(obs, &wire.Array{DType: wire.Float64, Data: make([]byte, 8*now)})
			if c.Stats().BytesSent != sent {
				t.Fatal("the Act at the new width sent again: the chunk was not kept")
			}
		}
		if err != nil {
			t.Fatalf("step %d: step size %d; Act: %v", step, per, err)
		}
		if err := r.Report(obs, []float64{0}, f, f, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !widths[1] || !widths[2] || r.Restarts() != 1 {
		t.Fatalf("widths %v over %d restarts; want 1 and then 2, over one", widths, r.Restarts())
	}
}

// TestCloseGivesUpOwedFeedback: a runner closed between Act and Report
// gives up the feedback it owed (SPEC 7.6), so that a new runner on the
// client acts, over a new connection; before, every infer was refused as
// out of order, for ever.
func TestCloseGivesUpOwedFeedback(t *testing.T) {
	_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1})
	const n = 2
	obs, out := stateObs(n), &wire.Array{DType: wire.Float64, Data: make([]byte, 8*n)}
	r1, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	r1.Close()
	r2, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.Act(obs, out); err != nil {
		t.Fatalf("a new runner's first act: %v", err)
	}
	if c.Stats().Reconnects[client.CauseOther] != 1 {
		t.Fatalf("reconnects %v; want one, for the feedback given up", c.Stats().Reconnects)
	}
}

// TestCloseKeepsAConnectionOwedNothing: a runner closed with every chunk
// fed back leaves the connection as it is.
func TestCloseKeepsAConnectionOwedNothing(t *testing.T) {
	_, c := dialRef(t, refserver.Config{Horizon: 1, ActionDim: 1})
	obs, out := stateObs(1), &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}
	r, err := runner.New(c, runner.Config{Envs: 1})
	if err != nil {
		t.Fatal(err)
	}
	steps(t, r, obs, out, 1)
	r.Close()
	if st := c.Stats(); st.Reconnects != [client.NumReconnectCauses]uint64{} {
		t.Fatalf("reconnects %v after closing a runner that owed nothing", st.Reconnects)
	}
	if _, err := c.Infer(&wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs}); err != nil {
		t.Fatalf("the client's own infer after: %v", err)
	}
}

// TestEndOfRunClosesInOrder: a run that ends in the middle of its chunks
// (Ctrl-C, max_episodes, a Runner going out of scope) closes as it always
// did once the client is closed: a close frame 1000 the server answers,
// and a ledger close by the client naming the envs that held chunks, not
// a dropped connection.
func TestEndOfRunClosesInOrder(t *testing.T) {
	s := refserver.New(refserver.Config{Horizon: 4, ActionDim: 1})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(t.TempDir(), "l")
	c, err := client.Dial(context.Background(), client.Options{URL: url, LedgerPath: path})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(c, runner.Config{Envs: 2})
	if err != nil {
		t.Fatal(err)
	}
	steps(t, r, stateObs(2), &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}, 6)
	r.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.FeedbackRowsDropped != 0 || st.Reconnects != [client.NumReconnectCauses]uint64{} {
		t.Fatalf("stats: %d rows dropped, reconnects %v; want none (not counted at close)", st.FeedbackRowsDropped, st.Reconnects)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Stats().Closes) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if cl := s.Stats().Closes; len(cl) != 1 || cl[0].By != "client" || cl[0].Code != 1000 {
		t.Fatalf("the server saw %+v; want one close by the client, 1000", cl)
	}
	var closes []*ledger.Record
	f2, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	lr, err := ledger.NewReader(f2)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := lr.Next()
		if err != nil {
			break
		}
		if rec.Kind == ledger.KindClose {
			closes = append(closes, rec)
		}
	}
	if len(closes) != 1 || closes[0].By != "client" || closes[0].Code != 1000 || len(closes[0].Dropped) != 2 {
		t.Fatalf("ledger closes %+v; want one by the client, 1000, with the 2 envs holding chunks", closes)
	}
}

// TestGivenUpEndsWithItsConnection: a runner freed between Act and Report
// marks the client; a direct Feedback of that action finds the connection
// gone and reconnects (ErrReconnected). The mark went with the old
// connection: the new one is not dropped at the next Infer (it was).
func TestGivenUpEndsWithItsConnection(t *testing.T) {
	s, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1,
		Faults: refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 1, When: refserver.AfterAction, Code: 1001, Reason: "plugrl-server-resync"}}}})
	const n = 2
	obs, out := stateObs(n), &wire.Array{DType: wire.Float64, Data: make([]byte, 8*n)}
	r, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	r.Close()                          // marks: the action is owed
	time.Sleep(100 * time.Millisecond) // the server's close arrives
	f := []bool{false, false}
	err = c.Feedback(&wire.Feedback{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs, Rewards: []float32{0, 0}, Terminated: f, Truncated: f})
	if !errors.Is(err, client.ErrReconnected) {
		t.Fatalf("feedback: %v; want ErrReconnected", err)
	}
	before := s.Stats().Connections
	_, err = c.Infer(&wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs})
	if err != nil || s.Stats().Connections != before {
		t.Fatalf("the first infer on a healthy new connection: %v, connections %d -> %d (the given-up mark survived the reconnect)", err, before, s.Stats().Connections)
	}
}

// TestGivenUpStillSeesAStop: a runner freed while it owes; then the
// server stops the run (SPEC 7.1) while the client is idle. The next
// direct Infer sees the stop, as it does when nothing was given up (it
// dropped the connection as given up, and reconnected).
func TestGivenUpStillSeesAStop(t *testing.T) {
	for _, owe := range []bool{false, true} {
		s, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1})
		const n = 2
		obs, out := stateObs(n), &wire.Array{DType: wire.Float64, Data: make([]byte, 8*n)}
		r, err := runner.New(c, runner.Config{Envs: n})
		if err != nil {
			t.Fatal(err)
		}
		steps(t, r, obs, out, 1)
		if !owe {
			steps(t, r, obs, out, 3) // through the chunk: nothing sent
		}
		r.Close()
		s.Stop()
		time.Sleep(100 * time.Millisecond)
		before := s.Stats().Connections
		_, err1 := c.Infer(&wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs})
		if !errors.Is(err1, client.ErrStopped) {
			t.Errorf("owed=%v: first infer after the server stopped: %v; want ErrStopped (connections %d -> %d)", owe, err1, before, s.Stats().Connections)
		}
	}
}
