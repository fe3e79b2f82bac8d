package ledgertool_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// brokenClient speaks the protocol with none of core/client's checks, over
// a real connection to the reference server, and records what it does
// into a ledger exactly as core/client does: the way to make the ledgers a
// broken client would leave.
type brokenClient struct {
	t   *testing.T
	url string
	cn  *conn.Conn
	led *ledger.Writer
	msg wire.Message
}

func newBroken(t *testing.T, cfg refserver.Config, level ledger.Level) (*brokenClient, string) {
	t.Helper()
	return newBrokenWith(t, cfg, ledger.Options{Level: level, Version: "test"})
}

func newBrokenWith(t *testing.T, cfg refserver.Config, o ledger.Options) (*brokenClient, string) {
	t.Helper()
	cfg.Horizon, cfg.ActionDim = 2, 1
	s := refserver.New(cfg)
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	path := filepath.Join(t.TempDir(), "broken.ledger")
	led, err := ledger.Create(path, o)
	if err != nil {
		t.Fatal(err)
	}
	b := &brokenClient{t: t, url: url, led: led}
	b.connect()
	return b, path
}

func (b *brokenClient) connect() {
	cn, err := conn.Dial(context.Background(), conn.Options{URL: b.url})
	if err != nil {
		b.t.Fatal(err)
	}
	meta, err := cn.Receive(5 * time.Second)
	if err != nil {
		b.t.Fatal(err)
	}
	b.led.Connected(b.url, "", meta)
	b.cn = cn
}

// drop ends the connection as a client that lost it would, recording
// which envs still held an action.
func (b *brokenClient) drop(held ...int64) {
	b.cn.Abort()
	b.led.Closed("local", 0, "", "test: connection dropped", held, false)
}

func obs(rows ...float64) *wire.Observation {
	return &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{
		DType: wire.Float64, Shape: []int{len(rows), 1}, Data: wire.BytesOf(rows)}}}}
}

func (b *brokenClient) infer(envs, steps []int64, o *wire.Observation, reuse []bool) {
	b.t.Helper()
	if err := wire.EncodeInfer(&b.msg, &wire.Infer{EnvIndices: envs, StepIDs: steps, Obs: o, Reuse: reuse}); err != nil {
		b.t.Fatal(err)
	}
	b.cn.ExpectMessage() // the action: not a stray if the poller looks first
	if err := b.cn.WriteMessage(&b.msg); err != nil {
		b.t.Fatal(err)
	}
	b.led.Sent(&b.msg, o)
	raw, err := b.cn.Receive(5 * time.Second)
	if err != nil {
		return // the server closed: what was sent is recorded
	}
	b.led.Received(raw)
}

func (b *brokenClient) feedback(f *wire.Feedback) {
	b.t.Helper()
	if err := wire.EncodeFeedback(&b.msg, f); err != nil {
		b.t.Fatal(err)
	}
	if err := b.cn.WriteMessage(&b.msg); err != nil {
		b.t.Fatal(err)
	}
	b.led.Sent(&b.msg, f.Obs)
}

func fb(envs, steps []int64, o *wire.Observation, rewards []float32, term []bool, ep *wire.Episode) *wire.Feedback {
	return &wire.Feedback{EnvIndices: envs, StepIDs: steps, Obs: o, Rewards: rewards,
		Terminated: term, Truncated: make([]bool, len(envs)), Episode: ep}
}

func audit(t *testing.T, b *brokenClient, path string) []ledgertool.Violation {
	t.Helper()
	vs, _ := auditNotes(t, b, path)
	return vs
}

// auditNotes ends the broken client's ledger and audits it: its
// violations and its notes.
func auditNotes(t *testing.T, b *brokenClient, path string) (vs, notes []ledgertool.Violation) {
	t.Helper()
	b.cn.Abort()
	if err := b.led.Close(); err != nil {
		t.Fatal(err)
	}
	a := ledgertool.NewAuditor()
	truncated, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { a.Add(ev); return nil })
	if err != nil || truncated {
		t.Fatalf("reading the ledger: %v (truncated %v)", err, truncated)
	}
	return a.Violations, a.Notes
}

func wantViolation(t *testing.T, vs []ledgertool.Violation, clause, text string) {
	t.Helper()
	for _, v := range vs {
		if v.Clause == clause && strings.Contains(v.Msg, text) {
			t.Logf("found: %v", v)
			return
		}
	}
	t.Fatalf("no SPEC %s violation mentioning %q; got %v", clause, text, vs)
}

