package roformer

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
)

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// int8 and bf16 forward passes stay close to float32 on every HF fixture
// model (hidden states within cosine 0.99 per token, as the issue asks,
// and the masked-LM's top token mostly unchanged), and a model in reduced
// precision refuses to train.
func TestReducedPrecisionAgainstFP32(t *testing.T) {
	ctx := context.Background()
	fs := loadFixtures(t)
	for _, p := range []Precision{PrecisionInt8, PrecisionBF16} {
		t.Run(string(p), func(t *testing.T) {
			if err := precisionSupported(p); err != nil {
				t.Skip(err)
			}
			for _, f := range fs {
				l, err := Load(f.dir, HeadMaskedLM, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want, err := l.Forward(ctx, f.batch(), nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := l.SetPrecision(p); err != nil {
					t.Fatal(err)
				}
				got, err := l.Forward(ctx, f.batch(), nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				nearFP32(t, f.Case, got, want, l.Config.HiddenSize, l.Config.VocabSize)
				s := l.NewState(f.batch().B, f.batch().T, true)
				if _, err := l.ForwardBackward(ctx, s, f.batch(), &Labels{IDs: flat(f.Outputs.RoFormerForMaskedLM.Labels)}, StepOptions{}); err == nil {
					t.Errorf("%s: a %s model trained", f.Case, p)
				}
				if err := l.SetPrecision(PrecisionFP32); err != nil || l.Precision() != PrecisionFP32 {
					t.Fatal(err)
				}
			}
		})
	}
}

// nearFP32 checks a reduced-precision masked-LM pass against float32's:
// every token's hidden state within cosine 0.99 (as issue #12 asks) and
// the top token unchanged on at least 90% of them.
func nearFP32(t *testing.T, name string, got, want *Output, H, V int) {
	t.Helper()
	worst := 1.0
	for r := 0; r < len(want.LastHiddenState.Data)/H; r++ {
		worst = min(worst, kernels.Cosine(got.LastHiddenState.Data[r*H:r*H+H], want.LastHiddenState.Data[r*H:r*H+H]))
	}
	agree, rows := 0, len(want.Logits.Data)/V
	for r := 0; r < rows; r++ {
		if kernels.Argmax(got.Logits.Data[r*V:r*V+V]) == kernels.Argmax(want.Logits.Data[r*V:r*V+V]) {
			agree++
		}
	}
	t.Logf("%s: worst token cosine %.5f, max logit drift %.4f, top-1 agreement %d/%d", name, worst, maxAbsDiff(got.Logits.Data, want.Logits.Data), agree, rows)
	if worst < 0.99 {
		t.Errorf("%s: a token's hidden state has cosine %.4f to float32", name, worst)
	}
	if float64(agree) < 0.9*float64(rows) {
		t.Errorf("%s: top-1 agrees on %d of %d tokens", name, agree, rows)
	}
}

func precisionSupported(p Precision) error {
	switch p {
	case PrecisionInt8:
		_, err := blas.Int8()
		return err
	case PrecisionBF16:
		_, err := kernels.NewBF16Linear(make([]float32, 4), 2, 2)
		return err
	}
	return nil
}

func TestParsePrecision(t *testing.T) {
	for in, want := range map[string]Precision{"": "", "fp32": PrecisionFP32, "INT8": PrecisionInt8, "bf16": PrecisionBF16} {
		if got, err := ParsePrecision(in); err != nil || got != want {
			t.Errorf("ParsePrecision(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParsePrecision("fp16"); err == nil {
		t.Error("fp16 accepted")
	}
}

// fp32 prepared for inference stores each weight once in the backend's
// layout: oneDNN's matmul (kernels.PackedLinear), which gives the plain
// products' numbers to float32 rounding, or go-asm's panels
// (kernels.PanelLinear), which give the unprepared model's logits to the
// bit; both within the fixtures' tolerance, and training drops the prepared
// layers and trains on the real weights.
func TestPreparedFP32(t *testing.T) {
	ctx := context.Background()
	fs := loadFixtures(t)
	for _, c := range []struct {
		kind  string
		layer string // the prepared layers' type
		exact bool   // the plain model's bits
	}{
		{blas.KindOneDNN, "*kernels.PackedLinear", false},
		{blas.KindGoAsm, "*kernels.PanelLinear", true},
	} {
		t.Run(c.kind, func(t *testing.T) {
			testutil.UseBackend(t, c.kind)
			for _, f := range fs {
				labels := &Labels{IDs: flat(f.Outputs.RoFormerForMaskedLM.Labels)}
				plain, err := Load(f.dir, HeadMaskedLM, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want, err := plain.Forward(ctx, f.batch(), labels, Options{})
				if err != nil {
					t.Fatal(err)
				}
				l, err := Load(f.dir, HeadMaskedLM, LoadOptions{Precision: PrecisionFP32})
				if err != nil {
					t.Fatal(err)
				}
				if l.lowp == nil {
					t.Fatalf("nothing prepared for fp32 on %s", c.kind)
				}
				for _, ll := range l.lowp.layers {
					if got := fmt.Sprintf("%T", ll); got != c.layer {
						t.Fatalf("%s: an fp32 layer on %s is %s, want %s", f.Case, c.kind, got, c.layer)
					}
				}
				got, err := l.Forward(ctx, f.batch(), labels, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range got.Logits.Data {
					if c.exact && math.Float32bits(v) != math.Float32bits(want.Logits.Data[i]) {
						t.Fatalf("%s: logit %d is %v prepared, %v on the plain weights", f.Case, i, v, want.Logits.Data[i])
					}
				}
				check(t, f.Case+" masked-lm logits (fp32 prepared on "+c.kind+")", got.Logits.Data, f.Outputs.RoFormerForMaskedLM.Logits, tolLogits)
				checkLoss(t, f.Case+" masked-lm loss (fp32 prepared on "+c.kind+")", got.Loss, f.Outputs.RoFormerForMaskedLM.Loss)
				s := l.NewState(f.batch().B, f.batch().T, true)
				if _, err := l.ForwardBackward(ctx, s, f.batch(), labels, StepOptions{}); err != nil {
					t.Fatalf("%s: training after fp32 preparation: %v", f.Case, err)
				}
				if l.lowp != nil {
					t.Errorf("%s: the prepared layers survived a training step", f.Case)
				}
			}
		})
	}
}

// The feed-forward block of a model prepared in bf16 runs fused (the
// activation in the first product, a bfloat16 intermediate) and gives what
// the unfused products and ActivationForward give, within the
// intermediate's bfloat16 rounding, which the unfused second product also
// does; fp32 and int8 preparations do not fuse it.
func TestFusedFeedForward(t *testing.T) {
	const BT = 37
	ran := 0
	for _, p := range []Precision{PrecisionFP32, PrecisionBF16, PrecisionInt8} {
		for _, act := range []string{"gelu", "gelu_new", "relu", "silu"} {
			cfg := tinyConfig(func(c *Config) { c.HiddenAct, c.IntermediateSize = act, 24 })
			m := randomModel(t, cfg, HeadMaskedLM, 35)
			if err := m.SetPrecision(p); err != nil || m.lowp == nil {
				continue // not on this machine (or fp32 not on oneDNN)
			}
			L := &m.Encoder.Layers[0]
			s := m.NewState(1, BT, false)
			la := &s.layers[0]
			for i := range la.a[:BT*cfg.HiddenSize] {
				la.a[i] = float32(math.Sin(float64(i)))
			}
			H, I := cfg.HiddenSize, cfg.IntermediateSize
			want := make([]float32, BT*H)
			pre := make([]float32, BT*I)
			m.matmul(pre, la.a, L.FFIn.W.Data, L.FFIn.Bias(), BT, H, I)
			kernels.ActivationForward(pre, pre, m.act, BT*I)
			m.matmulResidual(want, pre, L.FFOut.W.Data, L.FFOut.Bias(), la.a, BT, I, H)
			fused := m.fusedFeedForward(L, la, BT)
			if fused != (p == PrecisionBF16) {
				t.Fatalf("%s %s: fused = %v", p, act, fused)
			}
			if !fused {
				continue
			}
			ran++
			// Where the fused activation and ours differ by an ulp, the
			// bfloat16 roundings of the intermediate may differ by one
			// bfloat16 step (2⁻⁸ relative) in a few of the I terms.
			const tol = 2e-3
			for i := range want {
				if d := math.Abs(float64(la.res2[i] - want[i])); d > tol*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("%s %s: element %d is %v, unfused %v", p, act, i, la.res2[i], want[i])
				}
			}
		}
	}
	if ran == 0 {
		t.Skip("no prepared precision runs on oneDNN here")
	}
}
