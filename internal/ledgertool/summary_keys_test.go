package ledgertool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// TestSummaryKeepsBoundedCloses: summary counts closes by who closed and
// why, and reconnects by cause: each distinct reason a key, kept and
// printed; and the first 16 server addresses. All come from the file:
// close records whose errors are long and each a little different (zstd
// stores each in a few bytes after the first) made a summary hold every
// one whole, and connect records of 1 MiB addresses 16 MiB.
func TestSummaryKeepsBoundedCloses(t *testing.T) {
	const maxServers, maxReasonsShown = 16, 64
	const closes, length = 2000, 32 << 10
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{QueueBytes: 32 << 20, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", length)
	for i := range maxServers {
		w.Connected("ws://x", fmt.Sprintf("%d %s", i, strings.Repeat("a", 1<<20)), []byte{0x80})
	}
	for i := range closes {
		w.Closed("local", 0, "", fmt.Sprintf("%d %s", i, long), nil, false)
		w.Reconnecting(fmt.Sprintf("%d %s", i, long))
		if i%100 == 99 {
			time.Sleep(30 * time.Millisecond) // the writer's flushes take them: few are lost
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := ledgertool.NewSummary()
	records := 0
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error {
		if ev.Kind == ledger.KindClose {
			records++
		}
		s.Add(ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("a %d-byte ledger of %d closes: the summary holds %d MiB (%d close reasons, %d causes)", fi.Size(), closes, held>>20, len(s.Closes), len(s.Reconnects))
	if held > 16<<20 {
		t.Errorf("a %d-byte ledger's summary holds %d MiB", fi.Size(), held>>20)
	}
	n := 0
	for _, c := range s.Closes {
		n += c
	}
	if n != records || records < 4*maxReasonsShown {
		t.Errorf("%d closes counted, of %d close records (%d written)", n, records, closes)
	}
	runtime.KeepAlive(s)
}
