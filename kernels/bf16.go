package kernels

import (
	"fmt"
	"unsafe"

	"github.com/roformer-go/roformer/blas"
)

// PackedLinear is a linear layer's weight stored once for oneDNN's matmul,
// for inference: in bfloat16 (NewBF16Linear: float32 accumulation, the
// activations rounded to bfloat16 on the way in) or in float32
// (NewPackedLinear: oneDNN's blocked layout, not packed again by every
// product).
type PackedLinear struct {
	OC, C int
	dtype string // "bf16" or "fp32": the weights' type, for String
	l     *blas.PackedMatmul
}

// NewPackedLinear stores w [OC, C] once in the blocked layout of oneDNN's
// float32 matmul; Forward then computes in float32 without packing the
// weights again on every product (as dnnl_sgemm does). It fails when
// oneDNN is missing.
func NewPackedLinear(w []float32, OC, C int) (*PackedLinear, error) {
	l, err := blas.NewF32Matmul(w[:OC*C], OC, C)
	if err != nil {
		return nil, err
	}
	return &PackedLinear{OC: OC, C: C, dtype: "fp32", l: l}, nil
}

// NewBF16Linear converts w [OC, C] (PyTorch's nn.Linear layout) once. It
// fails when the processor has neither AVX512_BF16 nor AMX-BF16, or
// oneDNN is missing.
func NewBF16Linear(w []float32, OC, C int) (*PackedLinear, error) {
	if err := blas.BF16Supported(); err != nil {
		return nil, err
	}
	l, err := blas.NewBF16Matmul(w[:OC*C], OC, C)
	if err != nil {
		return nil, err
	}
	return &PackedLinear{OC: OC, C: C, dtype: "bf16", l: l}, nil
}

// Bytes returns the bytes of the layer's weights (oneDNN's copies).
func (q *PackedLinear) Bytes() int64 { return q.l.Bytes() }

// Forward computes out = res + inp·Wᵀ + bias, the products in the layer's
// precision (bfloat16 or float32) with float32 accumulation, the bias and
// the residual added inside the product's kernel.
//
//	out  [BT, OC]  may alias res; not inp
//	inp  [BT, C]
//	bias [OC] or nil
//	res  [BT, OC] or nil
func (q *PackedLinear) Forward(out, inp, bias, res []float32, BT int) {
	q.run(BT, blas.MatmulArgs{Out: out, In: inp, Bias: bias, Res: res})
}

// ForwardAct computes out = act(inp·Wᵀ + bias), the bias and the activation
// applied inside the product's kernel (oneDNN's eltwise post-op: its GELU,
// tanh and swish are approximations within a few float32 ulps).
//
//	out  [BT, OC]; inp [BT, C]; bias [OC] or nil
func (q *PackedLinear) ForwardAct(out, inp, bias []float32, act Activation, BT int) {
	q.run(BT, blas.MatmulArgs{Out: out, In: inp, Bias: bias, Act: eltwise(act)})
}

// ForwardActBF16 is ForwardAct storing out in bfloat16 (rounded to nearest
// even; the upper halves of float32 values), for a product that reads it
// next (ForwardBF16). bfloat16 layers only: it panics on others.
func (q *PackedLinear) ForwardActBF16(out []uint16, inp, bias []float32, act Activation, BT int) {
	q.run(BT, blas.MatmulArgs{Out16: out, In: inp, Bias: bias, Act: eltwise(act)})
}

// ForwardBF16 is Forward with the input in bfloat16, as ForwardActBF16
// writes it. bfloat16 layers only: it panics on others.
func (q *PackedLinear) ForwardBF16(out []float32, inp []uint16, bias, res []float32, BT int) {
	q.run(BT, blas.MatmulArgs{Out: out, In16: inp, Bias: bias, Res: res})
}

// BF16 reports whether the layer's weights are bfloat16, so that
// ForwardActBF16 and ForwardBF16 can run.
func (q *PackedLinear) BF16() bool { return q.dtype == "bf16" }

// run splits the rows of a over the workers; a holds whole-matrix slices.
func (q *PackedLinear) run(BT int, a blas.MatmulArgs) {
	C, OC := q.C, q.OC
	parallelFor(BT, 16, func(lo, hi int) {
		p := blas.MatmulArgs{Bias: a.Bias, Act: a.Act}
		switch {
		case a.In != nil && q.BF16():
			// rounded here (toBF16) rather than by oneDNN's reorder, which
			// runs at a fraction of the speed
			ps := getScratch(((hi-lo)*C + 1) / 2)
			defer putScratch(ps)
			p.In16 = BF16Buffer(*ps)[:(hi-lo)*C]
			toBF16(p.In16, a.In[lo*C:hi*C])
		case a.In != nil:
			p.In = a.In[lo*C : hi*C]
		default:
			p.In16 = a.In16[lo*C : hi*C]
		}
		if a.Out != nil {
			p.Out = a.Out[lo*OC : hi*OC]
		} else {
			p.Out16 = a.Out16[lo*OC : hi*OC]
		}
		if a.Res != nil {
			p.Res = a.Res[lo*OC : hi*OC]
		}
		q.l.Run(hi-lo, &p)
	})
}

// eltwise maps an Activation to oneDNN's post-op of the same function.
func eltwise(a Activation) blas.Eltwise {
	switch a {
	case GELU:
		return blas.EltwiseGELUErf
	case GELUNew:
		return blas.EltwiseGELUTanh
	case ReLU:
		return blas.EltwiseReLU
	case SiLU:
		return blas.EltwiseSwish
	case Tanh:
		return blas.EltwiseTanh
	case Linear:
		return blas.EltwiseNone
	}
	panic(fmt.Sprintf("kernels: no fused form of %v", a))
}

// String describes the layer: "bf16 linear [OC, C]" or "fp32 linear [OC, C]".
func (q *PackedLinear) String() string {
	return fmt.Sprintf("%s linear [%d, %d]", q.dtype, q.OC, q.C)
}

// BF16Buffer returns the memory of x as 2·len(x) bfloat16 values, for
// ForwardActBF16's output in a float32 buffer that is free.
func BF16Buffer(x []float32) []uint16 {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&x[0])), 2*len(x))
}
