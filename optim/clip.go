package optim

import (
	"math"

	"github.com/roformer-go/roformer/tensor"
)

// GradNorm returns the global L2 norm of all gradients,
// sqrt(Σ_p Σ_i g²), accumulated in float64 in parameter order.
func GradNorm(params []*tensor.Param) float64 {
	var s float64
	for _, p := range params {
		for _, g := range p.Grad {
			s += float64(g) * float64(g)
		}
	}
	return math.Sqrt(s)
}

// ClipGradNorm scales all gradients in place so that their global L2 norm is
// at most maxNorm, as torch.nn.utils.clip_grad_norm_ does: with
// coef = maxNorm/(norm + 1e-6), gradients are multiplied by coef when
// coef < 1. It returns the norm before clipping. A maxNorm <= 0 disables
// clipping (the norm is still returned). A non-finite norm is returned
// without touching the gradients, for the caller to report.
func ClipGradNorm(params []*tensor.Param, maxNorm float64) float64 {
	norm := GradNorm(params)
	if maxNorm <= 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm
	}
	coef := maxNorm / (norm + 1e-6)
	if coef >= 1 {
		return norm
	}
	c := float32(coef)
	for _, p := range params {
		for i := range p.Grad {
			p.Grad[i] *= c
		}
	}
	return norm
}
