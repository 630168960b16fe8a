package roformer

import (
	"context"
	"errors"
	"fmt"
	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/kernels"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Decoding modes of Generate.
const (
	// DecodeCausal is Hugging Face's RoFormerForCausalLM.generate: the
	// prompt under the causal mask, then one token at a time.
	DecodeCausal = "causal"
	// DecodeUniLM is RoFormer-Sim's generation: the prompt encoded
	// bidirectionally with token type 0, each new token with type 1,
	// seeing the whole prompt and the new tokens up to itself.
	DecodeUniLM = "unilm"
)

// Decoding strategies of Generate.
const (
	StrategyGreedy = "greedy" // the best id at every step (the default)
	StrategySample = "sample" // HF's do_sample=True: temperature, top-k, top-p
	StrategyBeam   = "beam"   // HF's beam search (num_beams > 1, do_sample=False)
)

// EarlyStopping is HF's early_stopping of beam search.
type EarlyStopping int

const (
	// EarlyStopHeuristic is HF's early_stopping=False (its default): a
	// prompt is done once num_beams hypotheses are finished and the best
	// running beam, length-normalised at the current length, cannot beat
	// the worst of them.
	EarlyStopHeuristic EarlyStopping = iota
	// EarlyStopOnBeams is early_stopping=True: done as soon as num_beams
	// hypotheses are finished.
	EarlyStopOnBeams
	// EarlyStopNever is early_stopping="never": done only when no running
	// beam can still beat the worst finished hypothesis at any length up
	// to the maximum (the exact rule).
	EarlyStopNever
)

// ErrStopGeneration, returned by GenerateOptions.OnToken, ends generation
// early without an error: Generate returns the ids decoded so far.
var ErrStopGeneration = errors.New("roformer: generation stopped by the callback")

// GenerateOptions says how Generate decodes.
type GenerateOptions struct {
	Mode         string // DecodeCausal (default) or DecodeUniLM
	MaxNewTokens int    // tokens to add to each prompt (> 0)
	// EOS, when ≥ 0, ends a row at that id: later steps give the row the
	// pad id (as HF's generate does), and decoding stops once every row
	// has ended. In beam search an EOS finishes a hypothesis.
	EOS int

	// Strategy is StrategyGreedy (""), StrategySample or StrategyBeam.
	Strategy string

	// Sampling (StrategySample), applied in HF's order after the
	// repetition penalty: logits / Temperature, then top-k, then top-p,
	// then a draw from the softmax.
	Temperature float64 // > 0 (1: the model's own distribution)
	TopK        int     // keep the TopK best ids (0: all)
	TopP        float64 // keep the smallest set of best ids with probability ≥ TopP, in (0, 1]; 0 means 1 (off)
	// Seed seeds the deterministic random stream of the draws: the same
	// seed, model and options give the same ids.
	Seed uint64

	// Beam search (StrategyBeam): NumBeams ≥ 1 beams per prompt; a
	// finished hypothesis scores its summed log-probabilities divided by
	// length^LengthPenalty, the length counting the prompt and excluding
	// the EOS (HF 4.30.2's BeamSearchScorer; HF's default penalty is 1,
	// the zero value here is 0: no normalisation).
	NumBeams      int
	LengthPenalty float64
	EarlyStopping EarlyStopping

	// RepetitionPenalty, when not 0 or 1, is HF's repetition_penalty: the
	// logit of every id already in the row (prompt or generated) is
	// divided by it when positive and multiplied by it when negative. It
	// must be > 0.
	RepetitionPenalty float64

	// Pad lets prompts have different lengths: they are left-padded to
	// the longest, the pad tokens are never attended to (in the prompt
	// pass nor from the cache), and each row counts its positions from
	// its first real token (HF's position_ids = cumsum(attention_mask) −
	// 1), so every row decodes as it would alone. Without Pad, prompts
	// must have equal lengths.
	Pad bool

	// OnToken, when set, sees every step's new ids as they are chosen
	// ([B], a finished row's id is the pad id), in order; an error stops
	// generation and is returned (ErrStopGeneration: Generate returns the
	// ids so far and no error). Not with beam search, whose ids are final
	// only at the end.
	OnToken func(step int, ids []int32) error
}

// Generation is what Generate returns.
type Generation struct {
	// Sequences are the prompts (without padding) followed by the new ids,
	// [B][L_b + steps]. Beam search gives each prompt its best hypothesis,
	// ended by the EOS when it finished with one (rows may then differ in
	// length).
	Sequences [][]int32
	// Scores are the processed logits each new id was chosen from,
	// [B][steps][V]: the raw logits for greedy (after the repetition
	// penalty), the warped ones for sampling (HF's output scores); nil for
	// beam search.
	Scores [][][]float32
	// BeamScores are the best hypotheses' length-normalised scores (HF's
	// sequences_scores), beam search only.
	BeamScores []float64
}

// kvCache holds each layer's rotated keys and values of the tokens decoded
// so far, [B, capacity, H] per layer; n tokens are filled. mask [B,
// capacity] is 1 for a real token and 0 for a pad, which no query sees.
type kvCache struct {
	B, cap, n int
	k, v      [][]float32
	mask      []float32
	// pending is the attention mask [B·T] of the tokens being stored (nil:
	// all real), set by decodeStep.
	pending []int32
	// step is the workspace of the one-token steps, reused from step to
	// step (a new State a token allocated every layer's buffers again).
	step *State
}

func (m *Model) newKVCache(B, capacity int) *kvCache {
	H, L := m.Config.HiddenSize, m.Config.NumHiddenLayers
	c := &kvCache{B: B, cap: capacity, k: make([][]float32, L), v: make([][]float32, L), mask: make([]float32, B*capacity)}
	for l := range c.k {
		c.k[l], c.v[l] = make([]float32, B*capacity*H), make([]float32, B*capacity*H)
	}
	return c
}

// store copies layer l's keys and values of T new tokens ([B, T, H],
// rotated) after the n cached ones, and their mask.
func (c *kvCache) store(l int, k, v []float32, T, H int) {
	for b := 0; b < c.B; b++ {
		dst := (b*c.cap + c.n) * H
		copy(c.k[l][dst:dst+T*H], k[b*T*H:(b+1)*T*H])
		copy(c.v[l][dst:dst+T*H], v[b*T*H:(b+1)*T*H])
		if l == 0 {
			for i := 0; i < T; i++ {
				mk := float32(1)
				if c.pending != nil && c.pending[b*T+i] == 0 {
					mk = 0
				}
				c.mask[b*c.cap+c.n+i] = mk
			}
		}
	}
}

// reorder makes row i of the cache the old row idx[i] (beam search: the
// beam each new beam continues; also the expansion of B prompts into
// B·beams rows).
func (c *kvCache) reorder(idx []int) {
	if len(idx) == c.B {
		same := true
		for i, j := range idx {
			same = same && i == j
		}
		if same {
			return
		}
	}
	H := len(c.k[0]) / (c.B * c.cap)
	gather := func(src []float32, w int) []float32 {
		dst := make([]float32, len(idx)*c.cap*w)
		for i, j := range idx {
			copy(dst[i*c.cap*w:(i+1)*c.cap*w], src[j*c.cap*w:(j+1)*c.cap*w])
		}
		return dst
	}
	for l := range c.k {
		c.k[l], c.v[l] = gather(c.k[l], H), gather(c.v[l], H)
	}
	c.mask = gather(c.mask, 1)
	c.B = len(idx)
}

// attend computes ctx [B, T, H] for T new queries q [B, T, H] (rotated)
// against layer l's n+T cached keys and values: new token i, at cache slot
// n+i, sees every unpadded key up to its own slot.
func (c *kvCache) attend(l int, ctx, q []float32, T, NH, HS int) {
	H := NH * HS
	N := c.n + T
	scale := float32(1 / math.Sqrt(float64(HS)))
	// One (row, head) pair per task: the scores of its T queries against
	// the N keys, then their softmax-weighted values, as two products.
	kernels.ParallelFor(c.B*NH, 1, func(lo, hi int) {
		scores := make([]float32, T*N)
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			kb := c.k[l][b*c.cap*H+h*HS:]
			vb := c.v[l][b*c.cap*H+h*HS:]
			blas.Sgemm(false, true, T, N, HS, scale, q[b*T*H+h*HS:], H, kb, H, 0, scores, N)
			mask := c.mask[b*c.cap : b*c.cap+N]
			for i := 0; i < T; i++ {
				row := scores[i*N : i*N+N]
				last := c.n + i // token i sees the keys up to its own position, pads excluded
				mx := float32(math.Inf(-1))
				for j := 0; j <= last; j++ {
					if mask[j] != 0 || j == last {
						mx = max(mx, row[j])
					}
				}
				sum := 0.0
				for j := range row {
					if j > last || (mask[j] == 0 && j != last) {
						row[j] = 0
						continue
					}
					e := math.Exp(float64(row[j] - mx))
					row[j] = float32(e)
					sum += e
				}
				inv := float32(1 / sum)
				for j := 0; j <= last; j++ {
					row[j] *= inv
				}
			}
			blas.Sgemm(false, false, T, HS, N, 1, scores, N, vb, H, 0, ctx[b*T*H+h*HS:], H)
		}
	})
}

