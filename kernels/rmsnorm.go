package kernels

import "math"

// RMSNormForward is RoFormer-V2's norm, x / sqrt(mean(x²) + eps) over the
// last dimension, with no weight and no bias.
//
//	out  [BT, C]  may alias inp
//	rstd [BT]     1/sqrt(mean(x²) + eps), kept for backward
//	inp  [BT, C]
func RMSNormForward(out, rstd, inp []float32, eps float32, BT, C int) {
	parallelFor(BT, 32, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := inp[r*C : r*C+C]
			ms := 0.0
			for _, v := range x {
				ms += float64(v) * float64(v)
			}
			rs := 1 / math.Sqrt(ms/float64(C)+float64(eps))
			rstd[r] = float32(rs)
			o := out[r*C : r*C+C]
			for i, v := range x {
				o[i] = float32(float64(v) * rs)
			}
		}
	})
}

// RMSNormBackward differentiates RMSNormForward: with y = x·s and
// s = (mean(x²) + eps)^(−1/2), dx = s·(dy − x·s²·mean(dy·x)).
//
//	dinp [BT, C]  accumulated (+=), as LayerNormBackward
//	dout [BT, C]
//	inp  [BT, C]
//	rstd [BT]
func RMSNormBackward(dinp, dout, inp, rstd []float32, BT, C int) {
	parallelFor(BT, 32, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x, dy, dx := inp[r*C:r*C+C], dout[r*C:r*C+C], dinp[r*C:r*C+C]
			s := float64(rstd[r])
			dot := 0.0
			for i, v := range x {
				dot += float64(dy[i]) * float64(v)
			}
			k := s * s * dot / float64(C)
			for i, v := range x {
				dx[i] += float32(s * (float64(dy[i]) - float64(v)*k))
			}
		}
	})
}
