package roformer

import (
	"context"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// TrainEncode and BackwardHidden with a loss on the hidden state, w·x (a
// fixed random projection), against finite differences over every
// parameter of a tiny base model, with padding and dropout.
func TestBackwardHiddenGradCheck(t *testing.T) {
	ctx := context.Background()
	B, T := 2, 4
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 0}, TokenTypeIDs: make([]int32, 8), B: B, T: T}
	m := randomModel(t, tinyConfig(func(c *Config) { c.HiddenDropoutProb = 0.2 }), HeadBase, 31)
	w := testutil.RandN(testutil.Rand(32), B*T*m.Config.HiddenSize, 1)
	s := m.NewState(B, T, true)
	opts := StepOptions{Dropout: true, Seed: 77}
	loss := func() float64 {
		x, err := m.TrainEncode(ctx, s, b, opts)
		if err != nil {
			t.Fatal(err)
		}
		return testutil.Dot(x, w)
	}
	m.ZeroGrad()
	loss()
	if err := m.BackwardHidden(ctx, s, w); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params() {
		testutil.GradCheck(t, p.Name, p.Data, append([]float32(nil), p.Grad...), loss, 1e-2, 2e-2)
	}
	if err := m.BackwardHidden(ctx, s, w[:3]); err == nil {
		t.Error("BackwardHidden took 3 gradient values for a 2×4 state")
	}
}
