package seq2seq

import "github.com/roformer-go/roformer/kernels"

// fusedTrainMinT is the shortest length at which training takes the fused
// attention: a sub-layer of Tq queries over Tk keys does when
// Tq·Tk ≥ fusedTrainMinT², the size of a head's score matrix at which
// model/roformer's encoder switches (1,024 tokens: there the fused
// backward, which recomputes q·kᵀ, catches up with the one that reads
// saved probabilities, and those cost B·NH·Tq·Tk floats a sub-layer).
var fusedTrainMinT = 1024

// fusedOff turns the fused kernels off everywhere: the tests' reference
// is the saved-probability path.
var fusedOff = false

// useFused reports whether a sub-layer of Tq queries over Tk keys takes the
// fused attention: inference (no saved state) at every length, training
// from fusedTrainMinT² score entries.
func useFused(train bool, Tq, Tk int) bool {
	if fusedOff {
		return false
	}
	if !train {
		return true
	}
	return int64(Tq)*int64(Tk) >= int64(fusedTrainMinT)*int64(fusedTrainMinT)
}

// attend sets a.att = softmax(q·kᵀ/√HS + mask)·v of a's q, k, v
// (mask the key mask or nil, causal the decoder's mask), through
// kernels.FlashAttentionForward when useFused says so, keeping a.lse
// [B, NH, T] in training, else through kernels.AttentionForward, keeping
// a.probs [B, NH, T, T] in training.
func (a *selfAttnAct) attend(mask []float32, causal, train bool, d dims) {
	a.att, a.probs, a.lse = make([]float32, d.BT()*d.C), nil, nil
	if useFused(train, d.T, d.T) {
		if train {
			a.lse = make([]float32, d.B*d.NH*d.T)
		}
		kernels.FlashAttentionForward(a.att, a.lse, a.q, a.k, a.v, mask, causal, kernels.Dropout{}, d.B, d.T, d.NH, d.HS)
		return
	}
	if train {
		a.probs = make([]float32, d.B*d.NH*d.T*d.T)
	}
	kernels.AttentionForward(a.att, a.probs, a.q, a.k, a.v, mask, causal, kernels.Dropout{}, d.B, d.T, d.NH, d.HS)
}

// attendBackward differentiates attend into dq, dk, dv [BT, C] (written)
// from datt, the gradient of a.att.
func (a *selfAttnAct) attendBackward(dq, dk, dv, datt, mask []float32, causal bool, d dims) {
	if a.lse != nil {
		kernels.FlashAttentionBackward(dq, dk, dv, datt, a.q, a.k, a.v, a.att, a.lse, mask, causal, kernels.Dropout{}, d.B, d.T, d.NH, d.HS)
		return
	}
	kernels.AttentionBackward(dq, dk, dv, datt, a.q, a.k, a.v, a.probs, mask, causal, kernels.Dropout{}, d.B, d.T, d.NH, d.HS)
}

// attend sets a.att = softmax(q·kcᵀ/√HS + srcMask)·vc, the decoder's T
// queries over the S source keys, through
// kernels.FlashCrossAttentionForward when useFused says so (a.lse
// [B, NH, T] kept in training), else kernels.CrossAttentionForward (a.probs
// [B, NH, T, S] kept in training).
func (a *crossAttnAct) attend(srcMask []float32, train bool, d dims, S int) {
	a.att, a.probs, a.lse = make([]float32, d.BT()*d.C), nil, nil
	if useFused(train, d.T, S) {
		if train {
			a.lse = make([]float32, d.B*d.NH*d.T)
		}
		kernels.FlashCrossAttentionForward(a.att, a.lse, a.q, a.kc, a.vc, srcMask, false, d.B, d.T, S, d.NH, d.HS)
		return
	}
	if train {
		a.probs = make([]float32, d.B*d.NH*d.T*S)
	}
	kernels.CrossAttentionForward(a.att, a.probs, a.q, a.kc, a.vc, srcMask, d.B, d.T, S, d.NH, d.HS)
}

// attendBackward differentiates attend into dq [BT, C] and dkc, dvc
// [B·S, C] (written) from datt, the gradient of a.att.
func (a *crossAttnAct) attendBackward(dq, dkc, dvc, datt, srcMask []float32, d dims, S int) {
	if a.lse != nil {
		kernels.FlashCrossAttentionBackward(dq, dkc, dvc, datt, a.q, a.kc, a.vc, a.att, a.lse, srcMask, false, d.B, d.T, S, d.NH, d.HS)
		return
	}
	kernels.CrossAttentionBackward(dq, dkc, dvc, datt, a.q, a.kc, a.vc, a.probs, srcMask, d.B, d.T, S, d.NH, d.HS)
}
