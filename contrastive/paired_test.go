package contrastive

import (
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// PairedForward against a float64 transcription of the formula, and its
// gradient against finite differences.
func TestPaired(t *testing.T) {
	N, D, scale := 6, 5, 30.0
	v := testutil.RandN(testutil.Rand(3), N*D, 1)
	want := 0.0
	unit := func(i int) []float64 {
		n := 0.0
		for _, x := range v[i*D : (i+1)*D] {
			n += float64(x) * float64(x)
		}
		out := make([]float64, D)
		for k, x := range v[i*D : (i+1)*D] {
			out[k] = float64(x) / math.Sqrt(n)
		}
		return out
	}
	for i := range N {
		sum := 0.0
		var pos float64
		for j := range N {
			if j == i {
				continue
			}
			s := scale * dot64(unit(i), unit(j))
			sum += math.Exp(s)
			if j == i^1 {
				pos = s
			}
		}
		want += (math.Log(sum) - pos) / float64(N)
	}
	if got := PairedForward(v, N, D, scale); math.Abs(got-want) > 1e-9*math.Max(1, want) {
		t.Errorf("PairedForward %.12g, want %.12g", got, want)
	}
	dv := make([]float32, N*D)
	PairedBackward(dv, v, N, D, 3, 1) // a smaller scale keeps the differences in float32's range
	testutil.GradCheck(t, "v", v, dv, func() float64 { return PairedForward(v, N, D, 3) }, 1e-3, 1e-3)
	if got := PairedForward(v[:2*D], 2, D, scale); got != 0 {
		t.Errorf("two rows: loss %g, want 0 (one candidate)", got)
	}
	if got := PairedForward(v[:3*D], 3, D, scale); !math.IsNaN(got) {
		t.Errorf("three rows: loss %g, want NaN (rows come in pairs)", got)
	}
}
