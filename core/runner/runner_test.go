package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestRunnerRidesThroughResyncAndStops runs 3 envs whose episodes end at
// different steps against a server that resyncs mid-run while the runner
// holds a chunk, then stops. The runner must reconnect by itself, never
// resend held feedback, sum rewards per chunk, and report the stop.
func TestRunnerRidesThroughResyncAndStops(t *testing.T) {
	s := refserver.New(refserver.Config{
		Horizon: 4, ActionDim: 2, StopAfter: 40, Features: []string{client.FeatureReuse},
		Faults: refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 10, When: refserver.AfterAction, Code: 1001, Reason: client.ReasonResync}}},
	})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 3
	var episodes []runner.Episode
	r, err := runner.New(c, runner.Config{Envs: n, OnEpisode: func(e runner.Episode) { episodes = append(episodes, e) }})
	if err != nil {
		t.Fatal(err)
	}
	t0 := make([]float64, n)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "t", Array: wire.Array{DType: wire.Float64, Shape: []int{n, 1}, Data: wire.BytesOf(t0)}}}}
	actions := make([]float32, n*2)
	out := &wire.Array{DType: wire.Float32, Shape: []int{n, 2}, Data: wire.BytesOf(actions)}
	rewards := []float64{1, 1, 1}
	term := make([]bool, n)
	none := make([]bool, n)
	if err := r.Report(obs, rewards, term, none, nil); !errors.Is(err, client.ErrOutOfOrder) {
		t.Fatalf("Report before Act: %v", err)
	}
	reports := 0
	for step := 0; ; step++ {
		err := r.Act(obs, out)
		if errors.Is(err, client.ErrStopped) {
			break
		}
		if err != nil {
			t.Fatalf("step %d: Act: %v", step, err)
		}
		for i := range t0 {
			t0[i]++
			term[i] = int(t0[i]) == 3+3*i
		}
		reports++
		err = r.Report(obs, rewards, term, none, nil)
		if errors.Is(err, client.ErrStopped) {
			break
		}
		if err != nil {
			t.Fatalf("step %d: Report: %v", step, err)
		}
		for i := range t0 {
			if term[i] {
				t0[i] = 0
			}
		}
		if step > 1000 {
			t.Fatal("the server never stopped the run")
		}
	}
	if r.Restarts() != 1 {
		t.Errorf("runner restarted %d times, want 1 (one resync)", r.Restarts())
	}
	for _, e := range episodes {
		if e.Length != int64(3+3*e.Env) || e.Return != float64(e.Length) {
			t.Fatalf("episode %+v: env %d's episodes last %d steps and pay 1 per step", e, e.Env, 3+3*e.Env)
		}
	}
	st := s.Stats()
	rs := r.Stats()
	if rs.EnvSteps != uint64(n*reports) || rs.Episodes != uint64(len(episodes)) {
		t.Errorf("runner stats: %d env steps, %d episodes; want %d, %d", rs.EnvSteps, rs.Episodes, n*reports, len(episodes))
	}
	if rs.Reconnects[client.CauseResync] != 1 || rs.RowsReused < uint64(st.ReusedRows) || st.ReusedRows == 0 || rs.FeedbackRowsDropped == 0 || rs.Exchanges == 0 || rs.Exchanges != c.Stats().Exchanges {
		t.Errorf("runner stats %+v; server reused %d rows", rs, st.ReusedRows)
	}
	if st.Orphans != 0 {
		t.Errorf("server saw %d feedback rows for envs with no action on their connection", st.Orphans)
	}
	if st.ReusedRows == 0 {
		t.Errorf("reuse-feedback-obs was offered and never used")
	}
	for _, m := range st.Received {
		if m.Type == wire.TypeFeedback {
			for i, rw := range m.Rewards {
				if rw < 1 || rw > 4 {
					t.Fatalf("feedback reward %v for env %d: chunk sums of 1..H steps", rw, m.EnvIndices[i])
				}
			}
		}
	}
}

