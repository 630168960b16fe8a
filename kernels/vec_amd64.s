//go:build amd64 && !purego

#include "textflag.h"

// AVX2 + FMA kernels of vec.go; n is a positive multiple of 8. R8 holds the
// address of vconst, whose row i (8 copies of one float32) is at 32·i.

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
#define BIAS 384
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
#define NEGINF 960

// EXP sets R = e^X lane by lane (X is kept; T1, T2 are clobbered):
// clamp to [−87, 88], n = round(x·log₂e), r = x − n·ln2 (two FMAs),
// e^r by Horner on the Taylor coefficients, times 2ⁿ built in the exponent
// bits; lanes with x < −87 (or −∞) give 0, NaN lanes give NaN.
#define EXP(X, R, T1, T2) \
	VMAXPS       EXPLO(R8), X, R;   \
	VMINPS       EXPHI(R8), R, R;   \
	VMULPS       LOG2E(R8), R, T1;  \
	VROUNDPS     $0, T1, T1;        \
	VFNMADD231PS LN2HI(R8), T1, R;  \
	VFNMADD231PS LN2LO(R8), T1, R;  \
	VMOVUPS      C7(R8), T2;        \
	VFMADD213PS  C6(R8), R, T2;     \
	VFMADD213PS  C5(R8), R, T2;     \
	VFMADD213PS  C4(R8), R, T2;     \
	VFMADD213PS  C3(R8), R, T2;     \
	VFMADD213PS  C2(R8), R, T2;     \
	VFMADD213PS  ONE(R8), R, T2;    \
	VFMADD213PS  ONE(R8), R, T2;    \
	VCVTPS2DQ    T1, T1;            \
	VPADDD       BIAS(R8), T1, T1;  \
	VPSLLD       $23, T1, T1;       \
	VMULPS       T1, T2, R;         \
	VCMPPS       $1, EXPLO(R8), X, T1; \
	VANDNPS      R, T1, R;          \
	VCMPPS       $3, X, X, T1;      \
	VORPS        T1, R, R

// HSUM leaves the sum of Y's eight lanes in the low lane of X (clobbers T).
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T;  \
	VADDPS       X, T, X;   \
	VPERMILPS    $0x4e, X, T; \
	VADDPS       T, X, X;   \
	VPERMILPS    $0xb1, X, T; \
	VADDPS       T, X, X

// HMAX is HSUM with max (NaNs are tracked separately by its callers).
#define HMAX(Y, X, T) \
	VEXTRACTF128 $1, Y, T;  \
	VMAXPS       X, T, X;   \
	VPERMILPS    $0x4e, X, T; \
	VMAXPS       T, X, X;   \
	VPERMILPS    $0xb1, X, T; \
	VMAXPS       T, X, X

// PHI computes, from x in Y0, Φ(x) in Y7 and w = x²/2 in Y9; it clobbers
// Y2–Y8. erfc(z) = t·exp(Q(u) − z²) with z = |x|/√2 (clamped at 10),
// t = 1/(1 + z/2), u = t·ua + ub and z² = x²/2; Φ = ½erfc for x < 0,
// 1 − ½erfc otherwise.
#define PHI \
	VANDPS       ABS(R8), Y0, Y2;   \
	VMULPS       RSQRT2(R8), Y2, Y2; \
	VMINPS       ZMAX(R8), Y2, Y2;  \
	VMULPS       HALF(R8), Y2, Y3;  \
	VADDPS       ONE(R8), Y3, Y3;   \
	VMOVUPS      ONE(R8), Y4;       \
	VDIVPS       Y3, Y4, Y3;        \
	VMOVUPS      UB(R8), Y4;        \
	VFMADD231PS  UA(R8), Y3, Y4;    \
	VMOVUPS      Q9(R8), Y5;        \
	VFMADD213PS  Q8(R8), Y4, Y5;    \
	VFMADD213PS  Q7(R8), Y4, Y5;    \
	VFMADD213PS  Q6(R8), Y4, Y5;    \
	VFMADD213PS  Q5(R8), Y4, Y5;    \
	VFMADD213PS  Q4(R8), Y4, Y5;    \
	VFMADD213PS  Q3(R8), Y4, Y5;    \
	VFMADD213PS  Q2(R8), Y4, Y5;    \
	VFMADD213PS  Q1(R8), Y4, Y5;    \
	VFMADD213PS  Q0(R8), Y4, Y5;    \
	VMULPS       Y0, Y0, Y9;        \
	VMULPS       HALF(R8), Y9, Y9;  \
	VSUBPS       Y9, Y5, Y5;        \
	EXP(Y5, Y6, Y7, Y8);            \
	VMULPS       Y3, Y6, Y6;        \
	VMULPS       HALF(R8), Y6, Y6;  \
	VMOVUPS      ONE(R8), Y7;       \
	VSUBPS       Y6, Y7, Y7;        \
	VBLENDVPS    Y0, Y6, Y7, Y7

