package conn

import (
	"bytes"
	"testing"

	"github.com/gobwas/ws"
)

// TestMaskCopy: the fused masked copy agrees with ws.Cipher (copy, then
// mask in place) for every length around the vector widths and every key
// offset, on both the vector and the generic paths.
func TestMaskCopy(t *testing.T) {
	src := make([]byte, 1<<12+77)
	for i := range src {
		src[i] = byte(i*31 + 7)
	}
	mask := [4]byte{0xa1, 0x5c, 0x03, 0xfe}
	vec := useAVX2Flag()
	for _, avx := range vec {
		setAVX2(avx)
		for _, n := range []int{0, 1, 3, 4, 7, 8, 15, 16, 63, 64, 65, 127, 128, 129, 1000, len(src)} {
			for pos := 0; pos < 8; pos++ {
				want := append([]byte(nil), src[:n]...)
				ws.Cipher(want, mask, pos)
				got := make([]byte, n+3)
				got[n], got[n+1], got[n+2] = 1, 2, 3
				maskCopy(got, src[:n], mask, pos)
				if !bytes.Equal(got[:n], want) {
					t.Fatalf("avx2=%v n=%d pos=%d: masked bytes differ", avx, n, pos)
				}
				if got[n] != 1 || got[n+1] != 2 || got[n+2] != 3 {
					t.Fatalf("avx2=%v n=%d pos=%d: wrote past the source length", avx, n, pos)
				}
			}
		}
	}
	setAVX2(vec[0])
}

func BenchmarkMaskCopy(b *testing.B) {
	src := make([]byte, 1<<20)
	dst := make([]byte, 1<<20)
	mask := [4]byte{1, 2, 3, 4}
	b.Run("fused", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for i := 0; i < b.N; i++ {
			maskCopy(dst, src, mask, 0)
		}
	})
	b.Run("copy+Cipher", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for i := 0; i < b.N; i++ {
			copy(dst, src)
			ws.Cipher(dst, mask, 0)
		}
	})
}

// TestMaskInPlace: maskCopy with dst == src masks in place.
func TestMaskInPlace(t *testing.T) {
	mask := [4]byte{9, 8, 7, 6}
	for _, n := range []int{0, 5, 64, 200, 1000} {
		for pos := 0; pos < 4; pos++ {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(i * 13)
			}
			want := append([]byte(nil), b...)
			ws.Cipher(want, mask, pos)
			maskCopy(b, b, mask, pos)
			if !bytes.Equal(b, want) {
				t.Fatalf("n=%d pos=%d: in-place masking differs", n, pos)
			}
		}
	}
}
