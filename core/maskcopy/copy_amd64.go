//go:build !purego

package maskcopy

// maskBlocks masks whole blocks: len(src) is a multiple of block and key
// is aligned to src[0]. AVX2 when the CPU and OS support it, else SSE2
// (which every amd64 CPU has).
func maskBlocks(dst, src []byte, key uint32) {
	if useAVX2 {
		maskBlocksAVX2(&dst[0], &src[0], len(src), key)
	} else {
		maskBlocksSSE2(&dst[0], &src[0], len(src), key)
	}
}

// copySumBlocks is maskBlocks that also continues the Adler-32 sum over
// src; len(src) is at most maxBulk.
func copySumBlocks(dst, src []byte, key uint32, sum uint32) uint32 {
	if !useAVX2 {
		sum = sumScalar(sum, src) // before the mask, which may be in place
		maskBlocksSSE2(&dst[0], &src[0], len(src), key)
		return sum
	}
	var l lanes // the AVX2 loop sums each group before it stores it
	copySumBlocksAVX2(&dst[0], &src[0], len(src), key, &l)
	return foldLanes(sum, &l, len(src))
}

// sumBlocks continues the Adler-32 sum over p, whole blocks, at most
// maxBulk bytes.
func sumBlocks(p []byte, sum uint32) uint32 {
	if !useAVX2 {
		return sumScalar(sum, p)
	}
	var l lanes
	sumBlocksAVX2(&p[0], len(p), &l)
	return foldLanes(sum, &l, len(p))
}

var useAVX2 = hasAVX2()

// hasAVX2: CPUID.1:ECX has OSXSAVE (27) and AVX (28), XCR0 enables XMM and
// YMM state (bits 1, 2), and CPUID.(7,0):EBX has AVX2 (bit 5).
func hasAVX2() bool {
	if max, _, _, _ := cpuid(0, 0); max < 7 {
		return false
	}
	if _, _, ecx, _ := cpuid(1, 0); ecx&(1<<27) == 0 || ecx&(1<<28) == 0 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 {
		return false
	}
	_, ebx, _, _ := cpuid(7, 0)
	return ebx&(1<<5) != 0
}

//go:noescape
func maskBlocksSSE2(dst, src *byte, n int, key uint32)

//go:noescape
func maskBlocksAVX2(dst, src *byte, n int, key uint32)

//go:noescape
func copySumBlocksAVX2(dst, src *byte, n int, key uint32, l *lanes)

//go:noescape
func sumBlocksAVX2(src *byte, n int, l *lanes)

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)
