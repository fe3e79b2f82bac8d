package ledger_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// FuzzReader reads arbitrary bytes as a ledger: it must return records or
// an error, never panic, and bound its memory by the bytes it is given.
func FuzzReader(f *testing.F) {
	path := filepath.Join(f.TempDir(), "seed")
	w, err := ledger.Create(path, ledger.Options{FlushInterval: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	in, _, _ := request()
	var m wire.Message
	if err := wire.EncodeInfer(&m, in); err != nil {
		f.Fatal(err)
	}
	w.Connected("ws://x", "127.0.0.1:1", []byte{0x80})
	w.Sent(&m, in.Obs)
	w.Received([]byte("a"))
	w.Closed("local", 0, "", "e", []int64{1}, true)
	w.Close()
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	// Format version 2's reading too: the header and first block of a
	// version 2 ledger (the whole file makes the fuzzer crawl).
	v2, err := os.ReadFile(filepath.Join("testdata", "v2-digest.ledger"))
	if err != nil {
		f.Fatal(err)
	}
	first := 16 + 12 + int(binary.LittleEndian.Uint32(v2[16:]))
	f.Add(v2[:first])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ledger.NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		defer r.Close()
		r.MaxMessage = 1 << 20
		for i := 0; i < 10000; i++ {
			rec, err := r.Next()
			if err != nil {
				return
			}
			if msg, err := r.Message(rec); err == nil && len(rec.Cuts) > 0 {
				if _, err := wire.DecodeInfer(msg); err != nil {
					_, _ = wire.DecodeFeedback(msg)
				}
			}
		}
	})
}
