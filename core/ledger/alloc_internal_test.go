package ledger

import (
	"path/filepath"
	"testing"
)

// TestFlushAllocs: once its buffers have grown, the background writer's
// flush allocates nothing either: the whole steady state is allocation-free.
func TestFlushAllocs(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	msg := make([]byte, 3000)
	for i := range msg {
		msg[i] = byte(i * 13)
	}
	round := func() {
		for i := 0; i < 20; i++ {
			w.Received(msg)
		}
		w.flush()
	}
	round()
	round()
	if a := testing.AllocsPerRun(20, round); a != 0 {
		t.Fatalf("a flush allocates %v times", a)
	}
}
