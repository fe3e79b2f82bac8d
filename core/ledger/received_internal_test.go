package ledger

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// changedSpanBytewise is changedSpan's rule a byte at a time.
func changedSpanBytewise(msg, last []byte) (lo, hi int) {
	lo, hi = 0, len(msg)
	for lo < hi && msg[lo] == last[lo] {
		lo++
	}
	if lo == hi {
		return 0, 0
	}
	for msg[hi-1] == last[hi-1] {
		hi--
	}
	return lo, hi
}

// TestChangedSpan: the word scan finds the bytewise span for every length
// up to 40 and every placement of one or two differing bytes (the words'
// edges, the tails shorter than a word, a single differing byte), given
// any guess of it.
func TestChangedSpan(t *testing.T) {
	for n := 0; n <= 40; n++ {
		last := make([]byte, n)
		for i := range last {
			last[i] = byte(3*i + 1)
		}
		check := func(msg []byte) {
			t.Helper()
			wlo, whi := changedSpanBytewise(msg, last)
			// Every guess: none, right, wrong either way, out of range.
			for lo0 := -1; lo0 <= n+1; lo0++ {
				for hi0 := lo0 - 1; hi0 <= n+1; hi0++ {
					if lo, hi := changedSpan(msg, last, lo0, hi0); lo != wlo || hi != whi {
						t.Fatalf("n %d, msg %x, last %x, guess [%d, %d): span [%d, %d), want [%d, %d)", n, msg, last, lo0, hi0, lo, hi, wlo, whi)
					}
				}
			}
		}
		check(bytes.Clone(last))
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				msg := bytes.Clone(last)
				msg[i] ^= 0x80
				msg[j] ^= 0x01
				check(msg)
			}
		}
	}
}

// TestOneRun: oneRun is true exactly when appendPatch codes the span as
// one run, and the writer's one run is then appendPatch's record, for
// spans of every length up to 90 (the words of noEqualRun, the 16-byte
// steps of oneRun's search for equal pairs, and the windows it checks
// around one) whose first and last bytes differ and whose other bytes are
// equal with probabilities from none to most.
func TestOneRun(t *testing.T) {
	rng := uint64(1)
	next := func() uint64 {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return rng
	}
	for n := 1; n <= 90; n++ {
		for _, equalIn8 := range []uint64{0, 1, 2, 4, 6, 7} {
			for trial := 0; trial < 300; trial++ {
				cur, prev := make([]byte, n), make([]byte, n)
				for i := range cur {
					cur[i] = byte(next())
					prev[i] = cur[i]
					if next()%8 >= equalIn8 {
						prev[i] = cur[i] ^ byte(1+next()%255)
					}
				}
				prev[0], prev[n-1] = ^cur[0], ^cur[n-1]
				patch, lits := appendPatch(nil, nil, cur, prev, 17)
				one := binary.AppendUvarint(binary.AppendUvarint(nil, 17), uint64(n))
				if got, want := oneRun(cur, prev), bytes.Equal(patch, one) && bytes.Equal(lits, cur); got != want {
					t.Fatalf("cur %x\nprev %x: oneRun %v, appendPatch's patch %x (one run: %v)", cur, prev, got, patch, want)
				}
			}
		}
	}
}

