package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"

	"github.com/plugrl/libplugrl/core/wire"
)

// FuzzBlock reads blocks of arbitrary raw bytes (records, then literals),
// as if decompressed from a block with a valid checksum, in format
// versions 2 and 3: FuzzReader's mutations seldom get past a block's
// checksum, so this target is the one that reaches the records, the
// patches and the accounting of the literals. It hands the bytes to the
// reader past zstd (whose buffer pools would make the coverage differ
// from run to run). The reader must return records or an error, never
// panic, and bound its memory by the bytes it is given.
func FuzzBlock(f *testing.F) {
	for _, b := range ledgerBlocks(f) {
		f.Add(b.raw, b.lits, false)
	}
	v2, err := os.ReadFile(filepath.Join("testdata", "v2-digest.ledger"))
	if err != nil {
		f.Fatal(err)
	}
	// Its first block's first records: seeds of a few KiB keep the
	// fuzzer's minimising quick (the blocks are 32 KiB or more).
	raw := splitBlocks(f, v2)[0].raw
	end := 0
	for rest := raw; len(rest) > 0 && end < 4<<10; end = len(raw) - len(rest) {
		if rest, err = msgp.Skip(rest); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(raw[:end], uint32(0), true)
	f.Fuzz(func(t *testing.T, raw []byte, lits uint32, v2 bool) {
		head := appendHeader(nil)
		if v2 {
			head[len(magic)] = 2
			lits = 0
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

// TestBlockRoundTrip: oneBlock, given the raw bytes and literal length of a
// block the writer wrote, makes a ledger that reads back as the writer's
// did, so that FuzzBlock's seeds start from real records.
func TestBlockRoundTrip(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := ledgerBlocks(t)
	lits := 0
	for _, b := range blocks {
		lits += int(b.lits)
		n := 0
		r, err := NewReader(bytes.NewReader(oneBlock(enc, b.raw, b.lits, false)))
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := r.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("a block the writer wrote, rebuilt: %v after %d records", err, n)
				}
				break
			}
			n++
		}
		r.Close()
	}
	if lits == 0 {
		t.Fatal("the seed ledger has no literals: its patches are not exercised")
	}
}

// rawBlock is a block's raw bytes and its literal length.
type rawBlock struct {
	raw  []byte
	lits uint32
}

// ledgerBlocks records SMALL exchanges whose actions vary (patches, so
// literals) and returns the blocks of the ledger written.
func ledgerBlocks(tb testing.TB) []rawBlock {
	in, fb, obs, action, data := smallExchange(tb)
	path := filepath.Join(tb.TempDir(), "l")
	w, err := Create(path, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	w.Connected("ws://x", []byte{0x80})
	rng := uint32(7)
	for i := 0; i < 6; i++ {
		rng = newAction(data[:8], rng) // two values change: a few short patches
		w.Sent(in, obs)
		w.Received(action)
		w.Sent(fb, obs)
	}
	w.Closed("server", 1000, "", "", nil)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return splitBlocks(tb, file)
}

// splitBlocks decompresses each block of a ledger file.
func splitBlocks(tb testing.TB, file []byte) []rawBlock {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer dec.Close()
	le := binary.LittleEndian
	size := blockHeader
	if le.Uint16(file[len(magic):]) == 2 {
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
		blocks = append(blocks, rawBlock{raw, lits})
		b = b[size+zlen:]
	}
	return blocks
}

// oneBlock is a ledger file of format version 3 (2 if v2) holding one
// block of raw bytes, the last lits of them literals (version 3), with a
// valid checksum.
func oneBlock(enc *zstd.Encoder, raw []byte, lits uint32, v2 bool) []byte {
	le := binary.LittleEndian
	file := append([]byte(magic), 3, 0)
	if v2 {
		file[len(magic)] = 2
	}
	z := enc.EncodeAll(raw, nil)
	file = le.AppendUint32(le.AppendUint32(file, uint32(len(z))), uint32(len(raw)))
	var litLen []byte // version 2: none
	if !v2 {
		litLen = le.AppendUint32(nil, lits)
	}
	file = le.AppendUint32(file, blockSum(z, litLen))
	return append(append(file, litLen...), z...)
}
