package roformer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/tensor"
)

// switchCases lists every valid (position encoding, attention) pair.
func switchCases() []struct {
	pe PositionEncoding
	at AttentionKind
} {
	var out []struct {
		pe PositionEncoding
		at AttentionKind
	}
	for _, at := range AttentionKinds {
		for _, pe := range PositionEncodings {
			if pe == PosRelative && at != AttnSoftmax {
				continue
			}
			out = append(out, struct {
				pe PositionEncoding
				at AttentionKind
			}{pe, at})
		}
	}
	return out
}

func switchConfig(pe PositionEncoding, at AttentionKind) func(*Config) {
	return func(c *Config) {
		c.PositionEmbeddingType, c.AttentionType = pe, at
		c.RelativeMaxDistance = 2 // T = 4: distances ±3 get clipped
		c.PerformerFeatures = 6
	}
}

// Finite differences over every parameter of tiny models, for every
// position encoding and attention kind, bidirectional (masked LM with
// padding) and causal (causal LM).
func TestSwitchGradCheck(t *testing.T) {
	ctx := context.Background()
	B, T := 2, 4
	base := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, AttentionMask: []int32{1, 1, 1, 1, 0, 1, 1, 1}, TokenTypeIDs: []int32{0, 0, 1, 1, 0, 0, 1, 1}, B: B, T: T}
	for i, sc := range switchCases() {
		for _, causal := range []bool{false, true} {
			name := fmt.Sprintf("%s_%s_causal%v", sc.pe, sc.at, causal)
			t.Run(name, func(t *testing.T) {
				head, lab := HeadMaskedLM, &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}
				mod := switchConfig(sc.pe, sc.at)
				if causal {
					head, lab = HeadCausalLM, &Labels{IDs: []int32{2, 5, 7, 3, -100, 9, 1, 0}}
				}
				if i%3 == 1 { // also the value rotation and a projected embedding
					inner := mod
					mod = func(c *Config) { inner(c); c.RotaryValue = true; c.EmbeddingSize = 6 }
				}
				m := randomModel(t, tinyConfig(mod), head, uint64(200+i))
				s := m.NewState(B, T, true)
				loss := func() float64 {
					r, err := m.ForwardBackward(ctx, s, base, lab, StepOptions{})
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
					testutil.GradCheck(t, p.Name, p.Data, grads[p.Name], loss, 3e-3, 2e-2)
				}
			})
		}
	}
}

// Dropout on the relative-key path: the masks of the training step are
// replayed by the backward pass.
func TestRelativeDropoutGradCheck(t *testing.T) {
	ctx := context.Background()
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, B: 2, T: 4}
	lab := &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}
	m := randomModel(t, tinyConfig(func(c *Config) {
		switchConfig(PosRelative, AttnSoftmax)(c)
		c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0.2, 0.2
	}), HeadMaskedLM, 300)
	s := m.NewState(2, 4, true)
	loss := func() float64 {
		r, err := m.ForwardBackward(ctx, s, b, lab, StepOptions{Dropout: true, Seed: 7})
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

// Shifting every position by the same offset leaves encodings that see only
// offsets unchanged (rotary in softmax and in linear attention, eq. 16 and
// 19; relative) and changes the absolute ones.
func TestShiftInvariance(t *testing.T) {
	ctx := context.Background()
	B, T := 1, 6
	ids := []int32{2, 5, 7, 3, 8, 9}
	shifted := make([]int32, T)
	for i := range shifted {
		shifted[i] = int32(i + 9)
	}
	for i, sc := range switchCases() {
		for _, causal := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s_%s_causal%v", sc.pe, sc.at, causal), func(t *testing.T) {
				m := randomModel(t, tinyConfig(switchConfig(sc.pe, sc.at)), HeadBase, uint64(400+i))
				a, err := m.Forward(ctx, &Batch{InputIDs: ids, B: B, T: T}, nil, Options{Causal: causal})
				if err != nil {
					t.Fatal(err)
				}
				b, err := m.Forward(ctx, &Batch{InputIDs: ids, PositionIDs: shifted, B: B, T: T}, nil, Options{Causal: causal})
				if err != nil {
					t.Fatal(err)
				}
				d, _ := tensor.MaxAbsDiff(a.LastHiddenState.Data, b.LastHiddenState.Data)
				switch sc.pe {
				case PosRotary, PosRelative, PosNone:
					if d > 2e-4 {
						t.Errorf("shifting positions by 9 changed the output by %.3g", d)
					}
				default:
					if d < 1e-3 {
						t.Errorf("absolute positions: shifting by 9 changed the output by only %.3g", d)
					}
				}
			})
		}
	}
}

