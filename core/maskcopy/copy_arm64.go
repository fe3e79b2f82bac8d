//go:build !purego

package maskcopy

// Every arm64 CPU has Advanced SIMD (NEON): the ARMv8-A base the Go
// toolchain targets includes it, so there is no fallback to choose at run
// time, unlike amd64's AVX2.

// maskBlocks masks whole blocks: len(src) is a multiple of block and key
// is aligned to src[0].
func maskBlocks(dst, src []byte, key uint32) {
	maskBlocksNEON(&dst[0], &src[0], len(src), key)
}

// copySumBlocks is maskBlocks that also continues the Adler-32 sum over
// src; len(src) is at most maxBulk.
func copySumBlocks(dst, src []byte, key uint32, sum uint32) uint32 {
	var l lanes // the NEON loop sums each group before it stores it
	copySumBlocksNEON(&dst[0], &src[0], len(src), key, &l)
	return foldLanes(sum, &l, len(src))
}

// sumBlocks continues the Adler-32 sum over p, whole blocks, at most
// maxBulk bytes.
func sumBlocks(p []byte, sum uint32) uint32 {
	var l lanes
	sumBlocksNEON(&p[0], len(p), &l)
	return foldLanes(sum, &l, len(p))
}

//go:noescape
func maskBlocksNEON(dst, src *byte, n int, key uint32)

//go:noescape
func copySumBlocksNEON(dst, src *byte, n int, key uint32, l *lanes)

//go:noescape
func sumBlocksNEON(src *byte, n int, l *lanes)
