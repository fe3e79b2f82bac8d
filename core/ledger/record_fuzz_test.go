package ledger

import (
	"math"
	"strings"
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
	for _, c := range [][3]int64{{0, math.MaxInt64, 1}, {0, math.MaxInt64 - 7, 8}, {0, 1 << 20, 0}} {
		f.Add(sendWithCut(c))
	}
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

// sendWithCut is a send record of one cut (offset, length, row bytes) and
// one digest.
func sendWithCut(c [3]int64) []byte {
	b := msgp.AppendMapHeader(nil, 4)
	b = msgp.AppendString(b, keyKind)
	b = msgp.AppendString(b, KindSend)
	b = msgp.AppendString(b, keyMsg)
	b = msgp.AppendBytes(b, []byte{0x80})
	b = msgp.AppendString(b, keyCuts)
	b = msgp.AppendArrayHeader(b, 1)
	b = msgp.AppendArrayHeader(b, 3)
	for _, v := range c {
		b = msgp.AppendInt64(b, v)
	}
	b = msgp.AppendString(b, keyDigests)
	return msgp.AppendBytes(b, make([]byte, 4))
}

// TestMessageHostileCuts: cuts whose lengths a crafted file chose are
// refused, with no panic and nothing allocated for them: a length near
// 2^63 (the sum wrapped negative and passed the cap, then make panicked),
// and bytes with no rows (zeros no digest stands for: a 131-byte file
// made the tool allocate and zero 1 GiB per record).
func TestMessageHostileCuts(t *testing.T) {
	for _, tc := range []struct {
		cut  [3]int64
		want string
	}{
		{[3]int64{0, math.MaxInt64, 1}, "over"},
		{[3]int64{0, math.MaxInt64 - 7, 8}, "over"},
		{[3]int64{0, 1 << 20, 0}, "no rows"},
	} {
		rec := &Record{}
		if _, err := rec.decode(sendWithCut(tc.cut)); err != nil {
			t.Fatal(err)
		}
		r := &Reader{MaxMessage: 1 << 30}
		if _, err := r.Message(rec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cut %v: got %v, want an error saying %q", tc.cut, err, tc.want)
		}
	}
}

// TestRecordListBounds: a record's dropped envs and cuts are bounded by
// what a writer can queue, whatever a crafted file claims, and refused
// past that before anything is allocated for them; within the bytes they
// take, the bound is reachable (one byte per dropped env, four per cut),
// so it is the bound that refuses here, not the byte count.
func TestRecordListBounds(t *testing.T) {
	dropped := msgp.AppendMapHeader(nil, 2)
	dropped = msgp.AppendString(dropped, keyKind)
	dropped = msgp.AppendString(dropped, KindClose)
	dropped = msgp.AppendString(dropped, keyDropped)
	dropped = msgp.AppendArrayHeader(dropped, maxDropped+1)
	dropped = append(dropped, make([]byte, maxDropped+1)...) // fixint 0s

	cuts := msgp.AppendMapHeader(nil, 2)
	cuts = msgp.AppendString(cuts, keyKind)
	cuts = msgp.AppendString(cuts, KindSend)
	cuts = msgp.AppendString(cuts, keyCuts)
	cuts = msgp.AppendArrayHeader(cuts, maxCuts+1)
	for range maxCuts + 1 {
		cuts = append(cuts, 0x93, 0, 0, 0) // [0, 0, 0]
	}

	for name, b := range map[string][]byte{"dropped envs": dropped, "cuts": cuts} {
		_, err := (&Record{}).decode(b)
		if err == nil || !strings.Contains(err.Error(), "more than a writer can queue") {
			t.Errorf("%s past the bound: got %v, want a refusal naming the bound", name, err)
		}
	}

	ok := msgp.AppendMapHeader(nil, 2)
	ok = msgp.AppendString(ok, keyKind)
	ok = msgp.AppendString(ok, KindClose)
	ok = msgp.AppendString(ok, keyDropped)
	ok = msgp.AppendArrayHeader(ok, 3)
	ok = append(ok, 1, 2, 3)
	rec := &Record{}
	if _, err := rec.decode(ok); err != nil || len(rec.Dropped) != 3 || rec.Dropped[2] != 3 {
		t.Fatalf("three dropped envs: %v, %v", rec.Dropped, err)
	}
}