var no, yes = []bool{false}, []bool{true}

func TestAuditCleanRun(t *testing.T) {
	for _, level := range []ledger.Level{ledger.Digest, ledger.Full} {
		b, path := newBroken(t, refserver.Config{Features: []string{wire.FeatureReuse}}, level)
		e := []int64{0}
		b.infer(e, []int64{0}, obs(1), nil)
		b.feedback(fb(e, []int64{0}, obs(2), []float32{1}, no, nil))
		b.infer(e, []int64{1}, obs(), yes) // reuses the fed-back obs(2)
		b.feedback(fb(e, []int64{1}, obs(3), []float32{2}, yes,
			&wire.Episode{Return: []float64{3}, Length: []int64{4}, Mask: yes}))
		b.infer(e, []int64{0}, obs(0), nil)
		if vs := audit(t, b, path); len(vs) != 0 {
			t.Fatalf("%v: a correct run has violations: %v", level, vs)
		}
	}
}

func TestAuditFeedbackResentAfterReconnect(t *testing.T) {
	b, path := newBroken(t, refserver.Config{}, ledger.Digest)
	e := []int64{0}
	b.infer(e, []int64{0}, obs(1), nil)
	b.drop(0)
	b.connect()
	b.feedback(fb(e, []int64{0}, obs(2), []float32{1}, no, nil)) // the resend SPEC 7.6 forbids
	wantViolation(t, audit(t, b, path), "7.6", "must be dropped on a reconnect")
}

func TestAuditEpisodeReturnNotTheRewardSum(t *testing.T) {
	b, path := newBroken(t, refserver.Config{}, ledger.Digest)
	e := []int64{0}
	b.infer(e, []int64{0}, obs(1), nil)
	b.feedback(fb(e, []int64{0}, obs(2), []float32{1}, no, nil))
	b.infer(e, []int64{1}, obs(2), nil)
	b.feedback(fb(e, []int64{1}, obs(3), []float32{1}, yes,
		&wire.Episode{Return: []float64{5}, Length: []int64{4}, Mask: yes})) // the rewards sum to 2
	wantViolation(t, audit(t, b, path), "5.4", "info.episode.r is 5")
}

func TestAuditReuseOfTerminalObservation(t *testing.T) {
	b, path := newBroken(t, refserver.Config{Features: []string{wire.FeatureReuse}}, ledger.Digest)
	e := []int64{0}
	b.infer(e, []int64{0}, obs(1), nil)
	b.feedback(fb(e, []int64{0}, obs(2), []float32{1}, yes,
		&wire.Episode{Return: []float64{1}, Length: []int64{1}, Mask: yes}))
	b.infer(e, []int64{0}, obs(), yes) // the server closes for a resync; the ledger has it
	wantViolation(t, audit(t, b, path), "10.1", "reuses a terminal observation")
}

func TestAuditSwappedEnvRows(t *testing.T) {
	for _, level := range []ledger.Level{ledger.Digest, ledger.Full} {
		b, path := newBroken(t, refserver.Config{}, level)
		e := []int64{0, 1}
		b.infer(e, []int64{0, 0}, obs(10, 20), nil)
		b.feedback(fb(e, []int64{0, 0}, obs(11, 21), []float32{1, 1}, []bool{false, false}, nil))
		b.infer(e, []int64{1, 1}, obs(21, 11), nil) // env 0 gets env 1's row and back
		vs := audit(t, b, path)
		wantViolation(t, vs, "5.4", "env 0's observation is not the one its last feedback sent")
		wantViolation(t, vs, "5.4", "env 1's observation")
	}
}

func TestAuditOrderAndStepIDs(t *testing.T) {
	b, path := newBroken(t, refserver.Config{}, ledger.Digest)
	e := []int64{0}
	b.infer(e, []int64{0}, obs(1), nil)
	b.feedback(fb(e, []int64{0}, obs(2), []float32{1}, no, nil))
	b.infer(e, []int64{7}, obs(2), nil) // step_ids should be 1
	b.feedback(fb(e, []int64{7}, obs(3), []float32{1}, no, nil))
	b.feedback(fb(e, []int64{7}, obs(3), []float32{1}, no, nil)) // a second feedback for one action
	vs := audit(t, b, path)
	wantViolation(t, vs, "5.2", "step_id is 7, want 1")
	wantViolation(t, vs, "4.2", "a feedback while no action is outstanding")
}

