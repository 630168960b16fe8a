package roformer

import (
	"fmt"

	"github.com/roformer-go/roformer/kernels"
)

// The training passes under RoFormer-Sim's UniLM mask, and a caller's loss
// on the pooler output (RoFormer-Sim's similarity loss), for
// ForwardBackward and TrainEncode.

// setTrainInputs copies b into s for a training pass and resolves its mask
// as Forward's passMask does, with StepOptions.UniLM forcing MaskUniLM:
// under MaskUniLM (opts.UniLM, or a RoFormer-Sim model) a row with a token
// type other than 0 gets the UniLM mask and a batch of type 0 alone is
// bidirectional; otherwise the pass is causal when opts.Causal, is_decoder
// or a causal head says so.
func (m *Model) setTrainInputs(s *State, b *Batch, opts StepOptions) error {
	if opts.Causal || !(opts.UniLM || m.IsSim()) {
		m.setInputs(s, b, opts.Causal || m.Config.IsDecoder || kindOf(m.Head).causal)
		return nil
	}
	seg := unilmSegments(b)
	if seg != nil && (m.Config.Attention() != AttnSoftmax || m.Config.PosEnc() == PosRelative) {
		return fmt.Errorf("roformer: training under the UniLM mask needs softmax attention without relative positions (attention_type %s, position_embedding_type %s)", m.Config.Attention(), m.Config.PosEnc())
	}
	m.setInputs(s, b, false)
	s.unilm = seg
	return nil
}

// unilmSegments returns the running sums of b's token types [B·T], the
// rule of MaskUniLM (token i sees token j when seg[j] ≤ seg[i]), or nil
// when every type is 0.
func unilmSegments(b *Batch) []int32 {
	mixed := false
	for _, v := range b.TokenTypeIDs {
		if v != 0 {
			mixed = true
			break
		}
	}
	if !mixed {
		return nil
	}
	seg := make([]int32, b.B*b.T)
	for r := range b.B {
		var c int32
		for t := range b.T {
			c += b.TokenTypeIDs[r*b.T+t]
			seg[r*b.T+t] = c
		}
	}
	return seg
}

// poolerTrain runs the pooler on the first token of each row of x [B·T, H],
// hands pooled [B, H] to loss, which returns its value and writes
// dpooled [B, H] (=), and back-propagates it: the pooler's parameter
// gradients are accumulated and the first token's rows of dx [B·T, H] get
// the gradient added (+=, after the head's).
//
//	pooled = act(W·x[r·T] + b)
//	⇒ dz = dpooled ⊙ act′(z), dW += dzᵀ·first, db += Σ dz, dx[r·T] += dz·W
func (m *Model) poolerTrain(dx, x []float32, B, T int, loss func(pooled, dpooled []float32, B, H int) (float64, error)) (float64, error) {
	p := m.Encoder.Pooler
	if p == nil {
		return 0, fmt.Errorf("roformer: a pooled loss needs a pooler (roformer.pooler.dense; EnablePooler)")
	}
	H := m.Config.HiddenSize
	act, err := kernels.ParseActivation(m.Config.PoolerActivationName())
	if err != nil {
		return 0, err
	}
	first, z, pooled, dact := make([]float32, B*H), make([]float32, B*H), make([]float32, B*H), make([]float32, B*H)
	for r := range B {
		copy(first[r*H:r*H+H], x[r*T*H:r*T*H+H])
	}
	m.matmul(z, first, p.W.Data, p.Bias(), B, H, H)
	kernels.ActivationForwardSaveGrad(pooled, dact, z, act, B*H)
	dpooled := make([]float32, B*H)
	l, err := loss(pooled, dpooled, B, H)
	if err != nil {
		return 0, err
	}
	dz, dfirst := make([]float32, B*H), make([]float32, B*H)
	kernels.ActivationBackwardSaved(dz, dpooled, dact, B*H)
	m.linearBackward(p, dfirst, dz, first, B)
	for r := range B {
		row := dx[r*T*H : r*T*H+H]
		for i, g := range dfirst[r*H : r*H+H] {
			row[i] += g
		}
	}
	return l, nil
}
