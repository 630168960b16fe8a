package pipeline

import (
	"errors"
	"fmt"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/sentence"
)

// Vectorizer makes one vector per row of a forward pass: what follows the
// transformer in a sentence-transformers folder. It pools the last hidden
// state (sentence.Pooling's modes) or takes the model's pooler, then runs
// the folder's Dense and Normalize modules in order. Build one with
// EmbedOptions.WithDefaults (EmbedOptions.Vectorizer); it is read-only and
// safe for concurrent use.
type Vectorizer struct {
	Pooler  bool             // the model's pooler (RoFormer-Sim) instead of Pooling
	Pooling sentence.Pooling // the modes over the last hidden state
	Steps   []sentence.Step  // the folder's Dense and Normalize modules after the pooling
}

// newVectorizer returns the vectorizer of the resolved pooling p over H
// values, followed by steps. The steps must take the pooling's output: a
// Dense module's in_features equal to the values before it.
func newVectorizer(p Pooling, H int, steps []sentence.Step) (*Vectorizer, error) {
	v := &Vectorizer{Steps: steps}
	switch p {
	case PoolPooler:
		v.Pooler = true
	case PoolDefault:
		return nil, fmt.Errorf("pipeline: pooling %q is not resolved", p)
	default:
		var err error
		if v.Pooling, err = sentence.ParseModes(string(p), H); err != nil {
			return nil, err
		}
	}
	d := v.poolDim(H)
	for i, s := range steps {
		if s.Dense != nil {
			if s.Dense.In != d {
				return nil, fmt.Errorf("pipeline: pooling %q gives %d values, but the folder's Dense module %d takes %d (in_features)", p, d, i, s.Dense.In)
			}
			d = s.Dense.Out
		}
	}
	return v, nil
}

func (v *Vectorizer) poolDim(H int) int {
	if v.Pooler {
		return H
	}
	return v.Pooling.OutDim()
}

// Dim returns the length of the vectors for a model of hidden size H.
func (v *Vectorizer) Dim(H int) int {
	d := v.poolDim(H)
	for _, s := range v.Steps {
		if s.Dense != nil {
			d = s.Dense.Out
		}
	}
	return d
}

// Normalizes says whether the vectors come out with unit length (the last
// step is Normalize).
func (v *Vectorizer) Normalizes() bool {
	return len(v.Steps) > 0 && v.Steps[len(v.Steps)-1].IsNormalize()
}

// Vector returns row i's vector of a forward pass over B rows of T
// positions: out.LastHiddenState [B, T, H], mask [T] row i's attention
// mask, skip the leading positions the pooling leaves out (a prompt's, when
// the folder's pooling does not include the prompt; see EmbedRow.Skip).
func (v *Vectorizer) Vector(out *roformer.Output, mask []int32, i, skip int) ([]float32, error) {
	hs := out.LastHiddenState
	T, H := hs.Shape[1], hs.Shape[2]
	var vec []float32
	if v.Pooler {
		if out.PoolerOutput == nil {
			return nil, errors.New("pipeline: the model has no pooler")
		}
		vec = append([]float32(nil), out.PoolerOutput.Data[i*H:(i+1)*H]...)
	} else {
		if v.Pooling.Dim != H {
			return nil, fmt.Errorf("pipeline: the pooling is over %d values, the model's hidden size is %d", v.Pooling.Dim, H)
		}
		if (v.Pooling.Mean || v.Pooling.MeanSqrtLen || v.Pooling.WeightedMean) && !anyOn(mask, skip) && skip == 0 {
			return nil, fmt.Errorf("pipeline: pooling %s of row %d, whose attention mask is all 0", v.Pooling.Modes(), i)
		}
		vec = v.Pooling.Pool(hs.Data[i*T*H:(i+1)*T*H], mask, T, skip)
	}
	for _, s := range v.Steps {
		if s.Dense != nil {
			vec = s.Dense.Forward(vec)
		} else {
			sentence.Normalize(vec)
		}
	}
	return vec, nil
}

func anyOn(mask []int32, skip int) bool {
	for t := skip; t < len(mask); t++ {
		if mask[t] != 0 {
			return true
		}
	}
	return false
}