// Causal linear attention (prefix sums) does not look ahead: changing the
// last token leaves the earlier outputs as they were.
func TestCausalLinearNoLookAhead(t *testing.T) {
	ctx := context.Background()
	for _, at := range []AttentionKind{AttnLinear, AttnPerformer} {
		for _, pe := range []PositionEncoding{PosRotary, PosNone} {
			t.Run(fmt.Sprintf("%s_%s", at, pe), func(t *testing.T) {
				m := randomModel(t, tinyConfig(switchConfig(pe, at)), HeadBase, 500)
				a, err := m.Forward(ctx, &Batch{InputIDs: []int32{2, 5, 7, 3, 8}, B: 1, T: 5}, nil, Options{Causal: true})
				if err != nil {
					t.Fatal(err)
				}
				b, err := m.Forward(ctx, &Batch{InputIDs: []int32{2, 5, 7, 3, 1}, B: 1, T: 5}, nil, Options{Causal: true})
				if err != nil {
					t.Fatal(err)
				}
				H := m.Config.HiddenSize
				testutil.AssertClose(t, "first four positions", b.LastHiddenState.Data[:4*H], a.LastHiddenState.Data[:4*H], 1e-5, 1e-5)
				if d, _ := tensor.MaxAbsDiff(a.LastHiddenState.Data[4*H:], b.LastHiddenState.Data[4*H:]); d < 1e-4 {
					t.Errorf("the changed token did not change its own output (%.3g)", d)
				}
			})
		}
	}
}

func TestLearnedPositionsEndAtTheTable(t *testing.T) {
	m := randomModel(t, tinyConfig(func(c *Config) { c.PositionEmbeddingType = PosLearned; c.MaxPositionEmbeddings = 4 }), HeadBase, 1)
	ctx := context.Background()
	if _, err := m.Forward(ctx, &Batch{InputIDs: []int32{1, 2, 3, 4}, B: 1, T: 4}, nil, Options{}); err != nil {
		t.Fatalf("4 tokens in a table of 4: %v", err)
	}
	_, err := m.Forward(ctx, &Batch{InputIDs: []int32{1, 2, 3, 4, 5}, B: 1, T: 5}, nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot go past their table") || !strings.Contains(err.Error(), "max_position_embeddings 4") {
		t.Errorf("5 tokens in a table of 4: error %v", err)
	}
	_, err = m.Forward(ctx, &Batch{InputIDs: []int32{1, 2}, PositionIDs: []int32{0, 4}, B: 1, T: 2}, nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "position_ids[0][1] = 4") {
		t.Errorf("position id 4 in a table of 4: error %v", err)
	}
	// Rotary has no table: the same model with rotary positions runs.
	r := randomModel(t, tinyConfig(func(c *Config) { c.MaxPositionEmbeddings = 4 }), HeadBase, 1)
	if _, err := r.Forward(ctx, &Batch{InputIDs: []int32{1, 2, 3, 4, 5, 6}, B: 1, T: 6}, nil, Options{}); err != nil {
		t.Errorf("rotary past max_position_embeddings: %v", err)
	}
}

