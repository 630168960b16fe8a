package roformer

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/kernels"
)

// Decoding modes of a Decoder.
const (
	// DecodeCausal is Hugging Face's RoFormerForCausalLM.generate: the
	// prompt under the causal mask, then one token at a time.
	DecodeCausal = "causal"
	// DecodeUniLM is RoFormer-Sim's generation: the prompt encoded
	// bidirectionally with token type 0, each new token with type 1,
	// seeing the whole prompt and the new tokens up to itself.
	DecodeUniLM = "unilm"
)

// DecoderOptions say how a Decoder runs the model.
type DecoderOptions struct {
	Mode string // DecodeCausal (default) or DecodeUniLM

	// Pad lets prompts have different lengths: they are left-padded to
	// the longest, the pad tokens are never attended to (in the prompt
	// pass nor from the cache), and each row counts its positions from
	// its first real token (HF's position_ids = cumsum(attention_mask) −
	// 1), so every row decodes as it would alone. Without Pad, prompts
	// must have equal lengths.
	Pad bool
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
// n+i, sees every unpadded key up to its own slot (kernels.CacheAttentionForward).
func (c *kvCache) attend(l int, ctx, q []float32, T, NH, HS int) {
	kernels.CacheAttentionForward(ctx, q, c.k[l], c.v[l], c.mask, c.B, T, c.n, c.cap, NH, HS)
}

// Decoder is the model's side of generation (a generate.Decoder): the
// encoder run on the prompts, then on one new token per row at a time,
// with a cache of each layer's keys and values, every new token rotated at
// its absolute position (with dynamic RoPE scaling, the frequencies follow
// the growing length); the LM head gives the logits. Pass it to
// generate.Generate, which chooses the ids. A Decoder decodes one call of
// generate.Generate: each Prefill starts afresh.
type Decoder struct {
	m       *Model
	opts    DecoderOptions
	c       *kvCache
	pos     []int32 // next position of each row
	newType int32
}

// NewDecoder checks that the model can decode with cached keys and values
// (an LM head; softmax attention with rotary, sinusoidal, learned or no
// positions) in o.Mode, and returns its Decoder.
func (m *Model) NewDecoder(o DecoderOptions) (*Decoder, error) {
	cfg := &m.Config
	if m.LM == nil {
		return nil, fmt.Errorf("roformer: generation needs an LM head, not %s", m.Head)
	}
	if o.Mode == "" {
		o.Mode = DecodeCausal
	}
	if o.Mode != DecodeCausal && o.Mode != DecodeUniLM {
		return nil, fmt.Errorf("roformer: decoding mode %q is not %s or %s", o.Mode, DecodeCausal, DecodeUniLM)
	}
	if cfg.Attention() != AttnSoftmax || cfg.PosEnc() == PosRelative || cfg.XPos != nil {
		return nil, fmt.Errorf("roformer: cached decoding supports softmax attention with rotary, sinusoidal, learned or no positions (not %s %s attention, nor xpos)", cfg.PosEnc(), cfg.Attention())
	}
	d := &Decoder{m: m, opts: o}
	if o.Mode == DecodeUniLM {
		d.newType = 1
	}
	return d, nil
}

// VocabSize is the LM head's vocabulary V.
func (d *Decoder) VocabSize() int { return d.m.Config.VocabSize }

// PadID is the config's pad_token_id (0 when it has none): the id of left
// padding and of finished rows.
func (d *Decoder) PadID() int32 { return int32(max(d.m.Config.PadID(), 0)) }

// GenerateCost is what one generation (generate.Generate over the model's
// Decoder) holds and computes at most, from the sizes alone: see
// Model.GenerateCost.
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
	// Bytes is an upper estimate of the memory a generation allocates:
	// the key/value cache (2 × layers × Tokens × H float32, twice with
	// more than one beam, whose reorder gathers a new copy), the prompt
	// pass's and a step's activations, a step's logits, beam search's
	// expanded logits (Rows × V float32), one beam's log-probabilities
	// (V float64 and float32) and a prompt's 2·K best candidates, and,
	// with OutputScores, the scores that greedy decoding and sampling
	// return (prompts × MaxNewTokens × V float32).
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

// GenerateCost checks the sizes of a generation (generate.Generate over the
// model's Decoder) of B prompts of at most L tokens with opts, and says
// what it would hold and compute (GenerateCost's fields), with
// overflow-checked arithmetic and before anything is allocated, so that a
// caller (a server) can refuse a request beyond its budget. It fails when
// B, L, MaxNewTokens or NumBeams is out of range or a product overflows
// int64 (generate.Generate refuses such sizes too).
func (m *Model) GenerateCost(B, L int, opts generate.Options) (GenerateCost, error) {
	cfg := &m.Config
	fail := func(format string, args ...any) (GenerateCost, error) {
		return GenerateCost{}, fmt.Errorf("roformer: generation of %d prompts of up to %d tokens, %d new tokens, %d beams: "+format,
			append([]any{B, L, opts.MaxNewTokens, opts.NumBeams}, args...)...)
	}
	if B < 1 || L < 1 || opts.MaxNewTokens < 1 || opts.NumBeams < 0 {
		return fail("the prompts, their tokens and the new tokens must be at least 1, the beams not negative")
	}
	K := int64(opts.Beams())
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
	if opts.Strategy == generate.Beam {
		c.add(cost.Rows, V, 4) // the expanded logits
		c.add(V, 12)           // a beam's log-probabilities (float64 and float32)
		c.add(K, 64)           // a prompt's 2·K best candidates, kept and sorted
	} else {
		c.add(V, 4) // a row's processed logits
		if opts.OutputScores {
			c.add(b, n, V, 4) // Scores: every step's processed logits
		}
	}
	if c.err != nil {
		return fail("%v", c.err)
	}
	cost.Bytes = c.n
	return cost, nil
}

// Prefill checks the prompts, left-pads them when the options allow ragged
// ones, runs them through the encoder (causal, or bidirectional in UniLM
// mode; token type 0) into a new cache with room for room.NewTokens more
// tokens, and returns the logits at each row's last token, [B, V]. Sizes
// whose products (GenerateCost's, with room.Beams rows a prompt) overflow
// int64 are an error before anything is allocated.
func (d *Decoder) Prefill(ctx context.Context, prompts [][]int32, room generate.Room) ([]float32, error) {
	m := d.m
	cfg := &m.Config
	B := len(prompts)
	if B == 0 {
		return nil, fmt.Errorf("roformer: no prompt to continue")
	}
	maxNew := room.NewTokens
	L := 0
	for r, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("roformer: prompt %d is empty: generation needs at least one token to continue", r)
		}
		if len(p) != len(prompts[0]) && !d.opts.Pad {
			return nil, fmt.Errorf("roformer: prompt %d has %d tokens, prompt 0 has %d: prompts must have equal lengths (or set Pad to left-pad them)", r, len(p), len(prompts[0]))
		}
		L = max(L, len(p))
	}
	if cfg.PosEnc() == PosLearned && L+maxNew > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("roformer: %d + %d tokens exceed the learned position table's %d (max_position_embeddings): learned absolute positions cannot go past their table", L, maxNew, cfg.MaxPositionEmbeddings)
	}
	o := generate.Options{MaxNewTokens: maxNew, Strategy: generate.Beam, NumBeams: max(room.Beams, 1)}
	if _, err := m.GenerateCost(B, L, o); err != nil {
		return nil, err
	}
	ids := make([]int32, 0, B*L)
	var mask, pos []int32
	padded := false
	for _, p := range prompts {
		padded = padded || len(p) != L
	}
	pad := d.PadID()
	if padded {
		mask, pos = make([]int32, 0, B*L), make([]int32, 0, B*L)
	}
	d.pos = make([]int32, B)
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
	batch := &Batch{InputIDs: ids, AttentionMask: mask, PositionIDs: pos, B: B, T: L}
	if err := batch.Validate(cfg); err != nil {
		return nil, err
	}
	d.c = m.newKVCache(B, L+maxNew)
	return m.decodeStep(ctx, d.c, batch, d.opts.Mode == DecodeCausal)
}

// Step feeds one new id per row (at each row's next position, token type
// 1 in UniLM mode, 0 otherwise) and returns the logits [R, V] of the next
// one.
func (d *Decoder) Step(ctx context.Context, next []int32) ([]float32, error) {
	if d.c == nil {
		return nil, fmt.Errorf("roformer: Step before Prefill")
	}
	B := len(next)
	if B != d.c.B {
		return nil, fmt.Errorf("roformer: %d tokens for %d decoder rows", B, d.c.B)
	}
	if d.c.n >= d.c.cap {
		return nil, fmt.Errorf("roformer: the cache's %d tokens are full (Prefill's prompt and new tokens)", d.c.cap)
	}
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

// Reorder makes row i the old row idx[i] (cache and positions).
func (d *Decoder) Reorder(idx []int) {
	d.c.reorder(idx)
	pos := make([]int32, len(idx))
	for i, j := range idx {
		pos[i] = d.pos[j]
	}
	d.pos = pos
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
	m.lmLogits(logits, last, b.B, nil, false)
	return logits, nil
}
