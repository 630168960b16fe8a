package experiment

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

// sampleSD is the sample standard deviation of x.
func sampleSD(x []float32) float64 {
	var s, ss float64
	for _, v := range x {
		s += float64(v)
	}
	mean := s / float64(len(x))
	for _, v := range x {
		ss += (float64(v) - mean) * (float64(v) - mean)
	}
	return math.Sqrt(ss / float64(len(x)-1))
}

// The char-lm model's word table (256 × 64) drawn as Vaswani et al.: sd
// 1/√E = 0.125 (1 after ×√E, the size of a sinusoid entry) within 5%,
// against HF's 0.02; only the word table changes, the padding row stays 0,
// and the draw is a function of the seed.
func TestVaswaniWordInitSD(t *testing.T) {
	for _, E := range []int{64, 128} {
		cfg := smallModel()
		cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumAttentionHeads, cfg.IntermediateSize = E, E, 2, 4*E
		cfg.VocabSize, cfg.PositionEmbeddingType, cfg.ScaleEmbedding = 256, roformer.PosSinusoidal, true
		pad := 3
		cfg.PadTokenID = &pad
		m, err := roformer.New(cfg, roformer.HeadCausalLM)
		if err != nil {
			t.Fatal(err)
		}
		m.Init(7)
		hf := sampleSD(m.Encoder.Embeddings.Word.Data)
		if math.Abs(hf-0.02)/0.02 > 0.05 {
			t.Errorf("E=%d: HF's table has sd %.4f, want 0.02", E, hf)
		}
		before := slices.Clone(m.Encoder.Layers[0].Query.W.Data)
		VaswaniWordInit(m, 7)
		w := m.Encoder.Embeddings.Word.Data
		want := 1 / math.Sqrt(float64(E))
		// Leave out the padding row from the sample.
		rows := slices.Concat(w[:3*E], w[4*E:])
		if got := sampleSD(rows); math.Abs(got-want)/want > 0.05 {
			t.Errorf("E=%d: Vaswani table sd %.4f, want 1/√E = %.4f within 5%%", E, got, want)
		}
		if got := sampleSD(rows) * math.Sqrt(float64(E)); math.Abs(got-1) > 0.05 {
			t.Errorf("E=%d: scaled entries sd %.4f, want 1 (a sinusoid entry's size)", E, got)
		}
		for i, v := range w[3*E : 4*E] {
			if v != 0 {
				t.Fatalf("E=%d: padding row element %d is %v", E, i, v)
			}
		}
		if !slices.Equal(before, m.Encoder.Layers[0].Query.W.Data) {
			t.Errorf("E=%d: VaswaniWordInit changed a query weight", E)
		}
		again := slices.Clone(w)
		VaswaniWordInit(m, 7)
		if !slices.Equal(again, m.Encoder.Embeddings.Word.Data) {
			t.Errorf("E=%d: the draw is not a function of the seed", E)
		}
		VaswaniWordInit(m, 8)
		if slices.Equal(again, m.Encoder.Embeddings.Word.Data) {
			t.Errorf("E=%d: seeds 7 and 8 drew the same table", E)
		}
	}
}

