package roformer

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/tensor"
)

// Labels are the optional targets of a head; Forward computes HF's loss for
// the head when the matching field is set.
type Labels struct {
	// IDs: masked/causal LM [B·T] token ids (−100 ignored); token
	// classification [B·T] classes (−100 ignored); single-label sequence
	// classification [B]; multiple choice [B/choices].
	IDs []int32
	// Floats: regression [B·NL] targets (NL = 1 usually); multi-label
	// classification [B·NL] of 0/1.
	Floats []float32
	// StartPositions, EndPositions: question answering [B]; HF clamps them to
	// [0, T] and ignores T.
	StartPositions, EndPositions []int32
}

// Options changes what Forward computes.
type Options struct {
	// Causal applies the causal mask even when config.json says is_decoder
	// false (the causal-lm head always does).
	Causal bool
	// NumChoices is the number of choices per example for the multiple-choice
	// head: the batch rows are examples × choices, choice-major within an example.
	NumChoices int
	// SkipHead runs the encoder (and the pooler) only: the head's outputs
	// stay nil and labels are not read. Embedding servers use it.
	SkipHead bool
	// OutputHiddenStates and OutputAttentions return HF's hidden_states
	// (num_layers+1 tensors [B, T, H]) and attentions ([B, NH, T, T] per layer).
	OutputHiddenStates, OutputAttentions bool
}

// Output holds what a head returns, named as HF names its outputs.
type Output struct {
	LastHiddenState *tensor.Tensor   // [B, T, H]
	HiddenStates    []*tensor.Tensor // with OutputHiddenStates
	Attentions      []*tensor.Tensor // with OutputAttentions
	Logits          *tensor.Tensor   // LM [B, T, V]; sequence cls [B, NL]; token cls [B, T, NL]; multiple choice [B/choices, choices]
	StartLogits     *tensor.Tensor   // question answering [B, T]
	EndLogits       *tensor.Tensor   // question answering [B, T]
	PoolerOutput    *tensor.Tensor   // [B, H], when the model has a pooler (RoFormer-Sim)
	Loss            float64          // HF's loss when labels were given
	HasLoss         bool
	ProblemType     string // the loss used by sequence classification
}

// Named returns the output tensor HF calls name ("last_hidden_state",
// "logits", "start_logits", "end_logits"), or nil. Head.Outputs lists the
// names a head returns.
func (o *Output) Named(name string) *tensor.Tensor {
	switch name {
	case "last_hidden_state":
		return o.LastHiddenState
	case "logits":
		return o.Logits
	case "start_logits":
		return o.StartLogits
	case "end_logits":
		return o.EndLogits
	case "pooler_output":
		return o.PoolerOutput
	}
	return nil
}

// Forward runs the model with its head on a batch (HF eval mode: no
// dropout). With labels it also computes the head's loss exactly as HF does.
func (m *Model) Forward(ctx context.Context, b *Batch, labels *Labels, opts Options) (*Output, error) {
	return m.forward(ctx, nil, b, labels, opts)
}

// forward is Forward; with a session, the workspace and the output buffers
// are the session's and are reused.
func (m *Model) forward(ctx context.Context, se *Session, b *Batch, labels *Labels, opts Options) (*Output, error) {
	if err := b.Validate(&m.Config); err != nil {
		return nil, err
	}
	causal, seg, err := m.passMask(b, opts)
	if err != nil {
		return nil, err
	}
	if err := m.checkChoices(b, opts.NumChoices); err != nil {
		return nil, err
	}
	debug := opts.OutputAttentions || opts.OutputHiddenStates
	var s *State
	if se != nil && !debug {
		s = se.state(b.B, b.T)
	} else {
		s = m.NewState(b.B, b.T, debug)
	}
	m.setInputs(s, b, causal)
	s.unilm = seg
	out := &Output{}
	if se != nil {
		se.out = Output{}
		out = &se.out
	}
	B, T, H := b.B, b.T, m.Config.HiddenSize
	var hook func(int, []float32, []float32)
	if debug {
		NH := m.Config.NumAttentionHeads
		hook = func(l int, hidden, probs []float32) {
			if opts.OutputHiddenStates {
				out.HiddenStates = append(out.HiddenStates, &tensor.Tensor{Shape: []int{B, T, H}, Data: append([]float32(nil), hidden...)})
			}
			if opts.OutputAttentions && probs != nil {
				out.Attentions = append(out.Attentions, &tensor.Tensor{Shape: []int{B, NH, T, T}, Data: append([]float32(nil), probs...)})
			}
		}
	}
	x, err := m.encode(ctx, s, hook)
	if err != nil {
		return nil, err
	}
	if se != nil {
		out.LastHiddenState = &tensor.Tensor{Shape: []int{B, T, H}, Data: x} // valid until the next call
	} else {
		out.LastHiddenState = &tensor.Tensor{Shape: []int{B, T, H}, Data: append([]float32(nil), x...)}
	}
	out.PoolerOutput = m.poolerForward(x, B, T)
	if opts.SkipHead {
		return out, nil
	}
	if err := m.headForward(out, x, b, labels, opts, se); err != nil {
		return nil, err
	}
	return out, nil
}

// headForward computes the head's outputs and loss from the last hidden
// state x [BT, H] (see the head's file for what each computes).
func (m *Model) headForward(out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error {
	if k := kindOf(m.Head); k.forward != nil {
		return k.forward(m, out, x, b, labels, opts, se)
	}
	return nil
}

// meanCE is torch.nn.CrossEntropyLoss (mean over the rows whose target is
// not negative); NaN when every row is ignored, as in PyTorch.
func meanCE(logits []float32, targets []int32, N, V int) float64 {
	losses := make([]float32, N)
	kernels.CrossEntropyForward(losses, logits, targets, N, V)
	s, n := 0.0, 0
	for i, t := range targets {
		if t >= 0 {
			s += float64(losses[i])
			n++
		}
	}
	return s / float64(n)
}

func checkClassIDs(name string, ids []int32, n int) error {
	for i, v := range ids {
		if v >= int32(n) || (v < 0 && v != -100) {
			return fmt.Errorf("roformer: %s[%d] = %d is outside [0, %d) and is not the ignore index -100", name, i, v, n)
		}
	}
	return nil
}

// shiftLeft returns labels[:, 1:] padded with −100: the target of position t
// is the token at t+1, and the last position of each row has none.
func shiftLeft(labels []int32, B, T int) []int32 {
	out := make([]int32, B*T)
	for r := 0; r < B; r++ {
		for t := 0; t < T; t++ {
			if t+1 < T {
				out[r*T+t] = labels[r*T+t+1]
			} else {
				out[r*T+t] = -100
			}
		}
	}
	return out
}

// clampPositions clamps to [0, T] and marks T as ignored (−1), as HF's QA loss.
func clampPositions(p []int32, T int) []int32 {
	out := make([]int32, len(p))
	for i, v := range p {
		v = max(0, min(v, int32(T)))
		if v == int32(T) {
			v = -1
		}
		out[i] = v
	}
	return out
}
