package roformer

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
)

// fixtureInputs are a family fixture's inputs, [B][L] each.
type fixtureInputs struct {
	InputIDs      [][]int32 `json:"input_ids"`
	AttentionMask [][]int32 `json:"attention_mask"`
	TokenTypeIDs  [][]int32 `json:"token_type_ids"`
}

// batch flattens the inputs into a Batch.
func (in *fixtureInputs) batch() *Batch {
	b := &Batch{B: len(in.InputIDs), T: len(in.InputIDs[0])}
	for r := range in.InputIDs {
		b.InputIDs = append(b.InputIDs, in.InputIDs[r]...)
		b.AttentionMask = append(b.AttentionMask, in.AttentionMask[r]...)
		b.TokenTypeIDs = append(b.TokenTypeIDs, in.TokenTypeIDs[r]...)
	}
	return b
}

// fixtureTensor is a fixture's output tensor.
type fixtureTensor struct {
	Shape []int     `json:"shape"`
	Data  []float32 `json:"data"`
}

// familyFixture is ../shared/fixtures/roformer-family/<case>/fixture.json
// (the RoFormer-V2 part).
type familyFixture struct {
	Inputs fixtureInputs `json:"inputs"`
	Heads  map[string]struct {
		Folder  string                   `json:"folder"`
		Outputs map[string]fixtureTensor `json:"outputs"`
	} `json:"heads"`
}

// RoFormer-V2 (norm_type rms_norm, use_bias false, the bare tied MLM
// decoder) against JunnYu/RoFormer_pytorch's outputs, every head, from both
// weight formats. Tolerance 1e-4 absolute, the fixture's (float32 products
// summed in another order).
func TestRoFormerV2Fixture(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "roformer-family", "v2_a")
	var f familyFixture
	testutil.ReadJSON(t, filepath.Join(dir, "fixture.json"), &f)
	b := f.Inputs.batch()
	if len(f.Heads) != 3 {
		t.Fatalf("fixture has %d heads, want 3", len(f.Heads))
	}
	for name, h := range f.Heads {
		if len(h.Outputs) == 0 {
			t.Fatalf("%s: no outputs in the fixture", name)
		}
		head, err := ParseHead(name)
		if err != nil {
			t.Fatal(err)
		}
		folder := h.Folder
		if folder == "" {
			folder = name
		}
		for _, weights := range []string{"model.safetensors", "pytorch_model.bin"} {
			t.Run(name+"/"+weights, func(t *testing.T) {
				l, err := Load(filepath.Join(dir, folder), head, LoadOptions{Weights: filepath.Join(dir, folder, weights)})
				if err != nil {
					t.Fatal(err)
				}
				if !l.Config.RMSNorm() || l.Config.Bias() {
					t.Fatalf("config not read as V2: norm_type %q, use_bias %v", l.Config.NormType, l.Config.Bias())
				}
				out, err := l.Forward(context.Background(), b, nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for oname, want := range h.Outputs {
					got := out.Named(oname)
					if got == nil {
						t.Fatalf("no %s", oname)
					}
					testutil.AssertClose(t, name+" "+oname, got.Data, want.Data, 1e-4, 0)
				}
			})
		}
	}
}

