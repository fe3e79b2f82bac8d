package ledgertool_test

import (
	"encoding/binary"
	"io"
	"path/filepath"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// FuzzTools runs what `plugrl ledger` runs (the audit, the summary, the
// episode log, dump and export) over ledgers a real writer made from a
// fuzzed script of records: connects with any metadata, sends and
// receives of any bytes, closes, reconnects and interrupts. A ledger is
// another team's file, and these tools read every message in it: they
// must report, never panic, whatever the messages hold, and follow the
// records they are given (their own bounds on kept violations, episodes
// and rows). core/ledger's FuzzReader and FuzzBlock cover the file's
// format; this target reaches the tools' own decoding and bookkeeping,
// which a flipped byte in a file seldom does (a block's checksum).
//
// The script is a sequence of steps: a kind byte, a 2-byte length, that
// many bytes. Run it with a bounded minimiser, as each execution writes a
// ledger (about 0.5 ms) and a session's messages come to a kilobyte or
// more, which Go's minimiser (quadratic in the input) would take the
// whole default minute over, for every new input:
//
//	go test -run '^$' -fuzz '^FuzzTools$' -fuzztime 60s -fuzzminimizetime 100x -parallel 1 ./internal/ledgertool
//
// (about 500 executions a second here).
func FuzzTools(f *testing.F) {
	for _, seed := range toolSeeds(f) {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, script []byte, full bool) {
		level := ledger.Digest
		if full {
			level = ledger.Full
		}
		path := scriptLedger(t, script, level)
		a, s := ledgertool.NewAuditor(), ledgertool.NewSummary()
		a.OnEpisode = s.AddEpisode
		d, ew, x := ledgertool.NewDumper(io.Discard, true), ledgertool.NewEpisodeWriter(io.Discard), ledgertool.NewExporter()
		episodes := ledgertool.NewAuditor()
		episodes.OnEpisode = ew.Write
		if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error {
			a.Add(ev)
			s.Add(ev)
			episodes.Add(ev)
			if err := d.Add(ev); err != nil {
				return err
			}
			return x.Add(ev)
		}); err != nil {
			return // an error is a report; a panic is the failure
		}
		s.Print(io.Discard)
		_ = ew.Close()
		if full {
			_, _ = x.Write(t.TempDir())
		}
	})
}

// toolSeeds are scripts of real sessions: metadata, an infer, its action,
// a feedback that ends an episode with its statistics, a reuse, a
// reconnect; and the same with a terminal observation carried into the
// next episode (the audit's note).
func toolSeeds(tb testing.TB) [][]byte {
	step := func(script []byte, kind byte, body []byte) []byte {
		script = append(script, kind, 0, 0)
		binary.LittleEndian.PutUint16(script[len(script)-2:], uint16(len(body)))
		return append(script, body...)
	}
	msg := func(encode func(m *wire.Message) error) []byte {
		var m wire.Message
		if err := encode(&m); err != nil {
			tb.Fatal(err)
		}
		return m.AppendTo(nil)
	}
	obs := func(v float64) *wire.Observation {
		return &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{
			DType: wire.Float64, Shape: []int{1, 1}, Data: wire.BytesOf([]float64{v})}}}}
	}
	meta := msg(func(m *wire.Message) error {
		return wire.EncodeMetadata(m, &wire.Metadata{
			ProtocolVersion: wire.Opt[int64]{Value: 1, Set: true},
			ActionHorizon:   wire.Opt[int64]{Value: 2, Set: true},
			ActionDim:       wire.Opt[int64]{Value: 1, Set: true},
			Features:        wire.Opt[[]string]{Value: []string{wire.FeatureReuse}, Set: true},
		})
	})
	e := []int64{0}
	infer := func(stepID int64, v float64, reuse []bool) []byte {
		o := obs(v)
		if reuse != nil && reuse[0] {
			o = &wire.Observation{}
		}
		return msg(func(m *wire.Message) error {
			return wire.EncodeInfer(m, &wire.Infer{EnvIndices: e, StepIDs: []int64{stepID}, Obs: o, Reuse: reuse})
		})
	}
	action := msg(func(m *wire.Message) error {
		return wire.EncodeAction(m, e, &wire.Array{DType: wire.Float64, Shape: []int{2, 1, 1}, Data: make([]byte, 16)})
	})
	feedback := func(stepID int64, v float64, reward float32, done bool) []byte {
		f := &wire.Feedback{EnvIndices: e, StepIDs: []int64{stepID}, Obs: obs(v), Rewards: []float32{reward},
			Terminated: []bool{done}, Truncated: []bool{false}}
		if done {
			f.Episode = &wire.Episode{Return: []float64{float64(reward)}, Length: []int64{1}, Mask: []bool{true}}
		}
		return msg(func(m *wire.Message) error { return wire.EncodeFeedback(m, f) })
	}
	episode := func(next float64) []byte { // an episode ends; the next begins with next
		var s []byte
		s = step(s, 0, meta)
		s = step(s, 1, infer(0, 1, nil))
		s = step(s, 2, action)
		s = step(s, 1, feedback(0, 5, 2, true))
		return step(s, 1, infer(0, next, nil))
	}
	reconnect := func() []byte { // a reuse, a drop, and the feedback resent
		var s []byte
		s = step(s, 0, meta)
		s = step(s, 1, infer(0, 1, nil))
		s = step(s, 2, action)
		s = step(s, 1, feedback(0, 2, 1, false))
		s = step(s, 1, infer(1, 0, []bool{true}))
		s = step(s, 2, action)
		s = step(s, 3, nil)
		s = step(s, 4, []byte("lost"))
		s = step(s, 5, nil)
		s = step(s, 0, meta)
		return step(s, 1, feedback(1, 6, 1, false)) // SPEC 7.6
	}
	return [][]byte{episode(0), episode(5), reconnect()}
}

