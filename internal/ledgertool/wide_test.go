package ledgertool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// wideObs is an observation of envs rows: one uint8 state of a byte per
// row, and arrays more states of no bytes per row.
func wideObs(envs, arrays int) *wire.Observation {
	o := &wire.Observation{}
	o.States = append(o.States, wire.NamedArray{Name: "a", Array: wire.Array{DType: wire.Uint8, Shape: []int{envs}, Data: make([]byte, envs)}})
	for i := range arrays {
		o.States = append(o.States, wire.NamedArray{Name: fmt.Sprintf("z%d", i), Array: wire.Array{DType: wire.Float32, Shape: []int{envs, 0}}})
	}
	return o
}

func wideLedger(t testing.TB, n int, level ledger.Level) string {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: level})
	if err != nil {
		t.Fatal(err)
	}
	env := make([]int64, n)
	for i := range env {
		env[i] = int64(i)
	}
	var meta wire.Message
	if err := wire.EncodeMetadata(&meta, &wire.Metadata{}); err != nil {
		t.Fatal(err)
	}
	w.Connected("ws://127.0.0.1:1", "127.0.0.1:1", meta.AppendTo(nil))
	recordExchange(t, w, env, wideObs(n, n))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAuditWideObs: an observation of n env rows and n arrays of rows of
// no bytes (a few bytes each on the wire, whatever n) audits clean. What
// it costs is BenchmarkAuditWideObs's: the audit summed every array for
// every env row (ObsDigest, and maxRows per row), so n = 40000, a 257 KB
// ledger, took 7.2 s; with the sums worked out once per event, 80 ms.
func TestAuditWideObs(t *testing.T) {
	path := wideLedger(t, 4000, ledger.Full)
	a := ledgertool.NewAuditor()
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { a.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(a.Violations) != 0 {
		t.Errorf("violations in a clean exchange: %v", a.Violations)
	}
}

// BenchmarkAuditWideObs times the audit of one exchange of n envs and n
// arrays of rows of no bytes; per op it should grow with n, not n^2
// (compare -bench with n=10000 and n=40000: 4x, where it was 16x).
func BenchmarkAuditWideObs(b *testing.B) {
	for _, n := range []int{10000, 40000} {
		path := wideLedger(b, n, ledger.Full)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				a := ledgertool.NewAuditor()
				if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { a.Add(ev); return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestExportFileCap: a ledger that names many envs and many arrays (rows
// of no bytes cost a message almost nothing: 600 of each, a few KB) would
// have export write a file per env per array, 363,000 here (601 arrays
// and 4 more files per env, for 600 envs); it refuses,
// saying how many, and writes none.
func TestExportFileCap(t *testing.T) {
	path := wideLedger(t, 600, ledger.Full)
	x := ledgertool.NewExporter()
	if _, err := ledgertool.Walk(path, x.Add); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	files, err := x.Write(dir)
	if err == nil || !strings.Contains(err.Error(), "would write 363000 files") {
		t.Fatalf("export of 600 envs x 600 arrays: %d files, error %v; want a refusal naming 363000 files", len(files), err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the refused export left %d files", len(left))
	}
}

// TestExportWideObs: the exporter's memory follows the observation rows
// it keeps, not envs x arrays. An infer and feedback of 2000 envs and
// 2000 arrays of rows of no bytes (a 19 KB ledger) allocated 286 MiB, a
// slice per env and array for the chunk's observation, the last one
// seen and the rows stacked.
func TestExportWideObs(t *testing.T) {
	path := wideLedger(t, 2000, ledger.Full)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := ledgertool.NewExporter()
	if _, err := ledgertool.Walk(path, x.Add); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("exporting one exchange of 2000 envs and 2000 empty arrays allocated %d MiB", got>>20)
	}
	runtime.KeepAlive(x)
}
