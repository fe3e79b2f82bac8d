package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
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
		if _, ok := rowCut(m, i, seg, obs); ok && level == Digest {
			seg = make([]byte, len(seg))
		}
		b = append(b, seg...)
	}
	return b
}

// readBack reads a ledger's messages of kind (KindSend, KindRecv), in
// order, and the records it says were lost.
func readBack(t *testing.T, path, kind string) ([][]byte, int64) {
	t.Helper()
	var msgs [][]byte
	var lost int64
	eachRecord(t, path, func(r *Reader, rec *Record) {
		switch rec.Kind {
		case KindLost:
			lost += rec.Count
		case kind:
			m, err := r.Message(rec)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, bytes.Clone(m))
		}
	})
	return msgs, lost
}

// eachRecord reads the ledger at path and calls fn with each record, in
// order (valid during the call only).
func eachRecord(t *testing.T, path string, fn func(r *Reader, rec *Record)) {
	t.Helper()
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
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(r, rec)
	}
}

// checkReadBack fails the test unless the messages read back (got, and
// lost, the records the ledger says were lost) are those the queue took
// (want), and as many were lost as the queue was made to refuse.
func checkReadBack(t *testing.T, what string, got, want [][]byte, lost int64, refused int) {
	t.Helper()
	if int(lost) != refused {
		t.Fatalf("%d records lost, %d refused", lost, refused)
	}
	if len(got) != len(want) {
		t.Fatalf("%d %s read back, %d taken", len(got), what, len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s %d reads back as other bytes:\n got %x\nwant %x", what, i, got[i], want[i])
		}
	}
}

// readSends reads a ledger's sends back, by the first of their step_ids,
// and the records it says were lost. Two sends must be empty (the message
// never encoded that TestSentByChanges records).
func readSends(t *testing.T, path string) (map[int64][]byte, int64) {
	t.Helper()
	sends, lost := readBack(t, path, KindSend)
	byID, empty := map[int64][]byte{}, 0
	for _, m := range sends {
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
			t.Fatal("a send decodes as neither an infer nor a feedback")
		}
		if _, dup := byID[id]; dup {
			t.Fatalf("two sends with step_ids[0] %d", id)
		}
		byID[id] = m
	}
	if empty != 2 {
		t.Fatalf("%d empty sends read back, want 2", empty)
	}
	return byID, lost
}

