package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"
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

// vmRSS is the process's resident memory, from /proc (0 where there is
// none).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib << 10
		}
	}
	return 0
}

// TestCutsCostTheirBytes: a send record of a few dozen bytes whose one
// cut claims 512 MiB of digested rows (one 4-byte digest stands for a row
// of any size) is rebuilt without the reader taking that memory: 16 of
// them made Message allocate 512 MiB each (a 95-byte file of such records
// near 1 GiB took `plugrl ledger summary` to 2.1 GB). The rebuilt message
// is whole: its kept bytes where they were, zeros in the cut.
func TestCutsCostTheirBytes(t *testing.T) {
	const claim, records = 512 << 20, 16
	kept := []byte{0x80, 0x81, 0x82}
	var one []byte
	one = msgp.AppendMapHeader(one, 5)
	one = msgp.AppendString(one, "k")
	one = msgp.AppendString(one, "send")
	one = msgp.AppendString(one, "p")
	one = msgp.AppendInt(one, 0)
	one = msgp.AppendString(one, "m")
	one = msgp.AppendBytes(one, kept)
	one = msgp.AppendString(one, "cuts")
	one = msgp.AppendArrayHeader(one, 1)
	one = msgp.AppendArrayHeader(one, 3)
	one = msgp.AppendInt64(one, 1) // after the first kept byte
	one = msgp.AppendInt64(one, claim)
	one = msgp.AppendInt64(one, claim)
	one = msgp.AppendString(one, "d")
	one = msgp.AppendBytes(one, []byte{1, 2, 3, 4})
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	file := oneBlock(enc, bytes.Repeat(one, records), 0)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rss := vmRSS()
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for ; ; n++ {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msg, err := r.Message(rec)
		if err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		if len(msg) != claim+len(kept) || msg[0] != 0x80 || msg[1] != 0 || msg[claim] != 0 || msg[claim+1] != 0x81 || msg[claim+2] != 0x82 {
			t.Fatalf("record %d rebuilt as %d bytes, %x...%x; want the kept bytes around %d zeros", n, len(msg), msg[:2], msg[len(msg)-3:], claim)
		}
	}
	runtime.ReadMemStats(&after)
	if n != records {
		t.Fatalf("read %d records, want %d", n, records)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("a %d-byte ledger of %d records made the reader allocate %d MiB", len(file), n, got>>20)
	}
	if grew := vmRSS() - rss; runtime.GOOS == "linux" && grew > 64<<20 {
		t.Errorf("a %d-byte ledger of %d records grew resident memory by %d MiB", len(file), n, grew>>20)
	}
}
