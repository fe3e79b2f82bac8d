package conn

import "encoding/binary"

// maskCopy sets dst[i] = src[i] ^ mask[(pos+i)%4] for every byte of src:
// the RFC 6455 mask applied during the one copy of a payload into the
// write buffer (fused, so the bytes are read once and written once).
// len(dst) must be at least len(src); dst may be src itself (masking in
// place), but the two must not otherwise overlap.
func maskCopy(dst, src []byte, mask [4]byte, pos int) {
	n := len(src)
	dst = dst[:n]
	// The key rotated so that its byte 0 applies to src[0].
	r := pos & 3
	key := uint32(mask[r]) | uint32(mask[(r+1)&3])<<8 | uint32(mask[(r+2)&3])<<16 | uint32(mask[(r+3)&3])<<24
	bulk := n &^ 63
	if bulk > 0 {
		maskBlocks(dst[:bulk], src[:bulk], key)
	}
	// The tail (under 64 bytes) and short segments: 8 bytes at a time, then
	// bytes. bulk is a multiple of 4, so the key is still aligned.
	i := bulk
	k8 := uint64(key) | uint64(key)<<32
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k8)
	}
	for ; i < n; i++ {
		dst[i] = src[i] ^ byte(key>>(8*(i&3)))
	}
}
