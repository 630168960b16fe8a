package roformer

import (
	"fmt"

	"github.com/roformer-go/roformer/kernels"
)

// attentionForward runs one layer's attention on the projected q, k, v of
// la and writes la.ctx [BT, H]: the position encoding inside attention
// (rotary or relative) and the attention kind (softmax, linear, performer).
// The default, rotary softmax, is HF's RoFormerSelfAttention call for call.
func (m *Model) attentionForward(s *State, l int, la *layerActs) {
	cfg := &m.Config
	B, T, NH := s.B, s.T, cfg.NumAttentionHeads
	HS := cfg.HeadSize()
	rotary := cfg.PosEnc() == PosRotary
	if cfg.Attention() != AttnSoftmax {
		m.linearAttentionForward(s, l, la)
		return
	}
	// q, k (and v) rotated by RoPE
	if rotary {
		ksin, kcos := s.keySinCos()
		m.rotary.Forward(la.q, s.sin, s.cos, B, T, NH)
		m.rotary.Forward(la.k, ksin, kcos, B, T, NH)
		if cfg.RotaryValue {
			m.rotary.Forward(la.v, s.sin, s.cos, B, T, NH)
		}
	}
	if c := s.cache; c != nil {
		// Cached decoding: keep this step's keys and values; after the
		// prompt, attend to every cached token.
		c.store(l, la.k, la.v, T, cfg.HiddenSize)
		if c.n > 0 {
			c.attend(l, la.ctx, la.q, T, NH, HS)
			return
		}
	}
	if m.fusedAttention(s, l, la) {
		return
	}
	if s.unilm != nil {
		// RoFormer-Sim with token type 1: the UniLM mask (passMask), for
		// the passes fusedAttention leaves (training below fusedTrainMinT,
		// or one that returns the attentions)
		unilmAttention(la.ctx, la.probs, la.q, la.k, la.v, s.keyMask, s.unilm, B, T, NH, HS)
		return
	}
	drop := s.dropAt(l, siteAttnProbs, cfg.AttentionProbsDropoutProb, NH*T*T)
	if cfg.PosEnc() == PosRelative {
		// ctx = softmax((q·kᵀ + q·a_{clip(j−i)}ᵀ)/√HS + mask)·v
		kernels.RelativeAttentionForward(la.ctx, la.probs, la.q, la.k, la.v, m.Encoder.Layers[l].RelKey.Data, s.keyMask, s.causal, drop, cfg.RelativeMaxDistance, B, T, NH, HS)
		return
	}
	// ctx = softmax(q·kᵀ/√HS + mask)·v
	if m.bf16Attention(s) {
		kernels.AttentionForwardBF16(la.ctx, la.probs, la.q, la.k, la.v, s.keyMask, s.causal, drop, B, T, NH, HS)
		return
	}
	kernels.AttentionForward(la.ctx, la.probs, la.q, la.k, la.v, s.keyMask, s.causal, drop, B, T, NH, HS)
}

// attentionBackward differentiates attentionForward: from g.dcx, the
// gradient of la.ctx, it writes g.dq, g.dk, g.dv, the gradients of the
// projected (unrotated) q, k, v, and accumulates the relative embeddings'
// gradient.
func (m *Model) attentionBackward(s *State, l int, la *layerActs, g *gradBuffers) {
	cfg := &m.Config
	B, T, NH := s.B, s.T, cfg.NumAttentionHeads
	HS := cfg.HeadSize()
	rotary := cfg.PosEnc() == PosRotary
	if cfg.Attention() != AttnSoftmax {
		m.linearAttentionBackward(s, l, la, g)
		return
	}
	drop := s.dropAt(l, siteAttnProbs, cfg.AttentionProbsDropoutProb, NH*T*T)
	if s.unilm != nil {
		// unilmAttention drew no dropout; its probabilities are 0 on the
		// keys it hides, so the plain backward below is its derivative
		drop = kernels.Dropout{}
	}
	if la.lse != nil && la.probs == nil {
		m.fusedAttentionBackward(s, la, g, drop) // the forward pass took fusedAttention
	} else if cfg.PosEnc() == PosRelative {
		L := &m.Encoder.Layers[l]
		kernels.RelativeAttentionBackward(g.dq, g.dk, g.dv, L.RelKey.Grad, g.dcx, la.q, la.k, la.v, L.RelKey.Data, la.probs, s.keyMask, s.causal, drop, cfg.RelativeMaxDistance, B, T, NH, HS)
	} else if m.bf16Attention(s) && s.unilm == nil {
		// ctx = attention(q, k, v), its products in bfloat16 as forward
		kernels.AttentionBackwardBF16(g.dq, g.dk, g.dv, g.dcx, la.q, la.k, la.v, la.probs, s.keyMask, s.causal, drop, B, T, NH, HS)
	} else {
		// ctx = attention(q, k, v)
		kernels.AttentionBackward(g.dq, g.dk, g.dv, g.dcx, la.q, la.k, la.v, la.probs, s.keyMask, s.causal, drop, B, T, NH, HS)
	}
	// q, k (, v) rotated
	if rotary {
		ksin, kcos := s.keySinCos()
		m.rotary.Backward(g.dq, s.sin, s.cos, B, T, NH)
		m.rotary.Backward(g.dk, ksin, kcos, B, T, NH)
		if cfg.RotaryValue {
			m.rotary.Backward(g.dv, s.sin, s.cos, B, T, NH)
		}
	}
}

