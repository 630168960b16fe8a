package roformer

import "github.com/roformer-go/roformer/kernels"

// fusedTrainMinT is the shortest row for which training takes the fused
// attention. Measured with kernels' BenchmarkFlashAttention on the small
// model's heads (2 Zen 5 cores, GFLOP per CPU-second, 128×128 backward
// tiles), fused against saved-probability backward: 8×128 76–94 vs 133,
// 1×512 118 vs 153, 1×1024 118 vs 115–136, 1×2048 103–119 vs 120,
// 1×4096 122 vs 108; and the probabilities cost B·NH·T² floats a layer.
var fusedTrainMinT = 1024

// fusedAttention runs one layer's softmax self-attention through
// kernels.FlashAttentionForward when that kernel computes it: absolute or
// rotary positions (relative ones have their own kernel), the padding and
// causal masks and the UniLM mask of RoFormer-Sim with token type 1 (from
// s.unilm, tile by tile, as kernels.FlashSegmentAttentionForward; without
// dropout, as unilmAttention), training's dropout on the probabilities (the
// same masks as kernels.AttentionForward's), and no pass that returns them
// (OutputAttentions). It then keeps no [B, NH, T, T] probabilities: a
// training state keeps la.lse [B, NH, T] for fusedAttentionBackward, so
// memory grows linearly in T. Otherwise it reports false, having given a
// training state the probabilities the other kernels fill.
//
// Inference takes it at every length (the fused forward is as fast as the
// blocked one at 8×128 and faster from 512 on), its two products in
// bfloat16 under PrecisionBF16 (kernels.FlashAttentionForwardBF16); training from
// fusedTrainMinT tokens on, where the fused backward (which recomputes
// q·kᵀ) catches up with the one that reads saved probabilities, its
// products in bfloat16 forward and backward under SetTrainingPrecision's
// PrecisionBF16 (bf16Attention).
func (m *Model) fusedAttention(s *State, l int, la *layerActs) bool {
	cfg := &m.Config
	B, T, NH := s.B, s.T, cfg.NumAttentionHeads
	drop := s.dropAt(l, siteAttnProbs, cfg.AttentionProbsDropoutProb, NH*T*T)
	if cfg.PosEnc() == PosRelative || (s.train && (s.wantProbs || T < fusedTrainMinT)) {
		if s.train && la.probs == nil {
			la.probs = make([]float32, B*NH*T*T)
		}
		la.lse = nil
		return false
	}
	if s.train {
		if len(la.lse) != B*NH*T {
			la.lse = make([]float32, B*NH*T)
		}
		la.probs = nil
	}
	bf16 := m.bf16Attention(s)
	if s.unilm != nil {
		// ctx = softmax(q·kᵀ/√HS + mask)·v, key j hidden from query i
		// where unilm[j] > unilm[i]
		if bf16 {
			kernels.FlashSegmentAttentionForwardBF16(la.ctx, la.lse, la.q, la.k, la.v, s.keyMask, s.unilm, kernels.Dropout{}, B, T, NH, cfg.HeadSize())
		} else {
			kernels.FlashSegmentAttentionForward(la.ctx, la.lse, la.q, la.k, la.v, s.keyMask, s.unilm, kernels.Dropout{}, B, T, NH, cfg.HeadSize())
		}
		return true
	}
	// ctx = softmax(q·kᵀ/√HS + mask)·v, tile by tile
	if bf16 {
		kernels.FlashAttentionForwardBF16(la.ctx, la.lse, la.q, la.k, la.v, s.keyMask, s.causal, drop, B, T, NH, cfg.HeadSize())
	} else {
		kernels.FlashAttentionForward(la.ctx, la.lse, la.q, la.k, la.v, s.keyMask, s.causal, drop, B, T, NH, cfg.HeadSize())
	}
	return true
}

// fusedAttentionBackward differentiates a layer whose forward pass took
// fusedAttention (la.lse set), from la.ctx and la.lse; drop is the forward
// pass's dropout on the probabilities (none under the UniLM mask).
func (m *Model) fusedAttentionBackward(s *State, la *layerActs, g *gradBuffers, drop kernels.Dropout) {
	cfg := &m.Config
	seg, full := kernels.FlashSegmentAttentionBackward, kernels.FlashAttentionBackward
	if m.bf16Attention(s) {
		seg, full = kernels.FlashSegmentAttentionBackwardBF16, kernels.FlashAttentionBackwardBF16
	}
	if s.unilm != nil {
		seg(g.dq, g.dk, g.dv, g.dcx, la.q, la.k, la.v, la.ctx, la.lse, s.keyMask, s.unilm, drop, s.B, s.T, cfg.NumAttentionHeads, cfg.HeadSize())
		return
	}
	full(g.dq, g.dk, g.dv, g.dcx, la.q, la.k, la.v, la.ctx, la.lse, s.keyMask, s.causal, drop, s.B, s.T, cfg.NumAttentionHeads, cfg.HeadSize())
}

// bf16Attention says whether the fused attention of a pass with s takes
// its tile products in bfloat16: in inference prepared in PrecisionBF16,
// and under SetTrainingPrecision(PrecisionBF16) in training and in the
// passes whose linear layers that setting runs (nothing prepared).
func (m *Model) bf16Attention(s *State) bool {
	if s.train || m.lowp == nil {
		return m.trainBF16
	}
	return m.Precision() == PrecisionBF16
}
