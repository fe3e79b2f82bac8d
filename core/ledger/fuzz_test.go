package ledger_test

import (
	"bytes"
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
	w.Connected("ws://x", []byte{0x80})
	w.Sent(&m, in.Obs)
	w.Received([]byte("a"))
	w.Closed("local", 0, "", "e", []int64{1})
	w.Close()
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	v2, err := os.ReadFile(filepath.Join("testdata", "v2-digest.ledger")) // format version 2's reading too
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v2)
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