// sendsOf records sends through a fresh ledger at level (each a function
// that encodes and sends, returning the message as the ledger must read it
// back, or nil when the queue is to refuse it) and checks that the ledger
// reads back exactly the messages it took.
func sendsOf(t *testing.T, level Level, sends ...func(w *Writer) []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{Level: level, FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for _, send := range sends {
		if m := send(w); m != nil {
			want = append(want, m)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := readBack(t, path, KindSend)
	if len(got) != len(want) {
		t.Fatalf("%d sends read back, %d taken", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("send %d reads back as other bytes:\n got %x\nwant %x", i, got[i], want[i])
		}
	}
}

// refused runs send with a queue that takes nothing more.
func refused(w *Writer, send func()) {
	w.mu.Lock()
	limit := w.limit
	w.limit = len(w.queue)
	w.mu.Unlock()
	send()
	w.mu.Lock()
	w.limit = limit
	w.mu.Unlock()
}

// sendAs sends m as a connection does: the Digester, if digested, shown
// every byte it copies with dig, the observation m was encoded from;
// then Sent given obs (which may be another, or nil), or, if refuse, with
// the queue full. It reports whether the queue could take the send.
func sendAs(w *Writer, m *wire.Message, dig, obs *wire.Observation, digested, refuse bool) bool {
	if digested {
		if d := w.BeginSend(m, dig); d != nil {
			for i := 0; i < m.Segments(); i++ {
				d.Copied(i, m.Segment(i))
			}
		}
	}
	if refuse {
		refused(w, func() { w.Sent(m, obs) })
		return false
	}
	w.Sent(m, obs)
	return true
}

// TestSendsFromOneSlotInARow: the writer patches a send of a known layout
// over the bytes that changed only against its slot's last send; when that
// is the last send of all (two infers in a row, as after a reconnect; a
// feedback the queue refused between two infers), the send two back is
// older, and the patch must not be made against it.
func TestSendsFromOneSlotInARow(t *testing.T) {
	state := []float64{1, 2}
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "q", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 2}, Data: wire.BytesOf(state)}}}}
	steps, rewards, flags := []int64{0}, []float32{0}, []bool{false}
	in := &wire.Infer{EnvIndices: []int64{0}, StepIDs: steps, Obs: obs}
	fb := &wire.Feedback{EnvIndices: []int64{0}, StepIDs: steps, Obs: obs, Rewards: rewards, Terminated: flags, Truncated: flags}
	for _, level := range []Level{Digest, Full} {
		var mi, mf wire.Message
		infer := func(step int64, s1 float64) func(*Writer) []byte {
			return func(w *Writer) []byte {
				steps[0], state[1] = step, s1
				if err := wire.EncodeInfer(&mi, in); err != nil {
					t.Fatal(err)
				}
				w.Sent(&mi, obs)
				return rebuiltAt(&mi, obs, level)
			}
		}
		feedback := func(reward float32, refuse bool) func(*Writer) []byte {
			return func(w *Writer) []byte {
				rewards[0] = reward
				if err := wire.EncodeFeedback(&mf, fb); err != nil {
					t.Fatal(err)
				}
				if refuse {
					refused(w, func() { w.Sent(&mf, obs) })
					return nil
				}
				w.Sent(&mf, obs)
				return rebuiltAt(&mf, obs, level)
			}
		}
		sendsOf(t, level, infer(0, 2), infer(7, 2), infer(7, 9), infer(8, 9))
		sendsOf(t, level, infer(0, 2), feedback(0, false), infer(1, 2), feedback(1, true),
			infer(2, 2), feedback(5, true), infer(2, 3), feedback(6, false), infer(3, 3))
	}
}

// TestSendWithOtherCuts: at digest level, a send of a known layout whose
// observation cuts other segments, or the same ones in other rows, than
// its slot's last send (an obs other than the one the message was encoded
// from, with the same totals) is recorded whole, as it is.
func TestSendWithOtherCuts(t *testing.T) {
	img := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	st := []byte{21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36}
	enc := &wire.Observation{
		Images: []wire.NamedArray{{Name: "i", Array: wire.Array{DType: wire.Uint8, Shape: []int{4, 2, 2, 1}, Data: img}}},
		States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{4, 4}, Data: st}}},
	}
	onlyImg, onlyState := &wire.Observation{Images: enc.Images}, &wire.Observation{States: enc.States}
	// The image again, as 2 rows of 8: the same digest bytes, other cuts.
	wide := &wire.Observation{Images: []wire.NamedArray{{Name: "i", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 8}, Data: img}}}}
	in := &wire.Infer{EnvIndices: []int64{0, 1, 2, 3}, StepIDs: []int64{0, 0, 0, 0}, Obs: enc}
	var m wire.Message
	send := func(o *wire.Observation) func(*Writer) []byte {
		return func(w *Writer) []byte {
			if err := wire.EncodeInfer(&m, in); err != nil {
				t.Fatal(err)
			}
			w.Sent(&m, o)
			return rebuiltAt(&m, o, Digest)
		}
	}
	sendsOf(t, Digest, send(onlyImg), send(onlyState), send(onlyImg), send(wide), send(enc), send(enc))
}

