package blas

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Weight panels give go-asm's Sgemm on the plain weight to the bit, at
// every row count 1–64, for blocks of columns and for the whole, beta 0
// and 1, and leave the columns outside the block alone.
func TestWeightPanelsMatchSgemm(t *testing.T) {
	g, ok := Current().(*goAsm)
	if !ok {
		if g = goAsmBest(); g == nil {
			t.Skip("no go-asm here (purego, or not amd64 with AVX2)")
		}
		defer Set(Set(g))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][2]int{{96, 64}, {100, 37}, {64, 200}, {768, 768}} {
		OC, C := s[0], s[1]
		w := randSlice(r, OC*C)
		wp, err := NewWeightPanels(w, OC, C)
		if err != nil {
			t.Fatal(err)
		}
		for m := 1; m <= 64; m++ {
			if OC*C > 1<<18 && m%9 != 1 {
				continue
			}
			a := randSlice(r, m*C)
			c0 := randSlice(r, m*OC)
			for _, beta := range []float32{0, 1} {
				want := append([]float32(nil), c0...)
				g.Sgemm(false, true, m, OC, C, 1, a, C, w, C, beta, want, OC)
				got := append([]float32(nil), c0...)
				u := wp.Unit()
				cut := min(OC, (OC/2+u-1)/u*u)
				wp.Sgemm(m, 0, cut, a, C, beta, got, OC)
				wp.Sgemm(m, cut, OC, a, C, beta, got, OC)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%d×%d, m %d, beta %v: C[%d] = %v, Sgemm gives %v", OC, C, m, beta, i, got[i], want[i])
					}
				}
				got = append(got[:0], c0...)
				wp.Sgemm(m, u, min(OC, 2*u), a, C, beta, got, OC)
				for i := range got {
					if o := i % OC; (o < u || o >= min(OC, 2*u)) && got[i] != c0[i] {
						t.Fatalf("%d×%d, m %d: column %d outside the block written", OC, C, m, o)
					}
				}
			}
		}
	}
	wp, _ := NewWeightPanels(randSlice(r, 64*8), 64, 8)
	func() {
		defer func() {
			if e := recover(); e == nil || !strings.Contains(e.(string), "multiples of") {
				t.Errorf("a block starting at column 3: %v", e)
			}
		}()
		wp.Sgemm(1, 3, 8, make([]float32, 8), 8, 0, make([]float32, 64), 64)
	}()
}
