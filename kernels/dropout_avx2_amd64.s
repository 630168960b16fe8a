//go:build amd64 && !purego

#include "textflag.h"

// The lane numbers 0…3 of one group of four 64-bit stream indices.
DATA dropLanes4<>+0(SB)/8, $0
DATA dropLanes4<>+8(SB)/8, $1
DATA dropLanes4<>+16(SB)/8, $2
DATA dropLanes4<>+24(SB)/8, $3
GLOBL dropLanes4<>(SB), RODATA|NOPTR, $32

// MUL64(Z, CLO, CHI, T1, T2) sets Z = Z·C mod 2^64 lane by lane, for a
// constant C whose low 32 bits are in the low halves of CLO's lanes and
// high 32 bits in CHI's: AVX2 has no 64-bit multiply, so
// Z·C = lo(Z)·lo(C) + ((hi(Z)·lo(C) + lo(Z)·hi(C)) << 32).
#define MUL64(Z, CLO, CHI, T1, T2) \
	VPSRLQ   $32, Z, T1;   \
	VPMULUDQ CLO, T1, T1;  \
	VPMULUDQ CHI, Z, T2;   \
	VPADDQ   T2, T1, T1;   \
	VPSLLQ   $32, T1, T1;  \
	VPMULUDQ CLO, Z, Z;    \
	VPADDQ   T1, Z, Z

// MIX4 applies SplitMix64's finaliser to the four lanes of Z (Y8–Y12 hold
// its constants), with T1–T3 scratch.
#define MIX4(Z, T1, T2, T3) \
	VPADDQ Y8, Z, Z;                \
	VPSRLQ $30, Z, T3;              \
	VPXOR  T3, Z, Z;                \
	MUL64(Z, Y9, Y10, T1, T2);      \
	VPSRLQ $27, Z, T3;              \
	VPXOR  T3, Z, Z;                \
	MUL64(Z, Y11, Y12, T1, T2);     \
	VPSRLQ $31, Z, T3;              \
	VPXOR  T3, Z, Z

// func dropMulAVX2(dst, src *float32, n int, seed, off, thr uint64, keep float32)
//
// dropMulAVX512 for AVX2, eight elements at a time (n a multiple of 8):
// dst[j] = src[j]·f(j), or f(j) when src is nil. The top 24 bits and thr
// are below 2^63, so the signed compare VPCMPGTQ orders them.
TEXT ·dropMulAVX2(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VPBROADCASTQ seed+24(FP), Y13
	VPBROADCASTQ off+32(FP), Y14
	VPBROADCASTQ thr+40(FP), Y15
	VBROADCASTSS keep+48(FP), Y7
	MOVQ         $0x9e3779b97f4a7c15, AX
	MOVQ         AX, X8
	VPBROADCASTQ X8, Y8
	MOVQ         $0xbf58476d1ce4e5b9, AX
	MOVQ         AX, X9
	VPBROADCASTQ X9, Y9
	SHRQ         $32, AX
	MOVQ         AX, X10
	VPBROADCASTQ X10, Y10
	MOVQ         $0x94d049bb133111eb, AX
	MOVQ         AX, X11
	VPBROADCASTQ X11, Y11
	SHRQ         $32, AX
	MOVQ         AX, X12
	VPBROADCASTQ X12, Y12
	VPADDQ       dropLanes4<>(SB), Y14, Y14 // off+0 … off+3
	MOVQ         $4, AX
	MOVQ         AX, X6
	VPBROADCASTQ X6, Y6
	TESTQ        CX, CX
	JZ           done

loop:
	VPADDQ       Y6, Y14, Y1 // off+j+4 …
	VPXOR        Y13, Y14, Y0
	VPXOR        Y13, Y1, Y1
	MIX4(Y0, Y2, Y3, Y4)
	MIX4(Y1, Y2, Y3, Y4)
	VPSRLQ       $40, Y0, Y0
	VPSRLQ       $40, Y1, Y1
	VPCMPGTQ     Y0, Y15, Y0 // dropped: thr > the top 24 bits
	VPCMPGTQ     Y1, Y15, Y1
	VSHUFPS      $0x88, Y1, Y0, Y0 // the low halves: 0 1 4 5 | 2 3 6 7
	VPERMQ       $0xD8, Y0, Y0     // 0 1 2 3 4 5 6 7
	VANDNPS      Y7, Y0, Y0        // keep where not dropped, else 0
	TESTQ        SI, SI
	JZ           store
	VMULPS       (SI), Y0, Y0
	ADDQ         $32, SI

store:
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	VPADDQ  Y6, Y14, Y14
	VPADDQ  Y6, Y14, Y14
	SUBQ    $8, CX
	JNZ     loop

done:
	VZEROUPPER
	RET
