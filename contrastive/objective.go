package contrastive

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kind names a loss.
type Kind string

const (
	KindMNRL   Kind = "mnrl"   // MultipleNegativesRankingLoss: anchors, positives, optional hard negatives
	KindCoSENT Kind = "cosent" // CoSENTLoss: scored pairs
)

// DefaultScale is sentence-transformers' scale of both losses (the inverse
// temperature of the cosine).
const DefaultScale = 20

// Objective is the loss of a contrastive step: Kind on the full vectors,
// or, with Dims (MatryoshkaLoss), the sum over the truncations Dims of the
// loss on each row's first Dims[k] values, weighted by Weights[k] (1 when
// Weights is nil). Each truncated vector is normalized anew inside the
// cosine, as sentence-transformers' shrink does.
type Objective struct {
	Kind      Kind
	Scale     float64
	Symmetric bool      // MNRL: add the positive→anchor direction
	Dims      []int     // Matryoshka truncations; nil: the full vector only
	Weights   []float64 // one per Dims entry; nil: all 1
}

// Validate checks o for vectors of dim values.
func (o *Objective) Validate(dim int) error {
	switch o.Kind {
	case KindMNRL, KindCoSENT:
	default:
		return fmt.Errorf("contrastive: unknown loss %q (want %s or %s)", o.Kind, KindMNRL, KindCoSENT)
	}
	if o.Symmetric && o.Kind != KindMNRL {
		return fmt.Errorf("contrastive: the symmetric option is MNRL's, not %s's", o.Kind)
	}
	if !(o.Scale > 0) || o.Scale > 1e4 {
		return fmt.Errorf("contrastive: scale %v must lie in (0, 10000]", o.Scale)
	}
	if o.Weights != nil && len(o.Weights) != len(o.Dims) {
		return fmt.Errorf("contrastive: %d Matryoshka weights for %d dimensions", len(o.Weights), len(o.Dims))
	}
	for _, d := range o.Dims {
		if d < 1 || d > dim {
			return fmt.Errorf("contrastive: Matryoshka dimension %d must lie in [1, %d] (the vector size)", d, dim)
		}
	}
	return nil
}

// MatryoshkaDims returns the truncations given as a comma-separated list
// ("768,256,64"), sorted from the largest, as MatryoshkaLoss sorts them;
// an empty s gives the default: dim, then each of 512, 256, 128 and 64 that
// is smaller than dim.
func MatryoshkaDims(s string, dim int) ([]int, error) {
	var dims []int
	if strings.TrimSpace(s) == "" {
		dims = []int{dim}
		for _, d := range []int{512, 256, 128, 64} {
			if d < dim {
				dims = append(dims, d)
			}
		}
		return dims, nil
	}
	for _, f := range strings.Split(s, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 1 || d > dim {
			return nil, fmt.Errorf("contrastive: Matryoshka dimension %q must be a whole number in [1, %d] (the vector size)", strings.TrimSpace(f), dim)
		}
		dims = append(dims, d)
	}
	slices.SortStableFunc(dims, func(x, y int) int { return y - x })
	return dims, nil
}

// terms returns the truncations and their weights: the full vector alone
// without Dims.
func (o *Objective) terms(dim int) (dims []int, weights []float64) {
	if len(o.Dims) == 0 {
		return []int{dim}, []float64{1}
	}
	weights = o.Weights
	if weights == nil {
		weights = make([]float64, len(o.Dims))
		for i := range weights {
			weights[i] = 1
		}
	}
	return o.Dims, weights
}

// Forward returns the loss of the pooled vectors cols, each [B, dim]: for
// MNRL cols[0] the anchors, cols[1] the positives and cols[2:] columns of
// hard negatives; for CoSENT the two sentences of each pair, with labels
// [B] their gold scores.
func (o *Objective) Forward(cols [][]float32, labels []float64, B, dim int) float64 {
	return o.run(nil, cols, labels, B, dim)
}

// Backward adds the gradient of Forward's loss into dcols (each [B, dim],
// shaped as cols) and returns the loss.
func (o *Objective) Backward(dcols, cols [][]float32, labels []float64, B, dim int) float64 {
	return o.run(dcols, cols, labels, B, dim)
}

func (o *Objective) run(dcols, cols [][]float32, labels []float64, B, dim int) float64 {
	dims, weights := o.terms(dim)
	var a, c, da, dc []float32
	M := 0
	if o.Kind == KindMNRL {
		// The candidates, one [M, dim] block: positives then negatives.
		a, M = cols[0], B*(len(cols)-1)
		c = slices.Concat(cols[1:]...)
		if dcols != nil {
			da, dc = dcols[0], make([]float32, M*dim)
		}
	}
	loss := 0.0
	for k, d := range dims {
		w := weights[k]
		switch {
		case o.Kind == KindCoSENT && dcols == nil:
			loss += w * CoSENTForward(cols[0], cols[1], labels, B, dim, d, o.Scale)
		case o.Kind == KindCoSENT:
			loss += w * CoSENTBackward(dcols[0], dcols[1], cols[0], cols[1], labels, B, dim, d, o.Scale, w)
		case dcols == nil:
			loss += w * MNRLForward(a, c, B, M, dim, d, o.Scale, o.Symmetric)
		default:
			loss += w * MNRLBackward(da, dc, a, c, B, M, dim, d, o.Scale, o.Symmetric, w)
		}
	}
	if o.Kind == KindMNRL && dcols != nil {
		for k, dst := range dcols[1:] {
			for i, g := range dc[k*B*dim : (k+1)*B*dim] {
				dst[i] += g
			}
		}
	}
	return loss
}
