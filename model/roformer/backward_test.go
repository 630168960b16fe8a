package roformer

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/tensor"
)

// Gradients of the MLM loss against HF's (fixture "gradients"): compared
// relative to the largest entry of each tensor, as the fixture README
// advises. 1e-4 leaves room for float32 summation order over a backward pass
// (HF's float32 gradients themselves differ from float64 at ~1e-6 relative).
const tolGradRel = 1e-4

func TestFixtureGradients(t *testing.T) {
	ctx := context.Background()
	for _, f := range loadFixtures(t) {
		if f.Gradients == nil {
			continue
		}
		t.Run(f.Case, func(t *testing.T) {
			l, err := Load(f.dir, HeadMaskedLM, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m := l.Model
			b := f.batch()
			s := m.NewState(b.B, b.T, true)
			res, err := m.ForwardBackward(ctx, s, b, &Labels{IDs: flat(f.Outputs.RoFormerForMaskedLM.Labels)}, StepOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(res.Loss - f.Gradients.Loss); d > tolLoss {
				t.Errorf("loss %v, HF %v", res.Loss, f.Gradients.Loss)
			}
			byName := map[string]*tensor.Param{}
			for _, p := range m.Params() {
				byName[p.Name] = p
			}
			worstRel := 0.0
			for name, want := range f.Gradients.Params {
				p, ok := byName[name]
				if !ok {
					t.Errorf("HF has a gradient for %s, which the model lacks", name)
					continue
				}
				d, at := tensor.MaxAbsDiff(p.Grad, want.Data)
				scale := math.Max(tensor.MaxAbs(want.Data), 1e-6)
				worstRel = math.Max(worstRel, d/scale)
				if d/scale > tolGradRel {
					t.Errorf("%s: max |diff| %.3g at %d (got %v, want %v) = %.3g of the largest entry %.3g", name, d, at, p.Grad[at], want.Data[at], d/scale, scale)
				}
			}
			t.Logf("%d parameter gradients, worst relative error %.3g", len(f.Gradients.Params), worstRel)
			if f.Case == "s01_tiny_h32_l1" && len(f.Gradients.Params) != len(m.Params()) {
				t.Errorf("s01 has %d gradients, the model %d parameters", len(f.Gradients.Params), len(m.Params()))
			}
		})
	}
}

// tinyConfig is a model small enough for finite differences over every parameter.
func tinyConfig(mod func(*Config)) Config {
	c := DefaultConfig()
	c.VocabSize, c.HiddenSize, c.EmbeddingSize, c.NumHiddenLayers, c.NumAttentionHeads = 11, 8, 8, 2, 2
	c.IntermediateSize, c.MaxPositionEmbeddings, c.LayerNormEps = 6, 16, 1e-5
	c.NumLabels = 3
	pad := 10 // an id the test batches do not use: the padding row gets no lookup gradient by design
	c.PadTokenID = &pad
	if mod != nil {
		mod(&c)
	}
	return c
}

func randomModel(t *testing.T, cfg Config, head Head, seed uint64) *Model {
	t.Helper()
	m, err := New(cfg, head)
	if err != nil {
		t.Fatal(err)
	}
	r := testutil.Rand(seed)
	for _, p := range m.Params() {
		for i := range p.Data {
			p.Data[i] = float32(r.NormFloat64() * 0.5)
			if len(p.Shape) == 1 && p.Name[len(p.Name)-6:] == "weight" {
				p.Data[i] += 1
			}
		}
	}
	return m
}

// Finite differences over every parameter of tiny models, for every head
// and the options that change the graph (embedding projection, rotary v,
// causal mask, padding, dropout).
func TestModelGradCheck(t *testing.T) {
	ctx := context.Background()
	B, T := 2, 4
	ids := []int32{2, 5, 7, 3, 2, 9, 1, 0}
	mask := []int32{1, 1, 1, 1, 0, 1, 1, 1} // row 2 left-padded
	types := []int32{0, 0, 1, 1, 0, 0, 1, 1}
	type tc struct {
		name  string
		head  Head
		mod   func(*Config)
		lab   *Labels
		opts  StepOptions
		batch *Batch
	}
	base := &Batch{InputIDs: ids, AttentionMask: mask, TokenTypeIDs: types, B: B, T: T}
	no := false
	mcBatch := &Batch{InputIDs: ids, AttentionMask: []int32{1, 1, 1, 0, 1, 1, 1, 1}, TokenTypeIDs: types, B: B, T: T}
	cases := []tc{
		{"mlm", HeadMaskedLM, nil, &Labels{IDs: []int32{-100, 4, -100, 3, -100, 10, 1, -100}}, StepOptions{}, base},
		{"mlm_project_rotary_value_gelu_new", HeadMaskedLM, func(c *Config) { c.EmbeddingSize = 6; c.RotaryValue = true; c.HiddenAct = "gelu_new" }, &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}, StepOptions{}, base},
		{"mlm_dropout", HeadMaskedLM, func(c *Config) { c.HiddenDropoutProb = 0.2; c.AttentionProbsDropoutProb = 0.2 }, &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}, StepOptions{Dropout: true, Seed: 99}, base},
		{"causal_lm_silu", HeadCausalLM, func(c *Config) { c.HiddenAct = "silu" }, &Labels{IDs: []int32{2, 5, 7, 3, -100, 9, 1, 0}}, StepOptions{}, base},
		{"seqcls_single", HeadSequenceCls, func(c *Config) { c.HiddenDropoutProb = 0.3 }, &Labels{IDs: []int32{2, 0}}, StepOptions{Dropout: true, Seed: 5}, base},
		{"seqcls_regression", HeadSequenceCls, func(c *Config) { c.NumLabels = 1 }, &Labels{Floats: []float32{0.5, -1}}, StepOptions{}, base},
		{"seqcls_multilabel_tanh", HeadSequenceCls, func(c *Config) { c.ProblemType = "multi_label_classification"; c.HiddenAct = "tanh" }, &Labels{Floats: []float32{1, 0, 1, 0, 0, 1}}, StepOptions{}, base},
		{"tokencls", HeadTokenCls, nil, &Labels{IDs: []int32{0, 1, 2, -100, -100, 2, 1, 0}}, StepOptions{}, base},
		{"qa", HeadQA, nil, &Labels{StartPositions: []int32{1, 2}, EndPositions: []int32{3, 9}}, StepOptions{}, base},
		{"multiple_choice", HeadMultipleChoice, nil, &Labels{IDs: []int32{1}}, StepOptions{NumChoices: 2}, mcBatch},
		{"mlm_partial_rotary_theta", HeadMaskedLM, func(c *Config) { c.PartialRotaryFactor = 0.5; c.RopeTheta = 500 }, &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}, StepOptions{}, base},
		{"mlm_v2", HeadMaskedLM, func(c *Config) { c.NormType = "rms_norm"; c.UseBias = &no }, &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}, StepOptions{}, base},
		{"seqcls_v2_project", HeadSequenceCls, func(c *Config) { c.NormType = "rms_norm"; c.UseBias = &no; c.EmbeddingSize = 6 }, &Labels{IDs: []int32{2, 0}}, StepOptions{}, base},
		{"mlm_xpos", HeadMaskedLM, func(c *Config) { c.XPos = &XPosConfig{ScaleBase: 4} }, &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}, StepOptions{}, base},
		{"causal_lm_yarn", HeadCausalLM, func(c *Config) { c.RopeScaling = &RopeScaling{RopeType: "yarn", Factor: 4} }, &Labels{IDs: []int32{2, 5, 7, 3, -100, 9, 1, 0}}, StepOptions{}, base},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := randomModel(t, tinyConfig(c.mod), c.head, uint64(100+i))
			s := m.NewState(B, T, true)
			loss := func() float64 {
				r, err := m.ForwardBackward(ctx, s, c.batch, c.lab, c.opts)
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
		})
	}
}

