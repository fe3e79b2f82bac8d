package maskcopy

import (
	"bytes"
	"hash/adler32"
	"math/rand/v2"
	"testing"

	"github.com/gobwas/ws"
)

// lengths around the vector block and the scalar loop's reduction points.
var lengths = []int{0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 5552, 5553, 1 << 12, 1<<16 + 77}

func testBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// maskedWant is the masked payload as gobwas/ws computes it.
func maskedWant(src []byte, mask [4]byte, pos int) []byte {
	want := append([]byte(nil), src...)
	ws.Cipher(want, mask, pos)
	return want
}

// TestCopy: the masked copy agrees with ws.Cipher (copy, then mask in
// place) for every length up to two blocks and a half (each of the short
// path's 8-, 4- and 1-byte steps) and around the vector widths, and every
// key offset, on every path this CPU has, and writes nothing past the
// source length.
func TestCopy(t *testing.T) {
	src := testBytes(1<<16+77, 1)
	mask := [4]byte{0xa1, 0x5c, 0x03, 0xfe}
	vec := useAVX2Flag()
	defer setAVX2(vec[0])
	every := make([]int, 0, 2*block+block/2+len(lengths))
	for n := 0; n < 2*block+block/2; n++ {
		every = append(every, n)
	}
	for _, avx := range vec {
		setAVX2(avx)
		for _, n := range append(every, lengths...) {
			for pos := 0; pos < 8; pos++ {
				got := make([]byte, n+3)
				got[n], got[n+1], got[n+2] = 1, 2, 3
				Copy(got, src[:n], Key(mask, pos))
				if !bytes.Equal(got[:n], maskedWant(src[:n], mask, pos)) {
					t.Fatalf("avx2=%v n=%d pos=%d: masked bytes differ", avx, n, pos)
				}
				if got[n] != 1 || got[n+1] != 2 || got[n+2] != 3 {
					t.Fatalf("avx2=%v n=%d pos=%d: wrote past the source length", avx, n, pos)
				}
			}
		}
	}
}

// TestCopyInPlace: dst == src masks in place.
func TestCopyInPlace(t *testing.T) {
	mask := [4]byte{9, 8, 7, 6}
	for _, n := range []int{0, 5, 64, 200, 1000} {
		for pos := 0; pos < 4; pos++ {
			b := testBytes(n, uint64(n))
			want := maskedWant(b, mask, pos)
			Copy(b, b, Key(mask, pos))
			if !bytes.Equal(b, want) {
				t.Fatalf("n=%d pos=%d: in-place masking differs", n, pos)
			}
		}
	}
}

// TestSum: Sum and CopySum give hash/adler32's checksum, whole and
// continued across any split, and CopySum masks as Copy does, on every
// path this CPU has. All-0xff input is the worst case for the lanes'
// bounds.
func TestSum(t *testing.T) {
	ones := bytes.Repeat([]byte{0xff}, 3<<20+5)
	vec := useAVX2Flag()
	defer setAVX2(vec[0])
	for _, avx := range vec {
		setAVX2(avx)
		for _, src := range [][]byte{testBytes(3<<20+5, 2), ones} {
			for _, n := range append(lengths, maxBulk, maxBulk+64, 3<<20+5) {
				p := src[:n]
				want := adler32.Checksum(p)
				if got := Sum(1, p); got != want {
					t.Fatalf("avx2=%v n=%d: Sum %#x, hash/adler32 %#x", avx, n, got, want)
				}
				dst := make([]byte, n)
				if got := CopySum(dst, p, Key([4]byte{1, 2, 3, 4}, 0), 1); got != want {
					t.Fatalf("avx2=%v n=%d: CopySum %#x, hash/adler32 %#x", avx, n, got, want)
				}
				if !bytes.Equal(dst, maskedWant(p, [4]byte{1, 2, 3, 4}, 0)) {
					t.Fatalf("avx2=%v n=%d: CopySum's masked bytes differ", avx, n)
				}
			}
		}
	}
}

// TestCopySumInPlace: with dst == src, CopySum masks in place and sums
// the bytes as they were, on every path this CPU has.
func TestCopySumInPlace(t *testing.T) {
	vec := useAVX2Flag()
	defer setAVX2(vec[0])
	for _, avx := range vec {
		setAVX2(avx)
		for _, n := range lengths {
			b := testBytes(n, uint64(n)+9)
			want, wantMasked := adler32.Checksum(b), maskedWant(b, [4]byte{5, 6, 7, 8}, 0)
			if got := CopySum(b, b, Key([4]byte{5, 6, 7, 8}, 0), 1); got != want {
				t.Fatalf("avx2=%v n=%d: in-place CopySum %#x, hash/adler32 %#x", avx, n, got, want)
			}
			if !bytes.Equal(b, wantMasked) {
				t.Fatalf("avx2=%v n=%d: in-place CopySum masked wrong", avx, n)
			}
		}
	}
}

