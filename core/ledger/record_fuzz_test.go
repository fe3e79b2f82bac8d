package ledger

import (
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// FuzzRecord decodes arbitrary bytes as a block's records (past the block
// checksum that keeps FuzzReader's mutations from reaching them) and
// rebuilds each message: errors, never a panic, and memory bounded by
// MaxMessage.
func FuzzRecord(f *testing.F) {
	b := msgp.AppendMapHeader(nil, 6)
	b = msgp.AppendString(b, keyKind)
	b = msgp.AppendString(b, KindSend)
	b = msgp.AppendString(b, keyMsg)
	b = msgp.AppendBytes(b, []byte{0x81, 0xa1, 'x', 0xc4, 0x02})
	b = msgp.AppendString(b, keyLen)
	b = msgp.AppendInt(b, 13)
	b = msgp.AppendString(b, keyCuts)
	b = msgp.AppendArrayHeader(b, 1)
	b = msgp.AppendArrayHeader(b, 3)
	b = msgp.AppendInt(b, 5)
	b = msgp.AppendInt(b, 8)
	b = msgp.AppendInt(b, 4)
	b = msgp.AppendString(b, keyDigests)
	b = msgp.AppendBytes(b, make([]byte, 8))
	b = msgp.AppendString(b, keyDropped)
	b = msgp.AppendArrayHeader(b, 2)
	b = msgp.AppendInt(b, 1)
	b = msgp.AppendInt(b, 2)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &Reader{MaxMessage: 1 << 20}
		for len(b) > 0 {
			rec := &Record{}
			rest, err := rec.decode(b)
			if err != nil {
				return
			}
			if msg, err := r.Message(rec); err == nil && int64(len(msg)) > r.MaxMessage {
				t.Fatalf("rebuilt %d bytes, over MaxMessage", len(msg))
			}
			b = rest
		}
	})
}
