package kernels

import (
	"math"
	"testing"
)

// mul (AVX-512 where the CPU has F and DQ) gives exactly the factors of
// at, for every length (the sixteen-wide body and the scalar tail), offset,
// rate, with and without a source, and in place.
func TestDropMulAgainstAt(t *testing.T) {
	for _, level := range []int{0, 1, 2} {
		restore, ok := withLevel(level)
		if !ok {
			restore()
			continue
		}
		for _, p := range []float32{1e-6, 0.1, 0.5, 0.9} {
			for _, seed := range []uint64{0, 7, math.MaxUint64} {
				for _, base := range []int{0, 5, 1 << 40} {
					m := Dropout{P: p, Seed: seed, Offset: base}.mask()
					for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 100, 1000} {
						for _, off := range []int{0, 3, 999} {
							src := make([]float32, n)
							for i := range src {
								src[i] = float32(i%13) - 6.5
							}
							got, fill, inplace := make([]float32, n), make([]float32, n), append([]float32(nil), src...)
							m.mul(got, src, off)
							m.mul(fill, nil, off)
							m.mul(inplace, inplace, off)
							kept := 0
							for i := range n {
								f := m.at(off + i)
								if f != 0 {
									kept++
								}
								if got[i] != src[i]*f || fill[i] != f || inplace[i] != src[i]*f {
									t.Fatalf("level %d p %g seed %d base %d n %d off %d: element %d: got %g/%g/%g, want %g·%g", level, p, seed, base, n, off, i, got[i], fill[i], inplace[i], src[i], f)
								}
							}
							if n == 1000 && (float64(kept) < 1000*(1-float64(p))-60 || float64(kept) > 1000*(1-float64(p))+60) {
								t.Errorf("p %g: kept %d of 1000", p, kept)
							}
						}
					}
				}
			}
		}
		restore()
	}
}

func BenchmarkDropMul(b *testing.B) {
	m := Dropout{P: 0.1, Seed: 3}.mask()
	x := make([]float32, 1<<16)
	for _, level := range []int{0, 1, 2} {
		restore, ok := withLevel(level)
		if !ok {
			restore()
			continue
		}
		b.Run([]string{"go", "avx2", "avx512"}[level], func(b *testing.B) {
			b.SetBytes(4 << 16)
			for i := 0; i < b.N; i++ {
				m.mul(x, x, i)
			}
		})
		restore()
	}
}
