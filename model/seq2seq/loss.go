package seq2seq

import (
	"math"

	"github.com/roformer-go/roformer/kernels"
)

// smoothedCrossEntropy is label-smoothed cross-entropy (Szegedy et al. 2016;
// Vaswani et al. §5.4) averaged over the rows whose label is not −1: with
// p = softmax(z) and the smoothed target q_v = ε/V + (1−ε)·[v = y],
//
//	loss = mean_rows −Σ_v q_v·log p_v = mean((1−ε)·(−log p_y) + ε·mean_v(−log p_v))
//	nll  = mean_rows −log p_y
//
// and, when grad is not nil, grad = (p − q)/N for counted rows and 0 for the
// others (N the number of counted rows). grad may alias logits.
//
//	grad   [N, V]  written (=), or nil
//	logits [N, V]
//	labels [N]     −1 to ignore a row
func smoothedCrossEntropy(grad, logits []float32, labels []int32, eps float64, N, V int) (loss, nll float64, n int) {
	for _, y := range labels[:N] {
		if y >= 0 {
			n++
		}
	}
	rowLoss, rowNLL := make([]float64, N), make([]float64, N)
	kernels.ParallelFor(N, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			z := logits[i*V : i*V+V]
			y := labels[i]
			var g []float32
			if grad != nil {
				g = grad[i*V : i*V+V]
			}
			if y < 0 {
				if g != nil {
					clear(g)
				}
				continue
			}
			mx := math.Inf(-1)
			sumZ := 0.0
			for _, v := range z {
				mx = math.Max(mx, float64(v))
				sumZ += float64(v)
			}
			s := 0.0
			for _, v := range z {
				s += math.Exp(float64(v) - mx)
			}
			lse := mx + math.Log(s)
			nllI := lse - float64(z[y])
			// −mean_v log p_v = lse − mean_v z_v
			rowNLL[i] = nllI
			rowLoss[i] = (1-eps)*nllI + eps*(lse-sumZ/float64(V))
			if g != nil {
				inv := 1 / float64(n)
				for v := range z {
					q := eps / float64(V)
					if int32(v) == y {
						q += 1 - eps
					}
					g[v] = float32((math.Exp(float64(z[v])-lse) - q) * inv)
				}
			}
		}
	})
	if n == 0 {
		return 0, 0, 0
	}
	for i := range rowLoss {
		loss += rowLoss[i]
		nll += rowNLL[i]
	}
	return loss / float64(n), nll / float64(n), n
}