// FuzzRecvs drives the writer with received messages that change as a
// server's do (values within, length, all or nothing), refusals by the
// queue and flushes anywhere, messages over maxDelta among them, and
// checks that the ledger reads back every message the queue took, byte
// for byte, and counts the ones it refused as lost: the caller's spans
// (frameRecvSpan) and the writer's history must agree through all of it.
func FuzzRecvs(f *testing.F) {
	f.Add([]byte{0, 0, 1, 9, 0, 17, 0, 2, 0, 3, 0, 0, 4, 0, 0})
	f.Add([]byte{8, 0, 1, 33, 3, 0, 0, 2, 4, 0, 5, 0, 6, 0, 0, 1, 200, 0})
	f.Add([]byte{0, 6, 0, 0, 3, 0, 7, 0, 0, 1, 255, 0, 4, 0})
	// A reviewer's: over 64 KiB and back to the length before it, the
	// caller's copy stale; a span, a refusal, then the whole message.
	f.Add([]byte{0, 0, 11, 0, 4, 0, 4, 0})
	f.Add([]byte{0, 0, 7, 0, 5, 0, 7, 0})
	f.Add([]byte{0, 0, 2, 0, 5, 0, 2, 0, 0, 10, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 || len(ops) > 400 {
			return
		}
		path := filepath.Join(t.TempDir(), "l")
		// A queue that takes every frame 400 ops can make (over 64 KiB
		// each): only the refusals the ops ask for are lost.
		w, err := Create(path, Options{Level: Level(ops[0] & 1), FlushInterval: 250e6, QueueBytes: 32 << 20})
		if err != nil {
			t.Fatal(err)
		}
		release := HoldFlushes(w)
		msg := []byte("an action message of 40 bytes, or so...")
		short := 0 // the length before case 4 made msg over 64 KiB
		var want [][]byte
		refuse, refusedN := false, 0
		for k, b := range ops[1:] {
			switch b % 8 {
			case 0: // receive msg
				if refuse {
					refused(w, func() { w.Received(msg) })
					refusedN++
				} else {
					w.Received(msg)
					want = append(want, bytes.Clone(msg))
				}
				refuse = false
			case 1: // change one byte
				if len(msg) > 0 {
					msg[int(b>>3)%len(msg)] += b | 1
				}
			case 2: // change a run of bytes, as an action's values
				if len(msg) > 0 {
					at := int(b>>3) % len(msg)
					for i := at; i < min(len(msg), at+13); i++ {
						msg[i] ^= byte(k) | 1
					}
				}
			case 3: // another length
				if b&8 != 0 {
					msg = append(msg, b)
				} else if len(msg) > 0 {
					msg = msg[:len(msg)-1]
				}
			case 4: // over maxDelta, and back to the length before
				if len(msg) <= maxDelta {
					short = len(msg)
					msg = append(msg, make([]byte, maxDelta)...)
				} else {
					msg = msg[:short]
				}
			case 5:
				refuse = true
			case 6:
				release = flushNow(w, release)
			case 7: // every byte
				for i := range msg {
					msg[i] = ^msg[i]
				}
			}
		}
		release()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, lost := readBack(t, w.Path(), KindRecv)
		checkReadBack(t, "receives", got, want, lost, refusedN)
	})
}

// TestRecvSpanQueued: a message of the last one's length is queued as its
// changed span, not whole; after one the queue refused, or of another
// length, whole again. What FuzzRecvs checks reads back whatever the frames
// are; this checks the frames are the small ones.
func TestRecvSpanQueued(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	release := HoldFlushes(w)
	defer release()
	lastFrame := func() (byte, int) {
		w.mu.Lock()
		defer w.mu.Unlock()
		q := w.queue
		for len(q) > 0 {
			n := frameHeader + int(uint32(q[1])|uint32(q[2])<<8|uint32(q[3])<<16|uint32(q[4])<<24)
			if n == len(q) {
				return q[0], n
			}
			q = q[n:]
		}
		return 0, 0
	}
	msg := bytes.Repeat([]byte{7}, 100)
	expect := func(tag byte, size int, what string) {
		t.Helper()
		if gt, gs := lastFrame(); gt != tag || gs != size {
			t.Fatalf("%s: the last frame is tag %d, %d bytes; want tag %d, %d bytes", what, gt, gs, tag, size)
		}
	}
	w.Received(msg)
	expect(frameRecv, frameHeader+8+100, "the first message")
	msg[40], msg[49] = 1, 2
	w.Received(msg)
	expect(frameRecvSpan, frameHeader+recvSpanFixed+10, "bytes 40 and 49 changed (8 equal between: patch-coded)")
	w.Received(msg)
	expect(frameRecvRun, frameHeader+recvSpanFixed, "the same message")
	refused(w, func() { w.Received(msg) })
	w.Received(msg)
	expect(frameRecv, frameHeader+8+100, "after a refused one")
	w.Received(msg[:99])
	expect(frameRecv, frameHeader+8+99, "another length")
	for i := range msg[:99] {
		msg[i]++
	}
	w.Received(msg[:99])
	expect(frameRecv, frameHeader+8+99, "every byte changed")
	msg[0]++
	w.Received(msg[:99])
	expect(frameRecvRun, frameHeader+recvSpanFixed+1, "one byte changed after a whole one of that length")

	// The longest message the writer patch-codes is kept as the base of
	// the next; one byte longer is not (the writer records it whole and
	// forgets its history).
	for _, c := range []struct {
		n   int
		tag byte
	}{{maxDelta, frameRecvRun}, {maxDelta + 1, frameRecv}} {
		long := make([]byte, c.n)
		w.Received(long)
		long[7] = 1
		w.Received(long)
		if tag, _ := lastFrame(); tag != c.tag {
			t.Fatalf("a %d-byte message after one of its length: tag %d, want %d", c.n, tag, c.tag)
		}
	}
}

