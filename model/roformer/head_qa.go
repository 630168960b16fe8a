package roformer

import (
	"fmt"

	"github.com/roformer-go/roformer/tensor"
)

// RoFormerForQuestionAnswering: qa_outputs [2, H] on every position gives
// the start and end logits of the answer span.

func buildQA(m *Model) {
	l := newLinear(2, m.Config.HiddenSize)
	m.QA = &l
}

func qaLinears(m *Model) []linearShape {
	return []linearShape{{m.QA.W.Data, 2, m.Config.HiddenSize}}
}

// qaForward writes the start and end logits [B, T] and, with positions, HF's loss.
func qaForward(m *Model, out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error {
	B, T, H := b.B, b.T, m.Config.HiddenSize
	BT := B * T
	both := make([]float32, BT*2)
	m.matmul(both, x, m.QA.W.Data, m.QA.Bias(), BT, H, 2)
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
	return nil
}

// qaTrain is qaForward's loss and its gradient.
func qaTrain(m *Model, dx, x []float32, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error) {
	B, T := b.B, b.T
	BT := B * T
	if len(labels.StartPositions) != B || len(labels.EndPositions) != B {
		return nil, fmt.Errorf("roformer: start/end positions have %d/%d values, want %d", len(labels.StartPositions), len(labels.EndPositions), B)
	}
	both := make([]float32, BT*2)
	m.linearForward(m.QA, both, x, BT)
	start, end := make([]float32, BT), make([]float32, BT)
	for i := 0; i < BT; i++ {
		start[i], end[i] = both[2*i], both[2*i+1]
	}
	sp, ep := clampPositions(labels.StartPositions, T), clampPositions(labels.EndPositions, T)
	res := &StepResult{Loss: (meanCE(start, sp, B, T) + meanCE(end, ep, B, T)) / 2}
	ds, de := make([]float32, BT), make([]float32, BT)
	n1, c1 := ceGrad(ds, start, sp, B, T)
	n2, c2 := ceGrad(de, end, ep, B, T)
	res.N, res.Correct = n1+n2, c1+c2
	dboth := make([]float32, BT*2)
	for i := 0; i < BT; i++ {
		dboth[2*i], dboth[2*i+1] = ds[i]/2, de[i]/2
	}
	m.linearBackward(m.QA, dx, dboth, x, BT)
	return res, nil
}
