package ledger

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"
)

// TestLostRecordTimeKeepsTheOrder: a lost record's time is not later than
// the record after it. It stands where the records it counts were refused
// (before the next record the queue takes, or at the end of the flush that
// took the queue), and was timed when it was written: the caller's reserve
// for the next record, after that record's own time was read (a receive's
// and a send's times are the client's readings, taken before they are
// recorded), or the end of the flush, after the records the caller queued
// meanwhile, which the next flush writes after it. Either way the ledger's
// times went back.
func TestLostRecordTimeKeepsTheOrder(t *testing.T) {
	for _, atFlushEnd := range []bool{false, true} {
		name := map[bool]string{false: "before the next record", true: "at the flush's end"}[atFlushEnd]
		t.Run(name, func(t *testing.T) {
			// A clock that moves 1 us at each reading. During the flush, the
			// caller records a receive (as a client's thread does while the
			// writer works), timed by its own reading, which came just before
			// the writer's first.
			var now time.Duration
			var w *Writer
			var duringFlush func()
			clock := func() time.Duration {
				if f := duringFlush; f != nil {
					duringFlush = nil
					f()
				}
				now += time.Microsecond
				return now
			}
			path := filepath.Join(t.TempDir(), "l")
			var err error
			w, err = Create(path, Options{QueueBytes: 4096, FlushInterval: 250 * time.Millisecond, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			release := HoldFlushes(w)
			w.ReceivedAt(clock(), bytes.Repeat([]byte{1}, 3000))
			w.ReceivedAt(clock(), bytes.Repeat([]byte{2}, 2000)) // lost: the queue is full
			if atFlushEnd {
				duringFlush = func() { w.ReceivedAt(clock(), []byte("queued while the writer flushed")) }
				release = flushNow(w, release) // takes the queue; the receive above goes in the next flush
			} else {
				w.ReceivedAt(clock(), []byte("the next record taken"))
			}
			release()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var prev *Record
			eachRecord(t, path, func(_ *Reader, rec *Record) {
				if prev != nil && rec.Time < prev.Time {
					t.Errorf("record %d (%s) at %v, after record %d (%s) at %v", rec.Seq, rec.Kind, time.Duration(rec.Time),
						prev.Seq, prev.Kind, time.Duration(prev.Time))
				}
				p := *rec
				prev = &p
			})
		})
	}
}
