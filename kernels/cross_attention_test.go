package kernels

import (
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// crossCases are shapes that break the BLAS blocks (Tq ≠ Tk, odd sizes),
// with and without a key mask.
func crossCases() []struct {
	name              string
	B, Tq, Tk, NH, HS int
	masked            bool
} {
	return []struct {
		name              string
		B, Tq, Tk, NH, HS int
		masked            bool
	}{
		{"B2_Tq3_Tk5", 2, 3, 5, 2, 3, false},
		{"B2_Tq7_Tk13_mask", 2, 7, 13, 3, 5, true},
		{"B1_Tq1_Tk9_mask", 1, 1, 9, 2, 4, true},
	}
}

// crossMask hides the last b+1 keys of row b (each row keeps at least one).
func crossMask(B, Tk int) []float32 {
	m := make([]float32, B*Tk)
	for b := 0; b < B; b++ {
		for j := 0; j < Tk-b-1; j++ {
			m[b*Tk+j] = 1
		}
	}
	return m
}

func TestCrossAttentionAgainstNaive(t *testing.T) {
	for _, c := range crossCases() {
		t.Run(c.name, func(t *testing.T) {
			r := testutil.Rand(11)
			C := c.NH * c.HS
			q, k, v := testutil.RandN(r, c.B*c.Tq*C, 1), testutil.RandN(r, c.B*c.Tk*C, 1), testutil.RandN(r, c.B*c.Tk*C, 1)
			var km []float32
			if c.masked {
				km = crossMask(c.B, c.Tk)
			}
			got, want := make([]float32, c.B*c.Tq*C), make([]float32, c.B*c.Tq*C)
			probs := make([]float32, c.B*c.NH*c.Tq*c.Tk)
			CrossAttentionForward(got, probs, q, k, v, km, c.B, c.Tq, c.Tk, c.NH, c.HS)
			crossAttentionForwardNaive(want, q, k, v, km, c.B, c.Tq, c.Tk, c.NH, c.HS)
			testutil.AssertClose(t, "out", got, want, 1e-5, 1e-5)
			// Without saved probabilities (inference) the same numbers come out.
			CrossAttentionForward(got, nil, q, k, v, km, c.B, c.Tq, c.Tk, c.NH, c.HS)
			testutil.AssertClose(t, "out (no probs)", got, want, 1e-5, 1e-5)
		})
	}
}

func TestCrossAttentionEqualsSelfAttention(t *testing.T) {
	r := testutil.Rand(3)
	B, T, NH, HS := 2, 7, 2, 5
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	km := crossMask(B, T)
	got, want := make([]float32, B*T*C), make([]float32, B*T*C)
	CrossAttentionForward(got, nil, q, k, v, km, B, T, T, NH, HS)
	AttentionForward(want, nil, q, k, v, km, false, Dropout{}, B, T, NH, HS)
	testutil.AssertClose(t, "cross vs self", got, want, 1e-6, 1e-6)
}

func TestCrossAttentionNoVisibleKey(t *testing.T) {
	r := testutil.Rand(5)
	B, Tq, Tk, NH, HS := 1, 2, 3, 1, 2
	q, k := testutil.RandN(r, Tq*HS, 1), testutil.RandN(r, Tk*HS, 1)
	v := []float32{1, 0, 2, 0, 6, 0}
	out, probs := make([]float32, Tq*HS), make([]float32, Tq*Tk)
	CrossAttentionForward(out, probs, q, k, v, make([]float32, Tk), B, Tq, Tk, NH, HS)
	for i := 0; i < Tq; i++ {
		if out[i*HS] != 3 || out[i*HS+1] != 0 {
			t.Errorf("query %d: got %v, want the mean of v (3, 0)", i, out[i*HS:i*HS+HS])
		}
	}
}

func TestCrossAttentionBackward(t *testing.T) {
	for _, c := range crossCases() {
		t.Run(c.name, func(t *testing.T) {
			r := testutil.Rand(13)
			C := c.NH * c.HS
			q, k, v := testutil.RandN(r, c.B*c.Tq*C, 1), testutil.RandN(r, c.B*c.Tk*C, 1), testutil.RandN(r, c.B*c.Tk*C, 1)
			proj := testutil.RandN(r, c.B*c.Tq*C, 1)
			var km []float32
			if c.masked {
				km = crossMask(c.B, c.Tk)
			}
			out, probs := make([]float32, c.B*c.Tq*C), make([]float32, c.B*c.NH*c.Tq*c.Tk)
			loss := func() float64 {
				CrossAttentionForward(out, probs, q, k, v, km, c.B, c.Tq, c.Tk, c.NH, c.HS)
				return testutil.Dot(out, proj)
			}
			loss()
			dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			CrossAttentionBackward(dq, dk, dv, proj, q, k, v, probs, km, c.B, c.Tq, c.Tk, c.NH, c.HS)
			testutil.GradCheck(t, "dq", q, dq, loss, 1e-2, 2e-3)
			testutil.GradCheck(t, "dk", k, dk, loss, 1e-2, 2e-3)
			testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
		})
	}
}
