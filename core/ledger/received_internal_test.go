package ledger

import (
	"bytes"
	"errors"
	"io"
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
// edges, the tails shorter than a word, a single differing byte).
func TestChangedSpan(t *testing.T) {
	for n := 0; n <= 40; n++ {
		last := make([]byte, n)
		for i := range last {
			last[i] = byte(3*i + 1)
		}
		check := func(msg []byte) {
			t.Helper()
			lo, hi := changedSpan(msg, last)
			wlo, whi := changedSpanBytewise(msg, last)
			if lo != wlo || hi != whi {
				t.Fatalf("n %d, msg %x, last %x: span [%d, %d), want [%d, %d)", n, msg, last, lo, hi, wlo, whi)
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
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 || len(ops) > 400 {
			return
		}
		path := filepath.Join(t.TempDir(), "l")
		w, err := Create(path, Options{Level: Level(ops[0] & 1), FlushInterval: 250e6})
		if err != nil {
			t.Fatal(err)
		}
		release := HoldFlushes(w)
		msg := []byte("an action message of 40 bytes, or so...")
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
			case 4: // over maxDelta, and back
				if len(msg) <= maxDelta {
					msg = append(msg, make([]byte, maxDelta)...)
				} else {
					msg = msg[:40]
				}
			case 5:
				refuse = true
			case 6:
				release()
				w.flush()
				release = HoldFlushes(w)
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
		got, lost := readBackRecvs(t, w.Path())
		if int(lost) != refusedN {
			t.Fatalf("%d records lost, %d refused", lost, refusedN)
		}
		if len(got) != len(want) {
			t.Fatalf("%d receives read back, %d taken", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("receive %d reads back as other bytes:\n got %x\nwant %x", i, got[i], want[i])
			}
		}
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
	expect(frameRecvSpan, frameHeader+recvSpanFixed+10, "bytes 40-49 changed")
	w.Received(msg)
	expect(frameRecvSpan, frameHeader+recvSpanFixed, "the same message")
	refused(w, func() { w.Received(msg) })
	w.Received(msg)
	expect(frameRecv, frameHeader+8+100, "after a refused one")
	w.Received(msg[:99])
	expect(frameRecv, frameHeader+8+99, "another length")
}

// readBackRecvs reads the file at path and returns its recv records'
// messages, and the records it counts as lost.
func readBackRecvs(t *testing.T, path string) ([][]byte, int64) {
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
	var msgs [][]byte
	var lost int64
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return msgs, lost
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case KindLost:
			lost += rec.Count
		case KindRecv:
			m, err := r.Message(rec)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, bytes.Clone(m))
		}
	}
}
