package kernels

import "github.com/roformer-go/roformer/blas"

// MatmulForward is a linear layer, out = inp·Wᵀ + bias, with W stored as
// PyTorch's nn.Linear does ([OC, C], output rows).
//
//	out    [BT, OC]
//	inp    [BT, C]
//	weight [OC, C]
//	bias   [OC] or nil
//
// Rows of out are split across the worker goroutines; each calls
// single-threaded BLAS on its block. (One call to OpenBLAS on 2 threads was
// measured as well: within 2% in the model, and its idle worker thread spins
// in sched_yield unless OPENBLAS_THREAD_TIMEOUT is lowered; see
// docs/performance.md.)
func MatmulForward(out, inp, weight, bias []float32, BT, C, OC int) {
	matmulForward(out, inp, weight, bias, nil, BT, C, OC)
}

func matmulForward(out, inp, weight, bias, res []float32, BT, C, OC int) {
	if splitColumns(BT, OC) {
		// Few rows: each worker takes a block of output columns, so it
		// reads (and packs) only its share of the weights, which is what a
		// product of few rows costs. The sums are those of the row split:
		// each element's inner loop is the same.
		parallelFor(OC, colChunk, func(lo, hi int) {
			beta := startCols(out, bias, res, lo, hi, BT, OC)
			blas.Sgemm(false, true, BT, hi-lo, C, 1, inp[:BT*C], C, weight[lo*C:hi*C], C, beta, out[lo:], OC)
		})
		return
	}
	parallelFor(BT, 16, func(lo, hi int) {
		o := out[lo*OC : hi*OC]
		beta := startRows(o, bias, res, lo, hi, OC)
		blas.Sgemm(false, true, hi-lo, OC, C, 1, inp[lo*C:hi*C], C, weight[:OC*C], C, beta, o, OC)
	})
}

// colChunk is the fewest output columns a worker takes in the column
// split: a few of go-asm's 32-wide panels.
const colChunk = 128

// splitColumns reports whether a product of BT rows and OC output columns
// splits its columns over the workers rather than its rows: below 64 rows
// a worker (the row split then leaves workers idle below 16 rows a worker,
// and every busy one reads and packs the whole weight matrix), when there
// are columns enough. Measured on the base model (Zen 4, 2 threads,
// docs/performance.md): 1×16 52–58 → 29–33 ms, 1×32 50–59 → 43–48 ms,
// 1×64 87–90 → 73–75 ms; at 1×128 (64 rows a worker) the two splits level.
func splitColumns(BT, OC int) bool {
	w := Threads()
	return w > 1 && BT < 64*w && OC >= 2*colChunk
}

// startCols is startRows for columns lo..hi of every row of out [BT, OC].
func startCols(out, bias, res []float32, lo, hi, BT, OC int) float32 {
	if bias == nil && res == nil {
		return 0
	}
	for r := 0; r < BT; r++ {
		o := out[r*OC+lo : r*OC+hi]
		switch {
		case res != nil && bias != nil:
			addVec(o, res[r*OC+lo:r*OC+hi], bias[lo:hi])
		case res != nil:
			copy(o, res[r*OC+lo:r*OC+hi])
		default:
			copy(o, bias[lo:hi])
		}
	}
	return 1
}

// startRows sets o, rows lo..hi of a layer's output, to res + bias (each
// may be nil; rows of res are the output's) before a product accumulates
// onto it, and returns the beta it accumulates with: 0 when o is left
// unset.
func startRows(o, bias, res []float32, lo, hi, OC int) float32 {
	switch {
	case res != nil && bias != nil:
		for r := lo; r < hi; r++ {
			addVec(o[(r-lo)*OC:(r-lo)*OC+OC], res[r*OC:r*OC+OC], bias[:OC])
		}
	case res != nil:
		copy(o, res[lo*OC:hi*OC])
	case bias != nil:
		for r := 0; r < hi-lo; r++ {
			copy(o[r*OC:r*OC+OC], bias[:OC])
		}
	default:
		return 0
	}
	return 1
}

// MatmulForwardBF16 is MatmulForward with the product's operands rounded
// to bfloat16 and accumulated in float32: the forward pass of a linear
// layer in mixed-precision training, where the weights stay float32 (the
// master copy) and are rounded at every use. The input and the weights are
// each rounded once, split over the workers, into scratch buffers for
// blas.GemmBF16; the bias is added in float32. blas.BF16Supported must be
// nil.
func MatmulForwardBF16(out, inp, weight, bias []float32, BT, C, OC int) {
	matmulForwardBF16(out, inp, weight, bias, nil, BT, C, OC)
}

func matmulForwardBF16(out, inp, weight, bias, res []float32, BT, C, OC int) {
	px, x16 := bf16Operand(inp, BT, C)
	pw, w16 := bf16Operand(weight, OC, C)
	parallelFor(BT, 16, func(lo, hi int) {
		o := out[lo*OC : hi*OC]
		beta := startRows(o, bias, res, lo, hi, OC)
		blas.GemmBF16(false, true, hi-lo, OC, C, x16[lo*C:hi*C], C, w16, C, beta, o, OC)
	})
	putScratch(px)
	putScratch(pw)
}

// bf16Operand rounds x [rows, cols] to bfloat16 (toBF16), rows split over
// the workers, into a scratch buffer: the buffer to give back with
// putScratch, and the rows·cols values in it.
func bf16Operand(x []float32, rows, cols int) (*[]float32, []uint16) {
	n := rows * cols
	p := getScratch((n + 1) / 2)
	h := BF16Buffer(*p)[:n]
	x = x[:n]
	parallelFor(rows, 64, func(lo, hi int) {
		toBF16(h[lo*cols:hi*cols], x[lo*cols:hi*cols])
	})
	return p, h
}

