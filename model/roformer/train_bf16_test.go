package roformer

import (
	"context"
	"math"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

// Mixed-precision training steps (SetTrainingPrecision(bf16)) against
// float32 ones on the same model and batch, for every head: the loss within
// 1% and each parameter's gradient within 5% of its norm (bfloat16 keeps 8
// significant bits; the error of each product is ~2⁻⁸ relative and a
// backward pass compounds a few). Two bf16 steps are bit-identical, and
// they differ from float32's (the products did run in bfloat16).
func TestTrainingBF16AgainstFP32(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	const B, T = 2, 16
	r := testutil.Rand(7)
	ids, types, mask := make([]int32, B*T), make([]int32, B*T), make([]int32, B*T)
	for i := range ids {
		ids[i] = int32(1 + r.IntN(40))
		mask[i] = 1
		if i%T >= T/2 {
			types[i] = 1
		}
	}
	mask[T+T-1], mask[T+T-2] = 0, 0 // padding in row 2
	batch := &Batch{InputIDs: ids, AttentionMask: mask, TokenTypeIDs: types, B: B, T: T}
	mlm := make([]int32, B*T)
	for i := range mlm {
		mlm[i] = -100
		if i%3 == 0 {
			mlm[i] = ids[i]
		}
	}
	tok := make([]int32, B*T)
	for i := range tok {
		tok[i] = int32(i % 3)
	}
	cases := []struct {
		name  string
		head  Head
		lab   *Labels
		opts  StepOptions
		fused bool // the fused attention (from 1 token on), its products in bf16 too
	}{
		{"mlm", HeadMaskedLM, &Labels{IDs: mlm}, StepOptions{}, false},
		{"mlm_dropout", HeadMaskedLM, &Labels{IDs: mlm}, StepOptions{Dropout: true, Seed: 3}, false},
		{"causal", HeadCausalLM, &Labels{IDs: ids}, StepOptions{}, false},
		{"seqcls", HeadSequenceCls, &Labels{IDs: []int32{2, 0}}, StepOptions{}, false},
		{"tokencls", HeadTokenCls, &Labels{IDs: tok}, StepOptions{}, false},
		{"qa", HeadQA, &Labels{StartPositions: []int32{1, 5}, EndPositions: []int32{3, 9}}, StepOptions{}, false},
		{"multiple_choice", HeadMultipleChoice, &Labels{IDs: []int32{1}}, StepOptions{NumChoices: 2}, false},
		{"mlm_fused", HeadMaskedLM, &Labels{IDs: mlm}, StepOptions{}, true},
		{"mlm_fused_dropout", HeadMaskedLM, &Labels{IDs: mlm}, StepOptions{Dropout: true, Seed: 3}, true},
		{"causal_fused", HeadCausalLM, &Labels{IDs: ids}, StepOptions{}, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.fused {
				old := fusedTrainMinT
				fusedTrainMinT = 1
				defer func() { fusedTrainMinT = old }()
			}
			cfg := tinyConfig(func(cf *Config) {
				cf.VocabSize, cf.HiddenSize, cf.EmbeddingSize, cf.NumAttentionHeads = 48, 64, 64, 4
				cf.IntermediateSize, cf.MaxPositionEmbeddings = 128, 32
				cf.HiddenDropoutProb, cf.AttentionProbsDropoutProb = 0.1, 0.1
			})
			m := randomModel(t, cfg, c.head, uint64(200+i))
			for _, p := range m.Params() { // HF-like scale: products of O(1)
				for j := range p.Data {
					if len(p.Shape) == 2 {
						p.Data[j] *= 0.3
					}
				}
			}
			step := func(p Precision) (float64, [][]float32) {
				if err := m.SetTrainingPrecision(p); err != nil {
					t.Fatal(err)
				}
				for _, q := range m.Params() {
					clear(q.Grad)
				}
				s := m.NewState(B, T, true)
				res, err := m.ForwardBackward(ctx, s, batch, c.lab, c.opts)
				if err != nil {
					t.Fatal(err)
				}
				var gs [][]float32
				for _, q := range m.Params() {
					gs = append(gs, append([]float32(nil), q.Grad...))
				}
				return res.Loss, gs
			}
			l32, g32 := step(PrecisionFP32)
			l16, g16 := step(PrecisionBF16)
			l16b, g16b := step(PrecisionBF16)
			if m.TrainingPrecision() != PrecisionBF16 {
				t.Fatalf("TrainingPrecision = %q", m.TrainingPrecision())
			}
			if math.Abs(l16-l32) > 0.01*math.Abs(l32) {
				t.Errorf("loss bf16 %.6g, fp32 %.6g", l16, l32)
			}
			if l16 != l16b {
				t.Errorf("two bf16 steps: loss %v then %v", l16, l16b)
			}
			// A gradient that is zero in exact arithmetic (a bias before a
			// softmax over positions or choices; a LayerNorm bias feeding
			// only it) is rounding noise in both: each parameter's error is
			// held within 5% of its gradient's norm or 0.1% of the whole
			// gradient's, whichever is larger.
			var all float64
			for k := range g32 {
				for _, v := range g32[k] {
					all += float64(v) * float64(v)
				}
			}
			all = math.Sqrt(all)
			same := true
			worst := 0.0
			for k, q := range m.Params() {
				var d2, n2 float64
				for j := range g32[k] {
					d := float64(g16[k][j] - g32[k][j])
					d2 += d * d
					n2 += float64(g32[k][j]) * float64(g32[k][j])
					if g16[k][j] != g16b[k][j] {
						t.Fatalf("%s: two bf16 steps differ at %d: %v, %v", q.Name, j, g16[k][j], g16b[k][j])
					}
				}
				same = same && d2 == 0
				diff, norm := math.Sqrt(d2), math.Sqrt(n2)
				if diff > math.Max(0.05*norm, 1e-3*all) {
					t.Errorf("%s: ‖g_bf16 − g_fp32‖ = %.3g, ‖g_fp32‖ %.3g, whole gradient %.3g", q.Name, diff, norm, all)
				}
				if norm > 1e-3*all {
					worst = math.Max(worst, diff/norm)
				}
			}
			if same {
				t.Error("bf16 gradients equal fp32's: the products did not run in bfloat16")
			}
			t.Logf("loss fp32 %.6f bf16 %.6f; worst gradient error %.3g of its norm", l32, l16, worst)
		})
	}
}

func TestSetTrainingPrecision(t *testing.T) {
	m := randomModel(t, tinyConfig(nil), HeadMaskedLM, 1)
	if err := m.SetTrainingPrecision(PrecisionInt8); err == nil {
		t.Error("int8 training accepted")
	}
	if err := m.SetTrainingPrecision("fp16"); err == nil {
		t.Error("fp16 accepted")
	}
	if m.TrainingPrecision() != PrecisionFP32 {
		t.Errorf("a refused precision changed the model: %q", m.TrainingPrecision())
	}
	err := m.SetTrainingPrecision(PrecisionBF16)
	if (err == nil) != (blas.BF16Supported() == nil) {
		t.Errorf("bf16: %v, while BF16Supported says %v", err, blas.BF16Supported())
	}
}
