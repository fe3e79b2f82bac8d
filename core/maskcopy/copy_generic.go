//go:build !(amd64 || arm64) || purego

package maskcopy

import "encoding/binary"

// maskBlocks masks whole blocks: len(src) is a multiple of block and key
// is aligned to src[0].
func maskBlocks(dst, src []byte, key uint32) {
	k8 := uint64(key) | uint64(key)<<32
	for i := 0; i+32 <= len(src); i += 32 {
		d, s := dst[i:i+32], src[i:i+32]
		binary.LittleEndian.PutUint64(d[0:], binary.LittleEndian.Uint64(s[0:])^k8)
		binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(s[8:])^k8)
		binary.LittleEndian.PutUint64(d[16:], binary.LittleEndian.Uint64(s[16:])^k8)
		binary.LittleEndian.PutUint64(d[24:], binary.LittleEndian.Uint64(s[24:])^k8)
	}
}

func copySumBlocks(dst, src []byte, key uint32, sum uint32) uint32 {
	sum = sumScalar(sum, src) // before the mask, which may be in place
	maskBlocks(dst, src, key)
	return sum
}

func sumBlocks(p []byte, sum uint32) uint32 { return sumScalar(sum, p) }
