//go:build amd64 && !purego

#include "textflag.h"

// The lane numbers 0…7 of one group of eight 64-bit stream indices.
DATA dropLanes<>+0(SB)/8, $0
DATA dropLanes<>+8(SB)/8, $1
DATA dropLanes<>+16(SB)/8, $2
DATA dropLanes<>+24(SB)/8, $3
DATA dropLanes<>+32(SB)/8, $4
DATA dropLanes<>+40(SB)/8, $5
DATA dropLanes<>+48(SB)/8, $6
DATA dropLanes<>+56(SB)/8, $7
GLOBL dropLanes<>(SB), RODATA|NOPTR, $64

// MIX8 applies SplitMix64's finaliser (dropout.go's mix) to the eight
// 64-bit lanes of Z, with T scratch; Z24–Z26 hold its three constants.
#define MIX8(Z, T) \
	VPADDQ  Z24, Z, Z;   \
	VPSRLQ  $30, Z, T;   \
	VPXORQ  T, Z, Z;     \
	VPMULLQ Z25, Z, Z;   \
	VPSRLQ  $27, Z, T;   \
	VPXORQ  T, Z, Z;     \
	VPMULLQ Z26, Z, Z;   \
	VPSRLQ  $31, Z, T;   \
	VPXORQ  T, Z, Z

// func dropMulAVX512(dst, src *float32, n int, seed, off, thr uint64, keep float32)
//
// dst[j] = src[j]·f(j), or f(j) when src is nil, for j < n (n a multiple of
// 16), where f(j) = 0 when mix(seed ^ (off+j)) >> 40 < thr and keep
// otherwise: dropMask.at, sixteen elements at a time (two groups of eight
// 64-bit hashes; VPMULLQ is AVX512DQ).
TEXT ·dropMulAVX512(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VPBROADCASTQ seed+24(FP), Z20
	VPBROADCASTQ off+32(FP), Z21
	VPBROADCASTQ thr+40(FP), Z22
	VBROADCASTSS keep+48(FP), Z23
	MOVQ         $0x9e3779b97f4a7c15, AX
	VPBROADCASTQ AX, Z24
	MOVQ         $0xbf58476d1ce4e5b9, AX
	VPBROADCASTQ AX, Z25
	MOVQ         $0x94d049bb133111eb, AX
	VPBROADCASTQ AX, Z26
	MOVQ         $8, AX
	VPBROADCASTQ AX, Z28
	MOVQ         $16, AX
	VPBROADCASTQ AX, Z29
	VPADDQ       dropLanes<>(SB), Z21, Z21 // off+0 … off+7
	TESTQ        CX, CX
	JZ           done

loop:
	VPADDQ   Z28, Z21, Z1 // off+j+8 …
	VPXORQ   Z20, Z21, Z0
	VPXORQ   Z20, Z1, Z1
	MIX8(Z0, Z2)
	MIX8(Z1, Z3)
	VPSRLQ   $40, Z0, Z0
	VPSRLQ   $40, Z1, Z1
	VPCMPUQ  $5, Z22, Z0, K1 // kept: the top 24 bits ≥ thr
	VPCMPUQ  $5, Z22, Z1, K2
	KUNPCKBW K1, K2, K3      // elements 0–7 from K1, 8–15 from K2
	VMOVAPS.Z Z23, K3, Z4
	TESTQ    SI, SI
	JZ       store
	VMULPS   (SI), Z4, Z4
	ADDQ     $64, SI

store:
	VMOVUPS Z4, (DI)
	ADDQ    $64, DI
	VPADDQ  Z29, Z21, Z21
	SUBQ    $16, CX
	JNZ     loop

done:
	VZEROUPPER
	RET