// TestSendCutsCheckedForAnotherObs: a send of a known layout given its
// slot's observation is queued as its changes without its cuts being
// checked (sentSame); given another observation its cuts are checked,
// and it is queued as its changes when they are its slot's (the same
// arrays in another Observation, which then becomes the slot's), whole
// when they are not. Every send reads back as sent.
func TestSendCutsCheckedForAnotherObs(t *testing.T) {
	st := []byte{21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36}
	enc := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{4, 4}, Data: st}}}}
	same := &wire.Observation{States: enc.States}
	wide := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 8}, Data: st}}}}
	in := &wire.Infer{EnvIndices: []int64{0, 1, 2, 3}, StepIDs: []int64{0, 0, 0, 0}, Obs: enc}
	var m wire.Message
	var tags []byte
	send := func(o *wire.Observation) func(*Writer) []byte {
		return func(w *Writer) []byte {
			in.StepIDs[0]++
			st[0]++
			if err := wire.EncodeInfer(&m, in); err != nil {
				t.Fatal(err)
			}
			w.flushMu.Lock() // no flush takes the queue until its frame is read
			defer w.flushMu.Unlock()
			w.mu.Lock()
			at := len(w.queue)
			w.mu.Unlock()
			w.Sent(&m, o)
			w.mu.Lock()
			tags = append(tags, w.queue[at])
			w.mu.Unlock()
			return rebuiltAt(&m, o, Digest)
		}
	}
	sendsOf(t, Digest, send(enc), send(enc), send(same), send(same), send(enc), send(wide), send(enc), send(enc))
	want := []byte{frameSend, frameSendSame, frameSendSame, frameSendSame, frameSendSame, frameSend, frameSend, frameSendSame}
	if !bytes.Equal(tags, want) {
		t.Fatalf("frames queued %v, want %v", tags, want)
	}
}

// TestLongSendsQueuedWhole: a send whose kept bytes are over maxDelta is
// queued whole each time, even with a known layout: the writer records it
// whole, so the queue's limit must count it whole to bound the writer's
// work (a text observation of 100 Ki characters, 400 KiB as <U4, and
// 1 MiB of queue: 2 are taken).
func TestLongSendsQueuedWhole(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{Level: Digest, QueueBytes: 1 << 20, FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	release := HoldFlushes(w)
	defer release()
	obs := &wire.Observation{Text: []string{string(bytes.Repeat([]byte("x"), 100<<10))}}
	in := &wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs}
	var m wire.Message
	for i := 0; i < 20; i++ {
		in.StepIDs[0] = int64(i)
		if err := wire.EncodeInfer(&m, in); err != nil {
			t.Fatal(err)
		}
		w.Sent(&m, obs)
	}
	frames := map[byte]int{}
	for f := w.queue; len(f) > 0; f = f[frameHeader+int(binary.LittleEndian.Uint32(f[1:])):] {
		frames[f[0]]++
	}
	if frames[frameSendSame] != 0 || frames[frameSend]+w.lostCount != 20 || w.lostCount == 0 {
		t.Fatalf("frames queued %v, %d lost: want only whole sends, and the rest lost", frames, w.lostCount)
	}
}

// TestDigestedSendRecordedWithoutCuts: at digest level a message whose rows
// the connection digested (BeginSend with obs, the Digester shown every
// segment) but that is then recorded with an observation that cuts nothing
// (Sent(m, nil): "a send recorded without its observation", which
// TestSentByChanges and FuzzSends treat as a case to handle) is queued as a
// frameSend with digests and no cuts. appendSend writes "d" only when there
// are cuts, so the reader's slot takes 0 digest bytes, while the writer's
// base and the caller's slot count the Digester's: the next send of the
// same layout, digested the same way, is a same-layout record whose "v"
// carries those digests, and the reader refuses it ("a same-layout send of
// N bytes, where its slot's digests and runs take M"). Found by review of
// 971ce36; before it, the writer rebuilt that send as a whole record.
func TestDigestedSendRecordedWithoutCuts(t *testing.T) {
	state := []float64{1, 2}
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "q", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 2}, Data: wire.BytesOf(state)}}}}
	steps := []int64{0}
	in := &wire.Infer{EnvIndices: []int64{0}, StepIDs: steps, Obs: obs}
	var m wire.Message
	for _, recordedWith := range []*wire.Observation{nil, {}} {
		path := filepath.Join(t.TempDir(), "l")
		w, err := Create(path, Options{Level: Digest, FlushInterval: 250e6})
		if err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		for step := int64(0); step < 3; step++ {
			steps[0], state[1] = step, float64(step)
			if err := wire.EncodeInfer(&m, in); err != nil {
				t.Fatal(err)
			}
			// What the connection does with a Digester (connection.go's
			// digester, conn.WriteMessageObserved): every segment shown.
			d := w.BeginSend(&m, obs)
			for i := 0; i < m.Segments(); i++ {
				d.Copied(i, m.Segment(i))
			}
			w.Sent(&m, recordedWith)
			want = append(want, rebuiltAt(&m, recordedWith, Digest))
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// readBack fails the test on the reader's error.
		got, _ := readBack(t, path, KindSend)
		if len(got) != len(want) {
			t.Fatalf("%d sends read back, %d sent", len(got), len(want))
		}
	}
}

