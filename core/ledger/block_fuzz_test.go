package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"

	"github.com/plugrl/libplugrl/core/wire"
)

// FuzzBlock reads blocks of arbitrary raw bytes (records, then literals),
// as if decompressed from a block with a valid checksum, in format
// versions 2 to 5: FuzzReader's mutations seldom get past a block's
// checksum, so this target is the one that reaches the records, the
// patches and the accounting of the literals. It hands the bytes to the
// reader past zstd (whose buffer pools would make the coverage differ
// from run to run). The reader must return records or an error, never
// panic, and bound its memory by the bytes it is given.
func FuzzBlock(f *testing.F) {
	// Seeds of about 1 KiB each: the first records of a block, with the
	// literals they take. Go's minimiser tries removing every span of an
	// interesting input, which is quadratic in its length: with seeds of
	// 2-74 KiB (the blocks are 32 KiB or more) each new input took the
	// whole minute of -fuzzminimizetime, at 2 executions a second.
	file, _ := ledgerFile(f)
	seed, seedLits := seedPrefix(f, file, 1<<10)
	f.Add(seed, seedLits, uint8(0))
	v2, err := os.ReadFile(filepath.Join("testdata", "v2-digest.ledger"))
	if err != nil {
		f.Fatal(err)
	}
	seed, _ = seedPrefix(f, v2, 1<<10)
	f.Add(seed, uint32(0), uint8(2))
	// Version 4, with same-layout sends.
	v4, err := os.ReadFile(filepath.Join("testdata", "v4-same.ledger"))
	if err != nil {
		f.Fatal(err)
	}
	seed, seedLits = seedPrefix(f, v4, 1<<10)
	f.Add(seed, seedLits, uint8(3))
	f.Fuzz(func(t *testing.T, raw []byte, lits uint32, version uint8) {
		// The versions this reader reads: 2, 3, 4 and the writer's.
		head := appendHeader(nil)
		switch version % 4 {
		case 3:
			head[len(magic)] = 4
		case 2:
			head[len(magic)] = 2
			lits = 0
		case 1:
			head[len(magic)] = 3
		}
		r, err := NewReader(bytes.NewReader(head))
		if err != nil {
			t.Fatalf("the header was refused: %v", err)
		}
		defer r.Close()
		r.MaxMessage = 1 << 20
		r.setBlock(raw, int(lits%uint32(len(raw)+1)))
		for i := 0; i < 10000; i++ {
			rec, err := r.Next()
			if err != nil {
				return
			}
			if rec.Kind == KindSend {
				if msg, err := r.Message(rec); err == nil && len(rec.Cuts) > 0 {
					if _, err := wire.DecodeInfer(msg); err != nil {
						_, _ = wire.DecodeFeedback(msg)
					}
				}
			}
		}
	})
}

// seedPrefix is the first records of file's first block that fit in n
// bytes (at least one), followed by the literals they take, and how many
// those are, for FuzzBlock's seeds.
func seedPrefix(tb testing.TB, file []byte, n int) ([]byte, uint32) {
	b := splitBlocks(tb, file)[0]
	records, lits := b.raw[:len(b.raw)-int(b.lits)], b.raw[len(b.raw)-int(b.lits):]
	r, err := NewReader(bytes.NewReader(file[:headerSize]))
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	r.setBlock(bytes.Clone(b.raw), int(b.lits))
	end, taken := 0, 0
	for end < len(records) {
		if _, err := r.Next(); err != nil {
			tb.Fatalf("the seed's block, after %d bytes of records: %v", end, err)
		}
		next, nextTaken := len(records)-len(r.rest), len(lits)-len(r.lits)
		if end > 0 && next+nextTaken > n {
			break
		}
		end, taken = next, nextTaken
	}
	return append(bytes.Clone(records[:end]), lits[:taken]...), uint32(taken)
}

