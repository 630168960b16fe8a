package kernels

// EmbeddingForward sums a word and a token-type embedding per position, as
// HF's RoFormerEmbeddings does before its LayerNorm:
// out[bt] = wte[ids[bt]] + wtt[types[bt]]. Ids must already be validated
// against the table sizes. wtt may be nil (no token types).
//
//	out   [BT, C]
//	ids   [BT]
//	types [BT]
//	wte   [V, C]
//	wtt   [TV, C]
func EmbeddingForward(out []float32, ids, types []int32, wte, wtt []float32, BT, C int) {
	parallelFor(BT, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o := out[r*C : r*C+C]
			w := wte[int(ids[r])*C : int(ids[r])*C+C]
			if wtt == nil {
				copy(o, w)
				continue
			}
			tt := wtt[int(types[r])*C : int(types[r])*C+C]
			for i := range o {
				o[i] = w[i] + tt[i]
			}
		}
	})
}

// EmbeddingBackward differentiates EmbeddingForward. Rows of wte whose id is
// paddingIdx get no gradient from the lookup (nn.Embedding's padding_idx);
// pass paddingIdx < 0 for none. The work is split over channels so that each
// goroutine owns whole columns of the tables: no two write the same element,
// and the sum order is fixed (deterministic).
//
//	dwte  [V, C]  accumulated (+=)
//	dwtt  [TV, C] accumulated (+=); nil when there are no token types
//	dout  [BT, C]
//	ids   [BT]
//	types [BT]
func EmbeddingBackward(dwte, dwtt, dout []float32, ids, types []int32, paddingIdx, BT, C int) {
	parallelFor(C, 32, func(lo, hi int) {
		for r := 0; r < BT; r++ {
			d := dout[r*C+lo : r*C+hi]
			if id := int(ids[r]); id != paddingIdx {
				w := dwte[id*C+lo : id*C+hi]
				for i, v := range d {
					w[i] += v
				}
			}
			if dwtt != nil {
				t := int(types[r])
				w := dwtt[t*C+lo : t*C+hi]
				for i, v := range d {
					w[i] += v
				}
			}
		}
	})
}

// AddForward sets out = a + b elementwise (a residual connection). out may
// alias a or b.
//
//	out [N]
//	a   [N]
//	b   [N]
func AddForward(out, a, b []float32, N int) {
	parallelFor(N, 1<<14, func(lo, hi int) {
		addVec(out[lo:hi], a[lo:hi], b[lo:hi])
	})
}
