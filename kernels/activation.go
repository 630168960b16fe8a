package kernels

import (
	"fmt"
	"math"
)

// Activation names a pointwise nonlinearity, with the names config.json uses
// for hidden_act (HF ACT2FN).
type Activation int

const (
	GELU    Activation = iota // "gelu": exact x·Φ(x) = x·½(1+erf(x/√2))
	GELUNew                   // "gelu_new" (also "gelu_pytorch_tanh", "gelu_fast"): ½x(1+tanh(√(2/π)(x+0.044715x³)))
	ReLU                      // "relu": max(x, 0)
	SiLU                      // "silu" / "swish": x·σ(x)
	Tanh                      // "tanh"
	Linear                    // "linear": identity
)

var activationNames = map[string]Activation{
	"gelu": GELU, "gelu_new": GELUNew, "gelu_pytorch_tanh": GELUNew, "gelu_fast": GELUNew,
	"relu": ReLU, "silu": SiLU, "swish": SiLU, "tanh": Tanh, "linear": Linear,
}

// ParseActivation maps a hidden_act name to an Activation.
func ParseActivation(name string) (Activation, error) {
	a, ok := activationNames[name]
	if !ok {
		return 0, fmt.Errorf("kernels: unsupported activation %q (supported: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu, silu, swish, tanh, linear)", name)
	}
	return a, nil
}

func (a Activation) String() string {
	switch a {
	case GELU:
		return "gelu"
	case GELUNew:
		return "gelu_new"
	case ReLU:
		return "relu"
	case SiLU:
		return "silu"
	case Tanh:
		return "tanh"
	case Linear:
		return "linear"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

const sqrt2OverPi = 0.7978845608028654

// act computes the activation of one value in float64.
func (a Activation) f(x float64) float64 {
	switch a {
	case GELU:
		return geluExact(x)
	case GELUNew:
		return 0.5 * x * (1 + math.Tanh(sqrt2OverPi*(x+0.044715*x*x*x)))
	case ReLU:
		return max(x, 0)
	case SiLU:
		return x / (1 + math.Exp(-x))
	case Tanh:
		return math.Tanh(x)
	}
	return x
}

// F64 evaluates the activation in float64 (for reference computations).
func (a Activation) F64(x float64) float64 { return a.f(x) }

// df is the derivative of the activation at x.
func (a Activation) df(x float64) float64 {
	switch a {
	case GELU:
		// d/dx x·Φ(x) = Φ(x) + x·φ(x)
		return geluExactGrad(x)
	case GELUNew:
		u := sqrt2OverPi * (x + 0.044715*x*x*x)
		th := math.Tanh(u)
		du := sqrt2OverPi * (1 + 3*0.044715*x*x)
		return 0.5*(1+th) + 0.5*x*(1-th*th)*du
	case ReLU:
		if x > 0 {
			return 1
		}
		return 0
	case SiLU:
		s := 1 / (1 + math.Exp(-x))
		return s * (1 + x*(1-s))
	case Tanh:
		th := math.Tanh(x)
		return 1 - th*th
	}
	return 1
}

// ActivationForward applies a pointwise: out[i] = act(inp[i]). GELU runs in
// the float32 vector kernels of vec.go (within 8.3 float32 steps of the exact
// value for x ≥ −3, within 4e−7 absolute everywhere); the others are
// evaluated in float64 and rounded once. out may alias inp.
//
//	out [N]
//	inp [N]
func ActivationForward(out, inp []float32, a Activation, N int) {
	parallelFor(N, 4096, func(lo, hi int) {
		o, x := out[lo:hi], inp[lo:hi]
		switch a {
		case ReLU:
			for i, v := range x {
				o[i] = max(v, 0)
			}
		case Linear:
			copy(o, x)
		case GELU:
			geluVec(o, x)
		default:
			for i, v := range x {
				o[i] = float32(a.f(float64(v)))
			}
		}
	})
}

// ActivationForwardSaveGrad is ActivationForward that also stores the
// derivative act'(inp[i]) in grad, so that the backward pass is a product
// (ActivationBackwardSaved) instead of a second evaluation.
//
//	out  [N]
//	grad [N]  act'(inp)
//	inp  [N]
func ActivationForwardSaveGrad(out, grad, inp []float32, a Activation, N int) {
	parallelFor(N, 4096, func(lo, hi int) {
		o, g, x := out[lo:hi], grad[lo:hi], inp[lo:hi]
		if a == GELU {
			geluGradVec(o, g, x)
			return
		}
		for i, v := range x {
			o[i] = float32(a.f(float64(v)))
			g[i] = float32(a.df(float64(v)))
		}
	})
}

// ActivationBackwardSaved differentiates ActivationForwardSaveGrad:
// dinp = dout·grad.
//
//	dinp [N]  written (=); may alias dout
//	dout [N]
//	grad [N]  from ActivationForwardSaveGrad
func ActivationBackwardSaved(dinp, dout, grad []float32, N int) {
	parallelFor(N, 8192, func(lo, hi int) {
		di, d, g := dinp[lo:hi], dout[lo:hi], grad[lo:hi]
		for i := range di {
			di[i] = d[i] * g[i]
		}
	})
}

// ActivationBackward differentiates ActivationForward.
//
//	dinp [N]  written (=)
//	dout [N]
//	inp  [N]  the forward input
func ActivationBackward(dinp, dout, inp []float32, a Activation, N int) {
	parallelFor(N, 4096, func(lo, hi int) {
		di, d, x := dinp[lo:hi], dout[lo:hi], inp[lo:hi]
		if a == GELU {
			var val, grad [512]float32
			for len(x) > 0 {
				n := min(len(x), len(grad))
				geluGradVec(val[:n], grad[:n], x[:n])
				for i, g := range grad[:n] {
					// out = GELU(x)
					di[i] = d[i] * g
				}
				di, d, x = di[n:], d[n:], x[n:]
			}
			return
		}
		for i, v := range x {
			// out = act(x)
			di[i] = float32(float64(d[i]) * a.df(float64(v)))
		}
	})
}
