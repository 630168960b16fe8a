package seq2seq

import (
	"github.com/roformer-go/roformer/kernels"
)

// smoothedCrossEntropy is label-smoothed cross-entropy (Szegedy et al. 2016;
// Vaswani et al. §5.4) averaged over the rows whose label is not −1: with
// p = softmax(z) and the smoothed target q_v = ε/V + (1−ε)·[v = y],
//
//	loss = mean_rows −Σ_v q_v·log p_v = mean((1−ε)·(−log p_y) + ε·(lse(z) − mean_v z_v))
//	nll  = mean_rows −log p_y
//
// and, when grad is not nil, grad = (p − q)/N for counted rows and 0 for the
// others (N the number of counted rows). The exponentials are the kernels'
// (kernels.CrossEntropyForward and CrossEntropyGradInPlace); the smoothing
// adds ε·(onehot − 1/V)/N to the plain gradient. grad may alias logits (then
// the logits are gone).
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
	if n == 0 {
		if grad != nil {
			clear(grad[:N*V])
		}
		return 0, 0, 0
	}
	ce := make([]float32, N)
	kernels.CrossEntropyForward(ce, logits, labels, N, V)
	// lse(z) − mean_v z_v = nll_r + z_y − mean_v z_v
	smooth := make([]float64, N)
	kernels.ParallelFor(N, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			if y := labels[r]; y >= 0 {
				z := logits[r*V : r*V+V]
				s := 0.0
				for _, v := range z {
					s += float64(v)
				}
				smooth[r] = float64(ce[r]) + float64(z[y]) - s/float64(V)
			}
		}
	})
	for r, y := range labels[:N] {
		if y >= 0 {
			nll += float64(ce[r])
			loss += (1-eps)*float64(ce[r]) + eps*smooth[r]
		}
	}
	if grad != nil {
		if &grad[0] != &logits[0] {
			copy(grad[:N*V], logits[:N*V])
		}
		inv := 1 / float64(n)
		kernels.CrossEntropyGradInPlace(grad, labels, float32(inv), N, V)
		off, on := float32(eps*inv/float64(V)), float32(eps*inv)
		kernels.ParallelFor(N, 64, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				if y := labels[r]; y >= 0 {
					g := grad[r*V : r*V+V]
					for v := range g {
						g[v] -= off
					}
					g[y] += on
				}
			}
		})
	}
	return loss / float64(n), nll / float64(n), n
}
