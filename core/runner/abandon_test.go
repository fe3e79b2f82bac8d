package runner_test

import (
	"testing"

	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestAbandonMidChunk: a caller whose act broke off after the runner
// stored its chunks (the C API, when the caller's output buffer faulted)
// abandons the runner. The chunks go with the connection: the next Act
// infers afresh for every env on a new connection (the server sees a
// second connection), and the Reports after it are not refused as out of
// order, as they were when only the client's connection was dropped and
// the runner kept feeding back its stale chunks.
func TestAbandonMidChunk(t *testing.T) {
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}
	srv, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1})
	r, err := runner.New(c, runner.Config{Envs: 2, MaxRestarts: 2})
	if err != nil {
		t.Fatal(err)
	}
	no := []bool{false, false}
	step := func(what string) {
		t.Helper()
		if err := r.Act(obs, out); err != nil {
			t.Fatalf("%s: act: %v", what, err)
		}
		if err := r.Report(obs, []float64{1, 1}, no, no, nil); err != nil {
			t.Fatalf("%s: report: %v", what, err)
		}
	}
	step("before")
	step("before") // two steps into both chunks of 4
	r.Abandon()
	for i := 0; i < 8; i++ {
		step("after the abandon")
	}
	if got := srv.Stats().Connections; got != 2 {
		t.Fatalf("the server saw %d connections; want 2 (the abandoned one, and the next Act's)", got)
	}
	if got := r.Restarts(); got != 1 {
		t.Fatalf("Restarts() = %d; want 1 (the abandon's)", got)
	}
}
