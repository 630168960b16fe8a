package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// String names the layer's precision: fp32 for NewPackedLinear, bf16 for
// NewBF16Linear (each where oneDNN and the CPU allow it).
func TestPackedLinearString(t *testing.T) {
	ran := 0
	for _, c := range []struct {
		name string
		make func([]float32, int, int) (*PackedLinear, error)
		want string
	}{
		{"NewPackedLinear", NewPackedLinear, "fp32 linear [3, 2]"},
		{"NewBF16Linear", NewBF16Linear, "bf16 linear [3, 2]"},
	} {
		l, err := c.make(make([]float32, 6), 3, 2)
		if err != nil {
			t.Logf("%s: %v", c.name, err)
			continue
		}
		ran++
		if got := l.String(); got != c.want {
			t.Errorf("%s: String() = %q, want %q", c.name, got, c.want)
		}
	}
	if ran == 0 {
		t.Skip("neither packed layer is available here (oneDNN missing)")
	}
}

// The fused forms of a packed layer (ForwardAct; in bfloat16
// ForwardActBF16 → ForwardBF16) against the layer's Forward followed by
// ActivationForward, every activation, row counts that split over the
// workers: the same products, so they differ only by oneDNN's activation
// approximations and, for the bfloat16 intermediate, its rounding.
func TestPackedLinearFused(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const OC, C = 40, 56
	w, bias := randVec(r, OC*C), randVec(r, OC)
	w2, bias2 := randVec(r, C*OC), randVec(r, C)
	made := 0
	for _, mk := range []func([]float32, int, int) (*PackedLinear, error){NewPackedLinear, NewBF16Linear} {
		q, err := mk(w, OC, C)
		if err != nil {
			continue
		}
		q2, err := mk(w2, C, OC)
		if err != nil {
			t.Fatal(err)
		}
		made++
		for _, BT := range []int{1, 17, 70} {
			inp, res := randVec(r, BT*C), randVec(r, BT*C)
			for a := GELU; a <= Linear; a++ {
				for _, b := range [][]float32{bias, nil} {
					what := fmt.Sprintf("%v BT=%d %v bias=%v", q, BT, a, b != nil)
					want := make([]float32, BT*OC)
					q.Forward(want, inp, b, nil, BT)
					ActivationForward(want, want, a, BT*OC)
					got := make([]float32, BT*OC)
					q.ForwardAct(got, inp, b, a, BT)
					for i := range got {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
							t.Fatalf("%s: ForwardAct element %d is %v, unfused %v", what, i, got[i], want[i])
						}
					}
					if !q.BF16() {
						continue
					}
					pre16 := make([]uint16, BT*OC)
					q.ForwardActBF16(pre16, inp, b, a, BT)
					widened := make([]float32, BT*OC)
					for i, h := range pre16 {
						widened[i] = math.Float32frombits(uint32(h) << 16)
						if d := math.Abs(float64(widened[i] - got[i])); d > math.Abs(float64(got[i]))/256+1e-6 {
							t.Fatalf("%s: ForwardActBF16 element %d is %v, float32 %v", what, i, widened[i], got[i])
						}
					}
					out, ref := make([]float32, BT*C), make([]float32, BT*C)
					q2.ForwardBF16(out, pre16, bias2, res, BT)
					q2.Forward(ref, widened, bias2, res, BT)
					for i := range out {
						if d := math.Abs(float64(out[i] - ref[i])); d > 1e-5*(1+math.Abs(float64(ref[i]))) {
							t.Fatalf("%s: ForwardBF16 element %d is %v, from the widened input %v", what, i, out[i], ref[i])
						}
					}
				}
			}
		}
	}
	if made == 0 {
		t.Skip("no packed layer can be made here (oneDNN missing)")
	}
}
