package kernels

import "math"

// CrossEntropyForward computes per-row losses −log softmax(logits_r)[t_r]
// with the log-sum-exp in float64. Rows whose target is negative (HF's −100,
// "ignore") get loss 0.
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
			losses[r] = float32(logSumExp(x) - float64(x[t]))
		}
	})
}

func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	s := 0.0
	for _, v := range x {
		s += exp64(float64(v) - mx)
	}
	return mx + math.Log(s)
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
			lse := logSumExp(x)
			g := float64(dloss[r])
			for j, v := range x {
				d[j] = float32(g * exp64(float64(v)-lse))
			}
			d[t] = float32(g * (exp64(float64(x[t])-lse) - 1))
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
			lse := logSumExp(x)
			g := float64(scale)
			xt := float64(x[t])
			for j, v := range x {
				x[j] = float32(g * exp64(float64(v)-lse))
			}
			x[t] = float32(g * (exp64(xt-lse) - 1))
		}
	})
}