// checkOptions validates opts (after defaults) for Generate.
func (m *Model) checkOptions(opts *GenerateOptions) error {
	cfg := &m.Config
	if m.LM == nil {
		return fmt.Errorf("roformer: generation needs an LM head, not %s", m.Head)
	}
	if opts.Mode == "" {
		opts.Mode = DecodeCausal
	}
	if opts.Mode != DecodeCausal && opts.Mode != DecodeUniLM {
		return fmt.Errorf("roformer: decoding mode %q is not %s or %s", opts.Mode, DecodeCausal, DecodeUniLM)
	}
	if opts.Strategy == "" {
		opts.Strategy = StrategyGreedy
	}
	switch opts.Strategy {
	case StrategyGreedy:
	case StrategySample:
		if !(opts.Temperature > 0) || math.IsInf(opts.Temperature, 0) {
			return fmt.Errorf("roformer: temperature %g must be a positive number when sampling (1 samples from the model's distribution)", opts.Temperature)
		}
		if opts.TopK < 0 {
			return fmt.Errorf("roformer: top_k %d must be ≥ 0 (0 keeps every id)", opts.TopK)
		}
		if opts.TopP == 0 {
			opts.TopP = 1
		}
		if !(opts.TopP > 0 && opts.TopP <= 1) {
			return fmt.Errorf("roformer: top_p %g is outside (0, 1]", opts.TopP)
		}
	case StrategyBeam:
		if opts.NumBeams < 1 {
			return fmt.Errorf("roformer: num_beams %d must be at least 1", opts.NumBeams)
		}
		if opts.OnToken != nil {
			return fmt.Errorf("roformer: streaming (OnToken) does not work with beam search: the beams' ids are final only at the end")
		}
		if opts.EarlyStopping < EarlyStopHeuristic || opts.EarlyStopping > EarlyStopNever {
			return fmt.Errorf("roformer: early stopping %d is not one of EarlyStopHeuristic, EarlyStopOnBeams, EarlyStopNever", opts.EarlyStopping)
		}
		if math.IsNaN(opts.LengthPenalty) || math.IsInf(opts.LengthPenalty, 0) {
			return fmt.Errorf("roformer: length_penalty %g is not a finite number", opts.LengthPenalty)
		}
	default:
		return fmt.Errorf("roformer: decoding strategy %q is not %s, %s or %s", opts.Strategy, StrategyGreedy, StrategySample, StrategyBeam)
	}
	if opts.Strategy != StrategyBeam && opts.NumBeams > 1 {
		return fmt.Errorf("roformer: num_beams %d needs the %s strategy, not %s", opts.NumBeams, StrategyBeam, opts.Strategy)
	}
	if opts.NumBeams < 0 {
		return fmt.Errorf("roformer: num_beams %d must be at least 1", opts.NumBeams)
	}
	if opts.RepetitionPenalty == 0 {
		opts.RepetitionPenalty = 1
	}
	if !(opts.RepetitionPenalty > 0) || math.IsInf(opts.RepetitionPenalty, 0) {
		return fmt.Errorf("roformer: repetition_penalty %g must be a positive number (1: off)", opts.RepetitionPenalty)
	}
	if opts.MaxNewTokens <= 0 {
		return fmt.Errorf("roformer: max new tokens %d must be positive", opts.MaxNewTokens)
	}
	if opts.EOS >= cfg.VocabSize {
		return fmt.Errorf("roformer: eos id %d is outside the vocabulary [0, %d)", opts.EOS, cfg.VocabSize)
	}
	if cfg.Attention() != AttnSoftmax || cfg.PosEnc() == PosRelative || cfg.XPos != nil {
		return fmt.Errorf("roformer: cached decoding supports softmax attention with rotary, sinusoidal, learned or no positions (not %s %s attention, nor xpos)", cfg.PosEnc(), cfg.Attention())
	}
	return nil
}

