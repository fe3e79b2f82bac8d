//go:build !purego

#include "textflag.h"

// The mask loops: dst[i] = src[i] ^ key bytes.

// func maskBlocksSSE2(dst, src *byte, n int, key uint32)
// dst[i] = src[i] ^ key bytes, 64 bytes per iteration; n is a multiple of 64.
TEXT ·maskBlocksSSE2(SB), NOSPLIT, $0-28
	MOVQ   dst+0(FP), DI
	MOVQ   src+8(FP), SI
	MOVQ   n+16(FP), CX
	MOVL   key+24(FP), DX
	MOVD   DX, X4
	PSHUFD $0, X4, X4
	SHRQ   $6, CX
	JZ     sse_done

sse_loop:
	MOVOU (SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	PXOR  X4, X0
	PXOR  X4, X1
	PXOR  X4, X2
	PXOR  X4, X3
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	ADDQ  $64, SI
	ADDQ  $64, DI
	DECQ  CX
	JNZ   sse_loop

sse_done:
	RET

// func maskBlocksAVX2(dst, src *byte, n int, key uint32)
// The same with two 32-byte vectors per iteration.
TEXT ·maskBlocksAVX2(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         key+24(FP), DX
	MOVD         DX, X2
	VPBROADCASTD X2, Y2
	SHRQ         $6, CX
	JZ           avx_done

avx_loop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPXOR   Y2, Y0, Y0
	VPXOR   Y2, Y1, Y1
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     avx_loop

avx_done:
	VZEROUPPER
	RET

// The Adler-32 loops. Per 32-byte group y of the input (see lanes in
// maskcopy.go): ps += s1; s1 += VPSADBW(y, 0); s2 += VPMADDWD(
// VPMADDUBSW(y, weights), ones). Two groups per iteration; n is a
// multiple of 64.
//
// Registers: Y3 weights, Y4 ones, Y5 zero, Y6 s1, Y7 ps, Y8 s2; Y0 the
// group, Y1 scratch; copySumBlocksAVX2 also Y2 the key, Y9 the masked
// group.

// Bytes 32, 31, ..., 1: the weight of each byte of a group.
DATA weights<>+0(SB)/8, $0x191a1b1c1d1e1f20
DATA weights<>+8(SB)/8, $0x1112131415161718
DATA weights<>+16(SB)/8, $0x090a0b0c0d0e0f10
DATA weights<>+24(SB)/8, $0x0102030405060708
GLOBL weights<>(SB), RODATA|NOPTR, $32

// Sixteen int16 ones: VPMADDWD with them adds pairs of words.
DATA ones<>+0(SB)/8, $0x0001000100010001
DATA ones<>+8(SB)/8, $0x0001000100010001
DATA ones<>+16(SB)/8, $0x0001000100010001
DATA ones<>+24(SB)/8, $0x0001000100010001
GLOBL ones<>(SB), RODATA|NOPTR, $32

#define SUM_SETUP \
	VMOVDQU weights<>(SB), Y3; \
	VMOVDQU ones<>(SB), Y4; \
	VPXOR   Y5, Y5, Y5; \
	VPXOR   Y6, Y6, Y6; \
	VPXOR   Y7, Y7, Y7; \
	VPXOR   Y8, Y8, Y8

// SUM_GROUP adds the group in Y0 to the lanes.
#define SUM_GROUP \
	VPADDQ     Y6, Y7, Y7; \
	VPSADBW    Y5, Y0, Y1; \
	VPADDQ     Y1, Y6, Y6; \
	VPMADDUBSW Y3, Y0, Y1; \
	VPMADDWD   Y4, Y1, Y1; \
	VPADDD     Y1, Y8, Y8

// SUM_STORE writes the lanes to *AX.
#define SUM_STORE \
	VMOVDQU Y6, 0(AX); \
	VMOVDQU Y7, 32(AX); \
	VMOVDQU Y8, 64(AX)

// func copySumBlocksAVX2(dst, src *byte, n int, key uint32, l *lanes)
TEXT ·copySumBlocksAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         key+24(FP), DX
	MOVQ         l+32(FP), AX
	MOVD         DX, X2
	VPBROADCASTD X2, Y2
	SUM_SETUP
	SHRQ         $6, CX
	JZ           copysum_done

copysum_loop:
	VMOVDQU (SI), Y0
	VPXOR   Y2, Y0, Y9
	VMOVDQU Y9, (DI)
	SUM_GROUP
	VMOVDQU 32(SI), Y0
	VPXOR   Y2, Y0, Y9
	VMOVDQU Y9, 32(DI)
	SUM_GROUP
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     copysum_loop

copysum_done:
	SUM_STORE
	VZEROUPPER
	RET

// func sumBlocksAVX2(src *byte, n int, l *lanes)
TEXT ·sumBlocksAVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ l+16(FP), AX
	SUM_SETUP
	SHRQ $6, CX
	JZ   sum_done

sum_loop:
	VMOVDQU (SI), Y0
	SUM_GROUP
	VMOVDQU 32(SI), Y0
	SUM_GROUP
	ADDQ    $64, SI
	DECQ    CX
	JNZ     sum_loop

sum_done:
	SUM_STORE
	VZEROUPPER
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL   $0, CX
	XGETBV
	MOVL   AX, eax+0(FP)
	MOVL   DX, edx+4(FP)
	RET
