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
			m := sum64(x) / float64(C)
			rs := 1 / math.Sqrt(sqdev64(x, m)/float64(C)+float64(eps))
			mf, rf := float32(m), float32(rs)
			lnApply(out[r*C:r*C+C], x, w, b, mf, rf)
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
			// out = xhat·w + b  ⇒  dw += dout·xhat, db += dout
			lnBackParam(dweight[lo:hi], dbias[lo:hi], dout[r*C+lo:r*C+hi], inp[r*C+lo:r*C+hi], mean[r], rstd[r])
		}
	})
	parallelFor(BT, 32, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := inp[r*C : r*C+C]
			d := dout[r*C : r*C+C]
			m, rs := mean[r], rstd[r]
			// dxhat = dout·w; dx = rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat))
			sum1, sum2 := lnBackSums(d, w, x, m, rs)
			m1, m2 := float32(sum1/float64(C)), float32(sum2/float64(C))
			lnBackApply(dinp[r*C:r*C+C], d, w, x, m, rs, m1, m2)
		}
	})
}
