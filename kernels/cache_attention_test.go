package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// CacheAttentionForward equals its naive twin at shapes that break the BLAS
// blocks (T = 7, C = 15), for a prompt pass (n = 0, T > 1) and one-token
// steps, with pads in the cache that no query sees (a pad's own slot still
// sees itself, as a left-padded prompt's pads do).
func TestCacheAttentionForward(t *testing.T) {
	for _, c := range []struct {
		B, T, n, capacity, NH, HS int
		pads                      bool
	}{
		{2, 7, 0, 9, 3, 5, false},
		{2, 7, 0, 12, 3, 5, true},
		{3, 1, 6, 8, 2, 4, true},
		{1, 1, 12, 13, 4, 3, false},
		{2, 3, 4, 10, 1, 7, true},
	} {
		name := fmt.Sprintf("B%d_T%d_n%d_NH%d_HS%d_pads%v", c.B, c.T, c.n, c.NH, c.HS, c.pads)
		t.Run(name, func(t *testing.T) {
			C := c.NH * c.HS
			r := testutil.Rand(uint64(c.B*100 + c.T*10 + c.n))
			q := testutil.RandN(r, c.B*c.T*C, 1)
			k := testutil.RandN(r, c.B*c.capacity*C, 1)
			v := testutil.RandN(r, c.B*c.capacity*C, 1)
			mask := make([]float32, c.B*c.capacity)
			for i := range mask {
				mask[i] = 1
				if c.pads && i%c.capacity < 1+i/c.capacity {
					mask[i] = 0 // row b: its first b+1 slots are pads
				}
			}
			got, want := make([]float32, c.B*c.T*C), make([]float32, c.B*c.T*C)
			CacheAttentionForward(got, q, k, v, mask, c.B, c.T, c.n, c.capacity, c.NH, c.HS)
			cacheAttentionNaive(want, q, k, v, mask, c.B, c.T, c.n, c.capacity, c.NH, c.HS)
			testutil.AssertClose(t, name, got, want, 1e-5, 1e-5)
			// A pad after the queries' slots changes nothing: only j ≤ n+i is read.
			if N := c.n + c.T; N < c.capacity {
				for b := 0; b < c.B; b++ {
					k[(b*c.capacity+N)*C] = float32(math.NaN())
				}
				again := make([]float32, len(got))
				CacheAttentionForward(again, q, k, v, mask, c.B, c.T, c.n, c.capacity, c.NH, c.HS)
				testutil.AssertClose(t, name+" unused slots", again, got, 0, 0)
			}
		})
	}
}

// LogSoftmax64 by hand: log(e^z_i / Σ e^z_j), and −Inf stays −Inf.
func TestLogSoftmax64(t *testing.T) {
	z := []float32{1, 2, 3, float32(math.Inf(-1))}
	out := make([]float64, len(z))
	LogSoftmax64(out, z)
	s := math.Exp(1) + math.Exp(2) + math.Exp(3)
	for i, want := range []float64{1 - math.Log(s), 2 - math.Log(s), 3 - math.Log(s), math.Inf(-1)} {
		if math.Abs(out[i]-want) > 1e-12 || math.IsInf(want, -1) != math.IsInf(out[i], -1) {
			t.Errorf("out[%d] = %v, want %v", i, out[i], want)
		}
	}
	// exp of the log-probabilities is Softmax64.
	p := Softmax64(z)
	for i := range p {
		if math.Abs(math.Exp(out[i])-p[i]) > 1e-15 {
			t.Errorf("exp(out[%d]) = %v, Softmax64 %v", i, math.Exp(out[i]), p[i])
		}
	}
}
