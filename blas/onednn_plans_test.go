//go:build !windows

package blas

import (
	"math/rand/v2"
	"testing"
)

// countPlans returns how many primitives l holds.
func countPlans(l *PackedMatmul) int {
	n := 0
	l.plans.Range(func(any, any) bool { n++; return true })
	return n
}

// A layer asked for every row count from 1 to 300 (what a server sees from
// requests of every length) keeps a bounded number of primitives, and the
// rows past the bound are still computed right, in every format.
func TestPackedMatmulPlansBounded(t *testing.T) {
	const n, k, most = 48, 40, 300
	r := rand.New(rand.NewPCG(9, 9))
	w := randSlice(r, n*k)
	inp := randSlice(r, most*k)
	type layer struct {
		name string
		l    *PackedMatmul
		tol  float64
	}
	var ls []layer
	if l, err := NewF32Matmul(w, n, k); err == nil {
		ls = append(ls, layer{"f32", l, 1e-5})
	} else {
		t.Skip(err)
	}
	if BF16Supported() == nil {
		l, err := NewBF16Matmul(w, n, k)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, layer{"bf16", l, 0.25}) // 2·2⁻⁸·Σ|x||w| ≈ 0.2 at k = 40
	}
	want := make([]float32, most*n)
	for i := range most {
		for j := range n {
			s := 0.0
			for c := range k {
				s += float64(inp[i*k+c]) * float64(w[j*k+c])
			}
			want[i*n+j] = float32(s)
		}
	}
	for _, c := range ls {
		for m := 1; m <= most; m++ {
			out := make([]float32, m*n)
			for i := range out {
				out[i] = 1
			}
			c.l.Forward(out, inp, m, 0.5) // out = 0.5 + inp·Wᵀ
			for i := range out {
				if d := float64(out[i] - 0.5 - want[i]); d > c.tol || d < -c.tol {
					t.Fatalf("%s, m = %d: entry %d = %g, want %g", c.name, m, i, out[i]-0.5, want[i])
				}
			}
		}
		// 32 row counts of their own and the 6 chunk sizes (a literal, so
		// that raising the constants fails here).
		if got, limit := countPlans(c.l), 38; got > limit || maxExactPlans+len(chunkRows) > limit {
			t.Errorf("%s: %d primitives after %d row counts, want at most %d", c.name, got, most, limit)
		}
	}
}
