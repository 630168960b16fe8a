package seq2seq

import (
	"math"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
)

// This file holds the three sub-layers as forward/backward pairs (llm.c
// style): each forward reads the residual stream x and writes
// out = x + Drop(f(LN(x))) (pre-LN) or out = LN(x + Drop(f(x))) (post-LN),
// saving what its backward needs; each backward turns dout (the gradient of
// out, in dx) into the gradient of x in place, accumulating parameter
// gradients (+=). The two placements differ only in subIn and residual
// (and their backward twins), shared by the three.

// dims are the shapes a pass runs at.
type dims struct{ B, T, C, NH, HS int }

func (d dims) BT() int { return d.B * d.T }

// layerNorm runs LN over [BT, C] rows, saving mean and rstd.
type normAct struct{ out, mean, rstd []float32 }

func newNormAct(BT, C int) normAct {
	return normAct{make([]float32, BT*C), make([]float32, BT), make([]float32, BT)}
}

// subIn returns a sub-layer's input: LN(x) in pre-LN, saved in ln, or x
// itself in post-LN.
//
//	x [BT, C]
func (m *Model) subIn(ln *normAct, norm nn.LayerNorm, x []float32, BT int) []float32 {
	if m.Config.postLN() {
		return x
	}
	C := m.Config.DModel
	*ln = newNormAct(BT, C)
	norm.Forward(ln.out, ln.mean, ln.rstd, x, float32(m.Config.LayerNormEps), BT, C)
	return ln.out
}

// subInBackward differentiates subIn: it adds din, the gradient of the
// sub-layer's input, into dx (which holds the residual's gradient): through
// LN in pre-LN, as it is in post-LN.
func (m *Model) subInBackward(dx, din []float32, ln normAct, norm nn.LayerNorm, x []float32, BT int) {
	if m.Config.postLN() {
		kernels.AddForward(dx, dx, din, BT*m.Config.DModel)
		return
	}
	// LayerNormBackward adds into dx.
	norm.Backward(dx, din, x, ln.mean, ln.rstd, BT, m.Config.DModel)
}

// residual ends a sub-layer whose dropped output f is in out: pre-LN
// out = x + f; post-LN sum = x + f (kept in post.out) and out = LN(sum)
// (post's mean and rstd saved).
//
//	out [BT, C]  f in, the sub-layer's output out
//	x   [BT, C]
func (m *Model) residual(post *normAct, out, x []float32, norm nn.LayerNorm, BT int) {
	C := m.Config.DModel
	kernels.AddForward(out, out, x, BT*C)
	if !m.Config.postLN() {
		return
	}
	*post = newNormAct(BT, C)
	copy(post.out, out)
	norm.Forward(out, post.mean, post.rstd, post.out, float32(m.Config.LayerNormEps), BT, C)
}

// residualBackward differentiates residual's LayerNorm: in post-LN, dx
// holds dL/dout and becomes dL/dsum; in pre-LN out = sum and dx is left.
func (m *Model) residualBackward(dx []float32, post normAct, norm nn.LayerNorm, BT int) {
	if !m.Config.postLN() {
		return
	}
	C := m.Config.DModel
	// out = LN(sum): LayerNormBackward adds, so dsum starts at zero.
	dsum := make([]float32, BT*C)
	norm.Backward(dsum, dx, post.out, post.mean, post.rstd, BT, C)
	copy(dx, dsum)
}

// selfAttnAct is what self-attention saves.
type selfAttnAct struct {
	in      []float32 // x [BT, C] (not owned)
	ln      normAct   // pre-LN: LN(x)
	h       []float32 // the sub-layer's input [BT, C]: ln.out or x
	post    normAct   // post-LN: the residual sum x + Drop(o) in out, and LN's mean and rstd
	q, k, v []float32 // [BT, C], q and k rotated
	probs   []float32 // [B, NH, T, T] in training, unless fused
	lse     []float32 // [B, NH, T] in fused training
	att     []float32 // [BT, C]
	drop    kernels.Dropout
}