// GenerateCost is what one call of Generate holds and computes at most,
// from the sizes alone: see Model.GenerateCost.
type GenerateCost struct {
	// Rows are the sequences decoded together: prompts × beams (× 1
	// without beam search).
	Rows int64
	// Tokens are the positions the cache holds: Rows × (the longest
	// prompt + MaxNewTokens).
	Tokens int64
	// Work is Rows × V × (the longest prompt + MaxNewTokens): the
	// vocabulary-wide scores over every position of every row, the
	// measure of the LM head's products and beam search's candidates.
	Work int64
	// Bytes is an upper estimate of the memory Generate allocates: the
	// key/value cache (2 × layers × Tokens × H float32, twice with beam
	// search, whose reorder gathers a new copy), the prompt pass's and a
	// step's activations, a step's logits, beam search's candidates and
	// log-probabilities (about 36 bytes per row and id), and the scores
	// that greedy decoding and sampling return (prompts × MaxNewTokens ×
	// V float32).
	Bytes int64
}

// costSum adds products of sizes with overflow checks; the first overflow
// (or negative size) is kept in err and later additions do nothing.
type costSum struct {
	n   int64
	err error
}

// mul returns the product of dims, or records an overflow.
func (s *costSum) mul(dims ...int64) int64 {
	p := int64(1)
	for _, d := range dims {
		if s.err != nil {
			return 0
		}
		if d < 0 {
			s.err = fmt.Errorf("a negative size %d in %v", d, dims)
			return 0
		}
		if d != 0 && p > math.MaxInt64/d {
			s.err = fmt.Errorf("the product of the sizes %v overflows int64", dims)
			return 0
		}
		p *= d
	}
	return p
}