// The arm names of the baselines parse, round-trip and build.
func TestCharLMBaselineArms(t *testing.T) {
	vs, err := ParseCharLMVariants("performer-none,performer-sinusoidal-vaswani,linear-sinusoidal-scaled,linear-learned-lr10,softmax-sinusoidal-vaswani-unscaled")
	if err != nil {
		t.Fatal(err)
	}
	want := []CharLMVariant{
		{Attention: roformer.AttnPerformer, Position: roformer.PosNone},
		{Attention: roformer.AttnPerformer, Position: roformer.PosSinusoidal, ScaleEmbedding: true, VaswaniInit: true},
		{Attention: roformer.AttnLinear, Position: roformer.PosSinusoidal, ScaleEmbedding: true},
		{Attention: roformer.AttnLinear, Position: roformer.PosLearned, PositionLR: 10},
		{Attention: roformer.AttnSoftmax, Position: roformer.PosSinusoidal, VaswaniInit: true},
	}
	if !slices.Equal(vs, want) {
		t.Fatalf("parsed %+v\nwant %+v", vs, want)
	}
	for _, v := range vs {
		back, err := ParseCharLMVariants(v.Name())
		if err != nil || len(back) != 1 || back[0] != v {
			t.Errorf("%s parsed back as %+v, %v", v.Name(), back, err)
		}
	}
	for _, bad := range []string{"linear-rotary-lr10", "linear-learned-lr0", "linear-learned-lrx", "linear-learned-lr1e9", "performer-vaswani"} {
		if _, err := ParseCharLMVariants(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	has := func(name string) bool {
		for _, v := range DefaultCharLMVariants {
			if v.Name() == name {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"performer-none", "performer-sinusoidal-vaswani", "linear-sinusoidal-vaswani"} {
		if !has(name) {
			t.Errorf("the default arms lack %s", name)
		}
	}
}

// A learned table given 10× the rate moves further in the same steps than
// at 1×, while every other parameter of the step-1 update is the same
// size; the run otherwise trains as usual.
func TestCharLMPositionLR(t *testing.T) {
	o := DefaultCharLM(t.TempDir())
	o.Model = tinyModel()
	o.Model.HiddenDropoutProb, o.Model.AttentionProbsDropoutProb = 0, 0
	o.Text, o.TextName = opticks(t, 60000), "Opticks"
	o.Steps, o.Warmup, o.LR, o.Batch, o.SeqLen = 4, 1, 1e-3, 2, 16
	o.EvalEvery, o.EvalWindows, o.TestWindows = 4, 2, 2
	moved := map[float64]float64{}
	for _, k := range []float64{1, 10} {
		v := CharLMVariant{Attention: roformer.AttnSoftmax, Position: roformer.PosLearned, PositionLR: k}
		cfg := o.Model
		cfg.VocabSize, cfg.TypeVocabSize, cfg.PadTokenID = 256, 1, nil
		cfg.PositionEmbeddingType, cfg.MaxPositionEmbeddings, cfg.IsDecoder = roformer.PosLearned, o.SeqLen, true
		m, err := roformer.New(cfg, roformer.HeadCausalLM)
		if err != nil {
			t.Fatal(err)
		}
		m.Init(1)
		init := slices.Clone(m.Encoder.Embeddings.Position.Data)
		st, ps, err := newRunStepper(m, o.Schedule, v.PositionLR)
		if err != nil {
			t.Fatal(err)
		}
		if (ps != nil) != (k != 1) {
			t.Fatalf("rate ×%g: own stepper %v", k, ps != nil)
		}
		ids := make([]int32, o.Batch*o.SeqLen)
		for i := range ids {
			ids[i] = int32(o.Text[i])
		}
		s := m.NewState(o.Batch, o.SeqLen, true)
		batch := &roformer.Batch{InputIDs: ids, B: o.Batch, T: o.SeqLen}
		for step := 0; step < 3; step++ {
			if _, err := ps.step(st, step, func() (float64, error) {
				r, err := m.ForwardBackward(context.Background(), s, batch, &roformer.Labels{IDs: ids}, roformer.StepOptions{Causal: true})
				if err != nil {
					return 0, err
				}
				return r.Loss, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		var d float64
		for i, v := range m.Encoder.Embeddings.Position.Data {
			d = max(d, math.Abs(float64(v-init[i])))
		}
		moved[k] = d
	}
	if !(moved[10] > 5*moved[1]) || moved[1] == 0 {
		t.Errorf("largest change of the table: %g at 1×, %g at 10×; want about 10 times more", moved[1], moved[10])
	}
	// The whole experiment runs with such an arm and a Vaswani one.
	o.Variants, _ = ParseCharLMVariants("performer-none,linear-learned-lr10,performer-sinusoidal-vaswani")
	o.Seeds = []uint64{1}
	res, err := CharLM(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if !(r.TestBPB > 0 && r.TestBPB < 9) {
			t.Errorf("%s: test %v bits/byte", r.Variant, r.TestBPB)
		}
	}
}

// copyResults copies the committed results.json of docs/experiments/name
// into a temporary folder, skipping the test without it.
func copyResults(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "experiments", name, "results.json"))
	if err != nil {
		t.Skipf("no committed results: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// --also puts the arms of a second results folder on the plots: the
// learned table on long-text-zh's, the scaled sinusoids on extrapolate's.
func TestResummarizeAlso(t *testing.T) {
	for _, c := range []struct {
		dir, also, plot, want string
		run                   func(dir string, also ...string) error
	}{
		{"long-text-zh", "long-text-zh-learned", "accuracy.svg", "learned, 327680 training tokens", func(d string, a ...string) error { _, err := ResummarizeLongTextZh(d, a...); return err }},
		{"extrapolate", "extrapolate-sinusoidal-scaled", "char-lm_loss.svg", "sinusoidal ×√E", func(d string, a ...string) error { _, err := ResummarizeExtrapolate(d, a...); return err }},
	} {
		dir, also := copyResults(t, c.dir), copyResults(t, c.also)
		for _, with := range []bool{false, true} {
			var a []string
			if with {
				a = []string{also}
			}
			if err := c.run(dir, a...); err != nil {
				t.Fatal(err)
			}
			svg, err := os.ReadFile(filepath.Join(dir, c.plot))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(svg), c.want); got != with {
				t.Errorf("%s/%s with --also %v: %q shown %v", c.dir, c.plot, with, c.want, got)
			}
		}
	}
}

// Every labelled tick is a round value, labelled with the decimals its
// step needs; the labels of ranges that are not round are not rounded
// off (DefaultTicks labels 3.52 as "3.5" on [3.5004, 3.7013]).
func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		min, max float64
		want     []string
	}{
		{3.5004, 3.7013, []string{"3.55", "3.60", "3.65", "3.70"}},
		{-0.03, 1.03, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{0, 600, []string{"0", "100", "200", "300", "400", "500", "600"}},
	} {
		var got []string
		for _, tk := range (niceTicks{}).Ticks(c.min, c.max) {
			if tk.Value < c.min || tk.Value > c.max {
				t.Errorf("[%g, %g]: tick %g outside", c.min, c.max, tk.Value)
			}
			if tk.Label != "" {
				got = append(got, tk.Label)
				if v, err := strconv.ParseFloat(tk.Label, 64); err != nil || math.Abs(v-tk.Value) > 1e-9 {
					t.Errorf("[%g, %g]: tick at %g labelled %q", c.min, c.max, tk.Value, tk.Label)
				}
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("[%g, %g]: labels %q, want %q", c.min, c.max, got, c.want)
		}
	}
}
