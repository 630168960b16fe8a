package nn

import (
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/tensor"
)

// Linear is nn.Linear, y = x·Wᵀ + b, with W [OC, C] (PyTorch's layout: one
// row per output) and b [OC], or no bias when B is nil.
type Linear struct {
	W *tensor.Param `hf:"weight"`
	B *tensor.Param `hf:"bias"`
}

// NewLinear returns a Linear from in to out features with a bias, all zero.
func NewLinear(out, in int) Linear {
	return Linear{W: tensor.NewParam("", out, in), B: tensor.NewParam("", out)}
}

// Bias returns the bias's values, or nil for a layer without one.
func (l *Linear) Bias() []float32 {
	if l.B == nil {
		return nil
	}
	return l.B.Data
}

// BiasGrad returns the bias's gradient, or nil for a layer without a bias.
func (l *Linear) BiasGrad() []float32 {
	if l.B == nil {
		return nil
	}
	return l.B.Grad
}

// Forward computes out = inp·Wᵀ + b (kernels.MatmulForward).
//
//	out [N, OC]  written
//	inp [N, C]
func (l *Linear) Forward(out, inp []float32, N int) {
	kernels.MatmulForward(out, inp, l.W.Data, l.Bias(), N, l.W.Shape[1], l.W.Shape[0])
}

// Backward differentiates Forward (kernels.MatmulBackward).
//
//	dinp [N, C]   written (=); nil to skip
//	dout [N, OC]
//	inp  [N, C]   Forward's input
//
// W's and b's gradients are accumulated (+=).
func (l *Linear) Backward(dinp, dout, inp []float32, N int) {
	kernels.MatmulBackward(dinp, l.W.Grad, l.BiasGrad(), dout, inp, l.W.Data, N, l.W.Shape[1], l.W.Shape[0])
}

// LayerNorm is nn.LayerNorm over the last dimension (Ba, Kiros and Hinton
// 2016),
//
//	y = (x − mean(x)) / √(var(x) + ε) · W + B,   W, B [C],
//
// or, without parameters (W and B nil), the RMS norm of RoFormer-V2 (Zhang
// and Sennrich 2019, without its gain), y = x / √(mean(x²) + ε).
type LayerNorm struct {
	W *tensor.Param `hf:"weight"`
	B *tensor.Param `hf:"bias"`
}

// NewLayerNorm returns a LayerNorm over c features: weight 1, bias 0 (the
// identity on normalised rows, as PyTorch initialises it).
func NewLayerNorm(c int) LayerNorm {
	ln := LayerNorm{W: tensor.NewParam("", c), B: tensor.NewParam("", c)}
	for i := range ln.W.Data {
		ln.W.Data[i] = 1
	}
	return ln
}

// Forward normalises each row of inp, saving its mean (LayerNorm only) and
// 1/σ for Backward.
//
//	out  [N, C]  written
//	mean [N]     written; unused by the RMS norm (nil allowed there)
//	rstd [N]     written
//	inp  [N, C]
func (ln *LayerNorm) Forward(out, mean, rstd, inp []float32, eps float32, N, C int) {
	if ln.W == nil {
		kernels.RMSNormForward(out, rstd, inp, eps, N, C)
		return
	}
	kernels.LayerNormForward(out, mean, rstd, inp, ln.W.Data, ln.B.Data, eps, N, C)
}

// Backward differentiates Forward.
//
//	dinp       [N, C]  accumulated (+=)
//	dout       [N, C]
//	inp        [N, C]  Forward's input
//	mean, rstd [N]     what Forward saved
//
// W's and B's gradients are accumulated (+=).
func (ln *LayerNorm) Backward(dinp, dout, inp, mean, rstd []float32, N, C int) {
	if ln.W == nil {
		kernels.RMSNormBackward(dinp, dout, inp, rstd, N, C)
		return
	}
	kernels.LayerNormBackward(dinp, ln.W.Grad, ln.B.Grad, dout, inp, ln.W.Data, mean, rstd, N, C)
}
