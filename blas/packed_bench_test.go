//go:build !windows

package blas

import (
	"fmt"
	"testing"
)

func BenchmarkPackedF32(b *testing.B) {
	be := Current()
	for _, s := range [][3]int{{512, 2304, 768}, {512, 3072, 768}, {512, 768, 3072}, {64, 768, 768}} {
		m, n, k := s[0], s[1], s[2]
		w, x, out := make([]float32, n*k), make([]float32, m*k), make([]float32, m*n)
		for i := range w {
			w[i] = float32(i%7) * 0.1
		}
		for i := range x {
			x[i] = float32(i%5) * 0.1
		}
		l, err := NewF32Matmul(w, n, k)
		if err != nil {
			b.Skip(err)
		}
		flops := 2 * float64(m*n*k)
		b.Run(fmt.Sprintf("sgemm/m%d_n%d_k%d", m, n, k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				be.Sgemm(false, true, m, n, k, 1, x, k, w, k, 1, out, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("packed/m%d_n%d_k%d", m, n, k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				l.Forward(out, x, m, 1)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