// TestRecvBackAfterSpan: a message that goes back to the one before its
// last, queued whole after a refusal, reads back as itself. The writer
// patch-codes it against its history, which must hold the last message
// the span made, not the one before (a writer that did not apply the span
// wrote an empty patch here, and the reader gave the span's message).
func TestRecvBackAfterSpan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	a := bytes.Repeat([]byte("action.."), 8)
	b := bytes.Clone(a)
	b[20], b[30] = 'x', 'y'
	w.Received(a)
	w.Received(b) // a span
	refused(w, func() { w.Received(b) })
	w.Received(a) // whole, patched against b
	w.Received(b) // a span again
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, lost := readBack(t, w.Path(), KindRecv)
	checkReadBack(t, "receives", got, [][]byte{a, b, a, b}, lost, 1)
}

// TestRecvSpanSparse: a span whose bytes mostly did not change (an action
// of discrete values: one byte in eight changes) is patch-coded, so that
// the unchanged bytes within it stay out of the literals, which zstd does
// not see: a span written as one run made such a file five times larger.
func TestRecvSpanSparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 362)
	copy(msg, "an action message's own bytes")
	const n = 4000
	rng := uint32(1)
	for i := 0; i < n; i++ {
		for k := 130; k+8 <= len(msg); k += 8 { // 28 int64 values in 0..3
			rng ^= rng << 13
			rng ^= rng >> 17
			rng ^= rng << 5
			msg[k] = byte(rng & 3)
		}
		w.Received(msg)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	// About 21 changed bytes a message, each a run of its own: under 60
	// bytes a message with the runs, the time and zstd's share; 221 with
	// the span stored whole.
	if per := float64(st.Size()) / n; per > 60 {
		t.Fatalf("%.1f bytes per receive of 28 discrete values: the span's unchanged bytes are stored", per)
	}
}

// TestRecvSpanWithoutBase: a span frame the writer's history cannot take
// (no message yet, another length, a span past the end; ReceivedAt never
// queues one) appends nothing and is counted as lost, and the receive
// after it reads back.
func TestRecvSpanWithoutBase(t *testing.T) {
	var h history
	for _, c := range []struct {
		name      string
		base      []byte
		n, lo     int
		span      []byte
		wantTaken bool
	}{
		{"no message yet", nil, 4, 0, []byte{1}, false},
		{"another length", []byte("abcd"), 5, 0, []byte{1}, false},
		{"offset past the end", []byte("abcd"), 4, 5, nil, false},
		{"span past the end", []byte("abcd"), 4, 3, []byte{1, 2}, false},
		{"span at the end", []byte("abcd"), 4, 3, []byte{1}, true},
	} {
		h.forget()
		if c.base != nil {
			if _, err := h.decode(c.base, 0, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		b, lits, ok := h.appendSpan([]byte("rec"), []byte("lit"), c.n, c.lo, c.span, false)
		if ok != c.wantTaken || (!ok && (string(b) != "rec" || string(lits) != "lit")) {
			t.Fatalf("%s: taken %v, record %q, literals %q; want taken %v, and nothing appended when not", c.name, ok, b, lits, c.wantTaken)
		}
	}

	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	release := HoldFlushes(w)
	w.mu.Lock() // a frameRecvRun of a 4-byte message, before any receive
	w.queue = append(w.queue, frameRecvRun, recvSpanFixed+1, 0, 0, 0)
	w.queue = binary.LittleEndian.AppendUint64(w.queue, 1)
	w.queue = binary.LittleEndian.AppendUint32(w.queue, 4)
	w.queue = binary.LittleEndian.AppendUint32(w.queue, 0)
	w.queue = append(w.queue, 'x')
	w.mu.Unlock()
	w.Received([]byte("next"))
	release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, lost := readBack(t, w.Path(), KindRecv)
	checkReadBack(t, "receives", got, [][]byte{[]byte("next")}, lost, 1)
}

// BenchmarkOneRun is the caller's check of a SMALL action's span (245
// bytes of a policy's float32 values, every one changed): the receive's
// largest part on the caller's thread (BenchmarkRecordExchange/varying).
// 64 actions in turn, each checked against the one before, as the client
// receives them: one pair checked again and again let the branch
// predictor learn its words.
func BenchmarkOneRun(b *testing.B) {
	actions := make([][]byte, 65)
	for i, rng := 0, uint32(1); i < len(actions); i++ {
		actions[i] = make([]byte, 245)
		rng = newAction(actions[i], rng)
	}
	b.SetBytes(245)
	for i := 0; i < b.N; i++ {
		if k := i % 64; !oneRun(actions[k+1], actions[k]) {
			b.Fatal("a policy's changed values hold a run of 4 equal bytes")
		}
	}
}
