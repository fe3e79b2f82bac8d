package ledgertool_test

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// TestWriterCPUShown: summary prints the background writer's CPU time from
// the end record, per exchange, and dump shows it; a ledger without it
// (off Linux) gets neither line.
func TestWriterCPUShown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		for k := 0; k < 100; k++ {
			w.Received(make([]byte, 300)) // a recv record is an exchange to summary
		}
		time.Sleep(time.Millisecond) // background flushes take them
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := ledgertool.NewSummary()
	var dumped bytes.Buffer
	d := ledgertool.NewDumper(&dumped, false)
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error {
		s.Add(ev)
		return d.Add(ev)
	}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Print(&out)
	measured := runtime.GOOS == "linux"
	if got := strings.Contains(out.String(), "recording: the background writer's flushes used"); got != measured {
		t.Errorf("summary has the writer's CPU line: %v, want %v:\n%s", got, measured, out.String())
	}
	if got := strings.Contains(dumped.String(), `"writer_cpu_ns":`); got != measured {
		t.Errorf("dump has writer_cpu_ns: %v, want %v", got, measured)
	}
	if s.Exchanges != 5000 || (measured && (s.WriterCPU <= 0 || s.WriterCPU > s.Duration)) {
		t.Errorf("%d exchanges, writer CPU %v over %v; want 5000, and more than 0 and at most the ledger's time", s.Exchanges, s.WriterCPU, s.Duration)
	}
}