// MatmulResidualForward is a linear layer added to a residual stream,
// out = res + inp·Wᵀ + bias, in one pass over out: each row starts as
// res + bias and BLAS accumulates the product onto it (beta = 1), instead
// of a product followed by an addition. The sum is rounded in another order
// than MatmulForward then AddForward, within float32 rounding. Its backward
// pass is MatmulBackward, with dout also flowing to res unchanged.
//
//	out    [BT, OC]  may not alias inp; may alias res
//	inp    [BT, C]
//	weight [OC, C]
//	bias   [OC] or nil
//	res    [BT, OC]
func MatmulResidualForward(out, inp, weight, bias, res []float32, BT, C, OC int) {
	matmulForward(out, inp, weight, bias, res, BT, C, OC)
}

// MatmulResidualForwardBF16 is MatmulResidualForward with the product in
// bfloat16, as MatmulForwardBF16; the residual and bias are added in
// float32.
func MatmulResidualForwardBF16(out, inp, weight, bias, res []float32, BT, C, OC int) {
	matmulForwardBF16(out, inp, weight, bias, res, BT, C, OC)
}

// MatmulBackward differentiates MatmulForward.
//
//	dinp    [BT, C]  written (=); nil to skip
//	dweight [OC, C]  accumulated (+=)
//	dbias   [OC]     accumulated (+=); nil when the layer has no bias
//	dout    [BT, OC]
//	inp     [BT, C]
//	weight  [OC, C]
func MatmulBackward(dinp, dweight, dbias, dout, inp, weight []float32, BT, C, OC int) {
	// out = inp·Wᵀ + b  ⇒  dinp = dout·W
	if dinp != nil {
		parallelFor(BT, 16, func(lo, hi int) {
			blas.Sgemm(false, false, hi-lo, C, OC, 1, dout[lo*OC:hi*OC], OC, weight[:OC*C], C, 0, dinp[lo*C:hi*C], C)
		})
	}
	// ⇒ dW += doutᵀ·inp, split over output rows of dW.
	parallelFor(OC, 16, func(lo, hi int) {
		blas.Sgemm(true, false, hi-lo, C, BT, 1, dout[lo:], OC, inp[:BT*C], C, 1, dweight[lo*C:hi*C], C)
	})
	// ⇒ db += Σ_rows dout
	biasBackward(dbias, dout, BT, OC)
}

// MatmulBackwardBF16 differentiates MatmulForwardBF16: both products (the
// input gradient dout·W and the weight gradient doutᵀ·inp) take bfloat16
// operands and accumulate in float32, and the gradients stay float32
// (the weight gradient is added to the float32 dweight, the bias
// gradient summed in float32), as mixed-precision training does. dout is
// rounded once for both products, inp and weight once each.
func MatmulBackwardBF16(dinp, dweight, dbias, dout, inp, weight []float32, BT, C, OC int) {
	pd, d16 := bf16Operand(dout, BT, OC)
	if dinp != nil {
		pw, w16 := bf16Operand(weight, OC, C)
		parallelFor(BT, 16, func(lo, hi int) {
			blas.GemmBF16(false, false, hi-lo, C, OC, d16[lo*OC:hi*OC], OC, w16, C, 0, dinp[lo*C:hi*C], C)
		})
		putScratch(pw)
	}
	px, x16 := bf16Operand(inp, BT, C)
	parallelFor(OC, 16, func(lo, hi int) {
		blas.GemmBF16(true, false, hi-lo, C, BT, d16[lo:], OC, x16, C, 1, dweight[lo*C:hi*C], C)
	})
	putScratch(px)
	putScratch(pd)
	biasBackward(dbias, dout, BT, OC)
}

// biasBackward accumulates db += Σ_rows dout (nothing when db is nil).
func biasBackward(dbias, dout []float32, BT, OC int) {
	if dbias == nil {
		return
	}
	parallelFor(OC, 64, func(lo, hi int) {
		for r := 0; r < BT; r++ {
			addVec(dbias[lo:hi], dbias[lo:hi], dout[r*OC+lo:r*OC+hi])
		}
	})
}

// matmulForwardNaive is the reference twin of MatmulForward (float64 sums).
func matmulForwardNaive(out, inp, weight, bias []float32, BT, C, OC int) {
	for r := 0; r < BT; r++ {
		for o := 0; o < OC; o++ {
			s := 0.0
			if bias != nil {
				s = float64(bias[o])
			}
			for c := 0; c < C; c++ {
				s += float64(inp[r*C+c]) * float64(weight[o*C+c])
			}
			out[r*OC+o] = float32(s)
		}
	}
}

// SplitQKV copies the three H-wide column blocks of a fused projection into
// their own matrices: q = qkv[:, 0:H], k = qkv[:, H:2H], v = qkv[:, 2H:3H].
//
//	q, k, v [BT, H]
//	qkv     [BT, 3H]
func SplitQKV(q, k, v, qkv []float32, BT, H int) {
	parallelFor(BT, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := qkv[r*3*H : r*3*H+3*H]
			copy(q[r*H:r*H+H], row[:H])
			copy(k[r*H:r*H+H], row[H:2*H])
			copy(v[r*H:r*H+H], row[2*H:])
		}
	})
}

// ConcatQKV is the inverse of SplitQKV: qkv[r] = [q[r], k[r], v[r]].
//
//	qkv     [BT, 3H]
//	q, k, v [BT, H]
func ConcatQKV(qkv, q, k, v []float32, BT, H int) {
	parallelFor(BT, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := qkv[r*3*H : r*3*H+3*H]
			copy(row[:H], q[r*H:r*H+H])
			copy(row[H:2*H], k[r*H:r*H+H])
			copy(row[2*H:], v[r*H:r*H+H])
		}
	})
}