// TestChunk: between Act and Report, Chunk gives the rest of an env's chunk
// from the step Act gave, in the caller's dtype; a short output says how
// many steps are left; outside Act..Report it is out of order.
func TestChunk(t *testing.T) {
	s := refserver.New(refserver.Config{Horizon: 4, ActionDim: 2, Policy: refserver.ProbePolicy{}})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 2
	r, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{DType: wire.Float64, Shape: []int{n, 1}, Data: make([]byte, 8*n)}}}}
	step := &wire.Array{DType: wire.Float64, Data: make([]byte, 8*n*2)}
	plan := make([]float64, 4*2)
	out := &wire.Array{DType: wire.Float64, Data: wire.BytesOf(plan)}
	if _, err := r.Chunk(0, out); !errors.Is(err, client.ErrOutOfOrder) {
		t.Fatalf("Chunk before Act: %v", err)
	}
	f := make([]bool, n)
	for k := 0; k < 4; k++ {
		if err := r.Act(obs, step); err != nil {
			t.Fatal(err)
		}
		steps, err := r.Chunk(1, out)
		if err != nil || steps != 4-k {
			t.Fatalf("step %d: Chunk gave %d steps, %v; want %d", k, steps, err, 4-k)
		}
		for j := 0; j < steps; j++ {
			for d := 0; d < 2; d++ {
				// The probe policy's value for step k+j of env 1, dim d.
				if got, want := plan[j*2+d], float64(10000*(k+j)+10*1+d); got != want {
					t.Fatalf("step %d: chunk[%d][%d] = %v, want %v", k, j, d, got, want)
				}
			}
		}
		if _, err := r.Chunk(1, &wire.Array{DType: wire.Float32, Data: make([]byte, 4)}); !errors.Is(err, runner.ErrShortBuffer) {
			t.Fatalf("a one-value output: %v", err)
		}
		if _, err := r.Chunk(n, out); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("env %d of %d: %v", n, n, err)
		}
		if err := r.Report(obs, make([]float64, n), f, f, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunnerAdoptsOwedChunks: plugrl_runner_free, finding the client in a
// call on another thread, only frees the chunks (no GiveUpOwed). With env
// 0 fed back (its episode ended early) and env 1 mid-chunk, the client is
// left with env 1 holding a chunk nobody will feed back. A new runner on
// the client gives it up on its first Act (the client reconnects) instead
// of being refused as out of order on every Act for ever.
func TestRunnerAdoptsOwedChunks(t *testing.T) {
	_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1})
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}
	r1, err := runner.New(c, runner.Config{Envs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	// Env 0 terminates at its first step; env 1 goes on.
	if err := r1.Report(obs, []float64{1, 1}, []bool{true, false}, []bool{false, false}, nil); err != nil {
		t.Fatal(err)
	}
	r1.FreeChunks() // what release does when the client is busy
	r2, err := runner.New(c, runner.Config{Envs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := r2.Act(obs, out); err != nil {
			if errors.Is(err, client.ErrOutOfOrder) {
				t.Fatalf("act %d on a new runner: %v", i, err)
			}
			t.Fatal(err)
		}
		if err := r2.Report(obs, []float64{1, 1}, []bool{false, false}, []bool{false, false}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunnerAdoptsOnceClientIsFree: a runner's first Act, while a call on
// another goroutine holds the client (misuse, here the caller's own
// InferFunc), gives up nothing and is refused as busy; the caller's infer
// then leaves an action owed. The runner's next Act must still give that
// up (reconnect) instead of counting itself adopted and being refused as
// out of order for ever.
func TestRunnerAdoptsOnceClientIsFree(t *testing.T) {
	_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1})
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}
	r, err := runner.New(c, runner.Config{Envs: 2})
	if err != nil {
		t.Fatal(err)
	}
	var inCall error
	req := &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs}
	if err := c.InferFunc(req, func(*wire.Action) error {
		inCall = r.Act(obs, out)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inCall, client.ErrBusy) {
		t.Fatalf("act while the client is in a call: %v, want busy", inCall)
	}
	// The caller's action is owed now; the runner takes the client over.
	steps(t, r, obs, out, 3)
}

// TestRunnerAdoptedGiveUpIsNoRestart: the reconnect a runner's first act
// makes to give up chunks an earlier user left on the client is not one
// of its MaxRestarts: with MaxRestarts 1, that act still rides through
// one connection the server ends.
func TestRunnerAdoptedGiveUpIsNoRestart(t *testing.T) {
	// Exchange 2 is the new runner's first infer, on the connection
	// after the give-up: the server ends it.
	_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1, Faults: refserver.Faults{
		Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AtInfer, Drop: true}}}})
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}
	r1, err := runner.New(c, runner.Config{Envs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	r1.FreeChunks() // what release does when the client is busy: the chunks stay owed
	r2, err := runner.New(c, runner.Config{Envs: 2, MaxRestarts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Act(obs, out); err != nil {
		t.Fatalf("the first act of a runner that gave up an earlier user's chunks, then lost one connection: %v", err)
	}
	if got := r2.Restarts(); got != 2 {
		t.Fatalf("%d restarts, want 2 (the give-up's and the server's)", got)
	}
}
