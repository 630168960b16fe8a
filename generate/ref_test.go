package generate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
)

// refBeamSearch is the beam search that the partial selection replaced,
// kept as the reference: model/roformer's former beamSearch over a Decoder,
// sorting all K·V candidates of a prompt at every step (its log-softmax
// written out as it was).
func refBeamSearch(dec Decoder, prompts [][]int32, o Options) (*Result, error) {
	ctx := context.Background()
	if err := o.Validate(dec.VocabSize()); err != nil {
		return nil, err
	}
	logits, err := dec.Prefill(ctx, prompts, Room{Beams: o.Beams(), NewTokens: o.MaxNewTokens})
	if err != nil {
		return nil, err
	}
	opts := &o
	B, K, V := len(prompts), opts.NumBeams, dec.VocabSize()
	pad := dec.PadID()
	idx := make([]int, B*K)
	exp := make([]float32, B*K*V)
	scores := make([]float64, B*K)
	for i := range idx {
		idx[i] = i / K
		copy(exp[i*V:i*V+V], logits[(i/K)*V:(i/K)*V+V])
		if i%K != 0 {
			scores[i] = -1e9
		}
	}
	dec.Reorder(idx)
	logits = exp
	length := func(b, ids int, eos bool) int {
		if opts.Length == LengthGNMT {
			if eos {
				return ids + 1
			}
			return ids
		}
		return len(prompts[b]) + ids
	}
	hyps := make([]*hypotheses, B)
	for b := range hyps {
		hyps[b] = &hypotheses{numBeams: K, alpha: opts.LengthPenalty, norm: opts.Length, early: opts.EarlyStopping, maxLength: length(b, opts.MaxNewTokens, false), worst: 1e9}
	}
	done := make([]bool, B)
	seqs := make([][]int32, B*K)
	seen := make([]bool, V)
	type cand struct {
		score float64
		flat  int
	}
	for step := 0; ; step++ {
		next := make([]int32, B*K)
		nextScores := make([]float64, B*K)
		for b := 0; b < B; b++ {
			curLen := length(b, step, false)
			if done[b] {
				for k := 0; k < K; k++ {
					i := b*K + k
					next[i], nextScores[i], idx[i] = pad, 0, i
				}
				continue
			}
			cands := make([]cand, 0, K*V)
			for k := 0; k < K; k++ {
				i := b*K + k
				lp := refLogSoftmax(slices.Clone(logits[i*V : i*V+V]))
				lp32 := make([]float32, V)
				for j, x := range lp {
					lp32[j] = float32(x)
				}
				repetitionPenalty(lp32, seen, opts.RepetitionPenalty, prompts[b], seqs[i])
				for j, x := range lp32 {
					cands = append(cands, cand{float64(x) + scores[i], k*V + j})
				}
			}
			sort.SliceStable(cands, func(x, y int) bool { return cands[x].score > cands[y].score })
			cands = cands[:min(2*K, len(cands))]
			nb := 0
			for rank, c := range cands {
				i, tok := b*K+c.flat/V, int32(c.flat%V)
				if opts.EOS >= 0 && tok == int32(opts.EOS) {
					if rank >= K {
						continue
					}
					hyps[b].add(slices.Clone(seqs[i]), c.score, length(b, len(seqs[i]), true), true)
				} else {
					j := b*K + nb
					next[j], nextScores[j], idx[j] = tok, c.score, i
					nb++
				}
				if nb == K {
					break
				}
			}
			if nb < K {
				return nil, fmt.Errorf("%d continuations for %d beams", nb, K)
			}
			done[b] = done[b] || hyps[b].isDone(cands[0].score, curLen)
		}
		ns := make([][]int32, B*K)
		for i, j := range idx {
			ns[i] = append(slices.Clone(seqs[j]), next[i])
		}
		seqs, scores = ns, nextScores
		if step+1 == opts.MaxNewTokens || !slices.Contains(done, false) {
			break
		}
		dec.Reorder(idx)
		if logits, err = dec.Step(ctx, next); err != nil {
			return nil, err
		}
	}
	gen := &Result{Sequences: make([][]int32, B), BeamScores: make([]float64, B)}
	for b := 0; b < B; b++ {
		if !done[b] {
			for k := 0; k < K; k++ {
				i := b*K + k
				hyps[b].add(seqs[i], scores[i], length(b, len(seqs[i]), false), false)
			}
		}
		best := 0
		for i, h := range hyps[b].beams {
			if h.score > hyps[b].beams[best].score {
				best = i
			}
		}
		h := hyps[b].beams[best]
		seq := append(slices.Clone(prompts[b]), h.ids...)
		if h.eos {
			seq = append(seq, int32(opts.EOS))
		}
		gen.Sequences[b], gen.BeamScores[b] = seq, h.score
	}
	return gen, nil
}

// refLogSoftmax is model/roformer's former logSoftmax.
func refLogSoftmax(row []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	sum := 0.0
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	out := make([]float64, len(row))
	for i, v := range row {
		out[i] = float64(v) - lse
	}
	return out
}
