package kernels

// EncoderTailForward is the row-local part of a post-LN transformer layer
// after its attention, for inference (no dropout):
//
//	res1 = x + ctx·Woᵀ + bo
//	a    = LayerNorm(res1) with ln1w, ln1b
//	pre  = act(a·W1ᵀ + b1)            (activation in place)
//	res2 = a + pre·W2ᵀ + b2
//	out  = LayerNorm(res2) with ln2w, ln2b
//
// It gives the bits of MatmulResidualForward, LayerNormForward,
// MatmulForward, ActivationForward, MatmulResidualForward and
// LayerNormForward called one after the other, but in one parallel region:
// each worker takes its block of rows through all six steps, so the workers
// meet once instead of six times. The two halves of a matrix product finish
// up to ~15% apart at random on the target machines; over three products in
// a row those differences partly cancel before anyone waits.
//
//	out, a, res1, res2 [BT, H]
//	pre                [BT, I]
//	x, ctx             [BT, H]
//	wo [H, H], w1 [I, H], w2 [H, I]; bo, ln1w, ln1b, b2, ln2w, ln2b [H]; b1 [I]
func EncoderTailForward(out, a, res1, pre, res2, x, ctx, wo, bo, ln1w, ln1b, w1, b1, w2, b2, ln2w, ln2b []float32, act Activation, eps float32, BT, H, I int) {
	parallelFor(BT, 16, func(lo, hi int) {
		matmulResidualRows(res1, ctx, wo, bo, x, lo, hi, H, H)
		layerNormRows(a, nil, nil, res1, ln1w, ln1b, eps, lo, hi, H)
		matmulRows(pre, a, w1, b1, lo, hi, H, I)
		activationRange(pre[lo*I:hi*I], pre[lo*I:hi*I], act)
		matmulResidualRows(res2, pre, w2, b2, a, lo, hi, I, H)
		layerNormRows(out, nil, nil, res2, ln2w, ln2b, eps, lo, hi, H)
	})
}
