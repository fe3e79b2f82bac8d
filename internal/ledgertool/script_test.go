package ledgertool_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestAuditNaNEpisodeReturn: info.episode.r is NaN while the rewards fed
// back sum to 2. A comparison with NaN is false, so the check passed it.
func TestAuditNaNEpisodeReturn(t *testing.T) {
	s := twoStepEpisode(1, 1, math.NaN())
	wantViolation(t, s.a.Violations, "5.4", "info.episode.r is NaN")
}

// twoStepEpisode scripts an episode of one env and two steps, rewarded
// first and second, that ends with info.episode.r ret.
func twoStepEpisode(first, second, ret float64) *script {
	s := newScript(nil)
	e := []int64{0}
	s.infer(e, []int64{0}, rows(1), nil)
	s.action(1, 1)
	s.feedback(e, []int64{0}, rows(2), []float64{first}, no, no, nil)
	s.infer(e, []int64{1}, rows(2), nil)
	s.action(1, 1)
	s.feedback(e, []int64{1}, rows(3), []float64{second}, yes, no,
		&wire.Episode{Return: []float64{ret}, Length: []int64{2}, Mask: yes})
	return s
}

// TestAuditNaNReward: one NaN reward makes the episode's sum NaN, after
// which no info.episode.r can be checked against it.
func TestAuditNaNReward(t *testing.T) {
	s := twoStepEpisode(math.NaN(), 1, 7)
	wantViolation(t, s.a.Violations, "5.4", "info.episode.r is 7")
}

// TestAuditInfiniteReward: an infinite reward makes the tolerance
// infinite; info.episode.r = 7 still differs from an infinite sum. Both
// infinite, or both NaN, agree.
func TestAuditInfiniteReward(t *testing.T) {
	for _, c := range []struct {
		reward, ret float64
		flagged     bool
	}{{math.Inf(1), 7, true}, {math.Inf(1), math.Inf(1), false}, {math.NaN(), math.NaN(), false}, {1, 2, false}} {
		s := twoStepEpisode(1, c.reward, c.ret)
		if got := len(s.a.Violations) > 0; got != c.flagged {
			t.Errorf("reward %g, info.episode.r %g: violations %v, want flagged %v", c.reward, c.ret, s.a.Violations, c.flagged)
		}
	}
}

// TestAuditNegativeStepID: step_ids count completed chunks; an env's first
// infer on a connection is not checked against a count, but a negative
// one is never a count.
func TestAuditNegativeStepID(t *testing.T) {
	s := newScript(nil)
	s.infer([]int64{0}, []int64{-3}, rows(1), nil)
	wantViolation(t, s.a.Violations, "5.2", "step_id is -3")
}

// TestAuditReuseKeyNotOffered: SPEC 5.2: "Without the feature the key is
// not sent", even all false.
func TestAuditReuseKeyNotOffered(t *testing.T) {
	s := newScript(nil)
	s.infer([]int64{0}, []int64{0}, rows(1), no)
	wantViolation(t, s.a.Violations, "10.1", "reuse")
}

// TestWalkDamagedLedger: one flipped bit in a ledger's first block, with
// more blocks after it, made Walk report a truncated ledger of no records,
// and `plugrl ledger audit` print "clean: 0 records" and exit 0. Damage
// in the middle is an error that says where.
func TestWalkDamagedLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		w.Received(bytes.Repeat([]byte{byte(i)}, 100))
		time.Sleep(5 * time.Millisecond) // a block each
	}
	w.Close()
	b, _ := os.ReadFile(path)
	b[16+20] ^= 1 // inside block 0's frame
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	truncated, err := ledgertool.Walk(path, func(*ledgertool.Event) error { n++; return nil })
	if !errors.Is(err, ledger.ErrDamaged) || truncated {
		t.Fatalf("%d records, truncated %v, error %v; want ErrDamaged", n, truncated, err)
	}
	if !strings.Contains(err.Error(), "before its first record") || !strings.Contains(err.Error(), "block 0 fails its checksum") {
		t.Fatalf("the error does not say where: %v", err)
	}
}