// TestBlockRoundTrip: oneBlock, given the raw bytes and literal length of
// the block the writer wrote, makes a ledger that reads back record for
// record as the writer's file does, so that FuzzBlock's seeds start from
// real records, literals included.
func TestBlockRoundTrip(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	file, blocks := ledgerFile(t)
	if len(blocks) != 1 || blocks[0].lits == 0 {
		t.Fatalf("the seed ledger has %d blocks; want one, with literals (its patches' new bytes)", len(blocks))
	}
	want, err := readRecords(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readRecords(oneBlock(enc, blocks[0].raw, blocks[0].lits))
	if err != nil {
		t.Fatalf("the rebuilt block, after %d records: %v", len(got), err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records read back from the rebuilt block, %d from the file", len(got), len(want))
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Time != want[i].Time || !bytes.Equal(got[i].Msg, want[i].Msg) {
			t.Fatalf("record %d: %s at %d, %d bytes; the file's: %s at %d, %d bytes", i,
				got[i].Kind, got[i].Time, len(got[i].Msg), want[i].Kind, want[i].Time, len(want[i].Msg))
		}
	}
}

// readRecords reads every record of a ledger file, each with its own copy
// of its message, up to the end or the first error.
func readRecords(file []byte) ([]Record, error) {
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		c := *rec
		c.Msg = bytes.Clone(rec.Msg)
		recs = append(recs, c)
	}
}

// TestLiteralsAccounted: a block whose patches take more literal bytes
// than it has, or fewer, or that has literals and no records, is an error
// naming the block, and so is a block header whose literal length was
// damaged, or a literal (the checksum covers both), or one that claims
// more literals than a writer writes; in version 3 too, whose literals
// are inside the frame.
func TestLiteralsAccounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		w.Received([]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', byte(i)})
	}
	w.Close()
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := splitBlocks(t, good)
	if len(blocks) != 1 || blocks[0].lits != 3*8+2 {
		t.Fatalf("%d blocks: want one, with 26 literal bytes (each recv's time, and one new byte per patched recv)", len(blocks))
	}
	raw, lits := blocks[0].raw, blocks[0].lits
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same receives as versions 3 and 4 recorded them: each time in
	// its record.
	var h history
	var v3raw, v3litBytes []byte
	for i := 0; i < 3; i++ {
		v3raw = msgp.AppendInt64(append(v3raw, prefixes[KindRecv][2]...), int64(i))
		v3raw, v3litBytes = h.appendCoded(v3raw, v3litBytes, []byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', byte(i)}, 1, 0, 8)
	}
	v3lits := uint32(len(v3litBytes))
	v3raw = append(v3raw, v3litBytes...)
	relabelled := bytes.Clone(good)
	relabelled[len(magic)] = 4 // versions 4 and 5 have the same block layout
	damaged := bytes.Clone(good)
	damaged[headerSize+12] = 1 // the literal length
	damagedLit := bytes.Clone(good)
	damagedLit[len(good)-1] ^= 1 // a literal, stored after the frame
	for _, tc := range []struct {
		what, want string
		file       []byte
	}{
		{"as written", "", oneBlock(enc, raw, lits)},
		{"a literal short", "a patch run of 1 new bytes, where 0 are left", oneBlock(enc, raw[:len(raw)-1], lits-1)},
		{"a time short", "a recv record's time needs 8 literal bytes, where the block has 7 left", oneBlock(enc, raw[:len(raw)-2], lits-2)},
		{"a literal more", "(block 0): the block's records leave 1 of its literal bytes, which no record took", oneBlock(enc, append(bytes.Clone(raw), 'x'), lits+1)},
		{"literals alone", "block 0: 3 literal bytes and no record to take them", oneBlock(enc, []byte("abc"), 3)},
		{"the literal length damaged", "block 0 fails its checksum", damaged},
		{"a literal damaged", "block 0 fails its checksum", damagedLit},
		{"version 5 relabelled 4", "block 0 fails its checksum", relabelled},
		{"literals past a block's bound", "3 raw, 67108865 literal: more than a writer writes", blockV3(enc, []byte("abc"), maxBlock+1, 4)},
		// Version 3: the literals are the frame's last bytes, and the
		// records hold their times.
		{"version 3, as written", "", blockV3(enc, v3raw, v3lits, 3)},
		{"version 3's records in version 5", "a recv record with a \"t\"", oneBlock(enc, v3raw, v3lits)},
		{"version 5's records in version 3", "leave 24 of its literal bytes", blockV3(enc, raw, lits, 3)},
		{"version 3, more literals than raw bytes", "claims 4 literal bytes of 3 raw", blockV3(enc, []byte("abc"), 4, 3)},
		{"version 3, literals alone", "block 0: 3 literal bytes and no record to take them", blockV3(enc, []byte("abc"), 3, 3)},
	} {
		_, err := readRecords(tc.file)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Fatalf("%s: %v, want %q", tc.what, err, tc.want)
		}
	}
}