func TestSwitchConfig(t *testing.T) {
	// The defaults write nothing new: a default config.json is unchanged.
	def := DefaultConfig()
	b, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"position_embedding_type", "attention_type", "relative_max_distance", "performer_features", "feature_redraw_interval", "scale_embedding"} {
		if strings.Contains(string(b), k) {
			t.Errorf("default config.json mentions %s:\n%s", k, b)
		}
	}
	// Non-default switches survive a round trip; only the relevant ones are written.
	for _, c := range []struct {
		in, has, lacks string
	}{
		{`{"position_embedding_type": "relative", "relative_max_distance": 5}`, `"relative_max_distance": 5`, "feature_redraw_interval"},
		{`{"attention_type": "performer", "performer_features": 8, "feature_redraw_interval": 0}`, `"feature_redraw_interval": 0`, "relative_max_distance"},
		{`{"position_embedding_type": "learned", "attention_type": "linear"}`, `"attention_type": "linear"`, "performer_features"},
		{`{"position_embedding_type": "rotary", "attention_type": "softmax"}`, `"model_type"`, "position_embedding_type"},
		{`{"position_embedding_type": "sinusoidal", "scale_embedding": true}`, `"scale_embedding": true`, "attention_type"},
	} {
		cfg, err := ParseConfig([]byte(c.in), "in")
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		out, err := cfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), c.has) || strings.Contains(string(out), c.lacks) {
			t.Errorf("%s: written as\n%s\nwant %s and no %s", c.in, out, c.has, c.lacks)
		}
		back, err := ParseConfig(out, "out")
		if err != nil {
			t.Fatal(err)
		}
		if back.PosEnc() != cfg.PosEnc() || back.Attention() != cfg.Attention() || back.NumFeatures() != cfg.NumFeatures() ||
			back.FeatureRedrawInterval != cfg.FeatureRedrawInterval || (cfg.PosEnc() == PosRelative && back.RelativeMaxDistance != cfg.RelativeMaxDistance) {
			t.Errorf("%s: round trip gave %+v", c.in, back)
		}
	}
	for _, c := range []struct{ json, want string }{
		{`{"position_embedding_type": "absolute"}`, `unknown position_embedding_type "absolute" (valid: rotary, sinusoidal, learned, relative, none)`},
		{`{"attention_type": "flash"}`, `unknown attention_type "flash"`},
		{`{"position_embedding_type": "relative", "attention_type": "linear"}`, "never forms"},
		{`{"position_embedding_type": "relative", "relative_max_distance": 0}`, "relative_max_distance 0"},
		{`{"attention_type": "performer", "performer_features": 7}`, "performer_features 7 must be even"},
		{`{"position_embedding_type": "learned", "max_position_embeddings": 0}`, "max_position_embeddings ≥ 1"},
	} {
		if _, err := ParseConfig([]byte(c.json), "config.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.json, err, c.want)
		}
	}
	if got := (&Config{HiddenSize: 64, NumAttentionHeads: 2, AttentionType: AttnPerformer}).NumFeatures(); got != 112 {
		t.Errorf("performer features for head size 32: %d, want ⌈32·ln 32⌉ = 111 rounded up to 112", got)
	}
}

