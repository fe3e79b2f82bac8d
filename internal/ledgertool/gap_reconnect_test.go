package ledgertool_test

import (
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// lost adds a lost record: the writer's queue dropped records here.
func (s *script) lost() {
	ev := &ledgertool.Event{}
	s.add(ledger.KindLost, ev)
	ev.Record.Count = 1
}

// TestGapBeforeReconnectHidesNothing: records lost on one connection say
// nothing about the next one once its connect record is in the ledger: a
// new connection starts with no action held and no feedback sent on it,
// and every record of it until the next gap is there. Here env 0 got an
// action on connection 1, a burst then dropped records (the writer's
// queue full), the connection ended, and on connection 2 the client
// resent the feedback it held (SPEC 7.6), or reused an observation it
// never fed back there (SPEC 10.1): both in records the ledger holds
// whole. The audit took env 0's state as unknown since the gap, and
// passed both.
func TestGapBeforeReconnectHidesNothing(t *testing.T) {
	reuseMeta := &wire.Metadata{Features: wire.Opt[[]string]{Value: []string{wire.FeatureReuse}, Set: true}}
	e := []int64{0}
	for _, c := range []struct {
		name   string
		run    func(s *script)
		clause string
		msg    string
	}{
		{"feedback resent after the reconnect", func(s *script) {
			s.infer([]int64{1}, []int64{0}, rows(5), nil)
			s.action(1, 1)
			s.feedback([]int64{1, 0}, []int64{0, 1}, rows(6, 3), []float64{1, 1}, []bool{false, false}, []bool{false, false}, nil)
		}, "7.6", "feedback for env 0, whose action came on connection 1, sent on connection 2: feedback must be dropped on a reconnect"},
		{"reuse of an observation fed back on the old connection", func(s *script) {
			s.infer(e, []int64{2}, rows(), yes)
		}, "10.1", "env 0 reuses an observation it never fed back on this connection"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScript(reuseMeta)
			s.infer(e, []int64{0}, rows(1), nil)
			s.action(1, 1)
			s.feedback(e, []int64{0}, rows(2), []float64{1}, no, no, nil)
			s.infer(e, []int64{1}, rows(2), nil)
			s.action(1, 1)
			s.lost() // a burst: the queue dropped records, the connection still up
			s.close("local", "")
			s.connect(reuseMeta)
			c.run(s)
			vs := s.a.Violations
			if len(vs) != 1 || vs[0].Clause != c.clause || vs[0].Msg != c.msg {
				t.Fatalf("violations %v; want exactly SPEC %s: %s", vs, c.clause, c.msg)
			}
		})
	}
}
