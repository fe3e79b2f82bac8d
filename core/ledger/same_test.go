package ledger

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"
)

// TestSameLayoutRecords: an env loop's sends after the first of each
// message are written as same-layout records (format version 4), a few
// bytes each, and read back as the messages sent (TestBlockRoundTrip and
// TestSentByChanges check the messages; this checks they were recorded
// that way, which is what the writer's cost rests on).
func TestSameLayoutRecords(t *testing.T) {
	file, blocks := ledgerFile(t)
	if len(blocks) != 1 {
		t.Fatalf("%d blocks, want 1", len(blocks))
	}
	raw := blocks[0].raw[:len(blocks[0].raw)-int(blocks[0].lits)]
	var whole, same int
	for len(raw) > 0 {
		var rec Record
		rest, err := rec.decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == KindSend && rec.isSame {
			same++
			// Its time is 9 bytes at most; the digest (4) and the
			// runs' bytes (an env id, a step id, a reward, two flags:
			// 8+8+4+1+1) 26 more, with their header.
			if n := len(raw) - len(rest); n > 60 {
				t.Errorf("a same-layout record of %d bytes, want at most 60", n)
			}
		} else if rec.Kind == KindSend {
			whole++
			if !rec.hasSlot {
				t.Error("a whole send record without its slot")
			}
		}
		raw = rest
	}
	if whole != 2 || same != 10 {
		t.Fatalf("%d whole and %d same-layout send records, want 2 and 10 (6 exchanges, 2 messages)", whole, same)
	}
	recs, err := readRecords(file)
	if err != nil {
		t.Fatal(err)
	}
	sends := 0
	for _, r := range recs {
		if r.Kind == KindSend {
			sends++
			if r.Len == 0 || len(r.Digests) != 1 || len(r.Cuts) != 1 {
				t.Fatalf("send %d reads back with length %d, %d digests, %d cuts; want its length, 1 and 1", sends, r.Len, len(r.Digests), len(r.Cuts))
			}
		}
	}
	if sends != 12 {
		t.Fatalf("%d sends read back, want 12", sends)
	}
}

// TestSameLayoutHostile: same-layout records and whole sends' runs that
// no writer writes are errors naming what is wrong.
func TestSameLayoutHostile(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("0123456789abcdef")
	wholeRuns := func(slot int64, runs []byte) []byte {
		b := msgp.AppendMapHeader(nil, 6)
		b = appendStr(b, keyKind, KindSend)
		b = appendInt64(b, keyTime, 1)
		b = appendInt64(b, keyPatch, 0)
		b = appendBin(b, keyMsg, msg)
		b = appendInt64(b, keySlot, slot)
		return appendBin(b, keyRefs, runs)
	}
	whole := func(slot int64, runs ...uint32) []byte { // (offset, length) pairs
		var r []byte
		for _, v := range runs {
			r = binary.LittleEndian.AppendUint32(r, v)
		}
		return wholeRuns(slot, r)
	}
	same := func(slot int64, values string, extra ...[]byte) []byte { // extra: whole keys and values
		b := msgp.AppendMapHeader(nil, uint32(4+len(extra)))
		b = appendStr(b, keyKind, KindSend)
		b = appendInt64(b, keyTime, 2)
		b = appendInt64(b, keySame, slot)
		b = appendBin(b, keyValues, []byte(values))
		for _, e := range extra {
			b = append(b, e...)
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	version3 := func(file []byte) []byte { file[len(magic)] = 3; return file }
	for _, tc := range []struct {
		what, want string
		file       []byte
	}{
		{"as a writer writes it", "", oneBlock(enc, cat(whole(1, 2, 3), same(1, "XYZ")), 0)},
		{"no whole send before", "slot 0, which no whole send before it set", oneBlock(enc, same(0, "XYZ"), 0)},
		{"another slot's whole send", "slot 0, which no whole send before it set", oneBlock(enc, cat(whole(1, 2, 3), same(0, "XYZ")), 0)},
		{"slot 2", "slot 2, where a client has 0 and 1", oneBlock(enc, cat(whole(2, 2, 3), same(2, "XYZ")), 0)},
		{"a same-layout send's slot 7", "slot 7, which no whole send", oneBlock(enc, cat(whole(1, 2, 3), same(7, "XYZ")), 0)},
		{"a byte short", "a same-layout send of 2 bytes, where its slot's digests and runs take 3", oneBlock(enc, cat(whole(0, 2, 3), same(0, "XY")), 0)},
		{"a byte more", "a same-layout send of 4 bytes, where its slot's digests and runs take 3", oneBlock(enc, cat(whole(0, 2, 3), same(0, "XYZW")), 0)},
		{"a message of its own", "a same-layout send with a message of its own", oneBlock(enc, cat(whole(0, 2, 3), same(0, "XYZ", appendBin(nil, keyMsg, msg))), 0)},
		{"an empty run", "a run of 0 bytes at 2", oneBlock(enc, whole(0, 2, 0), 0)},
		{"runs out of order", "a run of 1 bytes at 1", oneBlock(enc, whole(0, 4, 2, 1, 1), 0)},
		{"a run past the message", "a run of 8 bytes at 10", oneBlock(enc, whole(0, 10, 8), 0)},
		{"a run's offset near 2^32", "a run of 8 bytes at 4294967295", oneBlock(enc, whole(0, 1<<32-1, 8), 0)},
		{"half a run", "5 bytes of runs", oneBlock(enc, wholeRuns(0, []byte{1, 0, 0, 0, 1}), 0)},
		{"version 3", "a same-layout send, which format version 3 does not have", version3(oneBlock(enc, same(0, "XYZ"), 0))},
		{"version 3's slot", "a send naming a slot, which format version 3 does not have", version3(oneBlock(enc, whole(0, 2, 3), 0))},
	} {
		recs, err := readRecords(tc.file)
		if tc.want == "" {
			if err != nil || len(recs) != 2 || string(recs[1].Msg) != "01XYZ56789abcdef" {
				t.Fatalf("%s: %v, %d records, want the second to read 01XYZ56789abcdef", tc.what, err, len(recs))
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want %q", tc.what, err, tc.want)
		}
	}
}