// func expSubSumAVX2(x *float32, n int, m float32) float32
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	LEAQ         ·vconst(SB), R8
	VXORPS       Y14, Y14, Y14

esloop:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP(Y0, Y1, Y2, Y3)
	VMOVUPS Y1, (DI)
	VADDPS  Y1, Y14, Y14
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     esloop
	HSUM(Y14, X14, X1)
	VZEROUPPER
	MOVSS   X14, ret+24(FP)
	RET

// func expSumAVX2(x *float32, n int, m float32) float32
TEXT ·expSumAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	LEAQ         ·vconst(SB), R8
	VXORPS       Y14, Y14, Y14

xsloop:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP(Y0, Y1, Y2, Y3)
	VADDPS  Y1, Y14, Y14
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     xsloop
	HSUM(Y14, X14, X1)
	VZEROUPPER
	MOVSS   X14, ret+24(FP)
	RET

// func expSubScaleAVX2(x *float32, n int, m, a float32)
TEXT ·expSubScaleAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	VBROADCASTSS a+20(FP), Y14
	LEAQ         ·vconst(SB), R8

ecloop:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP(Y0, Y1, Y2, Y3)
	VMULPS  Y14, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     ecloop
	VZEROUPPER
	RET

// func divMaxAVX2(x *float32, n int, s float32) float32
TEXT ·divMaxAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y15
	LEAQ         ·vconst(SB), R8
	VMOVUPS      NEGINF(R8), Y14
	VXORPS       Y13, Y13, Y13 // lanes that met a NaN (VMAXPS drops NaNs)

dmloop:
	VMOVUPS (DI), Y0
	VDIVPS  Y15, Y0, Y0
	VMOVUPS Y0, (DI)
	VMAXPS  Y0, Y14, Y14
	VCMPPS  $3, Y0, Y0, Y1
	VORPS   Y1, Y13, Y13
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     dmloop
	HMAX(Y14, X14, X1)
	VMOVMSKPS Y13, AX
	TESTL     AX, AX
	JZ        dmdone
	VPCMPEQD  X14, X14, X14 // all bits set: a NaN, as Go's max returns

dmdone:
	VZEROUPPER
	MOVSS   X14, ret+24(FP)
	RET

// func maxAVX2(x *float32, n int) float32
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), DI
	MOVQ    n+8(FP), CX
	LEAQ    ·vconst(SB), R8
	VMOVUPS NEGINF(R8), Y14

	VXORPS  Y13, Y13, Y13 // lanes that met a NaN (VMAXPS drops NaNs)

mxloop:
	VMOVUPS   (DI), Y0
	VMAXPS    Y0, Y14, Y14
	VCMPPS    $3, Y0, Y0, Y1
	VORPS     Y1, Y13, Y13
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       mxloop
	HMAX(Y14, X14, X1)
	VMOVMSKPS Y13, AX
	TESTL     AX, AX
	JZ        mxdone
	VPCMPEQD  X14, X14, X14

mxdone:
	VZEROUPPER
	MOVSS  X14, ret+16(FP)
	RET

// func scaleAVX2(x *float32, n int, a float32)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS a+16(FP), Y15

scloop:
	VMULPS  (DI), Y15, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     scloop
	VZEROUPPER
	RET

// func dotAVX2(x, y *float32, n int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), DI
	MOVQ   y+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPS Y14, Y14, Y14

dtloop:
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y0, Y14
	ADDQ        $32, DI
	ADDQ        $32, SI
	SUBQ        $8, CX
	JNZ         dtloop
	HSUM(Y14, X14, X1)
	VZEROUPPER
	MOVSS       X14, ret+24(FP)
	RET