// RoFormer-Sim's pooler: dense → linear activation on the first token,
// against the reference's pooler_output for a padded batch (1e-4).
func TestRoFormerSimPooler(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "roformer-family", "sim_a")
	var f struct {
		Pooler struct {
			Inputs  fixtureInputs            `json:"inputs"`
			Outputs map[string]fixtureTensor `json:"outputs"`
		} `json:"pooler"`
	}
	testutil.ReadJSON(t, filepath.Join(dir, "fixture.json"), &f)
	b := f.Pooler.Inputs.batch()
	want := f.Pooler.Outputs["pooler_output"]
	if len(want.Data) == 0 {
		t.Fatal("no pooler_output in the fixture")
	}
	// The folder as it is (is_decoder true, a pooler): the UniLM rule makes
	// the type-0 batch bidirectional, with either head.
	for _, head := range []Head{HeadBase, HeadCausalLM} {
		l, err := Load(filepath.Join(dir, "model"), head, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Encoder.Pooler == nil {
			t.Fatal("the checkpoint's pooler was not loaded")
		}
		if !l.IsSim() || l.EncoderMask() != MaskUniLM {
			t.Fatalf("%s: IsSim %v, mask %s; want a Sim model under the UniLM mask", head, l.IsSim(), l.EncoderMask())
		}
		out, err := l.Forward(context.Background(), b, nil, Options{SkipHead: head != HeadBase})
		if err != nil {
			t.Fatal(err)
		}
		testutil.AssertClose(t, string(head)+" pooler_output", out.PoolerOutput.Data, want.Data, 1e-4, 0)
		// Forcing the causal mask gives other vectors: the test can fail.
		causal, err := l.Forward(context.Background(), b, nil, Options{Causal: true, SkipHead: true})
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(causal.PoolerOutput.Data, want.Data); d < 1e-2 {
			t.Errorf("%s: the causal pass is within %g of the reference", head, d)
		}
	}
}

