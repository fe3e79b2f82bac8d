package ledger

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"
)

// TestSameLayoutRecords: an env loop's sends after the first of each
// message are written as same-layout records (format version 4), 14
// bytes each (their time and values in the literals since version 5), and
// read back as the messages sent (TestBlockRoundTrip and TestSentByChanges
// check the messages; this checks they were recorded that way, which is
// what the writer's cost rests on).
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
			// The kind and the slot: its time and values are in the
			// literals (format version 5), so that it repeats byte for
			// byte.
			if n := len(raw) - len(rest); n != 14 || rec.hasTime || rec.hasValues {
				t.Errorf("a same-layout record of %d bytes, with a time %v and values %v; want 14 bytes, neither", n, rec.hasTime, rec.hasValues)
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
	same := func(slot int64, values string) []byte { // as version 4 wrote it
		b := msgp.AppendMapHeader(nil, 4)
		b = appendStr(b, keyKind, KindSend)
		b = appendInt64(b, keyTime, 2)
		b = appendInt64(b, keySame, slot)
		return appendBin(b, keyValues, []byte(values))
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// Version 5: a same-layout send's time and values are in the
	// block's literals, after the records.
	type piece struct{ rec, lits []byte }
	rec := func(b []byte) piece { return piece{rec: b} }
	same5 := func(slot int64, values string, extra ...[]byte) piece {
		b := msgp.AppendMapHeader(nil, uint32(2+len(extra)))
		b = appendStr(b, keyKind, KindSend)
		b = appendInt64(b, keySame, slot)
		return piece{cat(append([][]byte{b}, extra...)...), append(binary.LittleEndian.AppendUint64(nil, 2), values...)}
	}
	block := func(pieces ...piece) []byte {
		var records, lits []byte
		for _, p := range pieces {
			records, lits = append(records, p.rec...), append(lits, p.lits...)
		}
		return oneBlock(enc, append(records, lits...), uint32(len(lits)))
	}
	timeShort := same5(0, "")
	timeShort.lits = timeShort.lits[:5]
	for _, tc := range []struct {
		what, want string
		file       []byte
	}{
		{"as a writer writes it", "", block(rec(whole(1, 2, 3)), same5(1, "XYZ"))},
		{"no whole send before", "slot 0, which no whole send before it set", block(same5(0, "XYZ"))},
		{"another slot's whole send", "slot 0, which no whole send before it set", block(rec(whole(1, 2, 3)), same5(0, "XYZ"))},
		{"slot 2", "slot 2, where a client has 0 and 1", block(rec(whole(2, 2, 3)), same5(2, "XYZ"))},
		{"a same-layout send's slot 7", "slot 7, which no whole send", block(rec(whole(1, 2, 3)), same5(7, "XYZ"))},
		{"a byte short", "a same-layout send's values (slot 0) needs 3 literal bytes, where the block has 2 left", block(rec(whole(0, 2, 3)), same5(0, "XY"))},
		{"a byte more", "the block's records leave 1 of its literal bytes, which no record took", block(rec(whole(0, 2, 3)), same5(0, "XYZW"))},
		{"its time short", "a same-layout send's time needs 8 literal bytes, where the block has 5 left", block(rec(whole(0, 2, 3)), timeShort)},
		{"a message of its own", "a same-layout send with a message of its own", block(rec(whole(0, 2, 3)), same5(0, "XYZ", appendBin(nil, keyMsg, msg)))},
		{"values of its own", `a same-layout send with a "t" or a "v"`, block(rec(whole(0, 2, 3)), same5(0, "XYZ", appendBin(nil, keyValues, []byte("XYZ"))))},
		{"a time of its own", `a same-layout send with a "t" or a "v"`, block(rec(whole(0, 2, 3)), same5(0, "XYZ", appendInt64(nil, keyTime, 2)))},
		{"an empty run", "a run of 0 bytes at 2", oneBlock(enc, whole(0, 2, 0), 0)},
		{"runs out of order", "a run of 1 bytes at 1", oneBlock(enc, whole(0, 4, 2, 1, 1), 0)},
		{"a run past the message", "a run of 8 bytes at 10", oneBlock(enc, whole(0, 10, 8), 0)},
		{"a run a byte past the message", "a run of 7 bytes at 10", oneBlock(enc, whole(0, 10, 7), 0)},
		{"runs overlapping by a byte", "a run of 2 bytes at 4", oneBlock(enc, whole(0, 2, 3, 4, 2), 0)},
		{"a run's offset near 2^32", "a run of 8 bytes at 4294967295", oneBlock(enc, whole(0, 1<<32-1, 8), 0)},
		{"half a run", "5 bytes of runs", oneBlock(enc, wholeRuns(0, []byte{1, 0, 0, 0, 1}), 0)},
		// Version 4: the time and values in the record.
		{"version 4, as a writer wrote it", "", oneBlockVersion(enc, cat(whole(1, 2, 3), same(1, "XYZ")), 0, 4)},
		{"version 4, a byte short", "a same-layout send of 2 bytes, where its slot's digests and runs take 3", oneBlockVersion(enc, cat(whole(0, 2, 3), same(0, "XY")), 0, 4)},
		{"version 4, a byte more", "a same-layout send of 4 bytes, where its slot's digests and runs take 3", oneBlockVersion(enc, cat(whole(0, 2, 3), same(0, "XYZW")), 0, 4)},
		{"version 3", "a same-layout send, which format version 3 does not have", blockV3(enc, same(0, "XYZ"), 0, 3)},
		{"version 3's slot", "a send naming a slot, which format version 3 does not have", blockV3(enc, whole(0, 2, 3), 0, 3)},
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

// TestLiteralTimes: the times that format version 5 keeps in the
// literals (each recv's, each same-layout send's) read back as recorded,
// each with its own record, in a ledger of several blocks.
func TestLiteralTimes(t *testing.T) {
	var now time.Duration
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{Clock: func() time.Duration { now += 1000; return now }})
	if err != nil {
		t.Fatal(err)
	}
	in, fb, obs, action, _ := smallExchange(t)
	var want []int64 // each send's and recv's time, in order
	for i := 0; i < 300; i++ {
		w.Sent(in, obs)
		want = append(want, w.since(now))
		at := now + 500
		w.ReceivedAt(at, action)
		want = append(want, w.since(at))
		w.Sent(fb, obs)
		want = append(want, w.since(now))
		if i%100 == 99 {
			w.flush() // blocks of their own: each starts its literals afresh
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readRecords(file)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	same := 0
	for _, r := range recs {
		if r.Kind == KindSend || r.Kind == KindRecv {
			got = append(got, r.Time)
		}
		if r.isSame {
			same++
		}
	}
	if same < 500 || !slices.Equal(got, want) {
		t.Fatalf("%d same-layout sends; times %v..., want %v...", same, got[:min(6, len(got))], want[:6])
	}
}

// sameLayoutLoop records 50 SMALL exchanges with a varying action at path,
// on a clock that advances 1000 ns a reading: testdata/v4-same.ledger is
// this loop as the version 4 writer (fe9d756) recorded it.
func sameLayoutLoop(tb testing.TB, path string) {
	var now time.Duration
	w, err := Create(path, Options{Clock: func() time.Duration { now += 1000; return now }})
	if err != nil {
		tb.Fatal(err)
	}
	in, fb, obs, action, data := smallExchange(tb)
	rng := uint32(1)
	for i := 0; i < 50; i++ {
		rng = newAction(data, rng)
		w.Sent(in, obs)
		w.ReceivedAt(now+500, action)
		w.Sent(fb, obs)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// TestReadsVersion4SameLayout: a version 4 ledger, whose same-layout
// sends and recvs carry their times (and the sends their values) in the
// records, reads back send for send and recv for recv, times included,
// as the same loop recorded now in version 5.
func TestReadsVersion4SameLayout(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "v4-same.ledger"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "l")
	sameLayoutLoop(t, path)
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	exchanges := func(file []byte) (recs []Record, same int) {
		all, err := readRecords(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			if r.Kind == KindSend || r.Kind == KindRecv {
				recs = append(recs, r)
			}
			if r.isSame {
				same++
			}
		}
		return recs, same
	}
	want, _ := exchanges(now)
	got, same := exchanges(old)
	if same != 98 || len(got) != 150 || len(want) != 150 {
		t.Fatalf("%d same-layout sends of %d records in version 4, %d records in version 5; want 98 of 150, 150", same, len(got), len(want))
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Time != want[i].Time || !bytes.Equal(got[i].Msg, want[i].Msg) || !slices.Equal(got[i].Digests, want[i].Digests) {
			t.Fatalf("record %d of version 4: %s at %d, %d bytes, digests %v; version 5's: %s at %d, %d bytes, digests %v", i,
				got[i].Kind, got[i].Time, len(got[i].Msg), got[i].Digests, want[i].Kind, want[i].Time, len(want[i].Msg), want[i].Digests)
		}
	}
}