// add adds the product of dims.
func (s *costSum) add(dims ...int64) {
	p := s.mul(dims...)
	if s.err == nil && s.n > math.MaxInt64-p {
		s.err = fmt.Errorf("the sum of the sizes overflows int64 adding %v", dims)
	}
	if s.err == nil {
		s.n += p
	}
}

// GenerateCost checks the sizes of a call of Generate with B prompts of at
// most L tokens and opts, and says what it would hold and compute
// (GenerateCost's fields), with overflow-checked arithmetic and before
// anything is allocated, so that a caller (a server) can refuse a request
// beyond its budget. It fails when B, L, MaxNewTokens or NumBeams is out of
// range or a product overflows int64; Generate calls it too.
func (m *Model) GenerateCost(B, L int, opts GenerateOptions) (GenerateCost, error) {
	cfg := &m.Config
	fail := func(format string, args ...any) (GenerateCost, error) {
		return GenerateCost{}, fmt.Errorf("roformer: generation of %d prompts of up to %d tokens, %d new tokens, %d beams: "+format,
			append([]any{B, L, opts.MaxNewTokens, opts.NumBeams}, args...)...)
	}
	if B < 1 || L < 1 || opts.MaxNewTokens < 1 || opts.NumBeams < 0 {
		return fail("the prompts, their tokens and the new tokens must be at least 1, the beams not negative")
	}
	K := int64(1)
	if opts.Strategy == StrategyBeam {
		K = int64(max(opts.NumBeams, 1))
	}
	var c costSum
	b, n := int64(B), int64(opts.MaxNewTokens)
	capacity := int64(L) + n // no overflow: both are ints ≥ 1
	if capacity < 0 {
		return fail("the prompt and the new tokens overflow")
	}
	V, H, E, I := int64(cfg.VocabSize), int64(cfg.HiddenSize), int64(cfg.EmbeddingSize), int64(cfg.IntermediateSize)
	layers := int64(cfg.NumHiddenLayers)
	var cost GenerateCost
	cost.Rows = c.mul(b, K)
	cost.Tokens = c.mul(cost.Rows, capacity)
	cost.Work = c.mul(cost.Tokens, V)
	copies := int64(1)
	if K > 1 {
		copies = 2
	}
	c.add(copies, 2, layers, cost.Tokens, H, 4) // the key/value cache
	c.add(copies, cost.Tokens, 4)               // its mask
	perToken := c.mul(2*E+13*H+I+8, 4)          // a forward pass's activations per token (NewState)
	c.add(b, int64(L), perToken)                // the prompt pass
	c.add(b, int64(L), capacity, 4)             // its attention scores
	c.add(cost.Rows, perToken)                  // a step
	c.add(cost.Rows, V, 8)                      // a step's logits and the LM head's output
	if K > 1 {
		c.add(cost.Rows, V, 20) // expanded logits, each beam's log-probabilities (float64 and float32)
		c.add(K, V, 16)         // one prompt's candidates
	} else {
		c.add(b, n, V, 4) // Scores: every step's processed logits
	}
	if c.err != nil {
		return fail("%v", c.err)
	}
	cost.Bytes = c.n
	return cost, nil
}

