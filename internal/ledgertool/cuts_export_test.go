package ledgertool_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// rewriteRecords rewrites every block of a version 5 ledger file with
// edit applied to its records (the frame's bytes, not the literals), as
// a file from elsewhere may hold anything a block's checksum covers.
func rewriteRecords(t *testing.T, file []byte, edit func([]byte) []byte) []byte {
	t.Helper()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	le := binary.LittleEndian
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	out := append([]byte(nil), file[:16]...)
	for b := file[16:]; len(b) > 0; {
		zlen, litLen := int(le.Uint32(b)), int(le.Uint32(b[12:]))
		z, lits := b[16:16+zlen], b[16+zlen:16+zlen+litLen]
		b = b[16+zlen+litLen:]
		raw, err := dec.DecodeAll(z, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw = edit(raw)
		z = enc.EncodeAll(raw, nil)
		ll := le.AppendUint32(nil, uint32(litLen))
		sum := crc32.Update(crc32.Checksum(z, castagnoli), castagnoli, ll)
		sum = crc32.Update(sum, castagnoli, lits)
		sum = crc32.Update(sum, castagnoli, []byte{5, 0})
		out = le.AppendUint32(le.AppendUint32(out, uint32(len(z))), uint32(len(raw)))
		out = le.AppendUint32(out, sum)
		out = append(append(append(out, ll...), z...), lits...)
	}
	return out
}

// TestExportRefusesCutRecords: a ledger whose open record says full but
// whose sends are digest-level records (their observation data cut out,
// a digest per row in its place) holds no observation to export. Export
// took the zeros the reader rebuilds the cut rows with for the data,
// wrote them as the observations and reported success; and since a cut
// row costs the file 4 bytes whatever its size, a few bytes of file per
// exchange made it copy and keep megabytes.
func TestExportRefusesCutRecords(t *testing.T) {
	const width, exchanges = 1 << 20, 40 // 4 MiB of float32 state per row
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: ledger.Digest})
	if err != nil {
		t.Fatal(err)
	}
	o := states(width, "x")
	for i := range o.States[0].Array.Data {
		o.States[0].Array.Data[i] = 0x3f // not zeros
	}
	for range exchanges {
		recordExchange(t, w, []int64{0}, o)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file = rewriteRecords(t, file, func(raw []byte) []byte {
		return bytes.Replace(raw, []byte("\xa5level\xa6digest"), []byte("\xa5level\xa4full"), 1)
	})
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := ledgertool.NewExporter()
	_, werr := ledgertool.Walk(path, x.Add)
	runtime.ReadMemStats(&after)
	t.Logf("a %d-byte ledger of %d exchanges: export allocated %d MiB", len(file), exchanges, (after.TotalAlloc-before.TotalAlloc)>>20)
	if werr == nil || !strings.Contains(werr.Error(), "cut out") {
		dir := t.TempDir()
		files, err := x.Write(dir)
		t.Errorf("export of a ledger with cut observations: %v (write: %d files, %v), want an error saying the data was cut out", werr, len(files), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("the walk allocated %d MiB", got>>20)
	}
	runtime.KeepAlive(x)
}
