package roformer

import (
	"fmt"

	"github.com/roformer-go/roformer/tensor"
)

// RoFormerForMultipleChoice: the rows of a batch are examples × choices;
// the last position of each row (SequenceSummary "last", padding
// included) → classifier [1, H] gives one score per choice.

func buildChoice(m *Model) {
	l := newLinear(1, m.Config.HiddenSize)
	m.Choice = &l
}

func choiceLinears(m *Model) []linearShape {
	return []linearShape{{m.Choice.W.Data, 1, m.Config.HiddenSize}}
}

// choiceForward writes the logits [B/choices, choices] and, with labels, HF's loss.
func choiceForward(m *Model, out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error {
	B, T, H := b.B, b.T, m.Config.HiddenSize
	nc := opts.NumChoices
	logits := make([]float32, B)
	last := make([]float32, B*H)
	for r := 0; r < B; r++ { // SequenceSummary "last": the last position, padding included
		copy(last[r*H:r*H+H], x[(r*T+T-1)*H:(r*T+T)*H])
	}
	m.matmul(logits, last, m.Choice.W.Data, m.Choice.Bias(), B, H, 1)
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
	return nil
}

// choiceTrain is choiceForward's loss and its gradient.
func choiceTrain(m *Model, dx, x []float32, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error) {
	B, T, H := b.B, b.T, m.Config.HiddenSize
	nc := opts.NumChoices
	if len(labels.IDs) != B/nc {
		return nil, fmt.Errorf("roformer: multiple-choice labels have %d values, want %d", len(labels.IDs), B/nc)
	}
	if err := checkClassIDs("labels", labels.IDs, nc); err != nil {
		return nil, err
	}
	last := make([]float32, B*H)
	for r := 0; r < B; r++ {
		copy(last[r*H:r*H+H], x[(r*T+T-1)*H:(r*T+T)*H])
	}
	logits := make([]float32, B)
	m.linearForward(m.Choice, logits, last, B)
	res := &StepResult{Loss: meanCE(logits, labels.IDs, B/nc, nc)}
	dlogits, dlast := make([]float32, B), make([]float32, B*H)
	res.N, res.Correct = ceGrad(dlogits, logits, labels.IDs, B/nc, nc)
	m.linearBackward(m.Choice, dlast, dlogits, last, B)
	for r := 0; r < B; r++ {
		copy(dx[(r*T+T-1)*H:(r*T+T)*H], dlast[r*H:r*H+H])
	}
	return res, nil
}