// rotation is the sin/cos table of positions 0 … T−1 ([T, HS/2] each), or
// nil without RoPE.
type rotation struct{ sin, cos []float32 }

// selfAttnForward: out = x + Drop(Out·Attn(rot(q), rot(k), v)), q k v = QKV·LN(x)
// (pre-LN), or out = LN(x + Drop(Out·Attn(…))), q k v = QKV·x (post-LN).
//
//	out  [BT, C]  written
//	x    [BT, C]
//	mask [B, T] key mask or nil
//
// train keeps what selfAttnBackward needs (attend).
func (m *Model) selfAttnForward(a *selfAttnAct, out, x []float32, norm nn.LayerNorm, qkvL, outL nn.Linear, rot *rotation, mask []float32, causal, train bool, drop kernels.Dropout, d dims) {
	BT, C := d.BT(), d.C
	a.in, a.drop = x, drop
	a.h = m.subIn(&a.ln, norm, x, BT)
	qkv := make([]float32, BT*3*C)
	qkvL.Forward(qkv, a.h, BT)
	a.q, a.k, a.v = make([]float32, BT*C), make([]float32, BT*C), make([]float32, BT*C)
	kernels.SplitQKV(a.q, a.k, a.v, qkv, BT, C)
	if m.rot != nil {
		m.rot.Forward(a.q, rot.sin, rot.cos, d.B, d.T, d.NH)
		m.rot.Forward(a.k, rot.sin, rot.cos, d.B, d.T, d.NH)
	}
	a.attend(mask, causal, train, d)
	outL.Forward(out, a.att, BT)
	kernels.DropoutForward(out, drop, BT*C)
	m.residual(&a.post, out, x, norm, BT)
}

// selfAttnBackward differentiates selfAttnForward.
//
//	dx [BT, C]  dL/dout in, dL/dx out
func (m *Model) selfAttnBackward(dx []float32, a *selfAttnAct, norm nn.LayerNorm, qkvL, outL nn.Linear, rot *rotation, mask []float32, causal bool, d dims) {
	BT, C := d.BT(), d.C
	// post-LN: out = LN(sum)
	m.residualBackward(dx, a.post, norm, BT)
	// sum = x + Drop(o)  ⇒  do = Drop(dsum); dx = dsum + …
	do := append([]float32(nil), dx...)
	kernels.DropoutBackward(do, a.drop, BT*C)
	// o = att·Outᵀ + b
	datt := make([]float32, BT*C)
	outL.Backward(datt, do, a.att, BT)
	// att = Attn(q, k, v)
	dq, dk, dv := make([]float32, BT*C), make([]float32, BT*C), make([]float32, BT*C)
	a.attendBackward(dq, dk, dv, datt, mask, causal, d)
	// q = rot(q₀), k = rot(k₀)
	if m.rot != nil {
		m.rot.Backward(dq, rot.sin, rot.cos, d.B, d.T, d.NH)
		m.rot.Backward(dk, rot.sin, rot.cos, d.B, d.T, d.NH)
	}
	// qkv = LN(x)·QKVᵀ + b
	dqkv := make([]float32, BT*3*C)
	kernels.ConcatQKV(dqkv, dq, dk, dv, BT, C)
	dh := make([]float32, BT*C)
	qkvL.Backward(dh, dqkv, a.h, BT)
	// h = LN(x) or x; dx holds dsum: the residual.
	m.subInBackward(dx, dh, a.ln, norm, a.in, BT)
}

// crossAttnAct is what cross-attention saves; kc and vc are the layer's
// keys and values of the encoder output.
type crossAttnAct struct {
	in     []float32 // x [BT, C] (not owned)
	ln     normAct   // pre-LN: LN(x)
	h      []float32 // the queries' input [BT, C]: ln.out or x
	post   normAct   // post-LN: the residual sum, LN's mean and rstd
	q      []float32 // [BT, C]
	kc, vc []float32 // [B, S, C]
	probs  []float32 // [B, NH, T, S] in training, unless fused
	lse    []float32 // [B, NH, T] in fused training
	att    []float32 // [BT, C]
	drop   kernels.Dropout
}

