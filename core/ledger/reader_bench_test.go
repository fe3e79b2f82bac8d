package ledger

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRead reads a full ledger of 813 blocks of varying size, as
// `plugrl ledger` does: time and memory per whole read.
func BenchmarkRead(b *testing.B) {
	in, fb, obs, action, data := smallExchange(b)
	path := filepath.Join(b.TempDir(), "l")
	w, err := Create(path, Options{Level: Full, QueueBytes: maxQueue, FlushInterval: 250e6})
	if err != nil {
		b.Fatal(err)
	}
	rng := uint32(1)
	for blk := 0; blk < 200; blk++ {
		n := 50 + (blk*37)%700 // blocks of varying size
		for i := 0; i < n; i++ {
			rng = newAction(data, rng)
			w.Sent(in, obs)
			w.Received(action)
			w.Sent(fb, obs)
		}
		w.flush()
	}
	w.Close()
	file, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	blocks := 0
	for i := 0; i < b.N; i++ {
		r, err := NewReader(bytes.NewReader(file))
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		blocks = r.Block
		r.Close()
	}
	b.ReportMetric(float64(blocks), "blocks")
	b.ReportMetric(float64(len(file)), "file-bytes")
}