// TestAuditInferOfHeldEnv: envs 0 and 1 get a chunk, only env 0 is fed
// back, and the next infer asks for env 1 again: its first chunk's
// feedback can never come (SPEC 4.3).
func TestAuditInferOfHeldEnv(t *testing.T) {
	b, path := newBroken(t, refserver.Config{}, ledger.Digest)
	b.infer([]int64{0, 1}, []int64{0, 0}, obs(10, 20), nil)
	b.feedback(fb([]int64{0}, []int64{0}, obs(11), []float32{1}, no, nil))
	b.infer([]int64{1}, []int64{0}, obs(21), nil)
	wantViolation(t, audit(t, b, path), "4.3", "an infer for env 1, which still holds an action chunk")
}

// TestAuditZeroStepIDs: SPEC 5.2's Gap lets a client send zeros for
// step_ids; one that counts its chunks must go on counting until the
// episode ends.
func TestAuditZeroStepIDs(t *testing.T) {
	b, path := newBroken(t, refserver.Config{}, ledger.Digest)
	e := []int64{0, 1}
	b.infer(e, []int64{0, 0}, obs(10, 20), nil)
	b.feedback(fb(e, []int64{0, 0}, obs(11, 21), []float32{1, 1}, []bool{false, true}, nil))
	b.infer(e, []int64{0, 0}, obs(11, 0), nil) // env 0 sends zeros; env 1's episode ended
	b.feedback(fb(e, []int64{0, 0}, obs(12, 1), []float32{1, 1}, []bool{false, false}, nil))
	b.infer(e, []int64{0, 1}, obs(12, 1), nil) // env 1 counts from its new episode
	b.feedback(fb(e, []int64{0, 1}, obs(13, 2), []float32{1, 1}, []bool{false, false}, nil))
	b.infer(e, []int64{0, 0}, obs(13, 2), nil) // env 1 stops counting mid-episode
	b.feedback(fb(e, []int64{0, 0}, obs(14, 3), []float32{1, 1}, []bool{false, false}, nil))
	b.infer([]int64{0}, []int64{3}, obs(14), nil) // env 0 starts counting late
	vs := audit(t, b, path)
	wantViolation(t, vs, "5.2", "env 1's step_id is 0 after counts earlier in its episode: want 2")
	wantViolation(t, vs, "5.2", "env 0's step_id is 3 after zeros earlier in its episode")
	if len(vs) != 2 {
		t.Fatalf("want only the two switches flagged (zeros are allowed), got %v", vs)
	}
}

// TestAuditBrokenServer: the ledger shows a server's violations too, as it
// received them: wrong env_ids, a horizon metadata did not announce.
func TestAuditBrokenServer(t *testing.T) {
	for _, c := range []struct {
		kind   refserver.ReplyKind
		clause string
		text   string
	}{
		{refserver.ReplyWrongEnvIDs, "5.3", "action env_ids"},
		{refserver.ReplyWrongHorizon, "5.1", "metadata action_horizon"},
	} {
		b, path := newBroken(t, refserver.Config{Faults: refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 1, Kind: c.kind}}}}, ledger.Digest)
		b.infer([]int64{0}, []int64{0}, obs(1), nil)
		wantViolation(t, audit(t, b, path), c.clause, c.text)
	}
}