// crossAttnForward: out = x + Drop(Out·Attn(Q·LN(x), K·enc, V·enc)) (pre-LN)
// or out = LN(x + Drop(Out·Attn(Q·x, K·enc, V·enc))) (post-LN), no rotation.
//
//	out     [B, T, C]  written
//	x       [B, T, C]
//	enc     [B, S, C]  the encoder's output
//	srcMask [B, S]
//
// train keeps what crossAttnBackward needs (attend).
func (m *Model) crossAttnForward(a *crossAttnAct, out, x, enc, srcMask []float32, l *DecoderLayer, train bool, drop kernels.Dropout, d dims, S int) {
	BT, C := d.BT(), d.C
	a.in, a.drop = x, drop
	a.h = m.subIn(&a.ln, l.CrossNorm, x, BT)
	a.q = make([]float32, BT*C)
	l.Q.Forward(a.q, a.h, BT)
	a.kc, a.vc = m.crossKV(l, enc, d.B*S)
	a.attend(srcMask, train, d, S)
	l.CrossOut.Forward(out, a.att, BT)
	kernels.DropoutForward(out, drop, BT*C)
	m.residual(&a.post, out, x, l.CrossNorm, BT)
}

// crossKV returns the keys and values [BS, C] of enc [BS, C] for layer l.
func (m *Model) crossKV(l *DecoderLayer, enc []float32, BS int) (kc, vc []float32) {
	C := m.Config.DModel
	kv := make([]float32, BS*2*C)
	l.KV.Forward(kv, enc, BS)
	kc, vc = make([]float32, BS*C), make([]float32, BS*C)
	for i := 0; i < BS; i++ {
		copy(kc[i*C:i*C+C], kv[i*2*C:i*2*C+C])
		copy(vc[i*C:i*C+C], kv[i*2*C+C:i*2*C+2*C])
	}
	return kc, vc
}

// crossAttnBackward differentiates crossAttnForward.
//
//	dx   [B, T, C]  dL/dout in, dL/dx out
//	denc [B, S, C]  accumulated (+=)
func (m *Model) crossAttnBackward(dx, denc []float32, a *crossAttnAct, enc, srcMask []float32, l *DecoderLayer, d dims, S int) {
	BT, C := d.BT(), d.C
	// post-LN: out = LN(sum)
	m.residualBackward(dx, a.post, l.CrossNorm, BT)
	// sum = x + Drop(o)
	do := append([]float32(nil), dx...)
	kernels.DropoutBackward(do, a.drop, BT*C)
	datt := make([]float32, BT*C)
	l.CrossOut.Backward(datt, do, a.att, BT)
	dq, dkc, dvc := make([]float32, BT*C), make([]float32, d.B*S*C), make([]float32, d.B*S*C)
	a.attendBackward(dq, dkc, dvc, datt, srcMask, d, S)
	// kv = enc·KVᵀ + b, kc and vc its column halves
	BS := d.B * S
	dkv := make([]float32, BS*2*C)
	for i := 0; i < BS; i++ {
		copy(dkv[i*2*C:i*2*C+C], dkc[i*C:i*C+C])
		copy(dkv[i*2*C+C:i*2*C+2*C], dvc[i*C:i*C+C])
	}
	de := make([]float32, BS*C)
	l.KV.Backward(de, dkv, enc, BS)
	kernels.AddForward(denc, denc, de, BS*C)
	// q = h·Qᵀ + b, h = LN(x) or x
	dh := make([]float32, BT*C)
	l.Q.Backward(dh, dq, a.h, BT)
	m.subInBackward(dx, dh, a.ln, l.CrossNorm, a.in, BT)
}

// ffnAct is what the feed-forward block saves.
type ffnAct struct {
	in   []float32 // x [BT, C] (not owned)
	ln   normAct   // pre-LN: LN(x)
	h    []float32 // FC1's input [BT, C]: ln.out or x
	post normAct   // post-LN: the residual sum, LN's mean and rstd
	act  []float32 // act(h) [BT, I]
	dact []float32 // act'(h) [BT, I]
	drop kernels.Dropout
}

