package roformer

import (
	"context"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// ce64 is the cross-entropy of one row of logits at target in float64, and
// its gradient (softmax − one-hot).
func ce64(z []float64, target int) (float64, []float64) {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, v)
	}
	s := 0.0
	for _, v := range z {
		s += math.Exp(v - m)
	}
	lse := m + math.Log(s)
	g := make([]float64, len(z))
	for i, v := range z {
		g[i] = math.Exp(v - lse)
	}
	g[target]--
	return lse - z[target], g
}

// linear64 is x [N, H] · W[O, H]ᵀ + b in float64.
func linear64(x, w, b []float32, N, H, O int) []float64 {
	out := make([]float64, N*O)
	for r := 0; r < N; r++ {
		for o := 0; o < O; o++ {
			s := float64(b[o])
			for h := 0; h < H; h++ {
				s += float64(x[r*H+h]) * float64(w[o*H+h])
			}
			out[r*O+o] = s
		}
	}
	return out
}

// HF's question-answering loss written out in float64 from the last hidden
// state: start and end logits from qa_outputs, positions clamped to
// [0, T] with T ignored (here one start clamped from −3 to 0 and one end
// ignored), each cross-entropy the mean over its own kept rows, the loss
// their mean; the logits, the loss and the head's weight gradient must
// agree with Forward and ForwardBackward, and every gradient with finite
// differences.
func TestQALossFloat64Reference(t *testing.T) {
	ctx := context.Background()
	m := randomModel(t, tinyConfig(nil), HeadQA, 31)
	B, T, H := 2, 4, m.Config.HiddenSize
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 0}, TokenTypeIDs: []int32{0, 0, 1, 1, 0, 0, 1, 1}, B: B, T: T}
	lab := &Labels{StartPositions: []int32{-3, 2}, EndPositions: []int32{1, 7}}
	s := m.NewState(B, T, true)
	x, err := m.TrainEncode(ctx, s, b, StepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x = append([]float32(nil), x...)
	both := linear64(x, m.QA.W.Data, m.QA.Bias(), B*T, H, 2)
	gw := make([]float64, 2*H)
	loss := 0.0
	for k, pos := range [][]int32{lab.StartPositions, lab.EndPositions} {
		n, sum := 0, 0.0
		var grads [][]float64
		var rows []int
		for r, p := range pos {
			p = max(0, min(p, int32(T)))
			if p == int32(T) {
				continue
			}
			z := make([]float64, T)
			for t := range z {
				z[t] = both[(r*T+t)*2+k]
			}
			l, g := ce64(z, int(p))
			sum += l
			n++
			grads, rows = append(grads, g), append(rows, r)
		}
		loss += sum / float64(n) / 2
		for i, g := range grads {
			for t, gt := range g {
				for h := 0; h < H; h++ {
					gw[k*H+h] += gt / float64(n) / 2 * float64(x[(rows[i]*T+t)*H+h])
				}
			}
		}
	}
	out, err := m.Forward(ctx, b, lab, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start, end := make([]float32, B*T), make([]float32, B*T)
	for i := range start {
		start[i], end[i] = float32(both[2*i]), float32(both[2*i+1])
	}
	testutil.AssertClose(t, "start logits", out.StartLogits.Data, start, 1e-5, 1e-5)
	testutil.AssertClose(t, "end logits", out.EndLogits.Data, end, 1e-5, 1e-5)
	if math.Abs(out.Loss-loss) > 1e-5 {
		t.Errorf("Forward loss %v, float64 reference %v", out.Loss, loss)
	}
	m.ZeroGrad()
	r, err := m.ForwardBackward(ctx, s, b, lab, StepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.Loss-loss) > 1e-5 {
		t.Errorf("training loss %v, float64 reference %v", r.Loss, loss)
	}
	want := make([]float32, len(gw))
	for i, v := range gw {
		want[i] = float32(v)
	}
	testutil.AssertClose(t, "qa_outputs.weight gradient", m.QA.W.Grad, want, 1e-6, 1e-4)
	fdCheck(t, m, s, b, lab, StepOptions{})
}

// fdCheck compares every parameter's gradient with finite differences of
// the training loss (float64 differences of the float32 kernels).
func fdCheck(t *testing.T, m *Model, s *State, b *Batch, lab *Labels, opts StepOptions) {
	t.Helper()
	loss := func() float64 {
		r, err := m.ForwardBackward(context.Background(), s, b, lab, opts)
		if err != nil {
			t.Fatal(err)
		}
		return r.Loss
	}
	m.ZeroGrad()
	loss()
	grads := map[string][]float32{}
	for _, p := range m.Params() {
		grads[p.Name] = append([]float32(nil), p.Grad...)
	}
	for _, p := range m.Params() {
		testutil.GradCheck(t, p.Name, p.Data, grads[p.Name], loss, 1e-2, 2e-2)
	}
}

// HF's multiple-choice loss in float64: the last position of each row
// (padding included: row 0 ends in padding) → classifier [1, H] → logits
// [examples, choices] → cross-entropy; logits, loss and the classifier's
// weight gradient against Forward and ForwardBackward.
func TestMultipleChoiceLossFloat64Reference(t *testing.T) {
	ctx := context.Background()
	m := randomModel(t, tinyConfig(nil), HeadMultipleChoice, 32)
	B, T, H, nc := 4, 4, m.Config.HiddenSize, 2
	b := &Batch{InputIDs: []int32{2, 5, 7, 10, 2, 9, 1, 0, 3, 3, 5, 6, 1, 2, 4, 8}, AttentionMask: []int32{1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, B: B, T: T}
	lab := &Labels{IDs: []int32{1, 0}}
	s := m.NewState(B, T, true)
	x, err := m.TrainEncode(ctx, s, b, StepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := make([]float32, B*H)
	for r := 0; r < B; r++ {
		copy(last[r*H:(r+1)*H], x[(r*T+T-1)*H:(r*T+T)*H])
	}
	z := linear64(last, m.Choice.W.Data, m.Choice.Bias(), B, H, 1)
	loss := 0.0
	gw := make([]float64, H)
	for e, y := range lab.IDs {
		l, g := ce64(z[e*nc:(e+1)*nc], int(y))
		loss += l / float64(len(lab.IDs))
		for c, gc := range g {
			for h := 0; h < H; h++ {
				gw[h] += gc / float64(len(lab.IDs)) * float64(last[(e*nc+c)*H+h])
			}
		}
	}
	out, err := m.Forward(ctx, b, lab, Options{NumChoices: nc})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(z))
	for i, v := range z {
		want[i] = float32(v)
	}
	testutil.AssertClose(t, "logits", out.Logits.Data, want, 1e-5, 1e-5)
	if math.Abs(out.Loss-loss) > 1e-5 {
		t.Errorf("Forward loss %v, float64 reference %v", out.Loss, loss)
	}
	m.ZeroGrad()
	r, err := m.ForwardBackward(ctx, s, b, lab, StepOptions{NumChoices: nc})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.Loss-loss) > 1e-5 {
		t.Errorf("training loss %v, float64 reference %v", r.Loss, loss)
	}
	gwant := make([]float32, H)
	for i, v := range gw {
		gwant[i] = float32(v)
	}
	testutil.AssertClose(t, "classifier.weight gradient", m.Choice.W.Grad, gwant, 1e-6, 1e-4)
	fdCheck(t, m, s, b, lab, StepOptions{NumChoices: nc})
}
