package generate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/roformer-go/roformer/kernels"
)

// hypotheses is HF's BeamHypotheses: the NumBeams best finished
// hypotheses of one prompt.
type hypotheses struct {
	numBeams  int
	alpha     float64 // the length penalty's exponent
	norm      LengthNorm
	early     EarlyStopping
	maxLength int // the length at MaxNewTokens
	beams     []hypothesis
	worst     float64
}

type hypothesis struct {
	score float64
	ids   []int32 // the new ids, without the EOS
	eos   bool
}

// penalty is lp(n): n^α (LengthHF) or ((5+n)/6)^α (LengthGNMT).
func (h *hypotheses) penalty(n int) float64 {
	if h.norm == LengthGNMT {
		return math.Pow((5+float64(n))/6, h.alpha)
	}
	return math.Pow(float64(n), h.alpha)
}

// add keeps a hypothesis of summed log-probabilities sum and length n
// when it is among the numBeams best.
func (h *hypotheses) add(ids []int32, sum float64, n int, eos bool) {
	score := sum / h.penalty(n)
	if len(h.beams) < h.numBeams || score > h.worst {
		h.beams = append(h.beams, hypothesis{score, ids, eos})
		if len(h.beams) > h.numBeams {
			order := make([]int, len(h.beams))
			for i := range order {
				order[i] = i
			}
			sort.SliceStable(order, func(a, b int) bool { return h.beams[order[a]].score < h.beams[order[b]].score })
			h.worst = h.beams[order[1]].score
			h.beams = slices.Delete(h.beams, order[0], order[0]+1)
		} else {
			h.worst = min(score, h.worst)
		}
	}
}

// isDone is BeamHypotheses.is_done: best is the best running sum of
// log-probabilities, curLen the current length.
func (h *hypotheses) isDone(best float64, curLen int) bool {
	if len(h.beams) < h.numBeams {
		return false
	}
	switch h.early {
	case EarlyStopOnBeams:
		return true
	case EarlyStopNever:
		if h.alpha > 0 {
			return h.worst >= best/h.penalty(h.maxLength)
		}
	}
	return h.worst >= best/h.penalty(curLen)
}

// candidate is a continuation of a prompt's beams: score s_k + log p_v at
// flat = k·V + v.
type candidate struct {
	score float64
	flat  int
}

// worse orders candidates as a stable sort by descending score over the
// flat order does: a is worse than b when its score is lower, or equal
// with a later flat index.
func worse(a, b candidate) bool {
	return a.score < b.score || (a.score == b.score && a.flat > b.flat)
}

// topCandidates keeps the n best of the candidates offered in increasing
// flat order, in a binary heap whose root is the worst kept, and gives
// them best first: the first n of a stable sort of all of them by
// descending score, in O(K·V·log n) instead of O(K·V·log(K·V)).
type topCandidates struct {
	n    int
	heap []candidate
}

func (t *topCandidates) reset(n int) { t.n, t.heap = n, t.heap[:0] }

// offer considers c, whose flat index is above every earlier one's.
func (t *topCandidates) offer(c candidate) {
	h := t.heap
	if len(h) < t.n {
		h = append(h, c)
		for i := len(h) - 1; i > 0; { // sift up
			p := (i - 1) / 2
			if !worse(h[i], h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
		t.heap = h
		return
	}
	// Equal scores lose to the kept ones: they come later in flat order.
	if t.n == 0 || !(c.score > h[0].score) {
		return
	}
	h[0] = c
	for i := 0; ; { // sift down
		l, r, w := 2*i+1, 2*i+2, i
		if l < len(h) && worse(h[l], h[w]) {
			w = l
		}
		if r < len(h) && worse(h[r], h[w]) {
			w = r
		}
		if w == i {
			break
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// sorted returns the kept candidates best first (ties: lower flat first).
func (t *topCandidates) sorted() []candidate {
	out := slices.Clone(t.heap)
	slices.SortFunc(out, func(a, b candidate) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	return out
}

// beamSearch is HF 4.30.2's beam_search with its BeamSearchScorer
// (num_return_sequences 1): each step scores every beam's log-softmax
// (float64, rounded to float32 for the repetition penalty, which sees
// log-probabilities in beam search) plus the beam's sum,
//
//	s'_{k,v} = s_k + float32(log softmax(z_k)_v)',
//
// takes the 2·K best continuations of each prompt (ties: the lower beam,
// then the lower id), files those ending in EOS (ranked below K) as
// finished hypotheses and keeps the K best others; the decoder's rows
// follow the beams they continue. With opts.Length LengthGNMT and
// EarlyStopOnBeams it is fairseq's sequence generator (Vaswani et al.'s
// beam search).
func beamSearch(ctx context.Context, dec Decoder, logits []float32, prompts [][]int32, opts *Options) (*Result, error) {
	B, K, V := len(prompts), opts.NumBeams, dec.VocabSize()
	pad := dec.PadID()
	// Expand each prompt into K beams; only beam 0 competes at the first
	// step (the others start at −1e9).
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
	// length is a hypothesis's n: LengthHF counts the prompt, not the EOS;
	// LengthGNMT the new ids with the EOS.
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
		hyps[b] = &hypotheses{numBeams: K, alpha: opts.LengthPenalty, norm: opts.Length, early: opts.EarlyStopping,
			maxLength: length(b, opts.MaxNewTokens, false), worst: 1e9}
	}
	done := make([]bool, B)
	seqs := make([][]int32, B*K) // the new ids of each beam
	seen := make([]bool, V)
	lp := make([]float64, V)
	lp32 := make([]float32, V)
	var top topCandidates
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
			top.reset(min(2*K, K*V))
			for k := 0; k < K; k++ {
				i := b*K + k
				kernels.LogSoftmax64(lp, logits[i*V:i*V+V])
				for j, x := range lp {
					lp32[j] = float32(x)
				}
				repetitionPenalty(lp32, seen, opts.RepetitionPenalty, prompts[b], seqs[i])
				for j, x := range lp32 {
					top.offer(candidate{float64(x) + scores[i], k*V + j})
				}
			}
			cands := top.sorted()
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
				return nil, fmt.Errorf("generate: beam search found %d continuations for %d beams (the vocabulary of %d is too small)", nb, K, V)
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
		var err error
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
