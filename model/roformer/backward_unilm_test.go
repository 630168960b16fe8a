package roformer

import (
	"context"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// uniLMBatch is two rows [CLS] a [SEP] b [SEP] (types 0 then 1), the second
// padded, and their causal-LM labels: the target tokens only.
func uniLMBatch() (*Batch, []int32) {
	b := &Batch{
		InputIDs:      []int32{1, 5, 2, 7, 8, 2, 1, 6, 4, 2, 9, 0},
		TokenTypeIDs:  []int32{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0},
		AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},
		B:             2, T: 6,
	}
	labels := make([]int32, len(b.InputIDs))
	for i, ty := range b.TokenTypeIDs {
		labels[i] = -100
		if ty == 1 {
			labels[i] = b.InputIDs[i]
		}
	}
	return b, labels
}

// The causal-LM head under the UniLM mask (StepOptions.UniLM) plus a pooled
// loss (a fixed projection of the pooler output), against finite
// differences over every parameter, pooler included, with hidden dropout.
func TestUniLMPooledGradCheck(t *testing.T) {
	ctx := context.Background()
	b, labels := uniLMBatch()
	m := randomModel(t, tinyConfig(func(c *Config) { c.HiddenDropoutProb = 0.2; c.AttentionProbsDropoutProb = 0.3 }), HeadCausalLM, 41)
	m.EnablePooler()
	r := testutil.Rand(42)
	for _, p := range []*[]float32{&m.Encoder.Pooler.W.Data, &m.Encoder.Pooler.B.Data} {
		for i := range *p {
			(*p)[i] = float32(r.NormFloat64() * 0.5)
		}
	}
	H := m.Config.HiddenSize
	w := testutil.RandN(testutil.Rand(43), b.B*H, 1)
	pooled := func(z, dz []float32, B, H int) (float64, error) {
		copy(dz, w)
		return testutil.Dot(z, w), nil
	}
	s := m.NewState(b.B, b.T, true)
	opts := StepOptions{Dropout: true, Seed: 5, UniLM: true, PooledLoss: pooled}
	step := func() *StepResult {
		res, err := m.ForwardBackward(ctx, s, b, &Labels{IDs: labels}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	loss := func() float64 { r := step(); return r.Loss + r.PooledLoss }
	m.ZeroGrad()
	res := step()
	if res.N != 4 {
		t.Fatalf("%d labelled terms, want 4 (the target tokens after the shift)", res.N)
	}
	grads := map[string][]float32{}
	for _, p := range m.Params() {
		grads[p.Name] = append([]float32(nil), p.Grad...)
	}
	for _, p := range m.Params() {
		testutil.GradCheck(t, p.Name, p.Data, grads[p.Name], loss, 1e-2, 2e-2)
	}
}

// Under the UniLM mask a source token does not see the target: changing a
// target token leaves the source's hidden states (and the pooled vector)
// as they were, and a Sim model's training loss equals Forward's.
func TestUniLMTrainingMask(t *testing.T) {
	ctx := context.Background()
	b, labels := uniLMBatch()
	m := randomModel(t, tinyConfig(nil), HeadCausalLM, 51)
	s := m.NewState(b.B, b.T, true)
	x1, err := m.TrainEncode(ctx, s, b, StepOptions{UniLM: true})
	if err != nil {
		t.Fatal(err)
	}
	x1 = append([]float32(nil), x1...)
	b2 := *b
	b2.InputIDs = append([]int32(nil), b.InputIDs...)
	b2.InputIDs[4] = 3 // a target token of row 0
	x2, err := m.TrainEncode(ctx, s, &b2, StepOptions{UniLM: true})
	if err != nil {
		t.Fatal(err)
	}
	H := m.Config.HiddenSize
	for i := 0; i < 3*H; i++ { // [CLS] a [SEP]
		if x1[i] != x2[i] {
			t.Fatalf("source hidden value %d changed with a target token: %g → %g", i, x1[i], x2[i])
		}
	}
	if x1[4*H] == x2[4*H] {
		t.Error("the changed target token's own hidden state did not change")
	}
	// A Sim model (is_decoder with a pooler) trains under the mask Forward uses.
	m.Config.IsDecoder = true
	m.EnablePooler()
	out, err := m.Forward(ctx, b, &Labels{IDs: labels}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.ForwardBackward(ctx, s, b, &Labels{IDs: labels}, StepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(out.Loss-res.Loss) > 1e-5 {
		t.Errorf("Sim model: training loss %.7f, Forward's %.7f", res.Loss, out.Loss)
	}
	sum, n, _, err := m.EvaluateLM(ctx, nil, b, labels, StepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(sum/float64(n)-out.Loss) > 1e-5 {
		t.Errorf("Sim model: EvaluateLM loss %.7f, Forward's %.7f", sum/float64(n), out.Loss)
	}
}