// decoder is the state of one generation: the cache, each row's next
// position and the token type of new tokens.
type decoder struct {
	m       *Model
	c       *kvCache
	pos     []int32 // next position of each row
	newType int32
}

// prefill checks the prompts, left-pads them when opts.Pad allows ragged
// ones, runs them through the encoder into a new cache and returns the
// decoder with the logits at each row's last token, [B, V].
func (m *Model) prefill(ctx context.Context, prompts [][]int32, opts *GenerateOptions) (*decoder, []float32, error) {
	cfg := &m.Config
	B := len(prompts)
	if B == 0 {
		return nil, nil, fmt.Errorf("roformer: no prompt to continue")
	}
	L := 0
	for r, p := range prompts {
		if len(p) == 0 {
			return nil, nil, fmt.Errorf("roformer: prompt %d is empty: generation needs at least one token to continue", r)
		}
		if len(p) != len(prompts[0]) && !opts.Pad {
			return nil, nil, fmt.Errorf("roformer: prompt %d has %d tokens, prompt 0 has %d: prompts must have equal lengths (or set Pad to left-pad them)", r, len(p), len(prompts[0]))
		}
		L = max(L, len(p))
	}
	if cfg.PosEnc() == PosLearned && L+opts.MaxNewTokens > cfg.MaxPositionEmbeddings {
		return nil, nil, fmt.Errorf("roformer: %d + %d tokens exceed the learned position table's %d (max_position_embeddings): learned absolute positions cannot go past their table", L, opts.MaxNewTokens, cfg.MaxPositionEmbeddings)
	}
	ids := make([]int32, 0, B*L)
	var mask, pos []int32
	padded := false
	for _, p := range prompts {
		padded = padded || len(p) != L
	}
	pad := int32(max(cfg.PadID(), 0))
	if padded {
		mask, pos = make([]int32, 0, B*L), make([]int32, 0, B*L)
	}
	d := &decoder{m: m, pos: make([]int32, B)}
	for r, p := range prompts {
		for i := len(p); i < L; i++ {
			ids = append(ids, pad)
			if padded {
				mask, pos = append(mask, 0), append(pos, 0)
			}
		}
		ids = append(ids, p...)
		if padded {
			for i := range p {
				mask, pos = append(mask, 1), append(pos, int32(i))
			}
		}
		d.pos[r] = int32(len(p))
	}
	d.c = m.newKVCache(B, L+opts.MaxNewTokens)
	if opts.Mode == DecodeUniLM {
		d.newType = 1
	}
	// The prompt: causal, or bidirectional in UniLM mode; token type 0.
	batch := &Batch{InputIDs: ids, AttentionMask: mask, PositionIDs: pos, B: B, T: L}
	if err := batch.Validate(cfg); err != nil {
		return nil, nil, err
	}
	logits, err := m.decodeStep(ctx, d.c, batch, opts.Mode == DecodeCausal)
	if err != nil {
		return nil, nil, err
	}
	return d, logits, nil
}

// step feeds one new id per row (at each row's next position) and returns
// the logits [B, V] of the next one.
func (d *decoder) step(ctx context.Context, next []int32) ([]float32, error) {
	B := len(next)
	types := make([]int32, B)
	for r := range types {
		types[r] = d.newType
	}
	pos := slices.Clone(d.pos)
	logits, err := d.m.decodeStep(ctx, d.c, &Batch{InputIDs: next, TokenTypeIDs: types, PositionIDs: pos, B: B, T: 1}, false)
	if err != nil {
		return nil, err
	}
	for r := range d.pos {
		d.pos[r]++
	}
	return logits, nil
}

