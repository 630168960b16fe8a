//go:build amd64 && !purego

#include "textflag.h"

// AVX-512F twins of the exp and GELU kernels of vec_amd64.s, sixteen lanes at
// a time; n is a positive multiple of 16. Same formulas and constants (vconst,
// read with embedded broadcasts from the first lane of each 32-byte row), 2ⁿ
// through VSCALEFPS; R8 holds the address of vconst.

#define LOG2E 0
#define LN2HI 32
#define LN2LO 64
#define C7 96
#define C6 128
#define C5 160
#define C4 192
#define C3 224
#define C2 256
#define ONE 288
#define EXPLO 320
#define EXPHI 352
#define ABS 416
#define RSQRT2 448
#define HALF 480
#define ZMAX 512
#define UA 544
#define UB 576
#define Q0 608
#define Q1 640
#define Q2 672
#define Q3 704
#define Q4 736
#define Q5 768
#define Q6 800
#define Q7 832
#define Q8 864
#define Q9 896
#define RSQRT2PI 928

// EXP512 sets R = e^X lane by lane, as EXP does (X kept; T1, T2, K1, K2
// clobbered): clamp to [−87, 88], n = round(x·log₂e), r = x − n·ln2, Taylor
// polynomial, R = p·2ⁿ; lanes with x < −87 give 0, NaN lanes give NaN.
#define EXP512(X, R, T1, T2) \
	VMAXPS.BCST       EXPLO(R8), X, R;    \
	VMINPS.BCST       EXPHI(R8), R, R;    \
	VMULPS.BCST       LOG2E(R8), R, T1;   \
	VRNDSCALEPS       $0, T1, T1;         \
	VFNMADD231PS.BCST LN2HI(R8), T1, R;   \
	VFNMADD231PS.BCST LN2LO(R8), T1, R;   \
	VBROADCASTSS      C7(R8), T2;         \
	VFMADD213PS.BCST  C6(R8), R, T2;      \
	VFMADD213PS.BCST  C5(R8), R, T2;      \
	VFMADD213PS.BCST  C4(R8), R, T2;      \
	VFMADD213PS.BCST  C3(R8), R, T2;      \
	VFMADD213PS.BCST  C2(R8), R, T2;      \
	VFMADD213PS.BCST  ONE(R8), R, T2;     \
	VFMADD213PS.BCST  ONE(R8), R, T2;     \
	VSCALEFPS         T1, T2, R;          \
	VCMPPS.BCST       $1, EXPLO(R8), X, K1; \
	VPXORD            R, R, K1, R;        \
	VCMPPS            $3, X, X, K2;       \
	VADDPS            X, R, K2, R

