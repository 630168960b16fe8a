package seq2seq

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
	"github.com/roformer-go/roformer/rope"
)

// Dropout sites, mixed into each dropout mask's seed with the layer index.
const (
	siteSrcEmbed = iota + 1
	siteTgtEmbed
	siteEncAttn
	siteEncFFN
	siteDecSelf
	siteDecCross
	siteDecFFN
)

type encLayerAct struct {
	attn selfAttnAct
	x1   []float32 // after self-attention [B, S, C]
	ffn  ffnAct
	x2   []float32 // the layer's output [B, S, C]
}

type decLayerAct struct {
	self  selfAttnAct
	x1    []float32
	cross crossAttnAct
	x2    []float32
	ffn   ffnAct
	x3    []float32
}

// Pass is one forward pass over a Batch, holding what Backward needs.
type Pass struct {
	m          *Model
	b          *Batch
	train      bool
	drop       kernels.Dropout
	es, ds     dims
	rotS, rotT *rotation

	srcX  []float32 // embedded source [B, S, C]
	enc   []encLayerAct
	encLN normAct // the encoder's output [B, S, C]: LN_enc(x_L) (pre-LN) or x_L (post-LN, no mean or rstd)
	tgtX  []float32
	dec   []decLayerAct
	decLN normAct // the decoder's output [B, T, C]: LN_dec(y_L) or y_L, as encLN

	// Logits [B·T, V] of the decoder; after a forward with labels and
	// training, it holds the loss gradient instead (Backward's input).
	Logits []float32
	// Loss is the mean label-smoothed cross-entropy over the target tokens
	// (labels ≠ −1), NLL the mean plain negative log-likelihood, Tokens
	// their number.
	Loss, NLL float64
	Tokens    int
}

// Options configure Forward.
type Options struct {
	// Train runs the pass in training mode: dropout on, with masks that are
	// a pure function of Seed (see kernels.Dropout; model/roformer's
	// StepOptions.Dropout and Seed), and, when the batch has labels, Logits
	// replaced by the gradient of Loss for Pass.Backward. Without it
	// (evaluation, the uncached reference of decoding) dropout is off and
	// Logits are kept.
	Train bool
	Seed  uint64
}

// Forward runs the model on b (and its labels, when b has them, as
// model/roformer's Forward reads its Labels); it returns ctx's error,
// checked before the encoder and before each decoder layer, when ctx ends.
func (m *Model) Forward(ctx context.Context, b *Batch, opts Options) (*Pass, error) {
	if b.DecIn == nil {
		return nil, fmt.Errorf("seq2seq: Forward needs a batch with targets")
	}
	if len(b.Src) != b.B*b.S || len(b.SrcMask) != b.B*b.S || len(b.DecIn) != b.B*b.T || (b.Labels != nil && len(b.Labels) != b.B*b.T) {
		return nil, fmt.Errorf("seq2seq: batch B %d S %d T %d does not match its slices (%d, %d, %d, %d)", b.B, b.S, b.T, len(b.Src), len(b.SrcMask), len(b.DecIn), len(b.Labels))
	}
	c := m.Config
	p := &Pass{m: m, b: b, train: opts.Train}
	if opts.Train {
		p.drop = kernels.Dropout{P: float32(c.Dropout), Seed: opts.Seed}
	}
	C, NH, HS := c.DModel, c.Heads, c.HeadSize()
	p.es, p.ds = dims{b.B, b.S, C, NH, HS}, dims{b.B, b.T, C, NH, HS}
	p.rotS, p.rotT = m.rotation(0, b.S), m.rotation(0, b.T)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.encodeForward(p)
	enc := p.encLN.out

	BT := b.B * b.T
	p.tgtX = make([]float32, BT*C)
	m.embedForward(p.tgtX, b.DecIn, p.drop.Derive(siteTgtEmbed), b.B, b.T)
	x := p.tgtX
	p.dec = make([]decLayerAct, len(m.Dec))
	for l := range m.Dec {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		L, a := &m.Dec[l], &p.dec[l]
		a.x1, a.x2, a.x3 = make([]float32, BT*C), make([]float32, BT*C), make([]float32, BT*C)
		m.selfAttnForward(&a.self, a.x1, x, L.SelfNorm, L.QKV, L.SelfOut, p.rotT, nil, true, p.train, p.drop.Derive(siteDecSelf, uint64(l)), p.ds)
		m.crossAttnForward(&a.cross, a.x2, a.x1, enc, b.SrcMask, L, p.train, p.drop.Derive(siteDecCross, uint64(l)), p.ds, b.S)
		m.ffnForward(&a.ffn, a.x3, a.x2, L.FFNNorm, L.FC1, L.FC2, p.drop.Derive(siteDecFFN, uint64(l)), BT)
		x = a.x3
	}
	p.decLN = m.topNorm(m.DecNorm, x, BT)
	// logits = LN_dec(y)·Eᵀ, or y·Eᵀ in post-LN (the output projection tied to the embedding)
	p.Logits = make([]float32, BT*c.VocabSize)
	kernels.MatmulForward(p.Logits, p.decLN.out, m.Embed.Data, nil, BT, C, c.VocabSize)
	if b.Labels != nil {
		var grad []float32
		if opts.Train {
			grad = p.Logits
		}
		p.Loss, p.NLL, p.Tokens = smoothedCrossEntropy(grad, p.Logits, b.Labels, c.LabelSmooth, BT, c.VocabSize)
	}
	return p, nil
}

