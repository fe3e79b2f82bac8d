package runner_test

import (
	"errors"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestRunnerGiveUpOnEndedConnectionIsNoExtraRestart: when the connection
// the earlier user left chunks owed on has already been ended by the
// server, the give-up makes no reconnect of its own: the next infer finds
// the server's end (Infer: "before the infer") and reconnects for it, as
// it would for any runner. That reconnect is the server's doing, and must
// count against MaxRestarts (only the reconnect the give-up itself makes,
// client.ErrGivenUp, does not). Both runners below see the same server:
// the connection ends before their first act, and again at their first
// infer. The one with nothing to give up fails with MaxRestarts 1; so
// must the one that gave up chunks on the dead connection.
func TestRunnerGiveUpOnEndedConnectionIsNoExtraRestart(t *testing.T) {
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}
	for _, owed := range []bool{false, true} {
		// Exchange 1: the earlier user's act; the server drops the
		// connection after the action (owed) or after its feedback.
		// Exchange 2: the new runner's first infer, dropped too.
		when := refserver.AfterFeedback
		if owed {
			when = refserver.AfterAction
		}
		_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1, Faults: refserver.Faults{Closes: []refserver.CloseFault{
			{Exchange: 1, When: when, Drop: true},
			{Exchange: 2, When: refserver.AtInfer, Drop: true},
		}}})
		r1, err := runner.New(c, runner.Config{Envs: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := r1.Act(obs, out); err != nil {
			t.Fatal(err)
		}
		if !owed {
			// Both envs end: nothing is owed.
			if err := r1.Report(obs, []float64{1, 1}, []bool{true, true}, []bool{false, false}, nil); err != nil {
				t.Fatal(err)
			}
		}
		r1.FreeChunks()                    // as release does with the client busy: any chunks stay owed
		time.Sleep(200 * time.Millisecond) // the server's drop has reached the client
		r2, err := runner.New(c, runner.Config{Envs: 2, MaxRestarts: 1})
		if err != nil {
			t.Fatal(err)
		}
		err = r2.Act(obs, out)
		if err == nil {
			t.Fatalf("owed=%v: a runner with MaxRestarts 1 rode through %d connections the server ended (the one the give-up found dead, and its first infer's); want KindConnect",
				owed, r2.Restarts())
		}
		if !errors.Is(err, client.ErrConnect) {
			t.Fatalf("owed=%v: %v, want KindConnect", owed, err)
		}
	}
}
