package kernels

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

// A layer on go-asm's panels gives MatmulForward's and
// MatmulResidualForward's bits on the plain weight at every row count
// 1–70 (both splits over the workers), with and without a bias and a
// residual, the residual aliasing the output too.
func TestPanelLinearMatchesMatmul(t *testing.T) {
	testutil.UseBackend(t, blas.KindGoAsm)
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][2]int{{300, 40}, {768, 96}, {2, 64}} {
		OC, C := s[0], s[1]
		w, bias := randVec(r, OC*C), randVec(r, OC)
		l, err := NewPanelLinear(w, OC, C)
		if err != nil {
			t.Fatal(err)
		}
		for BT := 1; BT <= 70; BT++ {
			inp, res := randVec(r, BT*C), randVec(r, BT*OC)
			for _, withBias := range []bool{false, true} {
				b := bias
				if !withBias {
					b = nil
				}
				want, got := make([]float32, BT*OC), make([]float32, BT*OC)
				MatmulForward(want, inp, w, b, BT, C, OC)
				l.Forward(got, inp, b, nil, BT)
				same(t, "no residual", OC, C, BT, got, want)
				MatmulResidualForward(want, inp, w, b, res, BT, C, OC)
				l.Forward(got, inp, b, res, BT)
				same(t, "residual", OC, C, BT, got, want)
				copy(got, res)
				l.Forward(got, inp, b, got, BT)
				same(t, "residual aliasing out", OC, C, BT, got, want)
			}
		}
	}
	if l, _ := NewPanelLinear(make([]float32, 6), 3, 2); l.String() != "fp32 linear [3, 2] (go-asm panels)" || l.Bytes() < 4*6 {
		t.Errorf("String %q, Bytes %d", l.String(), l.Bytes())
	}
}

func same(t *testing.T, what string, OC, C, BT int, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%d×%d, %d rows, %s: out[%d] = %v, the plain product %v", OC, C, BT, what, i, got[i], want[i])
		}
	}
}

// Off go-asm the panels are refused with the reason.
func TestPanelLinearNeedsGoAsm(t *testing.T) {
	defer blas.Set(blas.Set(blas.Go()))
	if _, err := NewPanelLinear(make([]float32, 6), 3, 2); err == nil || !strings.Contains(err.Error(), "go-asm") {
		t.Errorf("on gonum: %v", err)
	}
}
