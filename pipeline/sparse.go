package pipeline

import (
	"errors"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/model/roformer"
)

// SparsePool returns the SPLADE vectors of the given rows of a forward pass
// of m: for row i and each vocabulary entry v, the maximum over the
// positions t whose mask is 1 of log(1 + max(0, logit[t][v])), computed in
// float64 and rounded to float32 (as text-embeddings-inference's splade
// pooling, special tokens included), where the logits are m's masked-LM
// head at t. mask is the batch's attention mask [B·T]; out needs only the
// last hidden state [B, T, H] (a pass with roformer.Options.SkipHead).
//
// The head runs on at most chunk positions at a time (roformer.Model.
// LMLogits; chunk < 1 is 1), the rows' positions one after the other, and
// each chunk's logits are folded into the maxima before the next: what
// SparsePool holds is chunk × vocabulary logits and the rows' vectors,
// not the batch's tokens × vocabulary logits. The vectors are those of the
// whole head's logits (the maximum commutes with rounding to float32), bit
// for bit where LMLogits's are (go-asm and gonum; within rounding on
// OpenBLAS and oneDNN, which choose their kernels by the number of rows).
// A row whose mask is all 0 is an error.
func SparsePool(m *roformer.Model, out *roformer.Output, mask []int32, rows []int, chunk int) ([][]float32, error) {
	hs := out.LastHiddenState
	if m.LM == nil || hs == nil || len(hs.Shape) != 3 {
		return nil, errors.New("pipeline: sparse pooling needs a masked-LM model and the last hidden state [batch, tokens, hidden] of its forward pass")
	}
	B, T, H, V := hs.Shape[0], hs.Shape[1], hs.Shape[2], m.Config.VocabSize
	if H != m.Config.HiddenSize || len(mask) != B*T {
		return nil, fmt.Errorf("pipeline: sparse pooling of a [%d, %d, %d] hidden state with a mask of %d positions (hidden size %d)", B, T, H, len(mask), m.Config.HiddenSize)
	}
	vecs := make([][]float32, len(rows))
	positions := 0
	for k, i := range rows {
		if i < 0 || i >= B {
			return nil, fmt.Errorf("pipeline: sparse pooling of row %d of %d", i, B)
		}
		n := 0
		for _, x := range mask[i*T : (i+1)*T] {
			if x != 0 {
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("pipeline: sparse pooling of row %d, whose attention mask is all 0", i)
		}
		positions += n
		vecs[k] = make([]float32, V)
	}
	chunk = max(1, min(chunk, positions))
	hidden, logits, owner := make([]float32, chunk*H), make([]float32, chunk*V), make([]int, chunk)
	filled := 0
	fold := func() error {
		if err := m.LMLogits(logits, hidden, filled); err != nil {
			return err
		}
		for p, k := range owner[:filled] {
			vec := vecs[k]
			for v, x := range logits[p*V : (p+1)*V] {
				if y := float32(math.Log1p(math.Max(0, float64(x)))); y > vec[v] {
					vec[v] = y
				}
			}
		}
		filled = 0
		return nil
	}
	for k, i := range rows {
		for t := range T {
			if mask[i*T+t] == 0 {
				continue
			}
			copy(hidden[filled*H:(filled+1)*H], hs.Data[(i*T+t)*H:(i*T+t+1)*H])
			owner[filled] = k
			if filled++; filled == chunk {
				if err := fold(); err != nil {
					return nil, err
				}
			}
		}
	}
	if filled > 0 {
		if err := fold(); err != nil {
			return nil, err
		}
	}
	return vecs, nil
}
