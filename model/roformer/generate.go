package roformer

import (
	"context"
	"fmt"
	"math"
	"slices"
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

// GenerateOptions says how Generate decodes.
type GenerateOptions struct {
	Mode         string // DecodeCausal (default) or DecodeUniLM
	MaxNewTokens int    // tokens to add to each prompt (> 0)
	// EOS, when ≥ 0, ends a row at that id: later steps give the row the
	// pad id (as HF's generate does), and decoding stops once every row
	// has ended.
	EOS int
}

// Generation is what Generate returns.
type Generation struct {
	// Sequences are the prompts followed by the new ids, [B][L + steps].
	Sequences [][]int32
	// Scores are the logits each new id was chosen from, [B][steps][V].
	Scores [][][]float32
}

// kvCache holds each layer's rotated keys and values of the tokens decoded
// so far, [B, capacity, H] per layer; n tokens are filled.
type kvCache struct {
	B, cap, n int
	k, v      [][]float32
}

func (m *Model) newKVCache(B, capacity int) *kvCache {
	H, L := m.Config.HiddenSize, m.Config.NumHiddenLayers
	c := &kvCache{B: B, cap: capacity, k: make([][]float32, L), v: make([][]float32, L)}
	for l := range c.k {
		c.k[l], c.v[l] = make([]float32, B*capacity*H), make([]float32, B*capacity*H)
	}
	return c
}

// store copies layer l's keys and values of T new tokens ([B, T, H],
// rotated) after the n cached ones.
func (c *kvCache) store(l int, k, v []float32, T, H int) {
	for b := 0; b < c.B; b++ {
		dst := (b*c.cap + c.n) * H
		copy(c.k[l][dst:dst+T*H], k[b*T*H:(b+1)*T*H])
		copy(c.v[l][dst:dst+T*H], v[b*T*H:(b+1)*T*H])
	}
}

// attend computes ctx [B, T, H] for T new queries q [B, T, H] (rotated)
// against layer l's n+T cached keys and values: new token i, at position
// n+i, sees every key up to its own position.
func (c *kvCache) attend(l int, ctx, q []float32, T, NH, HS int) {
	H := NH * HS
	scale := 1 / math.Sqrt(float64(HS))
	scores := make([]float64, c.n+T)
	for b := 0; b < c.B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < T; i++ {
				qi := q[(b*T+i)*H+h*HS : (b*T+i)*H+h*HS+HS]
				last := c.n + i
				mx := math.Inf(-1)
				for j := 0; j <= last; j++ {
					kj := c.k[l][(b*c.cap+j)*H+h*HS : (b*c.cap+j)*H+h*HS+HS]
					s := 0.0
					for d, x := range qi {
						s += float64(x) * float64(kj[d])
					}
					scores[j] = s * scale
					mx = max(mx, scores[j])
				}
				sum := 0.0
				for j := 0; j <= last; j++ {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				out := ctx[(b*T+i)*H+h*HS : (b*T+i)*H+h*HS+HS]
				acc := make([]float64, HS)
				for j := 0; j <= last; j++ {
					p := scores[j] / sum
					vj := c.v[l][(b*c.cap+j)*H+h*HS : (b*c.cap+j)*H+h*HS+HS]
					for d, x := range vj {
						acc[d] += p * float64(x)
					}
				}
				for d := range out {
					out[d] = float32(acc[d])
				}
			}
		}
	}
}