// reorder makes row i the old row idx[i] (cache and positions).
func (d *decoder) reorder(idx []int) {
	d.c.reorder(idx)
	pos := make([]int32, len(idx))
	for i, j := range idx {
		pos[i] = d.pos[j]
	}
	d.pos = pos
}

// Generate continues prompts with a cache of each layer's keys and values:
// every step runs the new token only, rotated at its absolute position
// (with dynamic RoPE scaling, the frequencies follow the growing length).
// opts chooses the mode (causal or UniLM), the strategy (greedy, sampling,
// beam search), the repetition penalty, the EOS, padding and streaming.
// The model needs an LM head.
func (m *Model) Generate(ctx context.Context, prompts [][]int32, opts GenerateOptions) (*Generation, error) {
	if err := m.checkOptions(&opts); err != nil {
		return nil, err
	}
	L := 0
	for _, p := range prompts {
		L = max(L, len(p))
	}
	if len(prompts) > 0 && L > 0 { // prefill names an empty prompt
		if _, err := m.GenerateCost(len(prompts), L, opts); err != nil {
			return nil, err
		}
	}
	d, logits, err := m.prefill(ctx, prompts, &opts)
	if err != nil {
		return nil, err
	}
	if opts.Strategy == StrategyBeam {
		return m.beamSearch(ctx, d, logits, prompts, &opts)
	}
	cfg := &m.Config
	B, V := len(prompts), cfg.VocabSize
	gen := &Generation{Sequences: make([][]int32, B), Scores: make([][][]float32, B)}
	for r := range gen.Sequences {
		gen.Sequences[r] = slices.Clone(prompts[r])
	}
	done := make([]bool, B)
	var rng *rand.Rand
	if opts.Strategy == StrategySample {
		rng = rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	}
	seen := make([]bool, V)
	for step := 0; ; step++ {
		next := make([]int32, B)
		for r := 0; r < B; r++ {
			row := slices.Clone(logits[r*V : r*V+V])
			repetitionPenalty(row, seen, opts.RepetitionPenalty, gen.Sequences[r])
			if rng != nil {
				warp(row, &opts)
				next[r] = int32(drawToken(row, rng))
			} else {
				next[r] = int32(argmax(row))
			}
			gen.Scores[r] = append(gen.Scores[r], row)
			if done[r] {
				next[r] = int32(max(cfg.PadID(), 0))
			}
			gen.Sequences[r] = append(gen.Sequences[r], next[r])
			if opts.EOS >= 0 && next[r] == int32(opts.EOS) {
				done[r] = true
			}
		}
		if opts.OnToken != nil {
			if err := opts.OnToken(step, slices.Clone(next)); err != nil {
				if errors.Is(err, ErrStopGeneration) {
					return gen, nil
				}
				return nil, err
			}
		}
		if step+1 == opts.MaxNewTokens || (opts.EOS >= 0 && !slices.Contains(done, false)) {
			return gen, nil
		}
		if logits, err = d.step(ctx, next); err != nil {
			return nil, err
		}
	}
}

// repetitionPenalty applies HF's RepetitionPenaltyLogitsProcessor to one
// row of scores: each distinct id of the token lists, once, is divided by
// penalty when positive and multiplied by it otherwise. seen is a [V]
// scratch of false values, left false.
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