// TestAuditTakesBackAnUnsentFeedback: a close that says the connection's
// last feedback never left the client (unsent: a feedback held for the
// next infer, then the connection reset) takes its reward and chunk out of
// the episode: the server never had them.
func TestAuditTakesBackAnUnsentFeedback(t *testing.T) {
	b, path := newBroken(t, refserver.Config{}, ledger.Digest)
	env, no := []int64{0}, []bool{false}
	b.infer(env, []int64{0}, obs(0), nil)
	b.feedback(fb(env, []int64{0}, obs(1), []float32{1}, no, nil))
	b.infer(env, []int64{1}, obs(1), nil)
	b.feedback(fb(env, []int64{1}, obs(2), []float32{10}, no, nil))
	b.cn.Abort() // as if it had been held, and the reset came first
	b.led.Closed("local", 0, "", "test: reset with a feedback held", env, true)
	b.connect()
	b.infer(env, []int64{0}, obs(2), nil)
	b.feedback(fb(env, []int64{0}, obs(3), []float32{2}, []bool{true}, nil))
	b.cn.Abort()
	if err := b.led.Close(); err != nil {
		t.Fatal(err)
	}
	a := ledgertool.NewAuditor()
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { a.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(a.Episodes) != 1 || a.Episodes[0].Return != 3 || a.Episodes[0].Length != 2 || a.Episodes[0].Step != 2 {
		t.Fatalf("episodes %+v; want one of return 3 (1 + 2: the unsent 10 taken back), 2 chunks, at the 2nd feedback", a.Episodes)
	}
	s := ledgertool.NewSummary()
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { s.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if s.Feedbacks != 2 || s.Unsent != 1 {
		t.Fatalf("summary: %d feedbacks, %d unsent; want 2 and 1", s.Feedbacks, s.Unsent)
	}
}

// TestAuditEpisodeAfterAnUnsentFeedback: when the unsent feedback was an
// episode's first chunk, the episode goes on over the next connection,
// and the client's info.episode counts the unsent reward (its env had it):
// a correct client, which the audit must not flag, though the rewards fed
// back sum to less. (The runner's stress test met it under qemu.)
func TestAuditEpisodeAfterAnUnsentFeedback(t *testing.T) {
	b, path := newBroken(t, refserver.Config{}, ledger.Digest)
	env, no, yes := []int64{0}, []bool{false}, []bool{true}
	b.infer(env, []int64{0}, obs(0), nil)
	b.feedback(fb(env, []int64{0}, obs(1), []float32{10}, no, nil))
	b.cn.Abort() // as if it had been held, and the reset came first
	b.led.Closed("local", 0, "", "test: reset with a feedback held", env, true)
	b.connect()
	b.infer(env, []int64{0}, obs(1), nil)
	b.feedback(fb(env, []int64{0}, obs(2), []float32{2}, yes,
		&wire.Episode{Return: []float64{12}, Length: []int64{2}, Mask: yes}))
	b.infer(env, []int64{0}, obs(0), nil)
	if vs := audit(t, b, path); len(vs) != 0 {
		t.Fatalf("a correct client's episode across an unsent feedback has violations: %v", vs)
	}
}

// TestAuditAcrossLostRecords: a correct client whose ledger lost records
// (a queue too small for its rate) audits clean: each lost record stands
// where its records were, and the audit learns the turn of messages and
// each env's state again after it. It reported hundreds of violations of
// 4.2, 4.3 and 5.4 (1051 in a full ledger of the camera bench).
func TestAuditAcrossLostRecords(t *testing.T) {
	b, path := newBrokenWith(t, refserver.Config{}, ledger.Options{Level: ledger.Full, QueueBytes: 16 << 10, FlushInterval: 250 * time.Millisecond})
	env := []int64{0, 1}
	no := []bool{false, false}
	row := make([]float64, 2*512) // 8 KiB a message: the queue holds two
	o := &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 512}, Data: wire.BytesOf(row)}}}}
	var step int64
	for range 60 {
		row[0]++ // a new observation each step
		b.infer(env, []int64{step, step}, o, nil)
		row[0]++
		b.feedback(fb(env, []int64{step, step}, o, []float32{1, 1}, no, nil))
		step++
	}
	vs := audit(t, b, path)
	s := ledgertool.NewSummary()
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { s.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if s.Lost == 0 {
		t.Fatal("no record was lost: the test did not test the gap")
	}
	if len(vs) != 0 {
		t.Fatalf("%d records lost; %d violations, the first: %v", s.Lost, len(vs), vs[0])
	}
	t.Logf("%d records lost, %d kept; no violation", s.Lost, s.Records)
}

// TestAuditObsArrayOrder: msgpack maps are unordered; an infer that lists
// the same two state arrays in the other order than the feedback did
// sends the same observation.
func TestAuditObsArrayOrder(t *testing.T) {
	two := func(a, b float64, swap bool) *wire.Observation {
		x := wire.NamedArray{Name: "x", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: wire.BytesOf([]float64{a})}}
		y := wire.NamedArray{Name: "y", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: wire.BytesOf([]float64{b})}}
		if swap {
			x, y = y, x
		}
		return &wire.Observation{States: []wire.NamedArray{x, y}}
	}
	for _, level := range []ledger.Level{ledger.Digest, ledger.Full} {
		b, path := newBroken(t, refserver.Config{}, level)
		e := []int64{0}
		b.infer(e, []int64{0}, two(1, 2, false), nil)
		b.feedback(fb(e, []int64{0}, two(3, 4, false), []float32{1}, no, nil))
		b.infer(e, []int64{1}, two(3, 4, true), nil) // the same observation, its map in another order
		if vs := audit(t, b, path); len(vs) != 0 {
			t.Fatalf("%v: the same observation in another key order has violations: %v", level, vs)
		}
	}
}

