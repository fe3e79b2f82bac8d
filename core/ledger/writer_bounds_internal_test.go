package ledger

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLostRecordMarksTheGap: records the full queue refuses are counted,
// with their bytes, and the first record taken after them is preceded by
// a lost record, so that a reader sees where the gap is; and the queue
// keeps room for that lost record, so it never holds more than its limit.
func TestLostRecordMarksTheGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{QueueBytes: 4096, FlushInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := HoldFlushes(w)
	for i := 0; i < 3; i++ {
		w.Received(bytes.Repeat([]byte{byte(i + 1)}, 1000)) // 1013-byte frames, queued whole
	}
	w.Received(bytes.Repeat([]byte{0xaa}, 2000)) // does not fit: lost
	w.mu.Lock()
	room := w.limit - len(w.queue)
	w.mu.Unlock()
	if room < 200 {
		t.Fatalf("%d bytes of room left; the test wants a few hundred", room)
	}
	// A frame that fits the room alone, but not with the lost record that
	// must go before it: lost as well.
	second := room - 10
	w.Received(bytes.Repeat([]byte{0xbb}, second-frameHeader-8))
	w.mu.Lock()
	queued := len(w.queue)
	w.mu.Unlock()
	if queued > w.limit {
		t.Errorf("the queue holds %d bytes, over its %d-byte limit", queued, w.limit)
	}
	w.Interrupted() // fits, with the lost record before it
	release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var lost Record
	eachRecord(t, path, func(_ *Reader, rec *Record) {
		kinds = append(kinds, rec.Kind)
		if rec.Kind == KindLost {
			lost = *rec
		}
	})
	want := []string{KindOpen, KindRecv, KindRecv, KindRecv, KindLost, KindInterrupt, KindEnd}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("records %v, want %v: the lost record where the gap is", kinds, want)
	}
	if wantBytes := int64(2013 + second); lost.Count != 2 || lost.Bytes != wantBytes {
		t.Fatalf("lost %d records of %d bytes, want 2 of %d", lost.Count, lost.Bytes, wantBytes)
	}
}

// TestSendSameWithoutBaseCountedLost: a same-layout frame the writer has
// no base for (which Sent never queues) is not written, as no reader could
// rebuild it, but it is counted as lost, not dropped unseen.
func TestSendSameWithoutBaseCountedLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{FlushInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := HoldFlushes(w)
	w.mu.Lock() // a frameSendSame of slot 0 with 3 bytes of values, before any send
	le := binary.LittleEndian
	w.queue = le.AppendUint32(append(w.queue, frameSendSame), sendSameFixed+3)
	w.queue = le.AppendUint64(w.queue, 1)
	w.queue = le.AppendUint32(le.AppendUint32(w.queue, 0), 0)
	w.queue = append(w.queue, "XYZ"...)
	w.mu.Unlock()
	w.Received([]byte("next"))
	release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, lost := readBack(t, path, KindRecv)
	checkReadBack(t, "receives", got, [][]byte{[]byte("next")}, lost, 1)
}

// TestOptionsBounded: a queue or flush interval asked for past its bound
// gets the bound: the queue's is what bounds a flush's work and memory,
// and the interval's is the most a process killed without Close loses.
func TestOptionsBounded(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{QueueBytes: 1 << 40, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.limit != maxQueue || w.interval != 250*time.Millisecond {
		t.Fatalf("queue %d bytes, flushed every %v; want %d and 250ms", w.limit, w.interval, maxQueue)
	}
}

// TestWholeBlocksTakesAnExactFit: under a file size limit, a block that
// ends exactly at the limit is written (the limit is the largest size
// allowed), and one a byte past it is not.
func TestWholeBlocksTakesAnExactFit(t *testing.T) {
	le := binary.LittleEndian
	var out []byte
	for range 2 { // two blocks of 3 frame bytes and 2 literals: 21 bytes each
		out = le.AppendUint32(out, 3)
		out = le.AppendUint32(out, 9)
		out = le.AppendUint32(out, 0)
		out = le.AppendUint32(out, 2)
		out = append(out, 1, 2, 3, 4, 5)
	}
	for room, want := range map[int64]int{20: 0, 21: 21, 41: 21, 42: 42, 100: 42} {
		if got := len(wholeBlocks(out, room)); got != want {
			t.Errorf("room %d: %d bytes of blocks, want %d", room, got, want)
		}
	}
}
