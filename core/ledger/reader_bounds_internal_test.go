package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestBlockHeaderBounds: a block header that claims more compressed or
// raw bytes than a writer writes is refused from the header alone, before
// anything is decompressed: the raw length is what bounds the stream
// decoder's output, so without its own bound a few bytes of file could
// make the reader inflate gigabytes.
func TestBlockHeaderBounds(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	z := enc.EncodeAll([]byte("abc"), nil)
	block := func(zlen, rawLen uint32) []byte {
		le := binary.LittleEndian
		litLen := le.AppendUint32(nil, 0)
		file := appendHeader(nil)
		file = le.AppendUint32(le.AppendUint32(file, zlen), rawLen)
		file = le.AppendUint32(file, blockSum(z, litLen, nil, Version))
		return append(append(file, litLen...), z...)
	}
	for _, tc := range []struct {
		what        string
		zlen, raw   uint32
		wantClaimed string
	}{
		{"raw length past the bound", uint32(len(z)), maxBlock + 1, "67108865 raw"},
		{"frame length past the bound", maxBlock + 1, 3, "claims 67108865 bytes"},
	} {
		_, err := readRecords(block(tc.zlen, tc.raw))
		if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), tc.wantClaimed) || !strings.Contains(err.Error(), "more than a writer writes") {
			t.Errorf("%s: %v, want the header refused for claiming more than a writer writes (%s)", tc.what, err, tc.wantClaimed)
		}
	}
}

// TestPatchDecodeBounds: a patch run that skips past the end of the
// message it patches, or a patch of a message the history has let go (a
// message over maxDelta clears it), is an error, not a panic or a stale
// message passed off as the record's.
func TestPatchDecodeBounds(t *testing.T) {
	var h history
	var lits []byte
	if _, err := h.decode([]byte("abcd"), 0, 1, &lits); err != nil {
		t.Fatal(err)
	}
	run := func(skip, n uint64) []byte { return binary.AppendUvarint(binary.AppendUvarint(nil, skip), n) }
	for _, tc := range []struct {
		what  string
		patch []byte
	}{
		{"a skip past the end", run(5, 0)},
		{"a skip to the end, then a byte", run(4, 1)},
	} {
		lits = []byte("x")
		if _, err := h.decode(tc.patch, 1, 1, &lits); err == nil || !strings.Contains(err.Error(), "outside the 4-byte message") {
			t.Errorf("%s: %v, want a run outside the message", tc.what, err)
		}
	}
	if _, err := h.decode(make([]byte, maxDelta+1), 0, 1, &lits); err != nil {
		t.Fatal(err)
	}
	// "abcd" is still in h.prev, but no longer the writer's: a patch of
	// no runs would read back as it.
	if m, err := h.decode(nil, 1, 1, &lits); err == nil || !strings.Contains(err.Error(), "does not have") {
		t.Errorf("a patch after a message over maxDelta: %q, %v; want an error", m, err)
	}
}

// TestRecvOfExactlyMaxDelta: a message of exactly maxDelta bytes is one
// the writer patches the next against, so the reader must keep it too:
// the two sides agree on the bound, or a valid ledger does not read back.
func TestRecvOfExactlyMaxDelta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	msg := incompressible(maxDelta, 1)
	for i := 0; i < 3; i++ {
		msg[100*i] ^= 0xff // a patch of one byte against the last
		w.Received(msg)
		want = append(want, bytes.Clone(msg))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, lost := readBack(t, path, KindRecv)
	checkReadBack(t, "receives", got, want, lost, 0)
}

// TestMessageCutsPastKeptBytes: cuts each of whose gaps fits the kept
// bytes, but whose gaps together take more than there are, or whose rows
// have fewer digests than rows, are refused by Message, not rebuilt (a
// panic, or zeros no digest stands for).
func TestMessageCutsPastKeptBytes(t *testing.T) {
	for _, tc := range []struct {
		what    string
		cuts    []Cut
		digests int
		want    string
	}{
		{"gaps past the kept bytes", []Cut{{3, 1, 1}, {7, 1, 1}}, 2, "past the message's 4 kept bytes"},
		{"a digest short", []Cut{{0, 2, 1}}, 1, "1 digests for 2 cut rows"},
	} {
		rec := &Record{Kind: KindSend, Msg: []byte{1, 2, 3, 4}, Cuts: tc.cuts, Digests: make([]uint32, tc.digests)}
		r := &Reader{MaxMessage: 1 << 30}
		if _, err := r.Message(rec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.what, err, tc.want)
		}
	}
}

// TestDroppedClaimBoundedByBytes: a close record claiming more dropped
// envs than its bytes can hold is refused before the list is allocated:
// maxDropped alone lets a few bytes of file allocate 128 MiB.
func TestDroppedClaimBoundedByBytes(t *testing.T) {
	b := appendStr(nil, keyKind, KindClose)
	b = append(b, 0xa0|byte(len(keyDropped)))
	b = append(b, keyDropped...)
	b = append(b, 0xdd, 0, 0, 0x10, 0) // an array 32 header: 4096 entries
	b = append([]byte{0x82}, append(b, 1, 2, 3)...)
	rec := &Record{}
	if _, err := rec.decode(b); err == nil || !strings.Contains(err.Error(), "4096 dropped envs in 3 bytes") {
		t.Fatalf("%v, want the claim refused by the bytes that follow it", err)
	}
}