// scriptLedger writes the ledger of a script (see FuzzTools) at level and
// returns its path.
func scriptLedger(t *testing.T, script []byte, level ledger.Level) string {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: level, Version: "fuzz"})
	if err != nil {
		t.Fatal(err)
	}
	var m wire.Message
	for steps := 0; len(script) >= 3 && steps < 64; steps++ {
		kind, n := script[0], int(binary.LittleEndian.Uint16(script[1:]))
		script = script[3:]
		n = min(n, len(script))
		body := script[:n]
		script = script[n:]
		switch kind % 6 {
		case 0:
			w.Connected("ws://fuzz", "", body)
		case 1:
			m.Reset()
			m.Raw(body)
			m.Finish()
			w.Sent(&m, nil)
		case 2:
			w.Received(body)
		case 3:
			var dropped []int64
			for i := 0; i+8 <= len(body) && i < 64; i += 8 {
				dropped = append(dropped, int64(binary.LittleEndian.Uint64(body[i:])))
			}
			w.Closed("server", int(kind), string(body[:min(len(body), 8)]), "", dropped, len(body)%2 == 1)
		case 4:
			w.Reconnecting(string(body[:min(len(body), 8)]))
		case 5:
			w.Interrupted()
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestToolSeeds: FuzzTools's seeds reach the audit's rules: an episode
// and the next one's start, the same starting with the terminal
// observation (the note), and a feedback resent across a reconnect (SPEC
// 4.2 and 7.6).
func TestToolSeeds(t *testing.T) {
	audit := func(seed []byte) *ledgertool.Auditor {
		a := ledgertool.NewAuditor()
		if _, err := ledgertool.Walk(scriptLedger(t, seed, ledger.Digest), func(ev *ledgertool.Event) error { a.Add(ev); return nil }); err != nil {
			t.Fatal(err)
		}
		return a
	}
	seeds := toolSeeds(t)
	if a := audit(seeds[0]); len(a.Violations)+len(a.Notes) != 0 || a.EpisodeCount != 1 {
		t.Fatalf("an episode: violations %v, notes %v, %d episodes; want none, none, 1", a.Violations, a.Notes, a.EpisodeCount)
	}
	if a := audit(seeds[1]); len(a.Violations) != 0 || len(a.Notes) != 1 {
		t.Fatalf("the terminal observation carried: violations %v, notes %v; want the note", a.Violations, a.Notes)
	}
	a := audit(seeds[2])
	if len(a.Violations) != 2 || a.Violations[0].Clause != "4.2" || a.Violations[1].Clause != "7.6" {
		t.Fatalf("the resent feedback: violations %v; want 4.2 and 7.6", a.Violations)
	}
}
