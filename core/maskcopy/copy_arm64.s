//go:build !purego

#include "textflag.h"

// The arm64 loops: 64 bytes per iteration, in four 16-byte registers.
// Go's assembler has no mnemonic for UADDLP, UADALP, UMULL or UMLAL, so
// those are WORDs, each with the instruction it encodes (as GNU as
// assembles it) beside it.

// MASK_BLOCK loads the next 64 bytes of *R1 into V0-V3, and stores them
// masked with the key in V4 (through V16-V19) to *R0, both pointers
// advanced: the sums, when taken, read V0-V3, the bytes as they were.
#define MASK_BLOCK \
	VLD1.P 64(R1), [V0.B16, V1.B16, V2.B16, V3.B16]; \
	VEOR   V4.B16, V0.B16, V16.B16; \
	VEOR   V4.B16, V1.B16, V17.B16; \
	VEOR   V4.B16, V2.B16, V18.B16; \
	VEOR   V4.B16, V3.B16, V19.B16; \
	VST1.P [V16.B16, V17.B16, V18.B16, V19.B16], 64(R0)

// func maskBlocksNEON(dst, src *byte, n int, key uint32)
// dst[i] = src[i] ^ key bytes; n is a multiple of 64.
TEXT ·maskBlocksNEON(SB), NOSPLIT, $0-28
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	MOVWU key+24(FP), R3
	VDUP R3, V4.S4
	LSR  $6, R2, R2
	CBZ  R2, mask_done

mask_loop:
	MASK_BLOCK
	SUBS   $1, R2, R2
	BNE    mask_loop

mask_done:
	RET

// The Adler-32 loops fill the lanes of maskcopy.go the way the amd64 ones
// do. Per 32-byte group, in V0 and V1 (or V2 and V3):
//
//	ps += s1 (widened: V6, V7 hold four uint64 lanes, which maxBulk's
//	          sums would overflow at 32 bits)
//	s1 += the group's bytes (UADDLP, UADALP: pairs of bytes into 8
//	      halfwords, then pairs of those into V5's four words)
//	s2 += each byte times its weight, 32 down to 1 (UMULL, UMLAL: 8
//	      halfwords of four products each, at most 255*80; then UADALP
//	      into four words: V8 for the first group of an iteration, V9
//	      for the second, so the two chains overlap)
//
// Registers: V30, V31 the weights; V11-V14 scratch; the mask loop's V4 the
// key and V16-V19 the masked bytes.

// Bytes 32, 31, ..., 1: the weight of each byte of a group (amd64's table).
DATA weights<>+0(SB)/8, $0x191a1b1c1d1e1f20
DATA weights<>+8(SB)/8, $0x1112131415161718
DATA weights<>+16(SB)/8, $0x090a0b0c0d0e0f10
DATA weights<>+24(SB)/8, $0x0102030405060708
GLOBL weights<>(SB), RODATA|NOPTR, $32

#define SUM_SETUP \
	MOVD $weights<>(SB), R5; \
	VLD1 (R5), [V30.B16, V31.B16]; \
	VEOR V5.B16, V5.B16, V5.B16; \
	VEOR V6.B16, V6.B16, V6.B16; \
	VEOR V7.B16, V7.B16, V7.B16; \
	VEOR V8.B16, V8.B16, V8.B16; \
	VEOR V9.B16, V9.B16, V9.B16

// SUM_GROUPS adds the groups in V0, V1 and V2, V3 to the lanes.
#define SUM_GROUPS \
	VUADDW  V5.S2, V6.D2, V6.D2; \
	VUADDW2 V5.S4, V7.D2, V7.D2; \
	WORD $0x6e20280b; \ // uaddlp v11.8h, v0.16b
	WORD $0x6e20682b; \ // uadalp v11.8h, v1.16b
	WORD $0x6e20284d; \ // uaddlp v13.8h, v2.16b
	WORD $0x6e20686d; \ // uadalp v13.8h, v3.16b
	WORD $0x6e606965; \ // uadalp v5.4s, v11.8h
	WORD $0x2e3ec00c; \ // umull v12.8h, v0.8b, v30.8b
	WORD $0x6e3e800c; \ // umlal2 v12.8h, v0.16b, v30.16b
	WORD $0x2e3f802c; \ // umlal v12.8h, v1.8b, v31.8b
	WORD $0x6e3f802c; \ // umlal2 v12.8h, v1.16b, v31.16b
	WORD $0x6e606988; \ // uadalp v8.4s, v12.8h
	VUADDW  V5.S2, V6.D2, V6.D2; \
	VUADDW2 V5.S4, V7.D2, V7.D2; \
	WORD $0x6e6069a5; \ // uadalp v5.4s, v13.8h
	WORD $0x2e3ec04e; \ // umull v14.8h, v2.8b, v30.8b
	WORD $0x6e3e804e; \ // umlal2 v14.8h, v2.16b, v30.16b
	WORD $0x2e3f806e; \ // umlal v14.8h, v3.8b, v31.8b
	WORD $0x6e3f806e; \ // umlal2 v14.8h, v3.16b, v31.16b
	WORD $0x6e6069c9    // uadalp v9.4s, v14.8h

// SUM_STORE writes the lanes to *R4: s1 widened to four uint64, ps, and
// s2's eight words (foldLanes adds both halves of each uint64).
#define SUM_STORE \
	VUXTL  V5.S2, V20.D2; \
	VUXTL2 V5.S4, V21.D2; \
	VST1.P [V20.D2, V21.D2], 32(R4); \
	VST1.P [V6.D2, V7.D2], 32(R4); \
	VST1   [V8.S4, V9.S4], (R4)

// func copySumBlocksNEON(dst, src *byte, n int, key uint32, l *lanes)
TEXT ·copySumBlocksNEON(SB), NOSPLIT, $0-40
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	MOVWU key+24(FP), R3
	MOVD  l+32(FP), R4
	VDUP  R3, V4.S4
	SUM_SETUP
	LSR   $6, R2, R2
	CBZ   R2, copysum_done

copysum_loop:
	MASK_BLOCK
	SUM_GROUPS
	SUBS   $1, R2, R2
	BNE    copysum_loop

copysum_done:
	SUM_STORE
	RET

// func sumBlocksNEON(src *byte, n int, l *lanes)
TEXT ·sumBlocksNEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R1
	MOVD n+8(FP), R2
	MOVD l+16(FP), R4
	SUM_SETUP
	LSR  $6, R2, R2
	CBZ  R2, sum_done

sum_loop:
	VLD1.P 64(R1), [V0.B16, V1.B16, V2.B16, V3.B16]
	SUM_GROUPS
	SUBS   $1, R2, R2
	BNE    sum_loop

sum_done:
	SUM_STORE
	RET
