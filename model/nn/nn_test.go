package nn

import (
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// Linear's Backward against float64 finite differences of Forward, with
// and without a bias, and the gradient policy: a second Backward doubles
// the parameter gradients and rewrites (not adds to) the input gradient.
func TestLinearBackward(t *testing.T) {
	const N, C, OC = 6, 4, 3 // B=2, T=3
	for _, bias := range []bool{true, false} {
		t.Run(fmt.Sprintf("bias_%v", bias), func(t *testing.T) {
			r := testutil.Rand(1)
			l := NewLinear(OC, C)
			if !bias {
				l.B = nil
			}
			copy(l.W.Data, testutil.RandN(r, OC*C, 1))
			if bias {
				copy(l.B.Data, testutil.RandN(r, OC, 1))
			}
			inp, proj := testutil.RandN(r, N*C, 1), testutil.RandN(r, N*OC, 1)
			out := make([]float32, N*OC)
			loss := func() float64 { l.Forward(out, inp, N); return testutil.Dot(out, proj) }
			dinp := make([]float32, N*C)
			l.Backward(dinp, proj, inp, N) // dL/dout = proj
			testutil.GradCheck(t, "inp", inp, dinp, loss, 1e-2, 1e-3)
			testutil.GradCheck(t, "W", l.W.Data, l.W.Grad, loss, 1e-2, 1e-3)
			if bias {
				testutil.GradCheck(t, "b", l.B.Data, l.B.Grad, loss, 1e-2, 1e-3)
			}
			dw, di := append([]float32(nil), l.W.Grad...), append([]float32(nil), dinp...)
			l.Backward(dinp, proj, inp, N)
			for i := range dw {
				dw[i] *= 2
			}
			testutil.AssertClose(t, "W grad after two backward calls", l.W.Grad, dw, 1e-6, 1e-6)
			testutil.AssertClose(t, "inp grad after two backward calls", dinp, di, 0, 0)
		})
	}
}

// LayerNorm's and the RMS norm's Backward against finite differences, and
// the policy: both the input and the parameter gradients accumulate.
func TestLayerNormBackward(t *testing.T) {
	const N, C = 6, 4
	for _, rms := range []bool{false, true} {
		t.Run(fmt.Sprintf("rms_%v", rms), func(t *testing.T) {
			r := testutil.Rand(2)
			ln := NewLayerNorm(C)
			if rms {
				ln = LayerNorm{}
			} else {
				copy(ln.W.Data, testutil.RandN(r, C, 1))
				copy(ln.B.Data, testutil.RandN(r, C, 1))
			}
			inp, proj := testutil.RandN(r, N*C, 1), testutil.RandN(r, N*C, 1)
			out, mean, rstd := make([]float32, N*C), make([]float32, N), make([]float32, N)
			loss := func() float64 { ln.Forward(out, mean, rstd, inp, 1e-5, N, C); return testutil.Dot(out, proj) }
			loss()
			dinp := make([]float32, N*C)
			ln.Backward(dinp, proj, inp, mean, rstd, N, C)
			di := append([]float32(nil), dinp...)
			testutil.GradCheck(t, "inp", inp, dinp, loss, 1e-2, 2e-3)
			if !rms {
				testutil.GradCheck(t, "W", ln.W.Data, ln.W.Grad, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "B", ln.B.Data, ln.B.Grad, loss, 1e-2, 2e-3)
			}
			loss()
			ln.Backward(dinp, proj, inp, mean, rstd, N, C)
			for i := range di {
				di[i] *= 2
			}
			testutil.AssertClose(t, "inp grad after two backward calls", dinp, di, 1e-6, 1e-5)
		})
	}
}

// NewLayerNorm is the identity on a row of mean 0 and variance 1.
func TestNewLayerNormIdentity(t *testing.T) {
	ln := NewLayerNorm(4)
	inp := []float32{-1, 1, -1, 1}
	out, mean, rstd := make([]float32, 4), make([]float32, 1), make([]float32, 1)
	ln.Forward(out, mean, rstd, inp, 0, 1, 4)
	testutil.AssertClose(t, "LN of a normalised row", out, inp, 1e-6, 0)
}
