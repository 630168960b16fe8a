package roformer

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/kernels"
)

// Batch is the input of a forward pass: B rows of T tokens, row-major.
type Batch struct {
	InputIDs      []int32 // [B·T] token ids in [0, vocab_size)
	TokenTypeIDs  []int32 // [B·T] in [0, type_vocab_size); nil means all 0
	AttentionMask []int32 // [B·T] 1 for a real token, 0 for padding; nil means all 1
	PositionIDs   []int32 // [B·T] rotary positions ≥ 0; nil means 0 … T−1 in every row (HF)
	B, T          int
}

// Validate checks the batch against the model's sizes; the error names the
// row, the position and the value.
func (b *Batch) Validate(cfg *Config) error {
	if b.B <= 0 || b.T <= 0 {
		return fmt.Errorf("roformer: empty batch (%d rows of %d tokens)", b.B, b.T)
	}
	n := b.B * b.T
	check := func(name string, s []int32, lo, hi int32) error {
		if s == nil {
			return nil
		}
		if len(s) != n {
			return fmt.Errorf("roformer: %s has %d values, want %d (%d rows × %d tokens)", name, len(s), n, b.B, b.T)
		}
		for i, v := range s {
			if v < lo || (hi >= 0 && v >= hi) {
				rng := fmt.Sprintf("[%d, %d)", lo, hi)
				if hi < 0 {
					rng = fmt.Sprintf("≥ %d", lo)
				}
				return fmt.Errorf("roformer: %s[%d][%d] = %d is outside %s", name, i/b.T, i%b.T, v, rng)
			}
		}
		return nil
	}
	if b.InputIDs == nil {
		return fmt.Errorf("roformer: input_ids missing")
	}
	if err := check("input_ids", b.InputIDs, 0, int32(cfg.VocabSize)); err != nil {
		return err
	}
	if err := check("token_type_ids", b.TokenTypeIDs, 0, int32(cfg.TypeVocabSize)); err != nil {
		return err
	}
	if err := check("attention_mask", b.AttentionMask, 0, 2); err != nil {
		return err
	}
	if err := check("position_ids", b.PositionIDs, 0, -1); err != nil {
		return err
	}
	return b.checkLearnedPositions(cfg)
}

// PadBatch returns B rows of T tokens, right-padded: row i holds the ids
// and type ids that row(i) returns (at most T of each), an attention mask
// of 1 on them and 0 after, and pad as the input id of every padding
// position (its type id 0). It is the batch that the embedding pipeline,
// the server's scheduler and fine-tuning each build from rows of unequal
// length.
func PadBatch(B, T int, pad int32, row func(i int) (ids, types []int32)) *Batch {
	b := &Batch{InputIDs: make([]int32, B*T), TokenTypeIDs: make([]int32, B*T), AttentionMask: make([]int32, B*T), B: B, T: T}
	for i := range B {
		ids, types := row(i)
		in, mask := b.InputIDs[i*T:(i+1)*T], b.AttentionMask[i*T:(i+1)*T]
		copy(in, ids)
		copy(b.TokenTypeIDs[i*T:(i+1)*T], types)
		for t := range in {
			if t < len(ids) {
				mask[t] = 1
			} else {
				in[t] = pad
			}
		}
	}
	return b
}

// layerActs holds one layer's activations: everything its backward pass
// needs. In inference one set is reused by every layer.
type layerActs struct {
	q, k, v []float32 // [BT, H] after the rotation (softmax); as projected (linear, performer)
	probs   []float32 // [B, NH, T, T]; nil in inference (scratch), for linear attention and for fusedAttention; allocated on first use
	lse     []float32 // [B, NH, T] the log-sum-exp of fusedAttention in training; nil otherwise
	ctx     []float32 // [BT, H] attention output before attention.output.dense
	res1    []float32 // [BT, H] x + dense(ctx); in inference q's buffer
	ln1Mean []float32 // [BT]
	ln1Rstd []float32 // [BT]
	a       []float32 // [BT, H] attention.output.LayerNorm output
	pre     []float32 // [BT, I] intermediate.dense output; in inference also the fused q, k, v before the split
	post    []float32 // [BT, I] act(pre), training only (inference applies act to pre in place)
	dact    []float32 // [BT, I] act'(pre), training only
	res2    []float32 // [BT, H] a + output.dense(post); in inference ctx's buffer
	ln2Mean []float32 // [BT]
	ln2Rstd []float32 // [BT]
	out     []float32 // [BT, H] output.LayerNorm output = the next layer's input

	// Linear and performer attention: the features φ(q), φ(k) [BT, NH·F],
	// their rotated copies (rotary positions only) and the denominators
	// [B, NH, T] (training only).
	fq, fk, fqr, fkr []float32
	den              []float32
}

