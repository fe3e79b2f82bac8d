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

// TestReaderMemoryFollowsBytes: a block's header claiming the largest raw
// size a writer writes, over a frame of a few bytes, costs the reader what
// the frame decodes to, not the claim (it allocated 64 MiB for a 46-byte
// file). A frame that itself claims more than the header is refused
// before it is decoded.
func TestReaderMemoryFollowsBytes(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	small := oneBlock(enc, bytes.Repeat([]byte{0xc0}, 100), 0)
	// The block's raw length (after the file header, zlen) claims maxBlock.
	binary.LittleEndian.PutUint32(small[headerSize+4:], maxBlock)
	// A frame that records its size (2000 bytes: the encoder leaves the
	// size out of a frame under 1 KiB), under a header that says less.
	under := oneBlock(enc, bytes.Repeat([]byte{0xc0}, 2000), 0)
	binary.LittleEndian.PutUint32(under[headerSize+4:], 50)
	for _, tc := range []struct {
		name, file, want string
	}{
		{"header claims 64 MiB", string(small), "decompresses to 100 bytes, its header says 67108864"},
		{"frame claims more", string(under), "frame holds 2000 bytes, its header says 50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r, err := NewReader(strings.NewReader(tc.file))
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
