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
	s := newSearch(dec, prompts, opts)
	logits = s.expand(dec, logits)
	for step := 0; ; step++ {
		s.next, s.nextScores = make([]int32, s.B*s.K), make([]float64, s.B*s.K)
		for b := 0; b < s.B; b++ {
			if err := s.choose(b, step, logits); err != nil {
				return nil, err
			}
		}
		ns := make([][]int32, s.B*s.K)
		for i, j := range s.idx {
			ns[i] = append(slices.Clone(s.seqs[j]), s.next[i])
		}
		s.seqs, s.scores = ns, s.nextScores
		if step+1 == opts.MaxNewTokens || !slices.Contains(s.done, false) {
			break
		}
		dec.Reorder(s.idx)
		var err error
		if logits, err = dec.Step(ctx, s.next); err != nil {
			return nil, err
		}
	}
	return s.result(), nil
}

// search is the state of a beam search over B prompts of K beams: row
// b·K+k of the decoder is prompt b's beam k.
type search struct {
	opts    *Options
	prompts [][]int32
	B, K, V int
	pad     int32
	hyps    []*hypotheses
	done    []bool
	seqs    [][]int32 // the new ids of each beam
	scores  []float64 // each beam's summed log-probabilities
	// a step's choice: the next id of each beam, its sum, and the beam it
	// continues
	next       []int32
	nextScores []float64
	idx        []int
	// scratch
	seen []bool
	lp   []float64
	lp32 []float32
	top  topCandidates
}

func newSearch(dec Decoder, prompts [][]int32, opts *Options) *search {
	B, K, V := len(prompts), opts.NumBeams, dec.VocabSize()
	s := &search{opts: opts, prompts: prompts, B: B, K: K, V: V, pad: dec.PadID(),
		hyps: make([]*hypotheses, B), done: make([]bool, B), seqs: make([][]int32, B*K), scores: make([]float64, B*K),
		idx: make([]int, B*K), seen: make([]bool, V), lp: make([]float64, V), lp32: make([]float32, V)}
	for b := range s.hyps {
		s.hyps[b] = &hypotheses{numBeams: K, alpha: opts.LengthPenalty, norm: opts.Length, early: opts.EarlyStopping,
			maxLength: s.length(b, opts.MaxNewTokens, false), worst: 1e9}
	}
	return s
}

// length is a hypothesis's n: LengthHF counts the prompt, not the EOS;
// LengthGNMT the new ids with the EOS.
func (s *search) length(b, ids int, eos bool) int {
	if s.opts.Length == LengthGNMT {
		if eos {
			return ids + 1
		}
		return ids
	}
	return len(s.prompts[b]) + ids
}

// expand makes each prompt K beams, the decoder's rows and the logits
// with them; only beam 0 competes at the first step (the others start at
// −1e9).
func (s *search) expand(dec Decoder, logits []float32) []float32 {
	K, V := s.K, s.V
	exp := make([]float32, s.B*K*V)
	for i := range s.idx {
		s.idx[i] = i / K
		copy(exp[i*V:i*V+V], logits[(i/K)*V:(i/K)*V+V])
		if i%K != 0 {
			s.scores[i] = -1e9
		}
	}
	dec.Reorder(s.idx)
	return exp
}

// choose makes prompt b's step: its 2·K best candidates, the EOS ones
// ranked below K filed as hypotheses, the K best others the next beams
// (next, nextScores, idx); a done prompt's beams get the pad id.
func (s *search) choose(b, step int, logits []float32) error {
	K, V, opts := s.K, s.V, s.opts
	if s.done[b] {
		for k := 0; k < K; k++ {
			i := b*K + k
			s.next[i], s.nextScores[i], s.idx[i] = s.pad, 0, i
		}
		return nil
	}
	s.top.reset(min(2*K, K*V))
	for k := 0; k < K; k++ {
		i := b*K + k
		kernels.LogSoftmax64(s.lp, logits[i*V:i*V+V])
		for j, x := range s.lp {
			s.lp32[j] = float32(x)
		}
		repetitionPenalty(s.lp32, s.seen, opts.RepetitionPenalty, s.prompts[b], s.seqs[i])
		for j, x := range s.lp32 {
			s.top.offer(candidate{float64(x) + s.scores[i], k*V + j})
		}
	}
	cands := s.top.sorted()
	nb := 0
	for rank, c := range cands {
		i, tok := b*K+c.flat/V, int32(c.flat%V)
		if opts.EOS >= 0 && tok == int32(opts.EOS) {
			if rank >= K {
				continue
			}
			s.hyps[b].add(slices.Clone(s.seqs[i]), c.score, s.length(b, len(s.seqs[i]), true), true)
		} else {
			j := b*K + nb
			s.next[j], s.nextScores[j], s.idx[j] = tok, c.score, i
			nb++
		}
		if nb == K {
			break
		}
	}
	if nb < K {
		return fmt.Errorf("generate: beam search found %d continuations for %d beams (the vocabulary of %d is too small)", nb, K, V)
	}
	s.done[b] = s.hyps[b].isDone(cands[0].score, s.length(b, step, false))
	return nil
}

// result files the running beams of the prompts not done and returns
// each prompt's best hypothesis (the first among equal scores).
func (s *search) result() *Result {
	gen := &Result{Sequences: make([][]int32, s.B), BeamScores: make([]float64, s.B)}
	for b := 0; b < s.B; b++ {
		if !s.done[b] {
			for k := 0; k < s.K; k++ {
				i := b*s.K + k
				s.hyps[b].add(s.seqs[i], s.scores[i], s.length(b, len(s.seqs[i]), false), false)
			}
		}
		best := 0
		for i, h := range s.hyps[b].beams {
			if h.score > s.hyps[b].beams[best].score {
				best = i
			}
		}
		h := s.hyps[b].beams[best]
		seq := append(slices.Clone(s.prompts[b]), h.ids...)
		if h.eos {
			seq = append(seq, int32(s.opts.EOS))
		}
		gen.Sequences[b], gen.BeamScores[b] = seq, h.score
	}
	return gen
}