// State is the workspace of forward (and backward) passes for one batch
// shape. Reusing it across steps avoids allocation.
type State struct {
	B, T  int
	train bool // every layer keeps its activations and attention probabilities

	ids, types []int32   // [BT]
	keyMask    []float32 // [BT] or nil (all visible)
	causal     bool
	wantProbs  bool      // this pass hands every layer's attention probabilities to a hook (no fusedAttention)
	unilm      []int32   // [BT] running sums of the token types under MaskUniLM with a type other than 0; nil otherwise
	pos        []int     // [T] (0 … T−1, every row) or [BT] (explicit position ids)
	sin, cos   []float32 // [T or BT, d/2]; with xPos, q's (scaled by ζ^n)
	ksin, kcos []float32 // with xPos: k's rotation (scaled by ζ^−n); nil otherwise
	cache      *kvCache  // cached decoding (Generate): keys and values of earlier tokens
	fsin, fcos []float32 // [T or BT, F/2]: the feature rotation of linear attention
	defaultPos bool      // pos is 0 … T−1 (no explicit position ids)
	// sinusoid caches the sinusoidal encodings [BT, E] of positions 0 … T−1.
	sinusoid []float32

	embSum  []float32 // [BT, E] word + token type
	embMean []float32 // [BT]
	embRstd []float32 // [BT]
	embLN   []float32 // [BT, E]
	hidden0 []float32 // [BT, H] encoder input (= embLN when E = H)
	layers  []layerActs
	qkv     []float32 // [BT, 3H] fused projection scratch
	// inference alternates the layers' output between la.out and spare
	// (the encoder input's buffer hidden0, free after the first layer).
	spare []float32

	// drop is the dropout of a training step (zero in inference); each
	// site derives its own stream from it. dropRow is the index of the
	// batch's first row in the batch whose masks it draws
	// (StepOptions.RowOffset).
	drop    kernels.Dropout
	dropRow int

	// Reused input buffers; anglesReady says sin/cos (and pos) hold the
	// angles of the last call, so default positions need no recomputation.
	zeroTypes   []int32
	maskBuf     []float32
	anglesReady bool

	// Scratch and gradient buffers for backward, allocated on first use.
	grads *gradBuffers
	lm    lmScratch
}

// lmScratch holds the LM head's training buffers, grown to the largest
// number of labelled rows seen and reused.
type lmScratch struct {
	xs, pre, post, ln, mean, rstd, logits, losses []float32
	dln, dpost, dpre, dxs                         []float32
	tg                                            []int32
}

// Dropout sites, mixed into the per-site dropout seeds.
const (
	siteEmbeddings = iota + 1
	siteAttnProbs
	siteAttnOut
	siteFFNOut
	siteHeadIn
	siteHeadMid
)

// dropAt returns the dropout of one site of one layer (layer −1: outside
// the encoder layers) on a tensor of rowLen elements per row of the batch:
// its stream starts at row dropRow's first element.
func (s *State) dropAt(layer, site int, p float64, rowLen int) kernels.Dropout {
	if !s.drop.Active() || p == 0 {
		return kernels.Dropout{}
	}
	d := s.drop.Derive(uint64(layer+1), uint64(site))
	d.P, d.Offset = float32(p), s.dropRow*rowLen
	return d
}

// setDropout gives s the dropout of a training step with opts (P is set
// per site from the configuration); clearDropout takes it away.
func (s *State) setDropout(opts StepOptions) {
	s.clearDropout()
	if opts.Dropout {
		s.drop, s.dropRow = kernels.Dropout{P: 1, Seed: opts.Seed}, opts.RowOffset
	}
}

func (s *State) clearDropout() { s.drop, s.dropRow = kernels.Dropout{}, 0 }

// arena is one slab of float32s that a Session's inference states take
// their activation buffers from, llm.c's one allocation for the
// activations: f32 hands out the next n floats, reset takes them all back.
// A round that asks for more than the slab holds gets the rest from the
// heap, and the next reset grows the slab to what that round took. A nil
// arena allocates every buffer afresh (training states, Model.Forward).
//
// f32 does not zero what it hands out: every buffer of an inference state
// is written whole before it is read (TestSessionArenaPoisoned fills the
// slab with NaN between shapes), so a zeroing pass over the workspace per
// request would buy nothing.
type arena struct {
	slab []float32
	off  int // floats handed out since the last reset; past len(slab) when the slab ran short
}