// ffnForward: out = x + Drop(FC2·act(FC1·LN(x))) (pre-LN) or
// out = LN(x + Drop(FC2·act(FC1·x))) (post-LN).
func (m *Model) ffnForward(a *ffnAct, out, x []float32, norm nn.LayerNorm, fc1, fc2 nn.Linear, drop kernels.Dropout, BT int) {
	C, I := m.Config.DModel, m.Config.FFN
	a.in, a.drop = x, drop
	a.h = m.subIn(&a.ln, norm, x, BT)
	h := make([]float32, BT*I)
	fc1.Forward(h, a.h, BT)
	a.act, a.dact = make([]float32, BT*I), make([]float32, BT*I)
	if m.act == kernels.ReLU {
		// ReLU directly: the kernel's generic saved-derivative path costs
		// 10% of a training step at C = 128.
		kernels.ParallelFor(BT, 64, func(lo, hi int) {
			hs, as, ds := h[lo*I:hi*I], a.act[lo*I:hi*I], a.dact[lo*I:hi*I]
			for i, v := range hs {
				if v > 0 {
					as[i], ds[i] = v, 1
				}
			}
		})
	} else {
		kernels.ActivationForwardSaveGrad(a.act, a.dact, h, m.act, BT*I)
	}
	fc2.Forward(out, a.act, BT)
	kernels.DropoutForward(out, drop, BT*C)
	m.residual(&a.post, out, x, norm, BT)
}

// ffnBackward differentiates ffnForward; dx holds dL/dout in, dL/dx out.
func (m *Model) ffnBackward(dx []float32, a *ffnAct, norm nn.LayerNorm, fc1, fc2 nn.Linear, BT int) {
	C, I := m.Config.DModel, m.Config.FFN
	// post-LN: out = LN(sum)
	m.residualBackward(dx, a.post, norm, BT)
	// sum = x + Drop(f)
	df := append([]float32(nil), dx...)
	kernels.DropoutBackward(df, a.drop, BT*C)
	// f = act·FC2ᵀ + b2
	dh := make([]float32, BT*I)
	fc2.Backward(dh, df, a.act, BT)
	// act = act(h)
	kernels.ActivationBackwardSaved(dh, dh, a.dact, BT*I)
	// h = in·FC1ᵀ + b1, in = LN(x) or x
	din := make([]float32, BT*C)
	fc1.Backward(din, dh, a.h, BT)
	m.subInBackward(dx, din, a.ln, norm, a.in, BT)
}

// embedForward: x = Drop(√C·E[ids] (+ PE(positions 0 … T−1))).
//
//	x   [B, T, C]  written
//	ids [B, T]
func (m *Model) embedForward(x []float32, ids []int32, drop kernels.Dropout, B, T int) {
	C := m.Config.DModel
	kernels.EmbeddingForward(x, ids, nil, m.Embed.Data, nil, B*T, C)
	s := float32(math.Sqrt(float64(C)))
	for i := range x {
		x[i] *= s
	}
	if m.rot == nil {
		pe := make([]float32, T*C)
		sinusoid(pe, 0, T, C)
		for b := 0; b < B; b++ {
			kernels.AddForward(x[b*T*C:(b+1)*T*C], x[b*T*C:(b+1)*T*C], pe, T*C)
		}
	}
	kernels.DropoutForward(x, drop, B*T*C)
}

// embedBackward differentiates embedForward into E's gradient.
//
//	dx [B, T, C]  overwritten
func (m *Model) embedBackward(dx []float32, ids []int32, drop kernels.Dropout, B, T int) {
	C := m.Config.DModel
	kernels.DropoutBackward(dx, drop, B*T*C)
	s := float32(math.Sqrt(float64(C)))
	for i := range dx {
		dx[i] *= s
	}
	kernels.EmbeddingBackward(m.Embed.Grad, nil, dx, ids, nil, -1, B*T, C)
}
