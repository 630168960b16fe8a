package kernels

import "math"

// CrossEntropyForward computes per-row losses −log softmax(logits_r)[t_r]
// with the log-sum-exp from float32 exponentials (vec.go) summed and logged
// in float64. Rows whose target is negative (HF's −100, "ignore") get loss 0.
//
//	losses  [N]
//	logits  [N, V]
//	targets [N]
func CrossEntropyForward(losses, logits []float32, targets []int32, N, V int) {
	parallelFor(N, 8, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			t := targets[r]
			if t < 0 {
				losses[r] = 0
				continue
			}
			x := logits[r*V : r*V+V]
			lse, _, _ := logSumExp(x)
			losses[r] = float32(lse - float64(x[t]))
		}
	})
}

// logSumExp returns log Σ e^x[i] and its two parts: the maximum m and
// s = Σ e^(x[i]−m), so that e^(x[i]−lse) = e^(x[i]−m)/s.
func logSumExp(x []float32) (lse float64, m float32, s float64) {
	m = maxOf(x)
	s = expSum(x, m)
	return float64(m) + math.Log(s), m, s
}

// CrossEntropyBackward differentiates CrossEntropyForward: for each row,
// dlogits = dloss[r]·(softmax(logits_r) − onehot(t_r)), and 0 for ignored rows.
//
//	dlogits [N, V]  written (=)
//	dloss   [N]     the gradient of the total loss with respect to each row's loss
//	logits  [N, V]
//	targets [N]
func CrossEntropyBackward(dlogits, dloss, logits []float32, targets []int32, N, V int) {
	parallelFor(N, 8, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			d := dlogits[r*V : r*V+V]
			t := targets[r]
			if t < 0 || dloss[r] == 0 {
				clear(d)
				continue
			}
			x := logits[r*V : r*V+V]
			lse, m, s := logSumExp(x)
			g := float64(dloss[r])
			copy(d, x)
			expSubScale(d, m, float32(g/s))
			d[t] = float32(g * (math.Exp(float64(x[t])-lse) - 1))
		}
	})
}

// CrossEntropyGradInPlace overwrites logits with the gradient of
// scale·Σ_r CE(logits_r, t_r): scale·(softmax(logits_r) − onehot(t_r)) for
// rows whose target is set, 0 for ignored rows. It saves the [N, V] buffer
// that CrossEntropyBackward needs when the logits are not used afterwards.
//
//	logits  [N, V]  in: logits; out: their gradient
//	targets [N]
func CrossEntropyGradInPlace(logits []float32, targets []int32, scale float32, N, V int) {
	parallelFor(N, 8, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := logits[r*V : r*V+V]
			t := targets[r]
			if t < 0 || scale == 0 {
				clear(x)
				continue
			}
			lse, m, s := logSumExp(x)
			g := float64(scale)
			xt := float64(x[t])
			expSubScale(x, m, float32(g/s))
			x[t] = float32(g * (math.Exp(xt-lse) - 1))
		}
	})
}
