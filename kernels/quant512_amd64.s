//go:build amd64 && !purego

#include "textflag.h"

// AVX-512F kernels of the int8 linear layer (quant.go); n is a positive
// multiple of 16.

// func minMax512(x *float32, n int) (lo, hi float32)
TEXT ·minMax512(SB), NOSPLIT, $0-24
	MOVQ    x+0(FP), DI
	MOVQ    n+8(FP), CX
	VMOVUPS (DI), Z0
	VMOVAPS Z0, Z1
	ADDQ    $64, DI
	SUBQ    $16, CX
	JZ      mmdone

mmloop:
	VMOVUPS (DI), Z2
	VMINPS  Z2, Z0, Z0
	VMAXPS  Z2, Z1, Z1
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     mmloop

mmdone:
	// Fold 16 lanes to 1: 512 → 256 → 128 → 64 → 32 bits.
	VEXTRACTF32X8 $1, Z0, Y2
	VMINPS        Y2, Y0, Y0
	VEXTRACTF32X8 $1, Z1, Y3
	VMAXPS        Y3, Y1, Y1
	VEXTRACTF128  $1, Y0, X2
	VMINPS        X2, X0, X0
	VEXTRACTF128  $1, Y1, X3
	VMAXPS        X3, X1, X1
	VPERMILPS     $0x4e, X0, X2
	VMINPS        X2, X0, X0
	VPERMILPS     $0x4e, X1, X3
	VMAXPS        X3, X1, X1
	VPERMILPS     $0xb1, X0, X2
	VMINPS        X2, X0, X0
	VPERMILPS     $0xb1, X1, X3
	VMAXPS        X3, X1, X1
	MOVSS         X0, lo+16(FP)
	MOVSS         X1, hi+20(FP)
	VZEROUPPER
	RET

// func quantU8512(q *uint8, x *float32, n int, inv, zh float32)
// q[i] = uint8(clamp(x[i]·inv + zh, 0, 255)), truncated.
TEXT ·quantU8512(SB), NOSPLIT, $0-32
	MOVQ         q+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS inv+24(FP), Z15
	VBROADCASTSS zh+28(FP), Z14
	VXORPS       Z13, Z13, Z13
	MOVL         $0x437f0000, AX // 255.0
	VPBROADCASTD AX, Z12

qloop:
	VMOVUPS     (SI), Z0
	VFMADD213PS Z14, Z15, Z0 // x·inv + zh
	VMAXPS      Z13, Z0, Z0
	VMINPS      Z12, Z0, Z0
	VCVTTPS2DQ  Z0, Z0
	VPMOVDB     Z0, X1
	VMOVDQU     X1, (DI)
	ADDQ        $64, SI
	ADDQ        $16, DI
	SUBQ        $16, CX
	JNZ         qloop
	VZEROUPPER
	RET

// func dequant512(o *float32, acc *int32, scale, wsum, bias, res *float32, n int, s, zs float32)
// o[j] = res[j] + bias[j] + s·(scale[j]·acc[j]) − zs·wsum[j].
TEXT ·dequant512(SB), NOSPLIT, $0-64
	MOVQ         o+0(FP), DI
	MOVQ         acc+8(FP), SI
	MOVQ         scale+16(FP), R8
	MOVQ         wsum+24(FP), R9
	MOVQ         bias+32(FP), R10
	MOVQ         res+40(FP), R11
	MOVQ         n+48(FP), CX
	VBROADCASTSS s+56(FP), Z15
	VBROADCASTSS zs+60(FP), Z14

dloop:
	VCVTDQ2PS    (SI), Z0
	VMULPS       (R8), Z0, Z0
	VMULPS       Z15, Z0, Z0
	VFNMADD231PS (R9), Z14, Z0 // − zs·wsum
	VADDPS       (R10), Z0, Z0
	VADDPS       (R11), Z0, Z0
	VMOVUPS      Z0, (DI)
	ADDQ         $64, DI
	ADDQ         $64, SI
	ADDQ         $64, R8
	ADDQ         $64, R9
	ADDQ         $64, R10
	ADDQ         $64, R11
	SUBQ         $16, CX
	JNZ          dloop
	VZEROUPPER
	RET
