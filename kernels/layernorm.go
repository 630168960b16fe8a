package kernels

import "math"

// LayerNormForward normalises each row over its C channels:
// out = (x − mean)/√(var + eps)·weight + bias, with the biased variance, as
// torch.nn.LayerNorm. Mean and variance are accumulated in float64.
//
//	out    [BT, C]
//	mean   [BT]  saved for the backward pass; nil in inference
//	rstd   [BT]  1/√(var+eps), saved; nil in inference
//	inp    [BT, C]
//	weight [C]
//	bias   [C]
func LayerNormForward(out, mean, rstd, inp, weight, bias []float32, eps float32, BT, C int) {
	w, b := weight[:C], bias[:C]
	parallelFor(BT, 32, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := inp[r*C : r*C+C]
			o := out[r*C : r*C+C]
			s := 0.0
			for _, v := range x {
				s += float64(v)
			}
			m := s / float64(C)
			v2 := 0.0
			for _, v := range x {
				d := float64(v) - m
				v2 += d * d
			}
			rs := 1 / math.Sqrt(v2/float64(C)+float64(eps))
			mf, rf := float32(m), float32(rs)
			for i, v := range x {
				o[i] = (v-mf)*rf*w[i] + b[i]
			}
			if mean != nil {
				mean[r] = mf
				rstd[r] = rf
			}
		}
	})
}

// LayerNormBackward differentiates LayerNormForward.
//
//	dinp    [BT, C]  accumulated (+=): the input of a post-LN layer norm is a residual sum
//	dweight [C]      accumulated (+=)
//	dbias   [C]      accumulated (+=)
//	dout    [BT, C]
//	inp     [BT, C]
//	weight  [C]
//	mean    [BT]
//	rstd    [BT]
func LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd []float32, BT, C int) {
	w := weight[:C]
	// Parameter gradients: columns are independent, rows are summed; split columns.
	parallelFor(C, 64, func(lo, hi int) {
		for r := 0; r < BT; r++ {
			x := inp[r*C : r*C+C]
			d := dout[r*C : r*C+C]
			m, rs := mean[r], rstd[r]
			for i := lo; i < hi; i++ {
				xhat := (x[i] - m) * rs
				// out = xhat·w + b
				dweight[i] += d[i] * xhat
				dbias[i] += d[i]
			}
		}
	})
	parallelFor(BT, 32, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := inp[r*C : r*C+C]
			d := dout[r*C : r*C+C]
			di := dinp[r*C : r*C+C]
			m, rs := mean[r], rstd[r]
			// dxhat = dout·w; dx = rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat))
			sum1, sum2 := 0.0, 0.0
			for i := range x {
				dxhat := float64(d[i] * w[i])
				xhat := float64((x[i] - m) * rs)
				sum1 += dxhat
				sum2 += dxhat * xhat
			}
			m1, m2 := float32(sum1/float64(C)), float32(sum2/float64(C))
			for i := range x {
				xhat := (x[i] - m) * rs
				di[i] += rs * (d[i]*w[i] - m1 - xhat*m2)
			}
		}
	})
}