// PHI512 computes, from x in Z0, Φ(x) in Z7 and clobbers Z2–Z6, Z8, Z9, K1–K3
// (see PHI in vec_amd64.s).
#define PHI512 \
	VPANDD.BCST       ABS(R8), Z0, Z2;    \
	VMULPS.BCST       RSQRT2(R8), Z2, Z2; \
	VMINPS.BCST       ZMAX(R8), Z2, Z2;   \
	VMULPS.BCST       HALF(R8), Z2, Z3;   \
	VADDPS.BCST       ONE(R8), Z3, Z3;    \
	VBROADCASTSS      ONE(R8), Z4;        \
	VDIVPS            Z3, Z4, Z3;         \
	VBROADCASTSS      UB(R8), Z4;         \
	VFMADD231PS.BCST  UA(R8), Z3, Z4;     \
	VBROADCASTSS      Q9(R8), Z5;         \
	VFMADD213PS.BCST  Q8(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q7(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q6(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q5(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q4(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q3(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q2(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q1(R8), Z4, Z5;     \
	VFMADD213PS.BCST  Q0(R8), Z4, Z5;     \
	VMULPS            Z0, Z0, Z9;         \
	VMULPS.BCST       HALF(R8), Z9, Z9;   \
	VSUBPS            Z9, Z5, Z5;         \
	EXP512(Z5, Z6, Z7, Z8);               \
	VMULPS            Z3, Z6, Z6;         \
	VMULPS.BCST       HALF(R8), Z6, Z6;   \
	VBROADCASTSS      ONE(R8), Z7;        \
	VSUBPS            Z6, Z7, Z7;         \
	VPXORD            Z8, Z8, Z8;         \
	VCMPPS            $1, Z8, Z0, K3;     \
	VMOVAPS           Z6, K3, Z7

// HSUM512 leaves the sum of Z's sixteen lanes in the low lane of X (Y and X
// are Z's lower halves; clobbers T (a Y register), TX (its X half) and U).
#define HSUM512(Z, Y, X, T, TX, U) \
	VEXTRACTF64X4 $1, Z, T;  \
	VADDPS        Y, T, T;   \
	VEXTRACTF128  $1, T, U;  \
	VADDPS        U, TX, X;  \
	VPERMILPS     $0x4e, X, U; \
	VADDPS        U, X, X;   \
	VPERMILPS     $0xb1, X, U; \
	VADDPS        U, X, X

// func expSubSum512(x *float32, n int, m float32) float32
TEXT ·expSubSum512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Z15
	LEAQ         ·vconst(SB), R8
	VPXORD       Z14, Z14, Z14

es5loop:
	VMOVUPS (DI), Z0
	VSUBPS  Z15, Z0, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VMOVUPS Z1, (DI)
	VADDPS  Z1, Z14, Z14
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     es5loop
	HSUM512(Z14, Y14, X14, Y1, X1, X2)
	VZEROUPPER
	MOVSS   X14, ret+24(FP)
	RET

// func expSum512(x *float32, n int, m float32) float32
TEXT ·expSum512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Z15
	LEAQ         ·vconst(SB), R8
	VPXORD       Z14, Z14, Z14

xs5loop:
	VMOVUPS (DI), Z0
	VSUBPS  Z15, Z0, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VADDPS  Z1, Z14, Z14
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     xs5loop
	HSUM512(Z14, Y14, X14, Y1, X1, X2)
	VZEROUPPER
	MOVSS   X14, ret+24(FP)
	RET

// func expSubScale512(x *float32, n int, m, a float32)
TEXT ·expSubScale512(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Z15
	VBROADCASTSS a+20(FP), Z14
	LEAQ         ·vconst(SB), R8

ec5loop:
	VMOVUPS (DI), Z0
	VSUBPS  Z15, Z0, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VMULPS  Z14, Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     ec5loop
	VZEROUPPER
	RET

// func gelu512(out, in *float32, n int)
TEXT ·gelu512(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ in+8(FP), SI
	MOVQ n+16(FP), CX
	LEAQ ·vconst(SB), R8

ge5loop:
	VMOVUPS (SI), Z0
	PHI512
	VMULPS  Z0, Z7, Z1
	VMOVUPS Z1, (DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	SUBQ    $16, CX
	JNZ     ge5loop
	VZEROUPPER
	RET

// func geluGrad512(out, grad, in *float32, n int)
TEXT ·geluGrad512(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ grad+8(FP), DX
	MOVQ in+16(FP), SI
	MOVQ n+24(FP), CX
	LEAQ ·vconst(SB), R8

gg5loop:
	VMOVUPS      (SI), Z0
	PHI512
	// φ(x) = e^(−x²/2)/√(2π); GELU' = Φ + x·φ
	VPXORD       Z10, Z10, Z10
	VSUBPS       Z9, Z10, Z9
	EXP512(Z9, Z10, Z11, Z12)
	VMULPS.BCST  RSQRT2PI(R8), Z10, Z10
	VMOVAPS      Z7, Z11
	VFMADD231PS  Z10, Z0, Z11
	VMULPS       Z0, Z7, Z1
	VMOVUPS      Z1, (DI)
	VMOVUPS      Z11, (DX)
	ADDQ         $64, DI
	ADDQ         $64, DX
	ADDQ         $64, SI
	SUBQ         $16, CX
	JNZ          gg5loop
	VZEROUPPER
	RET
