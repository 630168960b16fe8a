package rope

import (
	"fmt"
	"math"
	"math/cmplx"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// decayBoundComplex is an independent evaluation of the §3.4.3 bound with
// complex arithmetic and the frequencies of a Rotary.
func decayBoundComplex(t *testing.T, d int, r float64) float64 {
	rot := mustNew(t, Config{HeadSize: d})
	var s complex128
	sum := 0.0
	for _, th := range rot.Theta() {
		s += cmplx.Exp(complex(0, r*th))
		sum += cmplx.Abs(s)
	}
	return sum / float64(d/2)
}

func TestDecayBoundEqualsFormula(t *testing.T) {
	for _, d := range []int{2, 8, 64, 128, 768} {
		for _, r := range []float64{0, 1, 2.5, 17, 250, 4096} {
			t.Run(fmt.Sprintf("d%d_r%g", d, r), func(t *testing.T) {
				got, err := DecayBound(d, DefaultBase, r)
				if err != nil {
					t.Fatal(err)
				}
				want := decayBoundComplex(t, d, r)
				// Float64 rounding only: the two differ in how θ_k is
				// rounded and in sincos versus sin and cos.
				if math.Abs(got-want) > 1e-12*math.Max(1, want) {
					t.Errorf("bound %.17g, complex evaluation %.17g", got, want)
				}
				if r == 0 {
					if w0 := float64(d/2+1) / 2; got != w0 {
						t.Errorf("bound(0) = %v, want (d/2+1)/2 = %v", got, w0)
					}
				}
			})
		}
	}
}

// The curve of Fig. 2 decays: from 32.5 at r = 0 (d = 128) to a small
// fraction of it at r = 250, and every |S_j| ≤ j keeps it below bound(0).
func TestDecayCurveDecays(t *testing.T) {
	c, err := DecayCurve(128, DefaultBase, 250)
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 251 || c[0] != 32.5 {
		t.Fatalf("curve has %d points starting at %v, want 251 from 32.5", len(c), c[0])
	}
	for r, b := range c {
		if b > c[0] {
			t.Errorf("bound(%d) = %v exceeds bound(0) = %v", r, b, c[0])
		}
	}
	avg := func(lo, hi int) float64 {
		s := 0.0
		for _, b := range c[lo:hi] {
			s += b
		}
		return s / float64(hi-lo)
	}
	if a, b := avg(0, 10), avg(200, 251); !(b < a/2) {
		t.Errorf("no decay: mean bound %v over r < 10, %v over r ≥ 200", a, b)
	}
}

// The bound holds for real rotated vectors: |(R_m q)·(R_n k)| ≤
// max_j |h_{j+1} − h_j| · (d/2)·bound(m − n), with h_{d/2} = 0.
func TestDecayBoundHolds(t *testing.T) {
	d := 32
	rot := mustNew(t, Config{HeadSize: d})
	rng := testutil.Rand(11)
	for trial := 0; trial < 50; trial++ {
		q, k := testutil.RandN(rng, d, 1), testutil.RandN(rng, d, 1)
		h := make([]complex128, d/2+1)
		for j := 0; j < d/2; j++ {
			h[j] = complex(float64(q[2*j]), float64(q[2*j+1])) * cmplx.Conj(complex(float64(k[2*j]), float64(k[2*j+1])))
		}
		maxDiff := 0.0
		for j := 0; j < d/2; j++ {
			maxDiff = math.Max(maxDiff, cmplx.Abs(h[j+1]-h[j]))
		}
		m, n := rng.IntN(300), rng.IntN(300)
		qr, kr := append([]float32(nil), q...), append([]float32(nil), k...)
		sin, cos := make([]float32, d/2), make([]float32, d/2)
		rot.SinCos(sin, cos, []int{m})
		rot.Forward(qr, sin, cos, 1, 1, 1)
		rot.SinCos(sin, cos, []int{n})
		rot.Forward(kr, sin, cos, 1, 1, 1)
		score := testutil.Dot(qr, kr)
		b, _ := DecayBound(d, DefaultBase, float64(m-n))
		if lim := maxDiff * float64(d/2) * b; math.Abs(score) > lim*(1+1e-5)+1e-5 {
			t.Errorf("m=%d n=%d: |score| %v > bound %v", m, n, math.Abs(score), lim)
		}
	}
}

func TestDecayBoundErrors(t *testing.T) {
	for _, c := range []struct {
		d    int
		base float64
	}{{0, 10000}, {7, 10000}, {8, 1}, {8, math.NaN()}} {
		if _, err := DecayBound(c.d, c.base, 1); err == nil {
			t.Errorf("d %d base %v: no error", c.d, c.base)
		}
	}
	if _, err := DecayCurve(8, 10000, -1); err == nil {
		t.Error("negative distance: no error")
	}
}

func ExampleDecayCurve() {
	c, _ := DecayCurve(128, DefaultBase, 250)
	fmt.Printf("r=0: %.2f  r=50: %.2f  r=250: %.2f\n", c[0], c[50], c[250])
	// Output:
	// r=0: 32.50  r=50: 12.63  r=250: 6.55
}
