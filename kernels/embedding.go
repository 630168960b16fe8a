package kernels

import "github.com/roformer-go/roformer/tensor"

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

// EmbeddingForwardBF16 is EmbeddingForward for a word embedding stored in
// bfloat16 (a quantized model folder's, used where it lies in the mapped
// file): wte holds its V·C values as little-endian BF16 bytes, each row
// read is widened to float32 exactly, so out is what EmbeddingForward
// gives with the widened table, to the bit.
//
//	wte [V, C] as 2·V·C bytes
func EmbeddingForwardBF16(out []float32, ids, types []int32, wte []byte, wtt []float32, BT, C int) {
	parallelFor(BT, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o := out[r*C : r*C+C]
			DecodeBF16(o, wte[2*int(ids[r])*C:2*(int(ids[r])+1)*C])
			if wtt == nil {
				continue
			}
			tt := wtt[int(types[r])*C : int(types[r])*C+C]
			for i := range o {
				o[i] += tt[i]
			}
		}
	})
}

// DecodeBF16 widens the little-endian BF16 values src [2·len(dst) bytes]
// to float32 into dst (exactly: bfloat16 is float32's upper half).
func DecodeBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = tensor.BF16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
	}
}
