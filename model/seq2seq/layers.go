package seq2seq

import (
	"math"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
)

// This file holds the three pre-LN sub-layers as forward/backward pairs
// (llm.c style): each forward reads the residual stream x and writes
// out = x + Drop(f(LN(x))), saving what its backward needs; each backward
// turns dout (the gradient of out, in dx) into the gradient of x in place,
// accumulating parameter gradients (+=).

// dims are the shapes a pass runs at.
type dims struct{ B, T, C, NH, HS int }

func (d dims) BT() int { return d.B * d.T }

// layerNorm runs LN over [BT, C] rows, saving mean and rstd.
type normAct struct{ out, mean, rstd []float32 }

func newNormAct(BT, C int) normAct {
	return normAct{make([]float32, BT*C), make([]float32, BT), make([]float32, BT)}
}

// selfAttnAct is what self-attention saves.
type selfAttnAct struct {
	in      []float32 // x [BT, C] (not owned)
	ln      normAct
	q, k, v []float32 // [BT, C], q and k rotated
	probs   []float32 // [B, NH, T, T] in training, unless fused
	lse     []float32 // [B, NH, T] in fused training
	att     []float32 // [BT, C]
	drop    kernels.Dropout
}

// rotation is the sin/cos table of positions 0 … T−1 ([T, HS/2] each), or
// nil without RoPE.
type rotation struct{ sin, cos []float32 }

// selfAttnForward: out = x + Drop(Out·Attn(rot(q), rot(k), v)), q k v = QKV·LN(x).
//
//	out  [BT, C]  written
//	x    [BT, C]
//	mask [B, T] key mask or nil
//
// train keeps what selfAttnBackward needs (attend).
func (m *Model) selfAttnForward(a *selfAttnAct, out, x []float32, norm nn.LayerNorm, qkvL, outL nn.Linear, rot *rotation, mask []float32, causal, train bool, drop kernels.Dropout, d dims) {
	BT, C := d.BT(), d.C
	a.in, a.drop = x, drop
	a.ln = newNormAct(BT, C)
	norm.Forward(a.ln.out, a.ln.mean, a.ln.rstd, x, float32(m.Config.LayerNormEps), BT, C)
	qkv := make([]float32, BT*3*C)
	qkvL.Forward(qkv, a.ln.out, BT)
	a.q, a.k, a.v = make([]float32, BT*C), make([]float32, BT*C), make([]float32, BT*C)
	kernels.SplitQKV(a.q, a.k, a.v, qkv, BT, C)
	if m.rot != nil {
		m.rot.Forward(a.q, rot.sin, rot.cos, d.B, d.T, d.NH)
		m.rot.Forward(a.k, rot.sin, rot.cos, d.B, d.T, d.NH)
	}
	a.attend(mask, causal, train, d)
	outL.Forward(out, a.att, BT)
	kernels.DropoutForward(out, drop, BT*C)
	kernels.AddForward(out, out, x, BT*C)
}

// selfAttnBackward differentiates selfAttnForward.
//
//	dx [BT, C]  dL/dout in, dL/dx out
func (m *Model) selfAttnBackward(dx []float32, a *selfAttnAct, norm nn.LayerNorm, qkvL, outL nn.Linear, rot *rotation, mask []float32, causal bool, d dims) {
	BT, C := d.BT(), d.C
	// out = x + Drop(o)  ⇒  do = Drop(dout); dx = dout + …
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
	dln := make([]float32, BT*C)
	qkvL.Backward(dln, dqkv, a.ln.out, BT)
	// ln = LN(x): LayerNormBackward adds into dx, which holds dout: the residual.
	norm.Backward(dx, dln, a.in, a.ln.mean, a.ln.rstd, BT, C)
}

// crossAttnAct is what cross-attention saves; kc and vc are the layer's
// keys and values of the encoder output.
type crossAttnAct struct {
	in     []float32 // x [BT, C] (not owned)
	ln     normAct
	q      []float32 // [BT, C]
	kc, vc []float32 // [B, S, C]
	probs  []float32 // [B, NH, T, S] in training, unless fused
	lse    []float32 // [B, NH, T] in fused training
	att    []float32 // [BT, C]
	drop   kernels.Dropout
}

// crossAttnForward: out = x + Drop(Out·Attn(Q·LN(x), K·enc, V·enc)), no rotation.
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
	a.ln = newNormAct(BT, C)
	l.CrossNorm.Forward(a.ln.out, a.ln.mean, a.ln.rstd, x, float32(m.Config.LayerNormEps), BT, C)
	a.q = make([]float32, BT*C)
	l.Q.Forward(a.q, a.ln.out, BT)
	a.kc, a.vc = m.crossKV(l, enc, d.B*S)
	a.attend(srcMask, train, d, S)
	l.CrossOut.Forward(out, a.att, BT)
	kernels.DropoutForward(out, drop, BT*C)
	kernels.AddForward(out, out, x, BT*C)
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
	// q = LN(x)·Qᵀ + b
	dln := make([]float32, BT*C)
	l.Q.Backward(dln, dq, a.ln.out, BT)
	l.CrossNorm.Backward(dx, dln, a.in, a.ln.mean, a.ln.rstd, BT, C)
}

// ffnAct is what the feed-forward block saves.
type ffnAct struct {
	in   []float32 // x [BT, C] (not owned)
	ln   normAct
	act  []float32 // act(h) [BT, I]
	dact []float32 // act'(h) [BT, I]
	drop kernels.Dropout
}

// ffnForward: out = x + Drop(FC2·act(FC1·LN(x))).
func (m *Model) ffnForward(a *ffnAct, out, x []float32, norm nn.LayerNorm, fc1, fc2 nn.Linear, drop kernels.Dropout, BT int) {
	C, I := m.Config.DModel, m.Config.FFN
	a.in, a.drop = x, drop
	a.ln = newNormAct(BT, C)
	norm.Forward(a.ln.out, a.ln.mean, a.ln.rstd, x, float32(m.Config.LayerNormEps), BT, C)
	h := make([]float32, BT*I)
	fc1.Forward(h, a.ln.out, BT)
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
	kernels.AddForward(out, out, x, BT*C)
}

// ffnBackward differentiates ffnForward; dx holds dL/dout in, dL/dx out.
func (m *Model) ffnBackward(dx []float32, a *ffnAct, norm nn.LayerNorm, fc1, fc2 nn.Linear, BT int) {
	C, I := m.Config.DModel, m.Config.FFN
	df := append([]float32(nil), dx...)
	kernels.DropoutBackward(df, a.drop, BT*C)
	// f = act·FC2ᵀ + b2
	dh := make([]float32, BT*I)
	fc2.Backward(dh, df, a.act, BT)
	// act = act(h)
	kernels.ActivationBackwardSaved(dh, dh, a.dact, BT*I)
	// h = LN(x)·FC1ᵀ + b1
	dln := make([]float32, BT*C)
	fc1.Backward(dln, dh, a.ln.out, BT)
	norm.Backward(dx, dln, a.in, a.ln.mean, a.ln.rstd, BT, C)
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