// func softmaxBackAVX2(d, p *float32, n int, dot, s float32)
TEXT ·softmaxBackAVX2(SB), NOSPLIT, $0-32
	MOVQ         d+0(FP), DI
	MOVQ         p+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS dot+24(FP), Y15
	VBROADCASTSS s+28(FP), Y14

sbloop:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0
	VMULPS  (SI), Y0, Y0
	VDIVPS  Y14, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     sbloop
	VZEROUPPER
	RET

// func geluAVX2(out, in *float32, n int)
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ in+8(FP), SI
	MOVQ n+16(FP), CX
	LEAQ ·vconst(SB), R8

geloop:
	VMOVUPS (SI), Y0
	PHI
	VMULPS  Y0, Y7, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     geloop
	VZEROUPPER
	RET

// func geluGradAVX2(out, grad, in *float32, n int)
TEXT ·geluGradAVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ grad+8(FP), DX
	MOVQ in+16(FP), SI
	MOVQ n+24(FP), CX
	LEAQ ·vconst(SB), R8
	VXORPS Y13, Y13, Y13

ggloop:
	VMOVUPS     (SI), Y0
	PHI
	// φ(x) = e^(−x²/2)/√(2π); GELU' = Φ + x·φ
	VSUBPS      Y9, Y13, Y9
	EXP(Y9, Y10, Y11, Y12)
	VMULPS      RSQRT2PI(R8), Y10, Y10
	VMOVAPS     Y7, Y11
	VFMADD231PS Y10, Y0, Y11
	VMULPS      Y0, Y7, Y1
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y11, (DX)
	ADDQ        $32, DI
	ADDQ        $32, DX
	ADDQ        $32, SI
	SUBQ        $8, CX
	JNZ         ggloop
	VZEROUPPER
	RET

// HSUMPD leaves the sum of Y's four float64 lanes in the low lane of X
// (clobbers T).
#define HSUMPD(Y, X, T) \
	VEXTRACTF128 $1, Y, T;  \
	VADDPD       X, T, X;   \
	VPERMILPD    $1, X, T;  \
	VADDSD       T, X, X

// func sum64AVX2(x *float32, n int) float64
TEXT ·sum64AVX2(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), DI
	MOVQ   n+8(FP), CX
	VXORPD Y14, Y14, Y14
	VXORPD Y13, Y13, Y13

s6loop:
	VCVTPS2PD (DI), Y0
	VCVTPS2PD 16(DI), Y1
	VADDPD    Y0, Y14, Y14
	VADDPD    Y1, Y13, Y13
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       s6loop
	VADDPD    Y13, Y14, Y14
	HSUMPD(Y14, X14, X1)
	VZEROUPPER
	MOVSD     X14, ret+16(FP)
	RET

// func sqdev64AVX2(x *float32, n int, m float64) float64
TEXT ·sqdev64AVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSD m+16(FP), Y15
	VXORPD       Y14, Y14, Y14
	VXORPD       Y13, Y13, Y13

sdloop:
	VCVTPS2PD   (DI), Y0
	VCVTPS2PD   16(DI), Y1
	VSUBPD      Y15, Y0, Y0
	VSUBPD      Y15, Y1, Y1
	VFMADD231PD Y0, Y0, Y14
	VFMADD231PD Y1, Y1, Y13
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNZ         sdloop
	VADDPD      Y13, Y14, Y14
	HSUMPD(Y14, X14, X1)
	VZEROUPPER
	MOVSD       X14, ret+24(FP)
	RET

// func lnApplyAVX2(out, x, w, b *float32, n int, m, rs float32)
TEXT ·lnApplyAVX2(SB), NOSPLIT, $0-48
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         b+24(FP), BX
	MOVQ         n+32(FP), CX
	VBROADCASTSS m+40(FP), Y15
	VBROADCASTSS rs+44(FP), Y14

laloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0
	VMULPS  Y14, Y0, Y0
	VMULPS  (DX), Y0, Y0
	VADDPS  (BX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	SUBQ    $8, CX
	JNZ     laloop
	VZEROUPPER
	RET

// func lnBackSumsAVX2(d, w, x *float32, n int, m, rs float32) (s1, s2 float64)
TEXT ·lnBackSumsAVX2(SB), NOSPLIT, $0-56
	MOVQ         d+0(FP), DI
	MOVQ         w+8(FP), DX
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	VBROADCASTSS m+32(FP), Y15
	VBROADCASTSS rs+36(FP), Y14
	VXORPD       Y13, Y13, Y13
	VXORPD       Y12, Y12, Y12
	VXORPD       Y11, Y11, Y11
	VXORPD       Y10, Y10, Y10

lsloop:
	VMOVUPS      (DI), Y0
	VMULPS       (DX), Y0, Y0
	VMOVUPS      (SI), Y1
	VSUBPS       Y15, Y1, Y1
	VMULPS       Y14, Y1, Y1
	VCVTPS2PD    X0, Y2
	VEXTRACTF128 $1, Y0, X3
	VCVTPS2PD    X3, Y3
	VCVTPS2PD    X1, Y4
	VEXTRACTF128 $1, Y1, X5
	VCVTPS2PD    X5, Y5
	VADDPD       Y2, Y13, Y13
	VADDPD       Y3, Y12, Y12
	VFMADD231PD  Y4, Y2, Y11
	VFMADD231PD  Y5, Y3, Y10
	ADDQ         $32, DI
	ADDQ         $32, DX
	ADDQ         $32, SI
	SUBQ         $8, CX
	JNZ          lsloop
	VADDPD       Y12, Y13, Y13
	VADDPD       Y10, Y11, Y11
	HSUMPD(Y13, X13, X1)
	HSUMPD(Y11, X11, X1)
	VZEROUPPER
	MOVSD        X13, s1+40(FP)
	MOVSD        X11, s2+48(FP)
	RET

// func lnBackApplyAVX2(di, d, w, x *float32, n int, m, rs, m1, m2 float32)
TEXT ·lnBackApplyAVX2(SB), NOSPLIT, $0-56
	MOVQ         di+0(FP), DI
	MOVQ         d+8(FP), BX
	MOVQ         w+16(FP), DX
	MOVQ         x+24(FP), SI
	MOVQ         n+32(FP), CX
	VBROADCASTSS m+40(FP), Y15
	VBROADCASTSS rs+44(FP), Y14
	VBROADCASTSS m1+48(FP), Y13
	VBROADCASTSS m2+52(FP), Y12

lbloop:
	VMOVUPS (BX), Y0
	VMULPS  (DX), Y0, Y0
	VSUBPS  Y13, Y0, Y0
	VMOVUPS (SI), Y1
	VSUBPS  Y15, Y1, Y1
	VMULPS  Y14, Y1, Y1
	VMULPS  Y12, Y1, Y1
	VSUBPS  Y1, Y0, Y0
	VMULPS  Y14, Y0, Y0
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, BX
	ADDQ    $32, DX
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     lbloop
	VZEROUPPER
	RET

// func lnBackParamAVX2(dw, db, d, x *float32, n int, m, rs float32)
TEXT ·lnBackParamAVX2(SB), NOSPLIT, $0-48
	MOVQ         dw+0(FP), DI
	MOVQ         db+8(FP), BX
	MOVQ         d+16(FP), DX
	MOVQ         x+24(FP), SI
	MOVQ         n+32(FP), CX
	VBROADCASTSS m+40(FP), Y15
	VBROADCASTSS rs+44(FP), Y14

lploop:
	VMOVUPS (SI), Y1
	VSUBPS  Y15, Y1, Y1
	VMULPS  Y14, Y1, Y1
	VMOVUPS (DX), Y2
	VMULPS  Y2, Y1, Y1
	VADDPS  (DI), Y1, Y1
	VMOVUPS Y1, (DI)
	VADDPS  (BX), Y2, Y2
	VMOVUPS Y2, (BX)
	ADDQ    $32, DI
	ADDQ    $32, BX
	ADDQ    $32, DX
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     lploop
	VZEROUPPER
	RET

// func addVecAVX2(out, a, b *float32, n int)
TEXT ·addVecAVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

avloop:
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JNZ     avloop
	VZEROUPPER
	RET

// func mulVecAVX2(out, a, b *float32, n int)
TEXT ·mulVecAVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

mvloop:
	VMOVUPS (SI), Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JNZ     mvloop
	VZEROUPPER
	RET

// func adamWAVX2(p, grad, m, v *float32, n int, k *AdamWScalars)
// k: decay, b1, omb1, b2, omb2, stepSize, bc2sqrt, eps (float32 each).
// The operations and their order are those of the scalar loop, without
// fused multiply-adds, so both give the same bits.
TEXT ·adamWAVX2(SB), NOSPLIT, $0-48
	MOVQ         p+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         m+16(FP), DX
	MOVQ         v+24(FP), BX
	MOVQ         n+32(FP), CX
	MOVQ         k+40(FP), AX
	VBROADCASTSS 0(AX), Y15
	VBROADCASTSS 4(AX), Y14
	VBROADCASTSS 8(AX), Y13
	VBROADCASTSS 12(AX), Y12
	VBROADCASTSS 16(AX), Y11
	VBROADCASTSS 20(AX), Y10
	VBROADCASTSS 24(AX), Y9
	VBROADCASTSS 28(AX), Y8

adloop:
	VMULPS  (DI), Y15, Y0 // x = p·decay
	VMOVUPS (SI), Y1      // g
	VMULPS  (DX), Y14, Y2 // b1·m
	VMULPS  Y1, Y13, Y3   // omb1·g
	VADDPS  Y3, Y2, Y2    // m' = b1·m + omb1·g
	VMOVUPS Y2, (DX)
	VMULPS  (BX), Y12, Y4 // b2·v
	VMULPS  Y1, Y11, Y5   // omb2·g
	VMULPS  Y1, Y5, Y5    // (omb2·g)·g
	VADDPS  Y5, Y4, Y4    // v'
	VMOVUPS Y4, (BX)
	VSQRTPS Y4, Y4
	VDIVPS  Y9, Y4, Y4    // √v'/bc2sqrt
	VADDPS  Y8, Y4, Y4    // + eps
	VDIVPS  Y4, Y2, Y2    // m'/denom
	VMULPS  Y2, Y10, Y2   // stepSize·(m'/denom)
	VSUBPS  Y2, Y0, Y0    // x − …
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	SUBQ    $8, CX
	JNZ     adloop
	VZEROUPPER
	RET

// func rotatePairsAVX2(x, cos2, sin2 *float32, n int)
// x[j] = x[j]·cos2[j] + x[j^1]·sin2[j]: products rounded, then added (no FMA).
TEXT ·rotatePairsAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), DI
	MOVQ cos2+8(FP), SI
	MOVQ sin2+16(FP), DX
	MOVQ n+24(FP), CX

