package blas

import (
	"fmt"
	"os"
	"testing"
)

// BenchmarkWeightPanels times a short query's linear-layer products on
// go-asm with the weight as it lies (packed into panels by every call)
// and with it packed once (HeadPacker.PackB), the weights past the caches:
// each run takes the next of copies of the weight (over 64 MiB in all).
// WP_ISA=avx2 times the AVX2 kernel.
func BenchmarkWeightPanels(b *testing.B) {
	g, err := goAsmFor(os.Getenv("WP_ISA"))
	if err != nil {
		b.Skip(err)
	}
	p := HeadPacker{g}
	for _, s := range [][2]int{{768, 768}, {3072, 768}, {768, 3072}} {
		n, k := s[0], s[1]
		copies := max(2, (64<<20)/(4*n*k))
		plain := make([][]float32, copies)
		packed := make([]Operand, copies)
		for i := range plain {
			plain[i] = make([]float32, n*k)
			for j := range plain[i] {
				plain[i][j] = float32((i+j)%7) * 0.1
			}
			packed[i] = p.PackB(make([]float32, p.LenB(k, n)), true, k, n, plain[i], k)
		}
		for _, m := range []int{1, 16, 32} {
			a := make([]float32, m*k)
			c := make([]float32, m*n)
			b.Run(fmt.Sprintf("plain/%dx%dx%d", m, n, k), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					g.Sgemm(false, true, m, n, k, 1, a, k, plain[i%copies], k, 0, c, n)
				}
				b.SetBytes(int64(4 * n * k))
			})
			b.Run(fmt.Sprintf("packed/%dx%dx%d", m, n, k), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					p.Sgemm(m, n, k, 1, Matrix(false, a, k), packed[i%copies], 0, c, n)
				}
				b.SetBytes(int64(4 * n * k))
			})
		}
	}
}
