//go:build !windows

#include "textflag.h"

// func ccallTrampPC() uintptr
TEXT ·ccallTrampPC(SB), NOSPLIT, $0-8
	MOVQ $ccallTramp<>(SB), AX
	MOVQ AX, ret+0(FP)
	RET

// ccallTramp calls a C function with up to 16 integer-class arguments (6 in
// registers, 10 on the stack) and 2 float arguments (X0, X1), as the System V
// AMD64 ABI passes them. runtime·cgocall runs it on the system stack with
// the C ABI: DI points to a cCall (ccall_amd64.go):
//   0 fn; 8 + 8·i ints[i] (i < 16); 136 f0; 144 f1; 152 ret.
TEXT ccallTramp<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	MOVQ  SP, BP
	PUSHQ R12
	PUSHQ R13
	MOVQ  DI, R12

	// Entry SP ≡ 8 (mod 16); three pushes and 80 bytes leave SP ≡ 0 at the
	// call. ints[6:16] go to the stack in order.
	SUBQ $80, SP
	MOVQ 56(R12), AX
	MOVQ AX, 0(SP)
	MOVQ 64(R12), AX
	MOVQ AX, 8(SP)
	MOVQ 72(R12), AX
	MOVQ AX, 16(SP)
	MOVQ 80(R12), AX
	MOVQ AX, 24(SP)
	MOVQ 88(R12), AX
	MOVQ AX, 32(SP)
	MOVQ 96(R12), AX
	MOVQ AX, 40(SP)
	MOVQ 104(R12), AX
	MOVQ AX, 48(SP)
	MOVQ 112(R12), AX
	MOVQ AX, 56(SP)
	MOVQ 120(R12), AX
	MOVQ AX, 64(SP)
	MOVQ 128(R12), AX
	MOVQ AX, 72(SP)
	MOVQ 136(R12), X0
	MOVQ 144(R12), X1
	MOVQ 0(R12), R10
	MOVQ 8(R12), DI
	MOVQ 16(R12), SI
	MOVQ 24(R12), DX
	MOVQ 32(R12), CX
	MOVQ 40(R12), R8
	MOVQ 48(R12), R9
	MOVL $2, AX // vector registers used (read only by variadic callees)
	CALL R10
	MOVQ AX, 152(R12)
	ADDQ $80, SP
	POPQ R13
	POPQ R12
	POPQ BP
	RET
