package blas

import "fmt"

// Eltwise is an element-wise function PackedMatmul.Run applies to the
// product inside oneDNN's kernel (an eltwise post-op), before the result is
// stored.
type Eltwise int

const (
	EltwiseNone     Eltwise = iota // the identity
	EltwiseGELUErf                 // x·Φ(x), Φ through erf (HF's "gelu")
	EltwiseGELUTanh                // ½x(1+tanh(√(2/π)(x+0.044715x³))) (HF's "gelu_new")
	EltwiseReLU                    // max(x, 0)
	EltwiseSwish                   // x·σ(x) (HF's "silu")
	EltwiseTanh                    // tanh(x)
)

func (e Eltwise) String() string {
	switch e {
	case EltwiseNone:
		return "none"
	case EltwiseGELUErf:
		return "gelu_erf"
	case EltwiseGELUTanh:
		return "gelu_tanh"
	case EltwiseReLU:
		return "relu"
	case EltwiseSwish:
		return "swish"
	case EltwiseTanh:
		return "tanh"
	}
	return fmt.Sprintf("Eltwise(%d)", int(e))
}

// MatmulArgs are the operands of PackedMatmul.Run, which computes for m
// rows, in this order inside one oneDNN matmul:
//
//	out = Act(in·Wᵀ + Bias) + Res
//
// with float32 accumulation. Exactly one of Out and Out16 and exactly one of
// In and In16 is set; the others are nil. All are row-major and contiguous.
type MatmulArgs struct {
	// In is the input [m, k] in float32 (rounded to bfloat16, to nearest
	// even, on a bfloat16 layer), or In16 the input already in bfloat16
	// (the upper halves of float32 values; bfloat16 layers only).
	In   []float32
	In16 []uint16
	// Out receives the result [m, n] in float32, or Out16 in bfloat16
	// (rounded to nearest even; bfloat16 layers only).
	Out   []float32
	Out16 []uint16
	// Bias [n], added to every row; nil for none.
	Bias []float32
	// Act is applied to every element after the bias.
	Act Eltwise
	// Res [m, n] float32 is added last; nil for none. It may be Out itself
	// (an update in place), and must not overlap it otherwise.
	Res []float32
}
