// Package maskcopy makes the one pass the client takes over the bytes it
// sends: a copy into the write buffer with the RFC 6455 mask applied, and,
// when the ledger wants it, the Adler-32 of the bytes computed in the same
// pass.
//
// Every observation byte is read once, by this copy. A checksum that read
// the bytes again, even from the cache right after the copy, cost a camera
// workload more than the copy itself (CRC-32C at ~16 GB/s over 9.6 MB per
// exchange); folded into the copy's loop, Adler-32 adds a few vector
// instructions per 32 bytes already in registers. Adler-32 (RFC 1950) is
// chosen because it vectorises that way and is what hash/adler32 and
// zlib.adler32 compute, so anyone can check a digest.
package maskcopy

import "encoding/binary"

// Key returns mask as the little-endian key Copy takes, aligned so that
// its first byte applies to payload offset pos.
func Key(mask [4]byte, pos int) uint32 {
	return RotateKey(binary.LittleEndian.Uint32(mask[:]), pos)
}

// RotateKey returns key aligned n bytes further into the payload: the key
// for the bytes after the first n of a Copy.
func RotateKey(key uint32, n int) uint32 {
	r := uint(n&3) * 8
	return key>>r | key<<(32-r)
}

// Copy sets dst[i] = src[i] ^ byte(key>>(8*(i%4))) for every byte of src.
// len(dst) must be at least len(src); dst may be src itself (masking in
// place), but the two must not otherwise overlap.
func Copy(dst, src []byte, key uint32) {
	n := len(src)
	if n < block {
		// The short pieces of a message (its msgpack structure, ids,
		// flags) skip the vector loop's dispatch.
		maskTail(dst[:n], src, key)
		return
	}
	dst = dst[:n]
	bulk := n &^ (block - 1)
	maskBlocks(dst[:bulk], src[:bulk], key)
	maskTail(dst[bulk:], src[bulk:], key) // bulk is a multiple of 4: key still aligned
}

// CopySum is Copy that also returns the Adler-32 of src continued from
// sum (1 starts a new checksum): Sum(sum, src), computed by the same pass,
// of src's bytes as they were before (dst may be src).
func CopySum(dst, src []byte, key uint32, sum uint32) uint32 {
	n := len(src)
	dst = dst[:n]
	for n >= block {
		bulk := min(n&^(block-1), maxBulk)
		sum = copySumBlocks(dst[:bulk], src[:bulk], key, sum)
		dst, src, n = dst[bulk:], src[bulk:], n-bulk
	}
	sum = sumScalar(sum, src) // before the mask, which may be in place
	maskTail(dst, src, key)
	return sum
}

// Sum returns the Adler-32 of p continued from sum (1 starts a new
// checksum), as hash/adler32 computes it.
func Sum(sum uint32, p []byte) uint32 {
	for len(p) >= block {
		bulk := min(len(p)&^(block-1), maxBulk)
		sum = sumBlocks(p[:bulk], sum)
		p = p[bulk:]
	}
	return sumScalar(sum, p)
}

const (
	// block is the vector loops' unit: they take whole multiples of it.
	block = 64
	// maxBulk bounds one vector call so that its lane accumulators cannot
	// overflow (see foldLanes).
	maxBulk = 1 << 20

	adlerMod = 65521
	// adlerNMax is the most bytes the scalar loop may add before its
	// 32-bit sums must be reduced (RFC 1950, zlib's NMAX).
	adlerNMax = 5552
)

// maskTail masks the last bytes (under a block), 8 at a time, then 4,
// then the last three at most.
func maskTail(dst, src []byte, key uint32) {
	i, n := 0, len(src)
	dst = dst[:n]
	k8 := uint64(key) | uint64(key)<<32
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k8)
	}
	if i+4 <= n {
		binary.LittleEndian.PutUint32(dst[i:], binary.LittleEndian.Uint32(src[i:])^key)
		i += 4
	}
	// i is a multiple of 4 here: the last bytes take the key's first three.
	switch n - i {
	case 3:
		dst[i+2] = src[i+2] ^ byte(key>>16)
		fallthrough
	case 2:
		dst[i+1] = src[i+1] ^ byte(key>>8)
		fallthrough
	case 1:
		dst[i] = src[i] ^ byte(key)
	}
}

// sumScalar is Adler-32 one byte at a time: for short inputs and tails.
func sumScalar(sum uint32, p []byte) uint32 {
	a, b := sum&0xffff, sum>>16
	for len(p) > 0 {
		q := p[:min(len(p), adlerNMax)]
		p = p[len(q):]
		for len(q) >= 4 {
			a += uint32(q[0])
			b += a
			a += uint32(q[1])
			b += a
			a += uint32(q[2])
			b += a
			a += uint32(q[3])
			b += a
			q = q[4:]
		}
		for _, x := range q {
			a += uint32(x)
			b += a
		}
		a %= adlerMod
		b %= adlerMod
	}
	return b<<16 | a
}

// lanes are the vector loop's accumulators over n bytes taken as 32-byte
// groups y[j] (j = 0..n/32-1), each summed in the lanes of one register:
//
//	s1: the bytes (VPSADBW: 4 lanes of 8 bytes each)
//	ps: before each group, s1 so far (so the sum over j of all groups
//	    before j)
//	s2: each group's bytes weighted 32, 31, ..., 1 (VPMADDUBSW, VPMADDWD:
//	    8 lanes of 32 bits, stored as 4 uint64 holding 2 each)
//
// arm64's NEON loop (copy_arm64.s) fills the same lanes with the same
// sums, though it splits them across its lanes differently.
type lanes struct {
	s1, ps, s2 [4]uint64
}

// foldLanes turns the lanes over n bytes into the Adler-32 continued from
// sum. Over those bytes a grows by their sum, and b by n*a plus each
// byte weighted by how many bytes from it to the end, inclusive: byte i
// of group j counts (32-i) + 32*(groups after j). The per-lane counts
// stay below 2^32 for n up to maxBulk (s2 lanes gain at most 4*255*32 per
// group).
func foldLanes(sum uint32, l *lanes, n int) uint32 {
	a, b := uint64(sum&0xffff), uint64(sum>>16)
	var s1, ps, s2 uint64
	for i := range 4 {
		s1 += l.s1[i]
		ps += l.ps[i]
		s2 += l.s2[i]&0xffffffff + l.s2[i]>>32
	}
	b = (b + uint64(n)*a + 32*ps + s2) % adlerMod
	a = (a + s1) % adlerMod
	return uint32(b<<16 | a)
}
