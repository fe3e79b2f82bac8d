package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// blockOf is a one-block ledger file of the compressed bytes z, under a
// block header that claims rawLen raw bytes.
func blockOf(z []byte, rawLen uint32) []byte {
	le := binary.LittleEndian
	litLen := le.AppendUint32(nil, 0)
	file := le.AppendUint32(le.AppendUint32(appendHeader(nil), uint32(len(z))), rawLen)
	file = le.AppendUint32(file, blockSum(z, litLen, nil, Version))
	return append(append(file, litLen...), z...)
}

// TestReaderMemoryFollowsBytes: what a ledger's blocks claim (the raw
// length in a block's header, the content size in a zstd frame's) costs
// the reader nothing; it allocates as it decodes. A 46-byte file made it
// allocate 64 MiB, and so did a 2 KiB one whose frame claimed 64 MiB and
// decoded to nothing.
func TestReaderMemoryFollowsBytes(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	small := enc.EncodeAll(bytes.Repeat([]byte{0xc0}, 100), nil)
	larger := enc.EncodeAll(bytes.Repeat([]byte{0xc0}, 2000), nil)
	// The header of a frame of 64 MiB, then a block of the reserved type
	// and padding: nothing decodes.
	full := enc.EncodeAll(make([]byte, maxBlock), nil)
	var h zstd.Header
	if err := h.Decode(full); err != nil || !h.HasFCS || h.FrameContentSize != maxBlock {
		t.Fatalf("the 64 MiB frame's header: %+v, %v", h, err)
	}
	claim := append(full[:h.HeaderSize:h.HeaderSize], append([]byte{0x07, 0, 0}, make([]byte, 2045)...)...)
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0} // an empty skippable frame
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"header claims 64 MiB", blockOf(small, maxBlock), "decompresses to 100 bytes, its header says 67108864"},
		{"header claims less", blockOf(larger, 50), "decompresses to more than the 50 bytes its header says"},
		{"frame claims 64 MiB", blockOf(claim, maxBlock), "reserved block type"},
		{"frame claims 64 MiB after a skippable one", blockOf(append(skippable, claim...), 50), "reserved block type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r, err := NewReader(bytes.NewReader(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Next()
			r.Close()
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reading: %v; want %s", err, tc.want)
			}
			// The decoder's own state is a few hundred KiB at most.
			if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
				t.Fatalf("reading a %d-byte file allocated %d bytes", len(tc.file), got)
			}
		})
	}
}