// TestAuditNoteTerminalObservationCarried: an env whose next episode
// starts with the terminal observation that ended the last one (a client
// that did not reset it, or that sent the reset observation as the
// terminal one) is noted, not flagged: an env may reset to where it
// ended. An env whose observations never change is not noted, and
// neither is one that was reset.
func TestAuditNoteTerminalObservationCarried(t *testing.T) {
	episode := &wire.Episode{Return: []float64{2}, Length: []int64{2}, Mask: yes}
	run := func(t *testing.T, first, terminal, next float64) (vs, notes []ledgertool.Violation) {
		b, path := newBroken(t, refserver.Config{}, ledger.Digest)
		e := []int64{0}
		b.infer(e, []int64{0}, obs(first), nil)
		b.feedback(fb(e, []int64{0}, obs(terminal), []float32{1}, no, nil))
		b.infer(e, []int64{1}, obs(terminal), nil)
		b.feedback(fb(e, []int64{1}, obs(terminal), []float32{1}, yes, episode))
		b.infer(e, []int64{0}, obs(next), nil)
		return auditNotes(t, b, path)
	}
	t.Run("carried", func(t *testing.T) {
		vs, notes := run(t, 1, 5, 5)
		if len(vs) != 0 {
			t.Fatalf("a note counted as a violation: %v", vs)
		}
		if len(notes) != 1 || notes[0].Clause != "5.4" || !strings.Contains(notes[0].Msg, "terminal observation that ended its last one") {
			t.Fatalf("want one SPEC 5.4 note on the carried terminal observation; got %v", notes)
		}
	})
	t.Run("reset", func(t *testing.T) {
		if vs, notes := run(t, 1, 5, 1); len(vs)+len(notes) != 0 {
			t.Fatalf("a reset env: violations %v, notes %v", vs, notes)
		}
	})
	t.Run("constant", func(t *testing.T) {
		if vs, notes := run(t, 5, 5, 5); len(vs)+len(notes) != 0 {
			t.Fatalf("an env whose observation never changes: violations %v, notes %v", vs, notes)
		}
	})
}

// TestAuditNoteReconnectAfterStop: a client that connects again after the
// server ended the run with plugrl-server-stop is noted (SPEC 7.1: it
// should exit, unless configured to wait for the next run, which the
// ledger cannot know); one that reconnects after a resync is not.
func TestAuditNoteReconnectAfterStop(t *testing.T) {
	for _, tc := range []struct {
		reason string
		notes  int
	}{{wire.ReasonStop, 1}, {wire.ReasonResync, 0}} {
		t.Run(tc.reason, func(t *testing.T) {
			b, path := newBroken(t, refserver.Config{Faults: refserver.Faults{Closes: []refserver.CloseFault{
				{Exchange: 2, When: refserver.AtInfer, Code: 1001, Reason: tc.reason}}}}, ledger.Digest)
			e := []int64{0}
			b.infer(e, []int64{0}, obs(1), nil)
			b.feedback(fb(e, []int64{0}, obs(2), []float32{1}, no, nil))
			// The server's close comes instead of the second action.
			if err := wire.EncodeInfer(&b.msg, &wire.Infer{EnvIndices: e, StepIDs: []int64{1}, Obs: obs(2)}); err != nil {
				t.Fatal(err)
			}
			b.cn.ExpectMessage()
			if err := b.cn.WriteMessage(&b.msg); err != nil {
				t.Fatal(err)
			}
			b.led.Sent(&b.msg, obs(2))
			_, err := b.cn.Receive(5 * time.Second)
			var ce *conn.CloseError
			if !errors.As(err, &ce) || ce.Reason != tc.reason {
				t.Fatalf("want the server's close %q, got %v", tc.reason, err)
			}
			b.led.Closed("server", int(ce.Code), ce.Reason, err.Error(), e, false)
			b.connect()
			b.infer(e, []int64{0}, obs(3), nil)
			vs, notes := auditNotes(t, b, path)
			if len(vs) != 0 {
				t.Fatalf("violations: %v", vs)
			}
			if len(notes) != tc.notes {
				t.Fatalf("want %d note(s), got %v", tc.notes, notes)
			}
			if tc.notes > 0 && (notes[0].Clause != "7.1" || !strings.Contains(notes[0].Msg, "should exit rather than reconnect")) {
				t.Fatalf("want a SPEC 7.1 note, got %v", notes[0])
			}
		})
	}
}
