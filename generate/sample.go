package generate

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/roformer-go/roformer/kernels"
)

// sampleOrGreedy decodes one row per prompt: at each step each row's
// logits, after the repetition penalty, give the next id by argmax
// (greedy) or by a draw from the warped softmax (sampling).
func sampleOrGreedy(ctx context.Context, dec Decoder, logits []float32, prompts [][]int32, opts *Options) (*Result, error) {
	B, V := len(prompts), dec.VocabSize()
	pad := dec.PadID()
	gen := &Result{Sequences: make([][]int32, B)}
	if opts.OutputScores {
		gen.Scores = make([][][]float32, B)
	}
	for r := range gen.Sequences {
		gen.Sequences[r] = slices.Clone(prompts[r])
	}
	done := make([]bool, B)
	var rng *rand.Rand
	if opts.Strategy == Sample {
		rng = rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	}
	seen := make([]bool, V)
	row := make([]float32, V)
	var lp []float64
	if opts.OnStep != nil {
		lp = make([]float64, V)
	}
	for step := 0; ; step++ {
		next := make([]int32, B)
		var toks []StepToken
		if opts.OnStep != nil {
			toks = make([]StepToken, B)
		}
		for r := 0; r < B; r++ {
			if opts.OutputScores {
				row = make([]float32, V)
			}
			copy(row, logits[r*V:r*V+V])
			repetitionPenalty(row, seen, opts.RepetitionPenalty, gen.Sequences[r])
			if rng != nil {
				warp(row, opts)
				next[r] = int32(drawToken(row, rng))
			} else {
				next[r] = int32(kernels.Argmax(row))
			}
			if opts.OutputScores {
				gen.Scores[r] = append(gen.Scores[r], row)
			}
			if done[r] {
				next[r] = pad
			}
			if toks != nil {
				if done[r] {
					toks[r].ID = pad
				} else {
					toks[r] = stepToken(next[r], row, lp, opts.TopLogProbs)
				}
			}
			gen.Sequences[r] = append(gen.Sequences[r], next[r])
			if done[r] {
				continue
			}
			if opts.EOS >= 0 && next[r] == int32(opts.EOS) {
				done[r] = true
			} else if opts.Stop != nil && opts.Stop(r, gen.Sequences[r][len(prompts[r]):]) {
				done[r] = true
			}
		}
		if opts.OnToken != nil {
			if err := opts.OnToken(step, slices.Clone(next)); err != nil {
				if errors.Is(err, ErrStop) {
					return gen, nil
				}
				return nil, err
			}
		}
		if opts.OnStep != nil {
			if err := opts.OnStep(step, toks); err != nil {
				if errors.Is(err, ErrStop) {
					return gen, nil
				}
				return nil, err
			}
		}
		if step+1 == opts.MaxNewTokens || !slices.Contains(done, false) {
			return gen, nil
		}
		var err error
		if logits, err = dec.Step(ctx, next); err != nil {
			return nil, err
		}
	}
}

// repetitionPenalty applies HF's RepetitionPenaltyLogitsProcessor to one
// row of scores: each distinct id of the token lists, once, is divided by
// penalty when positive and multiplied by it otherwise,
//
//	z_v ← z_v / θ  (z_v > 0),   z_v ← z_v · θ  (z_v ≤ 0),
//
// in float32. seen is a [V] scratch of false values, left false.
func repetitionPenalty(row []float32, seen []bool, penalty float64, tokens ...[]int32) {
	if penalty == 1 {
		return
	}
	p := float32(penalty)
	for _, ts := range tokens {
		for _, t := range ts {
			if t < 0 || int(t) >= len(row) || seen[t] {
				continue
			}
			seen[t] = true
			if row[t] < 0 {
				row[t] *= p
			} else {
				row[t] /= p
			}
		}
	}
	for _, ts := range tokens {
		for _, t := range ts {
			if t >= 0 && int(t) < len(row) {
				seen[t] = false
			}
		}
	}
}

// warp applies HF's sampling warpers in their order: temperature (z/T),
// top-k (every id below the k-th best value removed, ties kept), top-p
// (the ids sorted ascending, those whose cumulative probability is
// ≤ 1 − p removed, the best always kept); removed ids get −Inf.
func warp(row []float32, opts *Options) {
	if opts.Temperature != 1 {
		t := float32(opts.Temperature)
		for i := range row {
			row[i] /= t
		}
	}
	ninf := float32(math.Inf(-1))
	if k := opts.TopK; k > 0 && k < len(row) {
		sorted := slices.Clone(row)
		slices.Sort(sorted)
		kth := sorted[len(sorted)-k]
		for i, v := range row {
			if v < kth {
				row[i] = ninf
			}
		}
	}
	if opts.TopP < 1 {
		probs := kernels.Softmax64(row)
		order := make([]int, len(row))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] < row[order[b]] })
		cum := 0.0
		for n, i := range order {
			cum += probs[i]
			if cum <= 1-opts.TopP && n < len(order)-1 {
				row[i] = ninf
			}
		}
	}
}

// drawToken draws an id from softmax(row) with rng: the first id whose
// cumulative probability passes u ~ U[0, 1).
func drawToken(row []float32, rng *rand.Rand) int {
	p := kernels.Softmax64(row)
	u := rng.Float64()
	cum, last := 0.0, 0
	for i, q := range p {
		if q == 0 {
			continue
		}
		cum += q
		last = i
		if u < cum {
			return i
		}
	}
	return last
}
