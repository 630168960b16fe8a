package roformer

import (
	"fmt"
	"math"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
	"github.com/roformer-go/roformer/tensor"
)

// The classification heads. RoFormerForSequenceClassification: position 0
// → dense → act → out_proj, with HF's three losses (regression, single- and
// multi-label). RoFormerForTokenClassification: one linear layer on every
// position.

// ClassificationHead is RoFormerClassificationHead: position 0 → dense →
// act → out_proj.
type ClassificationHead struct {
	Dense   nn.Linear `hf:"dense"`    // [H, H]
	OutProj nn.Linear `hf:"out_proj"` // [NL, H]
}

func buildSeqCls(m *Model) {
	H := m.Config.HiddenSize
	m.Classifier = &ClassificationHead{Dense: newLinear(H, H), OutProj: newLinear(m.Config.NumLabels, H)}
}

func seqClsLinears(m *Model) []linearShape {
	H := m.Config.HiddenSize
	return []linearShape{{m.Classifier.Dense.W.Data, H, H}, {m.Classifier.OutProj.W.Data, m.Config.NumLabels, H}}
}

// seqClsForward writes the logits [B, NL] and, with labels, HF's loss.
func seqClsForward(m *Model, out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error {
	cfg := &m.Config
	B, T := b.B, b.T
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
	return nil
}

// seqClsTrain is seqClsForward's loss (with the head's dropout) and its gradient.
func seqClsTrain(m *Model, dx, x []float32, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error) {
	cfg := &m.Config
	B, T, H := b.B, b.T, cfg.HiddenSize
	NL := cfg.NumLabels
	first := make([]float32, B*H)
	for r := 0; r < B; r++ {
		copy(first[r*H:r*H+H], x[r*T*H:r*T*H+H])
	}
	dIn, dMid := s.dropAt(-1, siteHeadIn, cfg.HiddenDropoutProb, H), s.dropAt(-1, siteHeadMid, cfg.HiddenDropoutProb, H)
	kernels.DropoutForward(first, dIn, B*H)
	a := newClsActs(B, H)
	m.linearForward(&m.Classifier.Dense, a.pre, first, B)
	kernels.ActivationForward(a.post, a.pre, m.act, B*H)
	kernels.DropoutForward(a.post, dMid, B*H)
	logits := make([]float32, B*NL)
	m.linearForward(&m.Classifier.OutProj, logits, a.post, B)
	loss, pt, err := seqClsLoss(cfg, logits, labels, B, NL)
	if err != nil {
		return nil, err
	}
	res := &StepResult{Loss: loss}
	dlogits := make([]float32, B*NL)
	switch pt {
	case "regression":
		res.N = B * NL
		for i, y := range labels.Floats {
			dlogits[i] = float32(2 * (float64(logits[i]) - float64(y)) / float64(B*NL))
		}
	case "single_label_classification":
		res.N, res.Correct = ceGrad(dlogits, logits, labels.IDs, B, NL)
	default:
		res.N = B * NL
		for i, y := range labels.Floats {
			z := float64(logits[i])
			dlogits[i] = float32((1/(1+math.Exp(-z)) - float64(y)) / float64(B*NL))
			if (z > 0) == (y > 0.5) {
				res.Correct++
			}
		}
	}
	dpost, dpre, dfirst := make([]float32, B*H), make([]float32, B*H), make([]float32, B*H)
	m.linearBackward(&m.Classifier.OutProj, dpost, dlogits, a.post, B)
	kernels.DropoutBackward(dpost, dMid, B*H)
	kernels.ActivationBackward(dpre, dpost, a.pre, m.act, B*H)
	m.linearBackward(&m.Classifier.Dense, dfirst, dpre, first, B)
	kernels.DropoutBackward(dfirst, dIn, B*H)
	for r := 0; r < B; r++ {
		copy(dx[r*T*H:r*T*H+H], dfirst[r*H:r*H+H])
	}
	return res, nil
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
	m.matmul(a.pre, a.first, m.Classifier.Dense.W.Data, m.Classifier.Dense.Bias(), B, H, H)
	kernels.ActivationForward(a.post, a.pre, m.act, B*H)
	m.matmul(logits, a.post, m.Classifier.OutProj.W.Data, m.Classifier.OutProj.Bias(), B, H, NL)
}

// clsActs are the classification head's activations.
type clsActs struct{ first, pre, post []float32 } // [B, H]

func newClsActs(B, H int) *clsActs {
	return &clsActs{first: make([]float32, B*H), pre: make([]float32, B*H), post: make([]float32, B*H)}
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

func buildTokenCls(m *Model) {
	l := newLinear(m.Config.NumLabels, m.Config.HiddenSize)
	m.TokenCls = &l
}

func tokenClsLinears(m *Model) []linearShape {
	return []linearShape{{m.TokenCls.W.Data, m.Config.NumLabels, m.Config.HiddenSize}}
}

// tokenClsForward writes the logits [B, T, NL] and, with labels, HF's loss.
func tokenClsForward(m *Model, out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error {
	cfg := &m.Config
	B, T, H := b.B, b.T, cfg.HiddenSize
	BT := B * T
	NL := cfg.NumLabels
	logits := make([]float32, BT*NL)
	m.matmul(logits, x, m.TokenCls.W.Data, m.TokenCls.Bias(), BT, H, NL)
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
	return nil
}

// tokenClsTrain is tokenClsForward's loss (with dropout) and its gradient.
func tokenClsTrain(m *Model, dx, x []float32, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error) {
	cfg := &m.Config
	B, T, H := b.B, b.T, cfg.HiddenSize
	BT := B * T
	NL := cfg.NumLabels
	if len(labels.IDs) != BT {
		return nil, fmt.Errorf("roformer: labels have %d values, want %d (%d × %d)", len(labels.IDs), BT, B, T)
	}
	if err := checkClassIDs("labels", labels.IDs, NL); err != nil {
		return nil, err
	}
	drop := s.dropAt(-1, siteHeadIn, cfg.HiddenDropoutProb, T*H)
	xd := append([]float32(nil), x...)
	kernels.DropoutForward(xd, drop, BT*H)
	logits := make([]float32, BT*NL)
	m.linearForward(m.TokenCls, logits, xd, BT)
	res := &StepResult{Loss: meanCE(logits, labels.IDs, BT, NL)}
	dlogits := make([]float32, BT*NL)
	res.N, res.Correct = ceGrad(dlogits, logits, labels.IDs, BT, NL)
	m.linearBackward(m.TokenCls, dx, dlogits, xd, BT)
	kernels.DropoutBackward(dx, drop, BT*H)
	return res, nil
}