// f32 returns the next n floats of the slab, holding whatever they held
// (capacity n, so no append runs into the next buffer), or n new zeroed
// floats when a is nil or the slab is used up.
func (a *arena) f32(n int) []float32 {
	if a == nil {
		return make([]float32, n)
	}
	lo := a.off
	a.off += n
	if a.off > len(a.slab) {
		return make([]float32, n)
	}
	return a.slab[lo:a.off:a.off]
}

// reserve makes the slab hold at least n floats; what it held is lost.
func (a *arena) reserve(n int) {
	if len(a.slab) < n {
		a.slab = nil // the old slab may go before the new one is made
		a.slab = make([]float32, n)
	}
}

// reset takes back every buffer handed out, growing the slab first to what
// the last round asked for when it ran short. The buffers handed out
// before must no longer be used.
func (a *arena) reset() {
	a.reserve(a.off)
	a.off = 0
}

func (m *Model) newLayerActs(B, T int, withProbs bool, ar *arena) layerActs {
	H, I, NH := m.Config.HiddenSize, m.Config.IntermediateSize, m.Config.NumAttentionHeads
	BT := B * T
	la := layerActs{
		q: ar.f32(BT * H), k: ar.f32(BT * H), v: ar.f32(BT * H),
		ctx: ar.f32(BT * H), ln1Mean: ar.f32(BT), ln1Rstd: ar.f32(BT),
		a: ar.f32(BT * H), pre: ar.f32(BT * I),
		ln2Mean: ar.f32(BT), ln2Rstd: ar.f32(BT), out: ar.f32(BT * H),
	}
	if withProbs {
		la.res1, la.res2 = ar.f32(BT*H), ar.f32(BT*H)
		// softmax attention's probabilities: allocated by fusedAttention when a pass needs them
		la.post, la.dact = ar.f32(BT*I), ar.f32(BT*I)
	} else {
		// Inference keeps nothing for a backward pass: the residual sums go
		// where q and ctx were, which are read for the last time just
		// before (q by attention, ctx by attention.output.dense), so a
		// long input holds two [BT, H] buffers fewer.
		la.res1, la.res2 = la.q, la.ctx
	}
	if F := m.Config.NumFeatures(); F > 0 {
		la.fq, la.fk = ar.f32(BT*NH*F), ar.f32(BT*NH*F)
		if m.Config.PosEnc() == PosRotary {
			la.fqr, la.fkr = ar.f32(BT*NH*F), ar.f32(BT*NH*F)
		}
		if withProbs {
			la.den = ar.f32(B * NH * T)
		}
	}
	return la
}

// NewState allocates the workspace for batches of B rows of T tokens. With
// train set, every layer keeps its activations for Backward.
//
// In inference the state holds, per token, the embeddings' LayerNorm
// output, one layer's q, k, v, attention output, LayerNorm output and
// feed-forward intermediate, and the layer's output: 7·H + I float32s when
// E = H (16.5 KiB a token for the small preset), whatever the depth. The sum
// of the embeddings is written where the feed-forward intermediate goes
// (free until the first layer's products), and the layers alternate their
// output between the encoder input's buffer, read for the last time by the
// first layer, and one other.
func (m *Model) NewState(B, T int, train bool) *State { return m.newState(B, T, train, nil) }

// newState is NewState with the activation buffers taken from ar (nil:
// allocated).
func (m *Model) newState(B, T int, train bool, ar *arena) *State {
	s := new(State)
	m.cutState(s, B, T, train, ar)
	return s
}