// TestSendCutsOfAnObsReshapedSince: a send recorded with an observation
// other than the one its message was encoded from has its cuts found with
// that observation, whose arrays the encoder never compared; that one,
// reshaped in place since (its data the same length, as the C API's
// scratch Observation is), is then the one the next encoding of the same
// layout is made from and recorded with. sentSame took that send's row
// sizes from its slot, as found with the observation's old shapes, and
// recorded the rows it sent as half rows: cuts of 4-byte rows for the
// 8-byte rows of shape [2 8], four digests of their halves for two rows
// (found by FuzzSendsReshaped). Each send must read back with the cuts
// and digests of the observation it was recorded with, as it was then.
func TestSendCutsOfAnObsReshapedSince(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	enc := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 8}, Data: data}}}}
	other := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{4, 4}, Data: data}}}}
	in := &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}}
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{Level: Digest, FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	var m wire.Message
	type rec struct {
		rowBytes int64
		digests  []uint32
	}
	var want []rec
	send := func(from, given *wire.Observation) {
		in.Obs = from
		in.StepIDs[0]++
		if err := wire.EncodeInfer(&m, in); err != nil {
			t.Fatal(err)
		}
		w.Sent(&m, given)
		rb := given.States[0].Array.RowBytes()
		r := rec{rowBytes: int64(rb)}
		for k := 0; k < len(data); k += rb {
			r.digests = append(r.digests, RowDigest(data[k:k+rb]))
		}
		want = append(want, r)
	}
	send(enc, other)                   // a frameSend, cut in rows of 4
	other.States[0].Array.Shape[0] = 2 // other reshaped in place,
	other.States[0].Array.Shape[1] = 8 // as enc is
	send(other, other)                 // the same layout (the plan matched enc's shapes)
	data[0]++                          // and again, unchanged
	send(other, other)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	i := 0
	eachRecord(t, path, func(r *Reader, rc *Record) {
		if rc.Kind != KindSend {
			return
		}
		if _, err := r.Message(rc); err != nil {
			t.Fatal(err)
		}
		if i >= len(want) {
			t.Fatalf("more than %d sends read back", len(want))
		}
		if len(rc.Cuts) != 1 || rc.Cuts[0].RowBytes != want[i].rowBytes || !slices.Equal(rc.Digests, want[i].digests) {
			t.Errorf("send %d reads back with cuts %v, digests %x; want rows of %d, digests %x", i, rc.Cuts, rc.Digests, want[i].rowBytes, want[i].digests)
		}
		i++
	})
	if i != len(want) {
		t.Fatalf("%d sends read back, %d sent", i, len(want))
	}
}

// TestSendOwnObsNotRead: a send of a known layout given the observation
// its message was encoded from, as its slot's cuts were, is queued as its
// changes with the slot's row sizes, its observation's arrays not read
// (sentSame): here their shapes, changed after the encoding, would make
// the check fail and the send be queued whole.
func TestSendOwnObsNotRead(t *testing.T) {
	data := make([]byte, 16)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 8}, Data: data}}}}
	in := &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs}
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{Level: Digest, FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	release := HoldFlushes(w)
	defer release()
	var m wire.Message
	var tags []byte
	for i := 0; i < 2; i++ {
		if err := wire.EncodeInfer(&m, in); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			obs.States[0].Array.Shape = []int{4, 4} // not what was encoded
		}
		at := len(w.queue)
		w.Sent(&m, obs)
		tags = append(tags, w.queue[at])
		obs.States[0].Array.Shape = []int{2, 8}
	}
	if want := []byte{frameSend, frameSendSame}; !bytes.Equal(tags, want) {
		t.Fatalf("frames queued %v, want %v", tags, want)
	}
}
