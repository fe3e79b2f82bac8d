//go:build !purego

#include "textflag.h"

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
