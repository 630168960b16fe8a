package pipeline

import (
	"errors"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/model/roformer"
)

// SparsePool returns row i's SPLADE vector from a forward pass with the
// masked-LM head: for each vocabulary entry v, the maximum over the
// positions whose mask is 1 of log(1 + max(0, logit[t][v])), computed in
// float64 (as text-embeddings-inference's splade pooling, special tokens
// included). out.Logits must be the head's [B, T, V] logits.
func SparsePool(out *roformer.Output, mask []int32, i int) ([]float32, error) {
	if out.Logits == nil || len(out.Logits.Shape) != 3 {
		return nil, errors.New("pipeline: sparse pooling needs the masked-LM head's [batch, tokens, vocabulary] logits")
	}
	B, T, V := out.Logits.Shape[0], out.Logits.Shape[1], out.Logits.Shape[2]
	if i < 0 || i >= B || len(mask) != T {
		return nil, fmt.Errorf("pipeline: sparse pooling of row %d of %d with a mask of %d positions for %d", i, B, len(mask), T)
	}
	best := make([]float64, V)
	n := 0
	for t := range T {
		if mask[t] == 0 {
			continue
		}
		n++
		for v, x := range out.Logits.Data[(i*T+t)*V : (i*T+t+1)*V] {
			if y := math.Log1p(math.Max(0, float64(x))); y > best[v] {
				best[v] = y
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("pipeline: sparse pooling of row %d, whose attention mask is all 0", i)
	}
	vec := make([]float32, V)
	for v, y := range best {
		vec[v] = float32(y)
	}
	return vec, nil
}
