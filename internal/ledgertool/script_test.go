package ledgertool_test

import (
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// script builds a ledger's events by hand, as gap_test.go does: the
// faults a client could commit, without a server to refuse them first.
type script struct {
	a    *ledgertool.Auditor
	seq  int
	conn int
}

func newScript(meta *wire.Metadata) *script {
	s := &script{a: ledgertool.NewAuditor()}
	s.connect(meta)
	return s
}

func (s *script) add(kind string, ev *ledgertool.Event) {
	ev.Record = &ledger.Record{Kind: kind, Conn: s.conn, Seq: s.seq}
	s.seq++
	s.a.Add(ev)
}

func (s *script) connect(meta *wire.Metadata) {
	s.conn++
	if meta == nil {
		meta = &wire.Metadata{}
	}
	s.add(ledger.KindConnect, &ledgertool.Event{Meta: meta})
}

// rows is one observation array's row digests (one state, one row per env).
func rows(d ...uint32) [][]uint32 { return [][]uint32{d} }

func (s *script) infer(envs, steps []int64, obs [][]uint32, reuse []bool) {
	s.add(ledger.KindSend, &ledgertool.Event{Infer: &wire.InferMsg{EnvIndices: envs, StepIDs: steps, Reuse: reuse}, RowDigest: obs})
}

func (s *script) action(n, h int) {
	s.add(ledger.KindRecv, &ledgertool.Event{Action: &wire.Action{Chunk: wire.Array{DType: wire.Float32, Shape: []int{h, n, 1}, Data: make([]byte, 4*h*n)}}})
}

func (s *script) feedback(envs, steps []int64, obs [][]uint32, rewards []float64, term, trunc []bool, ep *wire.Episode) {
	s.add(ledger.KindSend, &ledgertool.Event{Feedback: &wire.FeedbackMsg{EnvIndices: envs, StepIDs: steps, Rewards: rewards,
		Terminated: term, Truncated: trunc, Episode: ep}, RowDigest: obs})
}

func (s *script) close(by, reason string) {
	r := &ledgertool.Event{}
	s.add(ledger.KindClose, r)
	r.Record.By, r.Record.Reason = by, reason
}