// Generate decodes greedily from prompts (equal lengths, no padding) with a
// cache of each layer's keys and values: every step runs the new token
// only, rotated at its absolute position (with dynamic RoPE scaling, the
// frequencies follow the growing length). The model needs an LM head.
func (m *Model) Generate(ctx context.Context, prompts [][]int32, opts GenerateOptions) (*Generation, error) {
	cfg := &m.Config
	if m.LM == nil {
		return nil, fmt.Errorf("roformer: generation needs an LM head, not %s", m.Head)
	}
	if opts.Mode == "" {
		opts.Mode = DecodeCausal
	}
	if opts.Mode != DecodeCausal && opts.Mode != DecodeUniLM {
		return nil, fmt.Errorf("roformer: decoding mode %q is not %s or %s", opts.Mode, DecodeCausal, DecodeUniLM)
	}
	if opts.MaxNewTokens <= 0 {
		return nil, fmt.Errorf("roformer: max new tokens %d must be positive", opts.MaxNewTokens)
	}
	if cfg.Attention() != AttnSoftmax || cfg.PosEnc() == PosRelative || cfg.XPos != nil {
		return nil, fmt.Errorf("roformer: cached decoding supports softmax attention with rotary, sinusoidal, learned or no positions (not %s %s attention, nor xpos)", cfg.PosEnc(), cfg.Attention())
	}
	B := len(prompts)
	if B == 0 || len(prompts[0]) == 0 {
		return nil, fmt.Errorf("roformer: no prompt to continue")
	}
	L := len(prompts[0])
	ids := make([]int32, 0, B*L)
	for r, p := range prompts {
		if len(p) != L {
			return nil, fmt.Errorf("roformer: prompt %d has %d tokens, prompt 0 has %d: prompts must have equal lengths", r, len(p), L)
		}
		ids = append(ids, p...)
	}
	if cfg.PosEnc() == PosLearned && L+opts.MaxNewTokens > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("roformer: %d + %d tokens exceed the learned position table's %d", L, opts.MaxNewTokens, cfg.MaxPositionEmbeddings)
	}
	c := m.newKVCache(B, L+opts.MaxNewTokens)
	gen := &Generation{Sequences: make([][]int32, B), Scores: make([][][]float32, B)}
	for r := range gen.Sequences {
		gen.Sequences[r] = slices.Clone(prompts[r])
	}
	done := make([]bool, B)

	// The prompt: causal, or bidirectional in UniLM mode; token type 0.
	batch := &Batch{InputIDs: ids, B: B, T: L}
	if err := batch.Validate(cfg); err != nil {
		return nil, err
	}
	logits, err := m.decodeStep(ctx, c, batch, opts.Mode == DecodeCausal)
	if err != nil {
		return nil, err
	}
	newType := int32(0)
	if opts.Mode == DecodeUniLM {
		newType = 1
	}
	V := cfg.VocabSize
	for step := 0; ; step++ {
		next := make([]int32, B)
		for r := 0; r < B; r++ {
			row := logits[r*V : r*V+V]
			gen.Scores[r] = append(gen.Scores[r], slices.Clone(row))
			next[r] = int32(argmax(row))
			if done[r] {
				next[r] = int32(max(cfg.PadID(), 0))
			}
			gen.Sequences[r] = append(gen.Sequences[r], next[r])
			if opts.EOS >= 0 && next[r] == int32(opts.EOS) {
				done[r] = true
			}
		}
		if step+1 == opts.MaxNewTokens || (opts.EOS >= 0 && !slices.Contains(done, false)) {
			return gen, nil
		}
		pos := make([]int32, B)
		types := make([]int32, B)
		for r := range pos {
			pos[r], types[r] = int32(c.n), newType
		}
		logits, err = m.decodeStep(ctx, c, &Batch{InputIDs: next, TokenTypeIDs: types, PositionIDs: pos, B: B, T: 1}, false)
		if err != nil {
			return nil, err
		}
	}
}

// decodeStep runs the T new tokens of b (positions after the c.n cached
// ones) through the encoder, storing their keys and values in c, and
// returns the LM head's logits at each row's last new token, [B, V]. The
// first step (an empty cache) runs the prompt with the causal mask or
// without; later ones see every cached token.
func (m *Model) decodeStep(ctx context.Context, c *kvCache, b *Batch, causal bool) ([]float32, error) {
	s := m.NewState(b.B, b.T, false)
	s.cache = c
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