// The gradient-accumulation policy: two backward calls double every parameter gradient.
func TestGradientsAccumulate(t *testing.T) {
	m := randomModel(t, tinyConfig(nil), HeadMaskedLM, 7)
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, B: 2, T: 4}
	lab := &Labels{IDs: []int32{-100, 4, -100, 3, 6, 10, 1, -100}}
	s := m.NewState(2, 4, true)
	if _, err := m.ForwardBackward(context.Background(), s, b, lab, StepOptions{}); err != nil {
		t.Fatal(err)
	}
	once := map[string][]float32{}
	for _, p := range m.Params() {
		once[p.Name] = append([]float32(nil), p.Grad...)
	}
	if _, err := m.ForwardBackward(context.Background(), s, b, lab, StepOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params() {
		want := make([]float32, len(p.Grad))
		for i, g := range once[p.Name] {
			want[i] = 2 * g
		}
		testutil.AssertClose(t, fmt.Sprintf("%s after two calls", p.Name), p.Grad, want, 1e-7, 1e-5)
	}
}

// Without dropout the training loss equals Forward's.
func TestTrainingLossEqualsForward(t *testing.T) {
	ctx := context.Background()
	m := randomModel(t, tinyConfig(nil), HeadMaskedLM, 8)
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 0}, B: 2, T: 4}
	lab := &Labels{IDs: []int32{-100, 4, -100, 3, 6, 10, 1, -100}}
	out, err := m.Forward(ctx, b, lab, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.ForwardBackward(ctx, m.NewState(2, 4, true), b, lab, StepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(out.Loss-r.Loss) > 1e-6 {
		t.Errorf("training loss %v, forward loss %v", r.Loss, out.Loss)
	}
	sum, n, _, err := m.EvaluateMLM(ctx, nil, b, lab.IDs)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(sum/float64(n)-out.Loss) > 1e-6 {
		t.Errorf("evaluation loss %v, forward loss %v", sum/float64(n), out.Loss)
	}
}

// New lays q, k, v out for the fused projection, loading keeps that layout,
// and the fused path gives the results of three separate products: the
// same logits, loss and parameter gradients after the weights are copied to
// separate slices (which turns the fused path off).
func TestFusedQKVEqualsSeparate(t *testing.T) {
	ctx := context.Background()
	cfg := tinyConfig(func(c *Config) { c.HiddenSize, c.NumAttentionHeads, c.IntermediateSize = 24, 3, 40 })
	fused := randomModel(t, cfg, HeadMaskedLM, 21)
	dir := t.TempDir()
	if err := fused.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, HeadMaskedLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sep, err := Load(dir, HeadMaskedLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range sep.Encoder.Layers {
		L := &sep.Encoder.Layers[i]
		for _, p := range []*tensor.Param{L.Query.W, L.Key.W, L.Value.W, L.Query.B, L.Key.B, L.Value.B} {
			p.Data = append([]float32(nil), p.Data...)
			p.Grad = append([]float32(nil), p.Grad...)
		}
		if _, _, ok := L.fusedWeights(); ok {
			t.Fatalf("layer %d: copied weights still count as fused", i)
		}
		if _, _, ok := L.fusedGrads(); ok {
			t.Fatalf("layer %d: copied gradients still count as fused", i)
		}
		if _, _, ok := loaded.Encoder.Layers[i].fusedWeights(); !ok {
			t.Fatalf("layer %d: the loaded model lost the fused layout", i)
		}
		if _, _, ok := fused.Encoder.Layers[i].fusedGrads(); !ok {
			t.Fatalf("layer %d: New did not lay out q, k, v for fusion", i)
		}
		if c := cap(fused.Encoder.Layers[i].Query.W.Data); c != len(fused.Encoder.Layers[i].Query.W.Data) {
			t.Fatalf("layer %d: the query view has capacity %d beyond its length: an append would overwrite the key", i, c)
		}
	}
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 0}, B: 2, T: 4}
	lab := &Labels{IDs: []int32{-100, 4, -100, 3, 6, 10, 1, -100}}
	run := func(m *Model) (float64, map[string][]float32) {
		m.ZeroGrad()
		r, err := m.ForwardBackward(ctx, m.NewState(2, 4, true), b, lab, StepOptions{Dropout: true, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		g := map[string][]float32{}
		for _, p := range m.Params() {
			g[p.Name] = append([]float32(nil), p.Grad...)
		}
		return r.Loss, g
	}
	lf, gf := run(loaded.Model)
	ls, gs := run(sep.Model)
	if math.Abs(lf-ls) > 1e-6 {
		t.Errorf("loss fused %v, separate %v", lf, ls)
	}
	for name, g := range gf {
		testutil.AssertClose(t, name, g, gs[name], 1e-6, 1e-5)
	}
	of, err := loaded.Forward(ctx, b, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	os, err := sep.Forward(ctx, b, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.AssertClose(t, "logits", of.Logits.Data, os.Logits.Data, 1e-6, 1e-5)
}