// linearAttentionForward is attention_type linear or performer:
//
//	φq = φ(q), φk = φ(k)                       (elu+1, or FAVOR+ with this layer's ω)
//	ctx = LinearAttention(num: R φq, R φk; den: φq, φk; v)   with rotary (eq. 19)
//	ctx = LinearAttention(num = den: φq, φk; v)              otherwise
//
// Rotary positions turn the features after the feature map, with the
// frequencies of a head of width F, and leave the normaliser unrotated, as
// the paper's eq. (19) says. (lucidrains/performer-pytorch instead rotates q
// and k before the feature map, so its normaliser sees rotated features;
// this is the paper's form.) Attention-probability dropout does not apply:
// there are no probabilities.
func (m *Model) linearAttentionForward(s *State, l int, la *layerActs) {
	cfg := &m.Config
	B, T, NH := s.B, s.T, cfg.NumAttentionHeads
	HS, F := cfg.HeadSize(), cfg.NumFeatures()
	BT := B * T
	rotary := cfg.PosEnc() == PosRotary
	if rotary && cfg.RotaryValue {
		m.rotary.Forward(la.v, s.sin, s.cos, B, T, NH)
	}
	switch cfg.Attention() {
	case AttnLinear:
		kernels.EluFeatureForward(la.fq, la.q, BT*NH*HS)
		kernels.EluFeatureForward(la.fk, la.k, BT*NH*HS)
	case AttnPerformer:
		kernels.FavorFeatureForward(la.fq, la.q, m.omega[l], true, B, T, NH, HS, F)
		kernels.FavorFeatureForward(la.fk, la.k, m.omega[l], false, B, T, NH, HS, F)
	default:
		panic(fmt.Sprintf("roformer: attention %q has no feature map", cfg.Attention()))
	}
	qn, kn := la.fq, la.fk
	if rotary {
		copy(la.fqr, la.fq)
		copy(la.fkr, la.fk)
		m.featRotary.Forward(la.fqr, s.fsin, s.fcos, B, T, NH)
		m.featRotary.Forward(la.fkr, s.fsin, s.fcos, B, T, NH)
		qn, kn = la.fqr, la.fkr
	}
	kernels.LinearAttentionForward(la.ctx, la.den, qn, kn, la.fq, la.fk, la.v, s.keyMask, s.causal, B, T, NH, F, HS)
}

// linearAttentionBackward differentiates linearAttentionForward.
func (m *Model) linearAttentionBackward(s *State, l int, la *layerActs, g *gradBuffers) {
	cfg := &m.Config
	B, T, NH := s.B, s.T, cfg.NumAttentionHeads
	HS, F := cfg.HeadSize(), cfg.NumFeatures()
	BT := B * T
	rotary := cfg.PosEnc() == PosRotary
	qn, kn := la.fq, la.fk
	if rotary {
		qn, kn = la.fqr, la.fkr
	}
	// ctx = LinearAttention(qn, kn; fq, fk; v)
	kernels.LinearAttentionBackward(g.dfq, g.dfk, g.dfqd, g.dfkd, g.dv, g.dcx, qn, kn, la.fq, la.fk, la.v, la.den, s.keyMask, s.causal, B, T, NH, F, HS)
	// qn = R fq, kn = R fk: rotate the numerator gradients back, then add
	// the denominator's, which reached fq and fk directly.
	if rotary {
		m.featRotary.Backward(g.dfq, s.fsin, s.fcos, B, T, NH)
		m.featRotary.Backward(g.dfk, s.fsin, s.fcos, B, T, NH)
	}
	kernels.AddForward(g.dfq, g.dfq, g.dfqd, BT*NH*F)
	kernels.AddForward(g.dfk, g.dfk, g.dfkd, BT*NH*F)
	// fq = φ(q), fk = φ(k)
	switch cfg.Attention() {
	case AttnLinear:
		kernels.EluFeatureBackward(g.dq, g.dfq, la.q, BT*NH*HS)
		kernels.EluFeatureBackward(g.dk, g.dfk, la.k, BT*NH*HS)
	case AttnPerformer:
		kernels.FavorFeatureBackward(g.dq, g.dfq, la.fq, la.q, m.omega[l], true, B, T, NH, HS, F)
		kernels.FavorFeatureBackward(g.dk, g.dfk, la.fk, la.k, m.omega[l], false, B, T, NH, HS, F)
	}
	if rotary && cfg.RotaryValue {
		m.rotary.Backward(g.dv, s.sin, s.cos, B, T, NH)
	}
}