// Save and Load keep every switch, the learned and relative tables and the
// performer's random features: the reloaded model computes the same outputs.
func TestSwitchSaveLoad(t *testing.T) {
	ctx := context.Background()
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, B: 2, T: 4}
	for i, sc := range switchCases() {
		t.Run(fmt.Sprintf("%s_%s", sc.pe, sc.at), func(t *testing.T) {
			m := randomModel(t, tinyConfig(switchConfig(sc.pe, sc.at)), HeadMaskedLM, uint64(600+i))
			m.Init(uint64(7 + i))
			m.Config.FeatureRedrawInterval = 10
			m.RedrawFeaturesAt(25) // draw 2
			dir := t.TempDir()
			if err := m.Save(dir); err != nil {
				t.Fatal(err)
			}
			want, err := m.Forward(ctx, b, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			l, err := Load(dir, HeadMaskedLM, LoadOptions{Bind: BindOptions{Strict: true}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.Forward(ctx, b, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			testutil.AssertClose(t, "logits after Save and Load", got.Logits.Data, want.Logits.Data, layoutTol(), 0)
			raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			var keys map[string]any
			if err := json.Unmarshal(raw, &keys); err != nil {
				t.Fatal(err)
			}
			if _, ok := keys["position_embedding_type"]; ok != (sc.pe != PosRotary) {
				t.Errorf("config.json position_embedding_type present %v for %s", ok, sc.pe)
			}
		})
	}
}

func TestRedrawSchedule(t *testing.T) {
	cfg := tinyConfig(switchConfig(PosRotary, AttnPerformer))
	cfg.FeatureRedrawInterval = 100
	m, err := New(cfg, HeadBase)
	if err != nil {
		t.Fatal(err)
	}
	m.Init(3)
	w0 := append([]float32(nil), m.omega[1]...)
	for _, c := range []struct {
		step   int
		redraw bool
		draw   uint64
	}{{0, false, 0}, {99, false, 0}, {100, true, 1}, {150, false, 1}, {420, true, 4}, {5, true, 0}} {
		if got := m.RedrawFeaturesAt(c.step); got != c.redraw || m.FeatureDraw() != c.draw {
			t.Errorf("step %d: redrew %v draw %d, want %v draw %d", c.step, got, m.FeatureDraw(), c.redraw, c.draw)
		}
	}
	// Draw 0 again gives the same features: a pure function of (seed, layer, draw).
	testutil.AssertClose(t, "draw 0 redrawn", m.omega[1], w0, 0, 0)
	// Rows of a block are orthogonal, and each row has a Gaussian-like norm.
	HS, M := cfg.HeadSize(), cfg.NumFeatures()
	for i := 0; i < min(HS, M); i++ {
		for j := 0; j < i; j++ {
			dot, ni, nj := 0.0, 0.0, 0.0
			for c := 0; c < HS; c++ {
				a, b := float64(w0[i*HS+c]), float64(w0[j*HS+c])
				dot, ni, nj = dot+a*b, ni+a*a, nj+b*b
			}
			if math.Abs(dot) > 1e-5*math.Sqrt(ni*nj) {
				t.Errorf("rows %d and %d are not orthogonal: cos %.3g", i, j, dot/math.Sqrt(ni*nj))
			}
		}
	}
}

// Vaswani et al.'s encoding, spot values: PE(p, 2i) = sin(p/10000^(2i/E)),
// PE(p, 2i+1) = cos(p/10000^(2i/E)).
func TestSinusoidRow(t *testing.T) {
	row := make([]float32, 6)
	sinusoidRow(row, 3)
	for i, want := range []float64{math.Sin(3), math.Cos(3), math.Sin(3 / math.Pow(10000, 2.0/6)), math.Cos(3 / math.Pow(10000, 2.0/6)), math.Sin(3 / math.Pow(10000, 4.0/6)), math.Cos(3 / math.Pow(10000, 4.0/6))} {
		if got := row[i]; got != float32(want) {
			t.Errorf("PE(3, %d) = %v, want %v", i, got, float32(want))
		}
	}
	odd := make([]float32, 3)
	sinusoidRow(odd, 0)
	if odd[0] != 0 || odd[1] != 1 || odd[2] != 0 {
		t.Errorf("PE(0) with E = 3: %v, want [0 1 0]", odd)
	}
}

// scale_embedding: the model equals an unscaled one whose word embeddings
// are √E times larger (forward), the padding row gets no lookup gradient,
// and finite differences agree for every parameter with sinusoidal, learned
// and rotary positions.
func TestScaleEmbedding(t *testing.T) {
	ctx := context.Background()
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, AttentionMask: []int32{1, 1, 1, 1, 0, 1, 1, 1}, TokenTypeIDs: []int32{0, 0, 1, 1, 0, 0, 1, 1}, B: 2, T: 4}
	for i, pe := range []PositionEncoding{PosSinusoidal, PosLearned, PosRotary} {
		t.Run(string(pe), func(t *testing.T) {
			cfg := tinyConfig(func(c *Config) { switchConfig(pe, AttnSoftmax)(c); c.ScaleEmbedding = true })
			a := randomModel(t, cfg, HeadMaskedLM, uint64(700+i))
			cfg.ScaleEmbedding = false
			ref := randomModel(t, cfg, HeadMaskedLM, uint64(700+i))
			sc := float32(math.Sqrt(float64(cfg.EmbeddingSize)))
			for j, w := range a.Encoder.Embeddings.Word.Data {
				ref.Encoder.Embeddings.Word.Data[j] = sc * w
			}
			got, err := a.Forward(ctx, b, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Forward(ctx, b, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			testutil.AssertClose(t, "last hidden state against √E·word", got.LastHiddenState.Data, want.LastHiddenState.Data, 1e-5, 1e-5)

			lab := &Labels{IDs: []int32{1, 4, -100, 3, -100, 10, 1, 2}}
			s := a.NewState(2, 4, true)
			loss := func() float64 {
				r, err := a.ForwardBackward(ctx, s, b, lab, StepOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return r.Loss
			}
			a.ZeroGrad()
			loss()
			grads := map[string][]float32{}
			for _, p := range a.Params() {
				grads[p.Name] = append([]float32(nil), p.Grad...)
			}
			for _, p := range a.Params() {
				testutil.GradCheck(t, p.Name, p.Data, grads[p.Name], loss, 3e-3, 2e-2)
			}
		})
	}
	// The padding row (id 10 in tinyConfig) gets no gradient from the
	// lookup; a classifier has no tied decoder to give it one.
	cfg := tinyConfig(func(c *Config) { c.ScaleEmbedding = true })
	m := randomModel(t, cfg, HeadSequenceCls, 710)
	pb := &Batch{InputIDs: []int32{2, 5, 10, 10, 3, 10, 1, 10}, B: 2, T: 4}
	m.ZeroGrad()
	if _, err := m.ForwardBackward(ctx, m.NewState(2, 4, true), pb, &Labels{IDs: []int32{2, 0}}, StepOptions{}); err != nil {
		t.Fatal(err)
	}
	E := cfg.EmbeddingSize
	for c, g := range m.Encoder.Embeddings.Word.Grad[10*E : 11*E] {
		if g != 0 {
			t.Fatalf("padding row gradient [10][%d] = %v, want 0", c, g)
		}
	}
	if g := m.Encoder.Embeddings.Word.Grad[2*E : 3*E]; g[0] == 0 && g[1] == 0 {
		t.Errorf("row 2 got no gradient")
	}
}