// blockV3 is a one-block ledger file of format version (3, or 4 for a
// header whose literal length no version 4 writer writes) whose frame
// holds all of raw, literals included, as version 3 wrote them, with a
// valid checksum.
func blockV3(enc *zstd.Encoder, raw []byte, lits uint32, version byte) []byte {
	le := binary.LittleEndian
	z := enc.EncodeAll(raw, nil)
	litLen := le.AppendUint32(nil, lits)
	file := appendHeader(nil)
	file[len(magic)] = version
	file = le.AppendUint32(le.AppendUint32(file, uint32(len(z))), uint32(len(raw)))
	file = le.AppendUint32(file, blockSum(z, litLen, nil, uint16(version)))
	return append(append(file, litLen...), z...)
}

// rawBlock is a block's raw bytes and its literal length.
type rawBlock struct {
	raw  []byte
	lits uint32
}

// ledgerFile records SMALL exchanges whose actions vary (patches, so
// literals) and returns the ledger written, and its blocks.
func ledgerFile(tb testing.TB) ([]byte, []rawBlock) {
	in, fb, obs, action, data := smallExchange(tb)
	path := filepath.Join(tb.TempDir(), "l")
	w, err := Create(path, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	w.Connected("ws://x", "127.0.0.1:1", []byte{0x80})
	rng := uint32(7)
	for i := 0; i < 6; i++ {
		rng = newAction(data[:8], rng) // two values change: a few short patches
		w.Sent(in, obs)
		w.Received(action)
		w.Sent(fb, obs)
	}
	w.Closed("server", 1000, "", "", nil, false)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return file, splitBlocks(tb, file)
}

// splitBlocks decompresses each block of a ledger file.
func splitBlocks(tb testing.TB, file []byte) []rawBlock {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer dec.Close()
	le := binary.LittleEndian
	version := le.Uint16(file[len(magic):])
	size := blockHeader
	if version == 2 {
		size = blockHeaderV2
	}
	var blocks []rawBlock
	for b := file[headerSize:]; len(b) > 0; {
		zlen := int(le.Uint32(b))
		var lits uint32
		if size == blockHeader {
			lits = le.Uint32(b[12:])
		}
		raw, err := dec.DecodeAll(b[size:size+zlen], nil)
		if err != nil {
			tb.Fatal(err)
		}
		b = b[size+zlen:]
		if version >= 4 { // the literals follow the frame
			raw = append(raw, b[:lits]...)
			b = b[lits:]
		}
		blocks = append(blocks, rawBlock{raw, lits})
	}
	return blocks
}

// oneBlock is a ledger file of this package's format version holding one
// block of raw bytes, the last lits of them literals (stored after the
// frame, as version 4 does), with a valid checksum.
func oneBlock(enc *zstd.Encoder, raw []byte, lits uint32) []byte {
	return oneBlockVersion(enc, raw, lits, Version)
}

// oneBlockVersion is oneBlock in format version 4 or 5 (the same block
// layout; 5's checksum covers the version).
func oneBlockVersion(enc *zstd.Encoder, raw []byte, lits uint32, version uint16) []byte {
	le := binary.LittleEndian
	records, stored := raw[:len(raw)-int(lits)], raw[len(raw)-int(lits):]
	z := enc.EncodeAll(records, nil)
	litLen := le.AppendUint32(nil, lits)
	file := appendHeader(nil)
	le.PutUint16(file[len(magic):], version)
	file = le.AppendUint32(le.AppendUint32(file, uint32(len(z))), uint32(len(records)))
	file = le.AppendUint32(file, blockSum(z, litLen, stored, version))
	return append(append(append(file, litLen...), z...), stored...)
}