// encodeForward runs the encoder of p's batch into p.encLN.
func (m *Model) encodeForward(p *Pass) {
	b, C := p.b, m.Config.DModel
	BS := b.B * b.S
	p.srcX = make([]float32, BS*C)
	m.embedForward(p.srcX, b.Src, p.drop.Derive(siteSrcEmbed), b.B, b.S)
	x := p.srcX
	p.enc = make([]encLayerAct, len(m.Enc))
	for l := range m.Enc {
		L, a := &m.Enc[l], &p.enc[l]
		a.x1, a.x2 = make([]float32, BS*C), make([]float32, BS*C)
		m.selfAttnForward(&a.attn, a.x1, x, L.AttnNorm, L.QKV, L.Out, p.rotS, b.SrcMask, false, p.train, p.drop.Derive(siteEncAttn, uint64(l)), p.es)
		m.ffnForward(&a.ffn, a.x2, a.x1, L.FFNNorm, L.FC1, L.FC2, p.drop.Derive(siteEncFFN, uint64(l)), BS)
		x = a.x2
	}
	p.encLN = m.topNorm(m.EncNorm, x, BS)
}

// topNorm is the LayerNorm at the top of a stack, LN(x) of x [BT, C], in
// pre-LN; in post-LN, whose last sub-layer ends in a LayerNorm, x itself.
func (m *Model) topNorm(norm nn.LayerNorm, x []float32, BT int) normAct {
	if m.Config.postLN() {
		return normAct{out: x}
	}
	C := m.Config.DModel
	a := newNormAct(BT, C)
	norm.Forward(a.out, a.mean, a.rstd, x, float32(m.Config.LayerNormEps), BT, C)
	return a
}

// topNormBackward differentiates topNorm into dx [BT, C] (written) from
// dy, the gradient of its output.
func (m *Model) topNormBackward(dx, dy []float32, norm nn.LayerNorm, a normAct, x []float32, BT int) {
	if m.Config.postLN() {
		copy(dx, dy)
		return
	}
	// LayerNormBackward adds, so dx starts at zero.
	clear(dx)
	norm.Backward(dx, dy, x, a.mean, a.rstd, BT, m.Config.DModel)
}

// rotation returns the sin/cos of positions offset … offset+T−1, or nil
// without RoPE.
func (m *Model) rotation(offset, T int) *rotation {
	if m.rot == nil {
		return nil
	}
	h := m.Config.HeadSize() / 2
	r := &rotation{make([]float32, T*h), make([]float32, T*h)}
	m.rot.SinCos(r.sin, r.cos, rope.Positions(T, offset))
	return r
}

// Backward adds the gradient of p.Loss to every parameter's Grad (+=). p
// must come from Forward with Options.Train and labels. It returns ctx's
// error, checked at the start and before each layer, when ctx ends (the
// gradients are then partial).
func (p *Pass) Backward(ctx context.Context) error {
	if !p.train || p.b.Labels == nil {
		return fmt.Errorf("seq2seq: Backward needs a training forward pass with labels")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m, b, c := p.m, p.b, p.m.Config
	C := c.DModel
	BT, BS := b.B*b.T, b.B*b.S
	// logits = y·Eᵀ
	dy := make([]float32, BT*C)
	kernels.MatmulBackward(dy, m.Embed.Grad, nil, p.Logits, p.decLN.out, m.Embed.Data, BT, C, c.VocabSize)
	// y = LN_dec(x_L), or x_L in post-LN
	dx := make([]float32, BT*C)
	last := p.tgtX
	if n := len(p.dec); n > 0 {
		last = p.dec[n-1].x3
	}
	m.topNormBackward(dx, dy, m.DecNorm, p.decLN, last, BT)
	denc := make([]float32, BS*C)
	enc := p.encLN.out
	for l := len(m.Dec) - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		L, a := &m.Dec[l], &p.dec[l]
		m.ffnBackward(dx, &a.ffn, L.FFNNorm, L.FC1, L.FC2, BT)
		m.crossAttnBackward(dx, denc, &a.cross, enc, b.SrcMask, L, p.ds, b.S)
		m.selfAttnBackward(dx, &a.self, L.SelfNorm, L.QKV, L.SelfOut, p.rotT, nil, true, p.ds)
	}
	m.embedBackward(dx, b.DecIn, p.drop.Derive(siteTgtEmbed), b.B, b.T)
	// enc = LN_enc(x_L), or x_L in post-LN
	dxs := make([]float32, BS*C)
	lastS := p.srcX
	if n := len(p.enc); n > 0 {
		lastS = p.enc[n-1].x2
	}
	m.topNormBackward(dxs, denc, m.EncNorm, p.encLN, lastS, BS)
	for l := len(m.Enc) - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		L, a := &m.Enc[l], &p.enc[l]
		m.ffnBackward(dxs, &a.ffn, L.FFNNorm, L.FC1, L.FC2, BS)
		m.selfAttnBackward(dxs, &a.attn, L.AttnNorm, L.QKV, L.Out, p.rotS, b.SrcMask, false, p.es)
	}
	m.embedBackward(dxs, b.Src, p.drop.Derive(siteSrcEmbed), b.B, b.S)
	return nil
}
