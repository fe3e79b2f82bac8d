package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

// TestSentByChanges records an env loop that reuses its two messages, as a
// client does, so that most sends are queued as their changes alone
// (frameSendSame), with the layout changing now and then (a text
// observation, a terminal flag) and the queue refusing records now and
// then: the one that starts a layout, and ones that repeat it; and a send
// recorded without its observation, as no client records one. Every
// record written must read back as the message sent, whole at full level
// and with zeros for the observation data at digest level; the records
// lost must be counted.
func TestSentByChanges(t *testing.T) {
	for _, level := range []Level{Digest, Full} {
		t.Run(level.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l")
			w, err := Create(path, Options{Level: level, FlushInterval: 250e6})
			if err != nil {
				t.Fatal(err)
			}
			img, state := make([]byte, 2*4*4*3), make([]float64, 6)
			obs := &wire.Observation{
				Images: []wire.NamedArray{{Name: "cam", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 4, 4, 3}, Data: img}}},
				States: []wire.NamedArray{{Name: "q", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 3}, Data: wire.BytesOf(state)}}},
				Text:   []string{"a", "b"},
			}
			envs, steps, rewards := []int64{0, 1}, []int64{0, 0}, []float32{0, 0}
			terminated, truncated := []bool{false, false}, []bool{false, false}
			in := &wire.Infer{EnvIndices: envs, StepIDs: steps, Obs: obs}
			fb := &wire.Feedback{EnvIndices: envs, StepIDs: steps, Obs: obs, Rewards: rewards, Terminated: terminated, Truncated: truncated}
			var mi, mf wire.Message
			want := map[int64][]byte{} // by step_ids[0]: infers even, feedbacks odd
			frames := map[byte]int{}
			sends := 0
			for round := 0; round < 12; round++ {
				w.flushMu.Lock() // the queue is the test's until the round's end
				for k := 0; k < 10; k++ {
					i := int64(round*10 + k)
					if k == 0 { // a new layout for both messages
						obs.Text[1] = string(rune('b' + round))
					}
					terminated[1] = k == 5 // and for the feedback, twice a round
					for j := range img {
						img[j] = byte(int(i) * (j + 1))
					}
					state[0], state[5] = float64(i), -float64(i)
					rewards[0], rewards[1] = float32(i)/2, 1
					// The queue refuses: a round's first infer (it starts
					// a layout) every third round, and the sends of k == 7.
					refuse := round%3 == 1 && k == 0 || k == 7
					for _, m := range []*wire.Message{&mi, &mf} {
						steps[0], steps[1] = 2*i, i
						var err error
						if m == &mi {
							err = wire.EncodeInfer(m, in)
						} else {
							steps[0]++
							err = wire.EncodeFeedback(m, fb)
						}
						if err != nil {
							t.Fatal(err)
						}
						w.mu.Lock()
						if refuse {
							w.limit = len(w.queue)
						}
						w.mu.Unlock()
						// Now and then an infer is recorded without its
						// observation: its slot no longer describes it,
						// nor the next one, which has it again.
						o := obs
						if m == &mi && k == 3 {
							o = nil
						}
						w.Sent(m, o)
						w.mu.Lock()
						w.limit = 8 << 20
						w.mu.Unlock()
						sends++
						want[steps[0]] = rebuiltAt(m, o, level)
						refuse = refuse && k == 7 // a round's first feedback is taken
					}
				}
				for f := w.queue; len(f) > 0; f = f[frameHeader+int(binary.LittleEndian.Uint32(f[1:])):] {
					frames[f[0]]++
				}
				w.flushMu.Unlock()
				w.flush()
			}
			// A message never encoded (Layout 0, no segments) is
			// recorded whole, each time.
			var empty wire.Message
			w.Sent(&empty, nil)
			w.Sent(&empty, nil)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if frames[frameSendSame] < sends/2 || frames[frameSend] < 24 {
				t.Fatalf("frames queued: %v; the test means most sends to be queued as their changes", frames)
			}
			got, lost := readSends(t, path)
			if len(got)+int(lost) != sends || lost != 12*2+4 {
				t.Fatalf("%d sends read back and %d lost, of %d; want %d lost", len(got), lost, sends, 12*2+4)
			}
			for id, m := range got {
				if !bytes.Equal(m, want[id]) {
					t.Fatalf("the send with step_ids[0] %d reads back as other bytes", id)
				}
			}
		})
	}
}

// rebuiltAt is m as a reader rebuilds it from a ledger at level: at digest
// level, with zeros for the observation data.
func rebuiltAt(m *wire.Message, obs *wire.Observation, level Level) []byte {
	var b []byte
	for i := 0; i < m.Segments(); i++ {
		seg := m.Segment(i)
		if _, ok := m.ObsRowBytes(i, obs); ok && level == Digest {
			seg = make([]byte, len(seg))
		}
		b = append(b, seg...)
	}
	return b
}

// readSends reads a ledger's sends back, by the first of their step_ids,
// and the records it says were lost.
func readSends(t *testing.T, path string) (map[int64][]byte, int64) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sends, lost, empty := map[int64][]byte{}, int64(0), 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			if empty != 2 {
				t.Fatalf("%d empty sends read back, want 2", empty)
			}
			return sends, lost
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case KindLost:
			lost += rec.Count
		case KindSend:
			m, err := r.Message(rec)
			if err != nil {
				t.Fatal(err)
			}
			if len(m) == 0 {
				empty++
				continue
			}
			var id int64
			if in, err := wire.DecodeInfer(m); err == nil {
				id = in.StepIDs[0]
			} else if fb, err := wire.DecodeFeedback(m); err == nil {
				id = fb.StepIDs[0]
			} else {
				t.Fatalf("send record %d decodes as neither an infer nor a feedback", rec.Seq)
			}
			if _, dup := sends[id]; dup {
				t.Fatalf("two sends with step_ids[0] %d", id)
			}
			sends[id] = bytes.Clone(m)
		}
	}
}

// TestHalfFullWakesWriter: the record that takes the queue past half its
// limit wakes the background writer (once until it flushes), so that a
// high rate of records meets a flush before it meets the limit.
func TestHalfFullWakesWriter(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{QueueBytes: 64 << 10, FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.flushMu.Lock()
	woken := func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.kicked }
	msg := make([]byte, 1000)
	for len(w.queue) <= 32<<10 {
		if woken() {
			t.Fatalf("woken with %d bytes queued, at most half of %d", len(w.queue), w.limit)
		}
		w.Received(msg)
	}
	if !woken() {
		t.Fatalf("%d bytes queued, past half of %d, and the writer not woken", len(w.queue), w.limit)
	}
	w.flushMu.Unlock()
	w.flush()
	if woken() || len(w.queue) != 0 {
		t.Fatal("a flush left the queue or the wake-up behind")
	}
}
