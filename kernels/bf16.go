package kernels

import (
	"fmt"

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

// Forward computes out = res + inp·Wᵀ + bias, the products in the layer's
// precision (bfloat16 or float32) with float32 accumulation.
//
//	out  [BT, OC]  may alias res; not inp
//	inp  [BT, C]
//	bias [OC] or nil
//	res  [BT, OC] or nil
func (q *PackedLinear) Forward(out, inp, bias, res []float32, BT int) {
	C, OC := q.C, q.OC
	parallelFor(BT, 16, func(lo, hi int) {
		beta := float32(0)
		if bias != nil || res != nil {
			beta = 1
			for r := lo; r < hi; r++ {
				o := out[r*OC : r*OC+OC]
				switch {
				case bias != nil && res != nil:
					addVec(o, res[r*OC:r*OC+OC], bias[:OC])
				case bias != nil:
					copy(o, bias[:OC])
				default:
					copy(o, res[r*OC:r*OC+OC])
				}
			}
		}
		q.l.Forward(out[lo*OC:hi*OC], inp[lo*C:hi*C], hi-lo, beta)
	})
}

// String describes the layer: "bf16 linear [OC, C]" or "fp32 linear [OC, C]".
func (q *PackedLinear) String() string {
	return fmt.Sprintf("%s linear [%d, %d]", q.dtype, q.OC, q.C)
}