// warp applies HF's sampling warpers in their order: temperature, top-k,
// top-p; removed ids get −Inf.
func warp(row []float32, opts *GenerateOptions) {
	if opts.Temperature != 1 {
		t := float32(opts.Temperature)
		for i := range row {
			row[i] /= t
		}
	}
	ninf := float32(math.Inf(-1))
	if k := opts.TopK; k > 0 && k < len(row) {
		// TopKLogitsWarper: remove every id below the k-th best value.
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
		// TopPLogitsWarper: sort ascending, remove the ids whose
		// cumulative probability is ≤ 1 − top_p, keep at least the best.
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

// drawToken draws an id from softmax(row) with rng.
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

// beamHyps is HF's BeamHypotheses: the best finished hypotheses of one
// prompt.
type beamHyps struct {
	numBeams      int
	lengthPenalty float64
	early         EarlyStopping
	maxLength     int
	beams         []beamHyp
	worst         float64
}

type beamHyp struct {
	score float64
	ids   []int32 // the new ids, without the EOS
	eos   bool
}

// add keeps hyp (summed log-probabilities sum, length = prompt + new ids)
// when it is among the numBeams best.
func (h *beamHyps) add(ids []int32, sum float64, length int, eos bool) {
	score := sum / math.Pow(float64(length), h.lengthPenalty)
	if len(h.beams) < h.numBeams || score > h.worst {
		h.beams = append(h.beams, beamHyp{score, ids, eos})
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
func (h *beamHyps) isDone(best float64, curLen int) bool {
	if len(h.beams) < h.numBeams {
		return false
	}
	switch h.early {
	case EarlyStopOnBeams:
		return true
	case EarlyStopNever:
		if h.lengthPenalty > 0 {
			return h.worst >= best/math.Pow(float64(h.maxLength), h.lengthPenalty)
		}
	}
	return h.worst >= best/math.Pow(float64(curLen), h.lengthPenalty)
}

// beamSearch is HF 4.30.2's beam_search with its BeamSearchScorer
// (num_return_sequences 1): each step scores every beam's log-softmax
// (after the repetition penalty) plus the beam's sum, takes the 2·K best
// continuations of each prompt, files those ending in EOS (ranked below K)
// as finished hypotheses and keeps the K best others; the cache rows follow
// the beams they continue.
func (m *Model) beamSearch(ctx context.Context, d *decoder, logits []float32, prompts [][]int32, opts *GenerateOptions) (*Generation, error) {
	cfg := &m.Config
	B, K, V := len(prompts), opts.NumBeams, cfg.VocabSize
	pad := int32(max(cfg.PadID(), 0))
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
	d.reorder(idx)
	logits = exp
	hyps := make([]*beamHyps, B)
	for b := range hyps {
		hyps[b] = &beamHyps{numBeams: K, lengthPenalty: opts.LengthPenalty, early: opts.EarlyStopping, maxLength: len(prompts[b]) + opts.MaxNewTokens, worst: 1e9}
	}
	done := make([]bool, B)
	seqs := make([][]int32, B*K) // the new ids of each beam
	seen := make([]bool, V)
	type cand struct {
		score float64
		flat  int // beam·V + id
	}
	for step := 0; ; step++ {
		next := make([]int32, B*K)
		nextScores := make([]float64, B*K)
		for b := 0; b < B; b++ {
			curLen := len(prompts[b]) + step
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
				row := slices.Clone(logits[i*V : i*V+V])
				lp := logSoftmax(row)
				// the processors see the log-probabilities in beam search
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
					hyps[b].add(slices.Clone(seqs[i]), c.score, len(prompts[b])+len(seqs[i]), true)
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
				return nil, fmt.Errorf("roformer: beam search found %d continuations for %d beams (the vocabulary is too small)", nb, K)
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
		d.reorder(idx)
		var err error
		if logits, err = d.step(ctx, next); err != nil {
			return nil, err
		}
	}
	gen := &Generation{Sequences: make([][]int32, B), BeamScores: make([]float64, B)}
	for b := 0; b < B; b++ {
		if !done[b] {
			for k := 0; k < K; k++ {
				i := b*K + k
				hyps[b].add(seqs[i], scores[i], len(prompts[b])+len(seqs[i]), false)
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

// logSoftmax returns log(softmax(row)) in float64.
func logSoftmax(row []float32) []float64 {
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

// decodeStep runs the T new tokens of b (positions after the c.n cached
// ones) through the encoder, storing their keys and values (and mask) in
// c, and returns the LM head's logits at each row's last new token, [B, V].
// The first step (an empty cache) runs the prompt with the causal mask or
// without, pads masked; later ones see every cached unpadded token.
func (m *Model) decodeStep(ctx context.Context, c *kvCache, b *Batch, causal bool) ([]float32, error) {
	s := c.step
	if s == nil || s.B != b.B || s.T != b.T {
		s = m.NewState(b.B, b.T, false)
		if b.T == 1 {
			c.step = s
		}
	}
	s.cache = c
	c.pending = b.AttentionMask
	m.setInputs(s, b, causal)
	x, err := m.encode(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	c.n += b.T
	H, T := m.Config.HiddenSize, b.T
	last := make([]float32, b.B*H)
	for r := 0; r < b.B; r++ {
		copy(last[r*H:r*H+H], x[(r*T+T-1)*H:(r*T+T)*H])
	}
	logits := make([]float32, b.B*m.Config.VocabSize)
	m.lmLogits(logits, last, b.B, nil)
	return logits, nil
}