// cutState makes s a new workspace for B rows of T tokens, its activation
// buffers taken from ar (nil: allocated) and its layers in s.layers'
// array when that is long enough; nothing else of s is kept. Every buffer
// it takes is [BT, ·] (the training-only den aside), so an inference state
// takes B·T times what a 1 × 1 one takes.
func (m *Model) cutState(s *State, B, T int, train bool, ar *arena) {
	E, H, I := m.Config.EmbeddingSize, m.Config.HiddenSize, m.Config.IntermediateSize
	BT := B * T
	n := 1
	if train {
		n = m.Config.NumHiddenLayers
	}
	layers := s.layers
	if cap(layers) < n {
		layers = make([]layerActs, n)
	}
	*s = State{B: B, T: T, train: train, layers: layers[:n],
		embMean: ar.f32(BT), embRstd: ar.f32(BT), embLN: ar.f32(BT * E),
	}
	if E != H {
		s.hidden0 = ar.f32(BT * H)
	} else {
		s.hidden0 = s.embLN
	}
	for i := range s.layers {
		s.layers[i] = m.newLayerActs(B, T, train, ar)
	}
	if train || I < E {
		s.embSum = ar.f32(BT * E) // the backward reads it
	} else {
		s.embSum = s.layers[0].pre[:BT*E]
	}
	if !train {
		s.spare = s.hidden0
	}
}

// keepInputs gives s, a fresh state, the input buffers of old (a state of
// another shape), to reuse by capacity: the zero token types, the key
// mask, the positions and rotary angles (recomputed on the next call: s's
// anglesReady is false), the sinusoid cache (emptied) and the fused q, k,
// v scratch.
func (s *State) keepInputs(old *State) {
	s.zeroTypes, s.maskBuf, s.qkv = old.zeroTypes, old.maskBuf, old.qkv
	s.pos, s.sin, s.cos, s.ksin, s.kcos = old.pos[:0], old.sin[:0], old.cos[:0], old.ksin[:0], old.kcos[:0]
	s.fsin, s.fcos, s.sinusoid = old.fsin[:0], old.fcos[:0], old.sinusoid[:0]
}

// qkvScratch returns the state's [BT, 3H] buffer of the fused q, k, v
// projection (also the fused gradient in Backward), allocated on first use.
func (s *State) qkvScratch(n int) []float32 { return grow(&s.qkv, n) }

// setInputs copies the batch into the state: ids, the key mask and the
// rotary angles.
func (m *Model) setInputs(s *State, b *Batch, causal bool) {
	BT := b.B * b.T
	s.ids = b.InputIDs
	s.types = b.TokenTypeIDs
	if s.types == nil {
		s.types = grow(&s.zeroTypes, BT) // never written: all 0
	}
	s.keyMask = nil
	if b.AttentionMask != nil {
		for _, v := range b.AttentionMask {
			if v == 0 {
				s.keyMask = grow(&s.maskBuf, BT)
				for i, v := range b.AttentionMask {
					s.keyMask[i] = float32(v)
				}
				break
			}
		}
	}
	s.causal, s.unilm = causal, nil
	if b.PositionIDs == nil && s.defaultPos && len(s.pos) == b.T && s.anglesReady {
		return // positions 0 … T−1 again: the angles are already there
	}
	half := m.Config.HeadSize() / 2
	var pos []int
	if b.PositionIDs == nil {
		pos = grow(&s.pos, b.T)
		for i := range pos {
			pos[i] = i
		}
	} else {
		pos = grow(&s.pos, BT)
		for i, p := range b.PositionIDs {
			pos[i] = int(p)
		}
	}
	s.pos, s.defaultPos = pos, b.PositionIDs == nil
	s.anglesReady = true
	if m.Config.PosEnc() != PosRotary {
		return
	}
	s.sin, s.cos = grow(&s.sin, len(pos)*half), grow(&s.cos, len(pos)*half)
	m.rotary.SinCos(s.sin, s.cos, pos)
	if x := m.Config.XPos; x != nil {
		m.xposScale(s, pos)
	}
	if m.featRotary != nil {
		s.fsin, s.fcos = s.sin, s.cos
		if fh := m.featRotary.Config().HeadSize / 2; fh != half {
			s.fsin, s.fcos = grow(&s.fsin, len(pos)*fh), grow(&s.fcos, len(pos)*fh)
			m.featRotary.SinCos(s.fsin, s.fcos, pos)
		}
	}
}