// TestSumSplits: a checksum continued over pieces, each masked with the
// key rotated to its offset, equals the whole one.
func TestSumSplits(t *testing.T) {
	src := testBytes(200_000, 3)
	mask := [4]byte{0x10, 0x20, 0x30, 0x40}
	want := adler32.Checksum(src)
	wantMasked := maskedWant(src, mask, 0)
	r := rand.New(rand.NewPCG(4, 4))
	for trial := 0; trial < 200; trial++ {
		dst := make([]byte, len(src))
		sum, sumCopy, off := uint32(1), uint32(1), 0
		for off < len(src) {
			n := min(len(src)-off, r.IntN(3000))
			if r.IntN(8) == 0 {
				n = min(len(src)-off, r.IntN(70_000))
			}
			sum = Sum(sum, src[off:off+n])
			sumCopy = CopySum(dst[off:], src[off:off+n], Key(mask, off), sumCopy)
			off += n
		}
		if sum != want || sumCopy != want {
			t.Fatalf("trial %d: split sums %#x and %#x, whole %#x", trial, sum, sumCopy, want)
		}
		if !bytes.Equal(dst, wantMasked) {
			t.Fatalf("trial %d: split masked copies differ", trial)
		}
	}
}

func TestRotateKey(t *testing.T) {
	mask := [4]byte{1, 2, 3, 4}
	for pos := 0; pos < 12; pos++ {
		for n := 0; n < 9; n++ {
			if got, want := RotateKey(Key(mask, pos), n), Key(mask, pos+n); got != want {
				t.Fatalf("RotateKey(Key(pos %d), %d) = %#x, want %#x", pos, n, got, want)
			}
		}
	}
}

// FuzzCopySum: any bytes, split anywhere, masked from any offset.
func FuzzCopySum(f *testing.F) {
	f.Add([]byte("hello"), uint16(3), uint32(0xdeadbeef))
	f.Add(bytes.Repeat([]byte{0xff}, 300), uint16(64), uint32(0))
	f.Fuzz(func(t *testing.T, p []byte, split uint16, key uint32) {
		at := min(int(split), len(p))
		dst := make([]byte, len(p))
		sum := CopySum(dst, p[:at], key, 1)
		sum = CopySum(dst[at:], p[at:], RotateKey(key, at), sum)
		if want := adler32.Checksum(p); sum != want {
			t.Fatalf("CopySum %#x, hash/adler32 %#x", sum, want)
		}
		if got := Sum(Sum(1, p[:at]), p[at:]); got != adler32.Checksum(p) {
			t.Fatalf("Sum %#x, hash/adler32 %#x", got, adler32.Checksum(p))
		}
		for i := range p {
			if dst[i] != p[i]^byte(key>>(8*(i&3))) {
				t.Fatalf("byte %d masked wrong", i)
			}
		}
	})
}

// BenchmarkCopy compares, over a 32 KiB piece (the size the connection
// copies at a time when the ledger watches) and 1 MiB: the masked copy
// alone, the masked copy with its checksum, the checksum alone, and
// hash/crc32's CRC-32C (the ledger's digest before) and hash/adler32.
func BenchmarkCopy(b *testing.B) {
	for _, n := range []int{32 << 10, 1 << 20} {
		src, dst := testBytes(n, 5), make([]byte, n)
		run := func(name string, f func()) {
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(n))
				for i := 0; i < b.N; i++ {
					f()
				}
			})
		}
		var sink uint32
		sz := "32KiB"
		if n == 1<<20 {
			sz = "1MiB"
		}
		run(sz+"/Copy", func() { Copy(dst, src, 0x01020304) })
		run(sz+"/CopySum", func() { sink = CopySum(dst, src, 0x01020304, 1) })
		run(sz+"/Sum", func() { sink = Sum(1, src) })
		run(sz+"/hash-adler32", func() { sink = adler32.Checksum(src) })
		run(sz+"/Copy+crc32c", func() { Copy(dst, src, 0x01020304); sink = crcC(src) })
		_ = sink
	}
}