rploop:
	VMOVUPS   (DI), Y0
	VPERMILPS $0xb1, Y0, Y1 // swap each pair
	VMULPS    (SI), Y0, Y0
	VMULPS    (DX), Y1, Y1
	VADDPS    Y1, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, DI
	ADDQ      $32, SI
	ADDQ      $32, DX
	SUBQ      $8, CX
	JNZ       rploop
	VZEROUPPER
	RET

// BF16RNE sets X to the bfloat16 bits of its float32 lanes in the low 16
// bits of each dword (tensor.F32ToBF16: round to nearest even, NaN kept NaN
// by setting the quiet bit), with T1, T2 clobbered; Y15 = 0x7fff, Y14 = 1,
// Y13 = 0x7fffffff, Y12 = 0x7f800000, Y11 = 0x40 in every dword.
#define BF16RNE(X, T1, T2) \
	VPSRLD    $16, X, T1;     \
	VPAND     Y14, T1, T2;    \
	VPADDD    Y15, T2, T2;    \
	VPADDD    X, T2, T2;      \
	VPSRLD    $16, T2, T2;    \
	VPOR      Y11, T1, T1;    \
	VPAND     Y13, X, X;      \
	VPCMPGTD  Y12, X, X;      \
	VPBLENDVB X, T1, T2, X

// func toBF16AVX2(dst *uint16, src *float32, n int)
// n is a positive multiple of 16.
TEXT ·toBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         $0x7fff, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $1, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x7fffffff, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0x7f800000, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $0x40, AX
	VMOVD        AX, X11
	VPBROADCASTD X11, Y11

bfloop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	BF16RNE(Y0, Y2, Y3)
	BF16RNE(Y1, Y4, Y5)
	VPACKUSDW Y1, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       bfloop
	VZEROUPPER
	RET