// encode runs the embeddings and every layer. It returns the last hidden
// state [BT, H]. hook, when not nil, sees the encoder input and each layer's
// output and attention probabilities (for hidden_states / attentions).
func (m *Model) encode(ctx context.Context, s *State, hook func(layer int, hidden, probs []float32)) ([]float32, error) {
	cfg := &m.Config
	B, T := s.B, s.T
	BT := B * T
	E, H, I := cfg.EmbeddingSize, cfg.HiddenSize, cfg.IntermediateSize
	emb := &m.Encoder.Embeddings
	eps := float32(cfg.LayerNormEps)
	s.wantProbs = hook != nil

	// x = LayerNorm(word[ids] + type[types]); x = project(x) when E ≠ H
	switch word := m.wordBF16(); {
	case cfg.ScaleEmbedding:
		m.scaledEmbeddingForward(s) // √E·word[ids] + type[types]
	case word != nil: // stored in bfloat16 where it lies in the mapped folder
		kernels.EmbeddingForwardBF16(s.embSum, s.ids, s.types, word, emb.TokenType.Data, BT, E)
	default:
		kernels.EmbeddingForward(s.embSum, s.ids, s.types, emb.Word.Data, emb.TokenType.Data, BT, E)
	}
	m.addPositions(s) // sinusoidal or learned absolute positions; nothing for the others
	emb.LN.Forward(s.embLN, s.embMean, s.embRstd, s.embSum, eps, BT, E)
	kernels.DropoutForward(s.embLN, s.dropAt(-1, siteEmbeddings, cfg.HiddenDropoutProb, T*E), BT*E)
	if p := m.Encoder.Project; p != nil {
		m.matmul(s.hidden0, s.embLN, p.W.Data, p.Bias(), BT, E, H)
	}
	x := s.hidden0
	if hook != nil {
		hook(-1, x, nil)
	}
	for l := range m.Encoder.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		L := &m.Encoder.Layers[l]
		la := &s.layers[min(l, len(s.layers)-1)]
		if !s.train {
			// Reuse one slot: write this layer's output to the buffer that
			// is not its input.
			if &x[0] == &la.out[0] {
				la.out, s.spare = s.spare, la.out
			}
		}
		// q, k, v = Linear(x), as one [3H, H] product when the weights
		// are adjacent (one larger product runs closer to the BLAS peak)
		if w, b, ok := L.fusedWeights(); ok {
			var qkv []float32
			if !s.train && I >= 3*H {
				// inference: the feed-forward buffer is free until after attention
				qkv = la.pre[:BT*3*H]
			} else {
				qkv = s.qkvScratch(BT * 3 * H)
			}
			m.matmul(qkv, x, w, b, BT, H, 3*H)
			kernels.SplitQKV(la.q, la.k, la.v, qkv, BT, H)
		} else {
			m.matmul(la.q, x, L.Query.W.Data, L.Query.Bias(), BT, H, H)
			m.matmul(la.k, x, L.Key.W.Data, L.Key.Bias(), BT, H, H)
			m.matmul(la.v, x, L.Value.W.Data, L.Value.Bias(), BT, H, H)
		}
		// ctx = softmax(q·kᵀ/√HS + mask)·v with q, k (and v) rotated by
		// RoPE: see attentionForward for the other encodings and kinds
		m.attentionForward(s, l, la)
		// a = LayerNorm(x + dropout(dense(ctx)))
		if d := s.dropAt(l, siteAttnOut, cfg.HiddenDropoutProb, T*H); d.Active() {
			m.matmul(la.res1, la.ctx, L.AttnOut.W.Data, L.AttnOut.Bias(), BT, H, H)
			kernels.DropoutForward(la.res1, d, BT*H)
			kernels.AddForward(la.res1, la.res1, x, BT*H)
		} else {
			m.matmulResidual(la.res1, la.ctx, L.AttnOut.W.Data, L.AttnOut.Bias(), x, BT, H, H)
		}
		L.AttnLN.Forward(la.a, la.ln1Mean, la.ln1Rstd, la.res1, eps, BT, H)
		// out = LayerNorm(a + dropout(dense(act(dense(a)))))
		d := s.dropAt(l, siteFFNOut, cfg.HiddenDropoutProb, T*H)
		if la.dact == nil && !d.Active() && m.fusedFeedForward(L, la, BT) {
			// done: inference on prepared layers
		} else {
			m.matmul(la.pre, la.a, L.FFIn.W.Data, L.FFIn.Bias(), BT, H, I)
			post := la.pre // inference: the activation in place
			if la.dact != nil {
				post = la.post
				kernels.ActivationForwardSaveGrad(post, la.dact, la.pre, m.act, BT*I)
			} else {
				kernels.ActivationForward(post, la.pre, m.act, BT*I)
			}
			m.feedForwardOut(L, la, post, d, BT)
		}
		L.OutputLN.Forward(la.out, la.ln2Mean, la.ln2Rstd, la.res2, eps, BT, H)
		x = la.out
		if hook != nil {
			hook(l, x, la.probs)
		}
	}
	return x, nil
}
