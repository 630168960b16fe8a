package generate

import "github.com/roformer-go/roformer/kernels"

// TokenLogProb is an id with its log-probability under the distribution
// that a step chose from.
type TokenLogProb struct {
	ID      int32
	LogProb float64
}

// StepToken is one row's step as Options.OnStep sees it: the chosen id and
// its log-probability, and the Options.TopLogProbs most likely ids.
//
// The distribution is the softmax of the scores the id was chosen from,
// after the logits processors, as text-generation-inference reports it:
// the repetition-penalised logits for greedy decoding, the warped ones
// (temperature, then top-k and top-p, whose removed ids have
// log-probability −Inf) for sampling,
//
//	log p_v = z'_v − log Σ_u exp(z'_u),
//
// in float64 (kernels.LogSoftmax64). A row that had already finished gets
// the pad id with log-probability 0 and no top ids.
type StepToken struct {
	TokenLogProb
	// Top are the most likely ids, best first, the lower id first among
	// equal log-probabilities.
	Top []TokenLogProb
}

// stepToken fills the StepToken of id chosen from scores, with lp a [V]
// scratch.
func stepToken(id int32, scores []float32, lp []float64, top int) StepToken {
	kernels.LogSoftmax64(lp, scores)
	return StepToken{TokenLogProb: TokenLogProb{ID: id, LogProb: lp[id]}, Top: topLogProbs(lp, top)}
}

// topLogProbs returns the n largest entries of lp, best first, the lower
// index first among ties, in O(V·n) (n is small: a server bounds it).
func topLogProbs(lp []float64, n int) []TokenLogProb {
	n = min(n, len(lp))
	if n <= 0 {
		return nil
	}
	top := make([]TokenLogProb, 0, n)
	for v, x := range lp {
		if len(top) == n && !(x > top[n-1].LogProb) {
			continue
		}
		i := len(top)
		if i < n {
			top = append(top, TokenLogProb{})
		} else {
			i = n - 1
		}
		for ; i > 0 && x > top[i-1].LogProb; i-- {
			top[i] = top[i-1]
		}
		top[i] = TokenLogProb{ID: int32(v), LogProb: x}
	}
	return top
}
