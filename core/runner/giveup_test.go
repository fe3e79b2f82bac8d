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

// TestRunnerSupersededSendsNothing: a runner used again after a second
// runner over its client gave up its chunks (the second's first act
// reconnects) sends nothing for them, on a connection where the same
// envs hold the second runner's chunks: its feedback used to answer the
// second runner's infer. Its act is refused (KindOutOfOrder), a report
// that ends its chunks sends nothing, and its Close, while its stale
// chunks are left, does not give up the second runner's.
func TestRunnerSupersededSendsNothing(t *testing.T) {
	for _, mode := range []string{"act", "report", "close"} {
		_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 1})
		obs := stateObs(2)
		out := &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}
		r1, err := runner.New(c, runner.Config{Envs: 2})
		if err != nil {
			t.Fatal(err)
		}
		steps(t, r1, obs, out, 3) // one step of its chunk left
		if mode == "report" {
			if err := r1.Act(obs, out); err != nil {
				t.Fatal(err)
			}
		}
		r2, err := runner.New(c, runner.Config{Envs: 2})
		if err != nil {
			t.Fatal(err)
		}
		steps(t, r2, obs, out, 1)
		switch mode {
		case "act":
			if err := r1.Act(obs, out); !errors.Is(err, client.ErrOutOfOrder) {
				t.Fatalf("act of the superseded runner: %v, want KindOutOfOrder", err)
			}
		case "report": // its chunks end here: their feedback is not sent
			if err := r1.Report(obs, []float64{1, 1}, []bool{false, false}, []bool{false, false}, nil); err != nil {
				t.Fatalf("report of the superseded runner: %v", err)
			}
		}
		if got := c.Stats().Feedbacks; got != 0 {
			t.Fatalf("%s: %d feedbacks sent, want 0: the superseded runner's chunks went with their connection", mode, got)
		}
		r1.Close()
		steps(t, r2, obs, out, 4) // past its chunk's end: a feedback, and an infer on the same connection
		if s := c.Stats(); s.Feedbacks != 1 || c.Reconnects() != 1 {
			t.Fatalf("%s: %d feedbacks and %d reconnects, want 1 and 1", mode, s.Feedbacks, c.Reconnects())
		}
	}
}
