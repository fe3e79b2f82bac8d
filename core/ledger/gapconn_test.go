package ledger_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/ledger"
)

// TestMessagesAfterALostConnectNameTheirConnection: a connect record the
// full queue dropped leaves the messages after the gap on the connection
// they crossed, not on the one before it, which the ledger says had
// closed. The writer counts the connection whether or not its record is
// taken (TestConnectionsCountedAcrossAGap); send and recv records name no
// connection of their own, so the lost record that stands for the gap
// says which connection the records after it are on. Both places a lost
// record is written: before the next record the queue takes, and at the
// end of the flush that took the queue.
func TestMessagesAfterALostConnectNameTheirConnection(t *testing.T) {
	for _, flushBetween := range []bool{false, true} {
		name := map[bool]string{false: "marked before the next record", true: "marked at the flush's end"}[flushBetween]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l")
			w, err := ledger.Create(path, ledger.Options{QueueBytes: 4096, FlushInterval: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			release := ledger.HoldFlushes(w)
			w.Connected("ws://a", "", []byte("meta"))
			w.Received([]byte("action on connection 1"))
			w.Closed("server", 1001, "plugrl-server-resync", "", nil, false)
			w.Received(bytes.Repeat([]byte{1}, 3000))                // a few hundred bytes left
			w.Connected("ws://a", "", bytes.Repeat([]byte{2}, 1000)) // connection 2: dropped
			if flushBetween {
				release()
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					if recs, _, err := readAll(t, path); err == nil && len(recs) >= 6 {
						break // the queue was taken, the gap marked at its end
					}
					if time.Now().After(deadline) {
						t.Fatal("the queue was not flushed")
					}
				}
			}
			w.Received([]byte("action on connection 2")) // after the gap, on connection 2
			w.Closed("client", 1000, "", "", nil, false)
			if !flushBetween {
				release()
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			recs, _, err := readAll(t, path)
			if err != nil {
				t.Fatal(err)
			}
			var lost bool
			for _, r := range recs {
				switch r.Kind {
				case ledger.KindLost:
					lost = true
				case ledger.KindRecv:
					if want := map[bool]int{false: 1, true: 2}[lost]; r.Conn != want {
						t.Errorf("record %d: a recv read back on connection %d; it crossed connection %d", r.Seq, r.Conn, want)
					}
				}
			}
			if !lost {
				t.Fatal("no lost record")
			}
		})
	}
}
