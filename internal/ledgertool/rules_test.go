package ledgertool_test

import (
	"errors"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// TestAuditEveryRuleFires: each rule of the audit that no other test made
// fire, on a scripted ledger that breaks it and nothing else. With any one
// of these rules disabled (its flag never called), every other test of
// the repository still passed: `plugrl ledger audit` would have called
// such a ledger clean. Each case wants exactly one violation, with its
// whole message, so that a neighbouring rule (5.2's two step_id messages
// share their start) cannot stand in for the one under test.
func TestAuditEveryRuleFires(t *testing.T) {
	reuseMeta := &wire.Metadata{Features: wire.Opt[[]string]{Value: []string{wire.FeatureReuse}, Set: true}}
	e := []int64{0}
	for _, c := range []struct {
		name   string
		run    func() *script
		clause string
		msg    string
	}{
		{"metadata that does not decode", func() *script {
			s := &script{a: ledgertool.NewAuditor()}
			s.conn++
			s.add(ledger.KindConnect, &ledgertool.Event{DecodeErr: errors.New("bad map")})
			return s
		}, "5.1", "the server's first message is not metadata: bad map"},

		{"an infer while an action is awaited", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.infer([]int64{1}, []int64{0}, rows(2), nil)
			return s
		}, "4.2", "an infer while an action is awaited: messages must alternate infer, action, feedback"},

		{"a reused row without the feature", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(), yes)
			return s
		}, "10.1", "env 0 reuses its observation, but the server does not offer reuse-feedback-obs"},

		{"a reused row never fed back", func() *script {
			s := newScript(reuseMeta)
			s.infer(e, []int64{0}, rows(), yes)
			return s
		}, "10.1", "env 0 reuses an observation it never fed back on this connection"},

		{"a counting env that skips a count", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.action(1, 1)
			s.feedback(e, []int64{0}, rows(2), []float64{1}, no, no, nil)
			s.infer(e, []int64{1}, rows(2), nil)
			s.action(1, 1)
			s.feedback(e, []int64{1}, rows(3), []float64{1}, no, no, nil)
			s.infer(e, []int64{5}, rows(3), nil)
			return s
		}, "5.2", "env 0's step_id is 5, want 2 (chunks completed in its episode)"},

		{"an action nobody asked for", func() *script {
			s := newScript(nil)
			s.action(1, 1)
			return s
		}, "4.2", "the server sent a message while no action is outstanding"},

		{"a reply that is not an action", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.add(ledger.KindRecv, &ledgertool.Event{DecodeErr: errors.New("not a map")})
			return s
		}, "5.3", "the server's reply is not an action: not a map"},

		{"an action for another number of envs", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.action(2, 1)
			return s
		}, "5.3", "action shape [1 2 1] for an infer of 1 envs"},

		{"an action wider than action_dim", func() *script {
			s := newScript(&wire.Metadata{ActionDim: wire.Opt[int64]{Value: 3, Set: true}})
			s.infer(e, []int64{0}, rows(1), nil)
			s.action(1, 1)
			return s
		}, "5.1", "action shape [1 1 1], metadata action_dim 3"},

		{"feedback for an env that holds nothing", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.action(1, 1)
			s.feedback([]int64{1}, []int64{0}, rows(2), []float64{1}, no, no, nil)
			return s
		}, "4.3", "feedback for env 1, which holds no action chunk on this connection"},

		{"feedback with another step_id than its infer", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.action(1, 1)
			s.feedback(e, []int64{3}, rows(2), []float64{1}, no, no, nil)
			return s
		}, "5.2", "env 0's feedback step_id is 3, its chunk's infer said 0"},

		{"info.episode on a row that did not end", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.action(1, 1)
			s.feedback(e, []int64{0}, rows(2), []float64{1}, no, no,
				&wire.Episode{Return: []float64{1}, Length: []int64{1}, Mask: yes})
			return s
		}, "5.4", "env 0 sends info.episode (mask true) on a row that is neither terminated nor truncated"},

		{"an infer before any connection", func() *script {
			s := &script{a: ledgertool.NewAuditor()}
			s.infer(e, []int64{0}, rows(1), nil)
			return s
		}, ledgertool.ClauseLedger, "a message sent with no connection open (no connect record since the start or the last close)"},

		{"an action after the connection closed", func() *script {
			s := newScript(nil)
			s.infer(e, []int64{0}, rows(1), nil)
			s.close("local", "")
			s.action(1, 1)
			return s
		}, ledgertool.ClauseLedger, "a message received with no connection open (no connect record since the start or the last close)"},

		{"info.episode.l shorter than the chunks fed back", func() *script {
			return episodeOfLength(1)
		}, "5.4", "env 0's info.episode.l is 1, but 2 chunks were fed back over its episode"},

		{"info.episode.l longer than its chunks can hold", func() *script {
			return episodeOfLength(3)
		}, "5.4", "env 0's info.episode.l is 3, more than its 2 chunks of at most 1 steps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.run()
			vs := s.a.Violations
			if len(vs) != 1 || vs[0].Clause != c.clause || vs[0].Msg != c.msg {
				t.Fatalf("violations %v; want exactly SPEC %s: %s", vs, c.clause, c.msg)
			}
		})
	}
}

// episodeOfLength scripts a two-chunk episode of one env (chunks of one
// step, rewards 1 and 1) that ends with info.episode.r 2 and
// info.episode.l length.
func episodeOfLength(length int64) *script {
	s := newScript(nil)
	e := []int64{0}
	s.infer(e, []int64{0}, rows(1), nil)
	s.action(1, 1)
	s.feedback(e, []int64{0}, rows(2), []float64{1}, no, no, nil)
	s.infer(e, []int64{1}, rows(2), nil)
	s.action(1, 1)
	s.feedback(e, []int64{1}, rows(3), []float64{1}, yes, no,
		&wire.Episode{Return: []float64{2}, Length: []int64{length}, Mask: yes})
	return s
}