// The UniLM mask of a Sim model with a type-1 part, against generation's
// UniLM decoding (the prompt bidirectional into the cache, then each new
// token of type 1 on its own): one Forward over prompt + continuation with
// types 0…0 1…1 gives, at every continuation position, the logits of the
// matching cached step (1e-4), and at the prompt positions the logits of
// the prompt alone. A causal pass differs.
func TestSimUniLMMaskMatchesDecoding(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "roformer-family", "sim_a")
	l, err := Load(filepath.Join(dir, "model"), HeadCausalLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prompt, cont := []int32{2, 34, 13, 45, 49}, []int32{12, 38, 7, 21}
	d, err := l.NewDecoder(DecoderOptions{Mode: DecodeUniLM})
	if err != nil {
		t.Fatal(err)
	}
	V := l.Config.VocabSize
	first, err := d.Prefill(ctx, [][]int32{prompt}, generate.Room{Beams: 1, NewTokens: len(cont)})
	if err != nil {
		t.Fatal(err)
	}
	steps := [][]float32{first}
	for _, id := range cont[:len(cont)-1] {
		lg, err := d.Step(ctx, []int32{id})
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, lg)
	}
	ids := append(slices.Clone(prompt), cont[:len(cont)-1]...)
	types := make([]int32, len(ids))
	for i := len(prompt); i < len(ids); i++ {
		types[i] = 1
	}
	T := len(ids)
	out, err := l.Forward(ctx, &Batch{InputIDs: ids, TokenTypeIDs: types, B: 1, T: T}, nil, Options{OutputAttentions: true})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range steps {
		p := len(prompt) - 1 + k
		testutil.AssertClose(t, fmt.Sprintf("position %d", p), out.Logits.Data[p*V:(p+1)*V], want, 1e-4, 0)
	}
	alone, err := l.Forward(ctx, &Batch{InputIDs: prompt, B: 1, T: len(prompt)}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.AssertClose(t, "prompt positions", out.Logits.Data[:len(prompt)*V], alone.Logits.Data, 1e-4, 0)
	// The attention weights: zero exactly where the mask hides a key.
	for _, a := range out.Attentions {
		for h := range l.Config.NumAttentionHeads {
			for i := range T {
				for j := range T {
					w := a.Data[(h*T+i)*T+j]
					hidden := types[j] == 1 && (types[i] == 0 || j > i)
					if hidden != (w == 0) {
						t.Fatalf("head %d query %d key %d: weight %g, hidden %v", h, i, j, w, hidden)
					}
				}
			}
		}
	}
	causal, err := l.Forward(ctx, &Batch{InputIDs: ids, TokenTypeIDs: types, B: 1, T: T}, nil, Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	if dd := maxAbsDiff(causal.Logits.Data, out.Logits.Data); dd < 1e-3 {
		t.Errorf("the causal pass is within %g of the UniLM one", dd)
	}
}

// A plain causal LM (is_decoder true, no pooler: HF's RoFormerForCausalLM)
// still encodes causally, with any head; a Sim-style rule does not touch it.
func TestCausalLMStaysCausal(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "roformer-family", "causal_a", "model")
	ctx := context.Background()
	b := &Batch{InputIDs: []int32{2, 5, 9, 11, 4, 7}, TokenTypeIDs: make([]int32, 6), B: 1, T: 6}
	for _, head := range []Head{HeadBase, HeadCausalLM} {
		l, err := Load(dir, head, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.IsSim() || l.EncoderMask() != MaskCausal {
			t.Fatalf("%s: IsSim %v, mask %s; want the causal mask", head, l.IsSim(), l.EncoderMask())
		}
		got, err := l.Forward(ctx, b, nil, Options{SkipHead: true})
		if err != nil {
			t.Fatal(err)
		}
		want, err := l.Forward(ctx, b, nil, Options{Causal: true, SkipHead: true})
		if err != nil {
			t.Fatal(err)
		}
		testutil.AssertClose(t, string(head), got.LastHiddenState.Data, want.LastHiddenState.Data, 0, 0)
		// Position 0 sees only itself: a longer row leaves it unchanged.
		short, err := l.Forward(ctx, &Batch{InputIDs: b.InputIDs[:1], B: 1, T: 1}, nil, Options{SkipHead: true})
		if err != nil {
			t.Fatal(err)
		}
		H := l.Config.HiddenSize
		testutil.AssertClose(t, string(head)+" position 0", got.LastHiddenState.Data[:H], short.LastHiddenState.Data, 1e-5, 0)
	}
	enc, err := Load(dir, HeadBase, LoadOptions{ConfigOverride: func(c *Config) { c.IsDecoder = false }})
	if err != nil {
		t.Fatal(err)
	}
	if enc.EncoderMask() != MaskBidirectional {
		t.Errorf("is_decoder false: mask %s", enc.EncoderMask())
	}
}

type generateFixture struct {
	Mode         string `json:"mode"`
	MaxNewTokens int    `json:"max_new_tokens"`
	Inputs       struct {
		InputIDs [][]int32 `json:"input_ids"`
	} `json:"inputs"`
	Sequences [][]int32 `json:"sequences"`
	Scores    struct {
		Shape []int     `json:"shape"`
		Data  []float32 `json:"data"`
	} `json:"scores"`
}

// Greedy generation with the key/value cache against the references:
// RoFormer-Sim's UniLM decoding (JunnYu/RoFormer_pytorch) and HF's
// RoFormerForCausalLM.generate. The ids must be equal (the fixtures' top-2
// margins are far above float32 rounding) and every step's logits within
// 1e-4.
func TestGenerateFixtures(t *testing.T) {
	for _, name := range []string{"sim_a", "causal_a"} {
		t.Run(name, func(t *testing.T) {
			dir := testutil.Shared(t, "fixtures", "roformer-family", name)
			var f struct {
				Generate generateFixture `json:"generate"`
			}
			testutil.ReadJSON(t, filepath.Join(dir, "fixture.json"), &f)
			g := f.Generate
			l, err := Load(filepath.Join(dir, "model"), HeadCausalLM, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := generateWith(context.Background(), l.Model, g.Inputs.InputIDs, genOptions{DecoderOptions: DecoderOptions{Mode: g.Mode}, Options: generate.Options{MaxNewTokens: g.MaxNewTokens, EOS: -1, OutputScores: true}})
			if err != nil {
				t.Fatal(err)
			}
			for r := range g.Sequences {
				if !slices.Equal(out.Sequences[r], g.Sequences[r]) {
					t.Errorf("row %d: %v, want %v", r, out.Sequences[r], g.Sequences[r])
				}
			}
			var scores []float32
			for r := range out.Scores {
				for _, step := range out.Scores[r] {
					scores = append(scores, step...)
				}
			}
			testutil.AssertClose(t, "scores", scores, g.Scores.Data, 1e-4, 0)
		})
	}
}

// Cached decoding equals recomputing the whole sequence at every step
// (causal mask), also with a rotated value and linear RoPE scaling.
func TestGenerateEqualsRecomputation(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
	}{
		{"plain", nil},
		{"rotary_value_linear_scaling", func(c *Config) { c.RotaryValue = true; c.RopeScaling = &RopeScaling{RopeType: "linear", Factor: 2} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyConfig(c.mod)
			cfg.MaxPositionEmbeddings = 32
			m := randomModel(t, cfg, HeadCausalLM, 77)
			prompts := [][]int32{{2, 5, 7}, {9, 1, 4}}
			const steps = 5
			got, err := generateWith(context.Background(), m, prompts, genOptions{Options: generate.Options{MaxNewTokens: steps, EOS: -1, OutputScores: true}})
			if err != nil {
				t.Fatal(err)
			}
			V := cfg.VocabSize
			for r, p := range prompts {
				seq := slices.Clone(p)
				for step := 0; step < steps; step++ {
					out, err := m.Forward(context.Background(), &Batch{InputIDs: seq, B: 1, T: len(seq)}, nil, Options{Causal: true})
					if err != nil {
						t.Fatal(err)
					}
					last := out.Logits.Data[(len(seq)-1)*V : len(seq)*V]
					testutil.AssertClose(t, fmt.Sprintf("row %d step %d logits", r, step), got.Scores[r][step], last, 1e-4, 0)
					seq = append(seq, int32(kernels.Argmax(last)))
				}
				if !slices.Equal(got.Sequences[r], seq) {
					t.Errorf("row %d: cached %v, recomputed %v", r, got.Sequences[r], seq)
				}
			}
		})
	}
	m := randomModel(t, tinyConfig(nil), HeadSequenceCls, 1)
	if _, err := generateWith(context.Background(), m, [][]int32{{1}}, genOptions{Options: generate.Options{MaxNewTokens: 1}}); err == nil {
		t.Error("a classification model generated")
	}
	lm := randomModel(t, tinyConfig(nil), HeadCausalLM, 1)
	if _, err := generateWith(context.Background(), lm, [][]int32{{1, 2}, {3}}, genOptions{Options: generate.Options{MaxNewTokens: 1}}); err == nil {
		t.Error("ragged prompts accepted")
	}
}

// A V2 config over a v1 checkpoint and the reverse are errors that name
// the mismatch, not a model with tensors silently ignored.
func TestVariantMismatch(t *testing.T) {
	v1 := testutil.Shared(t, "fixtures", "roformer-family", "sim_a", "model") // a v1 (layer_norm) causal LM
	v2 := testutil.Shared(t, "fixtures", "roformer-family", "v2_a", "base")
	if _, err := Load(v1, HeadBase, LoadOptions{ConfigOverride: func(c *Config) { c.NormType = "rms_norm" }}); err == nil || !strings.Contains(err.Error(), "LayerNorm") {
		t.Errorf("v1 checkpoint, V2 config: %v", err)
	}
	no := false
	if _, err := Load(v1, HeadBase, LoadOptions{ConfigOverride: func(c *Config) { c.UseBias = &no }}); err == nil || !strings.Contains(err.Error(), "use_bias") {
		t.Errorf("v1 checkpoint, use_bias false: %v", err)
	}
	if _, err := Load(v2, HeadBase, LoadOptions{ConfigOverride: func(c *Config) { c.NormType = "layer_norm" }}); err == nil || !strings.Contains(err.Error(), "norm_type rms_norm") {
		t.Errorf("V2 checkpoint, v1 config: %v", err)
	}
}
