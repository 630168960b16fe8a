package roformer

import (
	"context"
	"fmt"
	"math"

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
	Loss            float64          // HF's loss when labels were given
	HasLoss         bool
	ProblemType     string // the loss used by sequence classification
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
	causal := opts.Causal || m.Config.IsDecoder || m.Head == HeadCausalLM
	if m.Head == HeadMultipleChoice {
		if opts.NumChoices <= 0 || b.B%opts.NumChoices != 0 {
			return nil, fmt.Errorf("roformer: multiple choice needs rows = examples × choices; %d rows, %d choices", b.B, opts.NumChoices)
		}
	}
	debug := opts.OutputAttentions || opts.OutputHiddenStates
	var s *State
	if se != nil && !debug {
		if se.s == nil || se.s.B != b.B || se.s.T != b.T {
			se.s = m.NewState(b.B, b.T, false)
		}
		s = se.s
	} else {
		s = m.NewState(b.B, b.T, debug)
	}
	m.setInputs(s, b, causal)
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
	if err := m.headForward(out, x, b, labels, opts, se); err != nil {
		return nil, err
	}
	return out, nil
}

// headForward computes the head's outputs and loss from the last hidden state x [BT, H].
func (m *Model) headForward(out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error {
	cfg := &m.Config
	B, T, H, E, V := b.B, b.T, cfg.HiddenSize, cfg.EmbeddingSize, cfg.VocabSize
	BT := B * T
	switch m.Head {
	case HeadBase:
		return nil
	case HeadMaskedLM, HeadCausalLM:
		var logits []float32
		var acts *lmActs
		if se != nil {
			logits = grow(&se.logits, BT*V)
			acts = &lmActs{pre: grow(&se.lm.pre, BT*E), post: grow(&se.lm.post, BT*E), ln: grow(&se.lm.ln, BT*E), mean: grow(&se.lm.mean, BT), rstd: grow(&se.lm.rstd, BT)}
		} else {
			logits = make([]float32, BT*V)
		}
		m.lmLogits(logits, x, BT, acts)
		out.Logits = &tensor.Tensor{Shape: []int{B, T, V}, Data: logits}
		if labels != nil && labels.IDs != nil {
			if len(labels.IDs) != BT {
				return fmt.Errorf("roformer: labels have %d values, want %d (%d × %d)", len(labels.IDs), BT, B, T)
			}
			if err := checkClassIDs("labels", labels.IDs, V); err != nil {
				return err
			}
			targets := labels.IDs
			if m.Head == HeadCausalLM {
				// logits[:, :-1] predict labels[:, 1:]
				targets = shiftLeft(labels.IDs, B, T)
			}
			out.Loss, out.HasLoss = meanCE(logits, targets, BT, V), true
		}
	case HeadSequenceCls:
		NL := cfg.NumLabels
		logits := make([]float32, B*NL)
		m.classifierLogits(logits, x, B, T, nil)
		out.Logits = &tensor.Tensor{Shape: []int{B, NL}, Data: logits}
		if labels != nil {
			loss, pt, err := seqClsLoss(cfg, logits, labels, B, NL)
			if err != nil {
				return err
			}
			out.Loss, out.HasLoss, out.ProblemType = loss, true, pt
		}
	case HeadTokenCls:
		NL := cfg.NumLabels
		logits := make([]float32, BT*NL)
		m.matmul(logits, x, m.TokenCls.W.Data, m.TokenCls.B.Data, BT, H, NL)
		out.Logits = &tensor.Tensor{Shape: []int{B, T, NL}, Data: logits}
		if labels != nil && labels.IDs != nil {
			if len(labels.IDs) != BT {
				return fmt.Errorf("roformer: labels have %d values, want %d (%d × %d)", len(labels.IDs), BT, B, T)
			}
			if err := checkClassIDs("labels", labels.IDs, NL); err != nil {
				return err
			}
			out.Loss, out.HasLoss = meanCE(logits, labels.IDs, BT, NL), true
		}
	case HeadQA:
		both := make([]float32, BT*2)
		m.matmul(both, x, m.QA.W.Data, m.QA.B.Data, BT, H, 2)
		start, end := make([]float32, BT), make([]float32, BT)
		for i := 0; i < BT; i++ {
			start[i], end[i] = both[2*i], both[2*i+1]
		}
		out.StartLogits = &tensor.Tensor{Shape: []int{B, T}, Data: start}
		out.EndLogits = &tensor.Tensor{Shape: []int{B, T}, Data: end}
		if labels != nil && labels.StartPositions != nil && labels.EndPositions != nil {
			if len(labels.StartPositions) != B || len(labels.EndPositions) != B {
				return fmt.Errorf("roformer: start/end positions have %d/%d values, want %d", len(labels.StartPositions), len(labels.EndPositions), B)
			}
			// HF clamps positions to [0, T] and ignores index T.
			sp, ep := clampPositions(labels.StartPositions, T), clampPositions(labels.EndPositions, T)
			out.Loss, out.HasLoss = (meanCE(start, sp, B, T)+meanCE(end, ep, B, T))/2, true
		}
	case HeadMultipleChoice:
		nc := opts.NumChoices
		logits := make([]float32, B)
		last := make([]float32, B*H)
		for r := 0; r < B; r++ { // SequenceSummary "last": the last position, padding included
			copy(last[r*H:r*H+H], x[(r*T+T-1)*H:(r*T+T)*H])
		}
		m.matmul(logits, last, m.Choice.W.Data, m.Choice.B.Data, B, H, 1)
		out.Logits = &tensor.Tensor{Shape: []int{B / nc, nc}, Data: logits}
		if labels != nil && labels.IDs != nil {
			if len(labels.IDs) != B/nc {
				return fmt.Errorf("roformer: multiple-choice labels have %d values, want %d", len(labels.IDs), B/nc)
			}
			if err := checkClassIDs("labels", labels.IDs, nc); err != nil {
				return err
			}
			out.Loss, out.HasLoss = meanCE(logits, labels.IDs, B/nc, nc), true
		}
	}
	return nil
}

// lmLogits runs cls.predictions on rows of x [BT, H]: transform.dense → act →
// transform.LayerNorm → decoder tied to the word embeddings + bias. When
// acts is not nil the intermediate values are kept for backward.
func (m *Model) lmLogits(logits, x []float32, N int, acts *lmActs) {
	cfg := &m.Config
	H, E, V := cfg.HiddenSize, cfg.EmbeddingSize, cfg.VocabSize
	a := acts
	if a == nil {
		a = newLMActs(N, E)
	}
	m.matmul(a.pre, x, m.LM.Transform.W.Data, m.LM.Transform.B.Data, N, H, E)
	kernels.ActivationForward(a.post, a.pre, m.act, N*E)
	kernels.LayerNormForward(a.ln, a.mean, a.rstd, a.post, m.LM.LN.W.Data, m.LM.LN.B.Data, float32(cfg.LayerNormEps), N, E)
	m.matmul(logits, a.ln, m.Encoder.Embeddings.Word.Data, m.LM.Bias.Data, N, E, V)
}

// lmActs are the LM head's activations for N rows.
type lmActs struct {
	pre, post, ln []float32 // [N, E]
	mean, rstd    []float32 // [N]
}

func newLMActs(N, E int) *lmActs {
	return &lmActs{pre: make([]float32, N*E), post: make([]float32, N*E), ln: make([]float32, N*E), mean: make([]float32, N), rstd: make([]float32, N)}
}

// classifierLogits runs RoFormerClassificationHead on position 0 of each
// row: dense → act → out_proj.
func (m *Model) classifierLogits(logits, x []float32, B, T int, acts *clsActs) {
	H, NL := m.Config.HiddenSize, m.Config.NumLabels
	a := acts
	if a == nil {
		a = newClsActs(B, H)
	}
	for r := 0; r < B; r++ {
		copy(a.first[r*H:r*H+H], x[r*T*H:r*T*H+H])
	}
	m.matmul(a.pre, a.first, m.Classifier.Dense.W.Data, m.Classifier.Dense.B.Data, B, H, H)
	kernels.ActivationForward(a.post, a.pre, m.act, B*H)
	m.matmul(logits, a.post, m.Classifier.OutProj.W.Data, m.Classifier.OutProj.B.Data, B, H, NL)
}

// clsActs are the classification head's activations.
type clsActs struct{ first, pre, post []float32 } // [B, H]

func newClsActs(B, H int) *clsActs {
	return &clsActs{first: make([]float32, B*H), pre: make([]float32, B*H), post: make([]float32, B*H)}
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

// ProblemType resolves the sequence-classification loss as HF does: the
// config's problem_type if set, else regression for one label, else single
// label when integer labels are given and multi label for float labels.
func ProblemType(cfg *Config, labels *Labels) string {
	if cfg.ProblemType != "" {
		return cfg.ProblemType
	}
	if cfg.NumLabels == 1 {
		return "regression"
	}
	if labels != nil && labels.IDs != nil {
		return "single_label_classification"
	}
	return "multi_label_classification"
}

func seqClsLoss(cfg *Config, logits []float32, labels *Labels, B, NL int) (float64, string, error) {
	pt := ProblemType(cfg, labels)
	switch pt {
	case "regression":
		if len(labels.Floats) != B*NL {
			return 0, pt, fmt.Errorf("roformer: regression needs %d float labels (%d rows × %d), got %d", B*NL, B, NL, len(labels.Floats))
		}
		s := 0.0
		for i, y := range labels.Floats {
			d := float64(logits[i]) - float64(y)
			s += d * d
		}
		return s / float64(B*NL), pt, nil
	case "single_label_classification":
		if len(labels.IDs) != B {
			return 0, pt, fmt.Errorf("roformer: single-label classification needs %d integer labels, got %d", B, len(labels.IDs))
		}
		if err := checkClassIDs("labels", labels.IDs, NL); err != nil {
			return 0, pt, err
		}
		return meanCE(logits, labels.IDs, B, NL), pt, nil
	default: // multi_label_classification: BCEWithLogits, mean over all elements
		if len(labels.Floats) != B*NL {
			return 0, pt, fmt.Errorf("roformer: multi-label classification needs %d float labels (%d rows × %d), got %d", B*NL, B, NL, len(labels.Floats))
		}
		s := 0.0
		for i, y := range labels.Floats {
			z := float64(logits[i])
			// max(z,0) − z·y + log(1+e^−|z|), the stable form PyTorch uses
			s += math.Max(z, 0) - z*float64(y) + math.Log1p(math.Exp(-math.Abs(z)))
		}
		return s / float64(B*NL), pt, nil
	}
}
