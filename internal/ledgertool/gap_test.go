package ledgertool_test

import (
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// A client that resends, on a new connection, the feedback of an action
// that came on the old one (SPEC 7.6). Every record of that env's infer
// and action is in the ledger; a lost record before them (a gap about
// nothing this violation involves) hides it.
func staleFeedbackAudit(withGap bool) []ledgertool.Violation {
	a := ledgertool.NewAuditor()
	seq := 0
	add := func(ev *ledgertool.Event) {
		ev.Record.Seq = seq
		seq++
		a.Add(ev)
	}
	rec := func(kind string, conn int) *ledger.Record { return &ledger.Record{Kind: kind, Conn: conn} }
	action := func(n int) *wire.Action {
		return &wire.Action{Chunk: wire.Array{DType: wire.Float32, Shape: []int{1, n, 1}, Data: make([]byte, 4*n)}}
	}
	infer := func(envs ...int64) *wire.InferMsg {
		return &wire.InferMsg{EnvIndices: envs, StepIDs: make([]int64, len(envs))}
	}
	feedback := func(envs ...int64) *wire.FeedbackMsg {
		n := len(envs)
		return &wire.FeedbackMsg{EnvIndices: envs, StepIDs: make([]int64, n), Rewards: make([]float64, n), Terminated: make([]bool, n), Truncated: make([]bool, n)}
	}
	add(&ledgertool.Event{Record: rec(ledger.KindConnect, 1), Meta: &wire.Metadata{}})
	if withGap {
		r := rec(ledger.KindLost, 0)
		r.Count = 1
		add(&ledgertool.Event{Record: r})
	}
	// Connection 1: env 0 asks and gets its action; the connection ends.
	add(&ledgertool.Event{Record: rec(ledger.KindSend, 1), Infer: infer(0)})
	add(&ledgertool.Event{Record: rec(ledger.KindRecv, 1), Action: action(1)})
	add(&ledgertool.Event{Record: rec(ledger.KindClose, 1)})
	// Connection 2: env 1 asks; the feedback names env 0 too (stale).
	add(&ledgertool.Event{Record: rec(ledger.KindConnect, 2), Meta: &wire.Metadata{}})
	add(&ledgertool.Event{Record: rec(ledger.KindSend, 2), Infer: infer(1)})
	add(&ledgertool.Event{Record: rec(ledger.KindRecv, 2), Action: action(1)})
	add(&ledgertool.Event{Record: rec(ledger.KindSend, 2), Feedback: feedback(1, 0)})
	return a.Violations
}

// TestGapHidesNoLaterViolation: a lost record makes the audit learn an
// env's state again, but an infer and action recorded after it teach it
// what the env holds: a 7.6 violation recorded whole after the gap is
// still found (it was hidden until the env's next feedback).
func TestGapHidesNoLaterViolation(t *testing.T) {
	without, with := staleFeedbackAudit(false), staleFeedbackAudit(true)
	if len(without) != 1 || without[0].Clause != "7.6" {
		t.Fatalf("without a lost record: %v; want the 7.6 violation", without)
	}
	if len(with) != 1 || with[0].Clause != "7.6" {
		t.Fatalf("with a lost record before the env's infer: %v; want the 7.6 violation still", with)
	}
}
