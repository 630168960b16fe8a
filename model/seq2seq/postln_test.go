package seq2seq

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
)

// postLNConfig is tinyConfig with post-LN layers.
func postLNConfig(position string) Config {
	c := tinyConfig(position)
	c.LayerNorm = PostLN
	return c
}

// TestPostLNGradients checks every parameter's gradient of the post-LN
// model (each sub-layer's LayerNorm after its residual sum, none at the top
// of the stacks) against float64 central differences, for both position
// encodings, with and without dropout, as TestGradients does for pre-LN.
func TestPostLNGradients(t *testing.T) {
	for _, pos := range []string{Rotary, Sinusoidal} {
		for _, drop := range []float64{0, 0.2} {
			t.Run(fmt.Sprintf("%s_drop%v", pos, drop), func(t *testing.T) {
				cfg := postLNConfig(pos)
				cfg.Dropout = drop
				cfg.Activation = "gelu" // ReLU's kink breaks central differences (see TestGradients)
				m, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				m.Init(1)
				r := testutil.Rand(2)
				for _, p := range m.Params() {
					if len(p.Shape) == 1 {
						for i, v := range testutil.RandN(r, len(p.Data), 0.1) {
							p.Data[i] += v
						}
					}
				}
				b := tinyBatch(t, cfg)
				const scale = 10
				loss := func() float64 {
					p, err := m.Forward(context.Background(), b, Options{Train: true, Seed: 5})
					if err != nil {
						t.Fatal(err)
					}
					return scale * p.Loss
				}
				m.ZeroGrad()
				p, err := m.Forward(context.Background(), b, Options{Train: true, Seed: 5})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Backward(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, prm := range m.Params() {
					g := make([]float32, len(prm.Grad))
					nz := 0.0
					for i, v := range prm.Grad {
						g[i] = scale * v
						nz = math.Max(nz, math.Abs(float64(v)))
					}
					if nz == 0 {
						t.Errorf("%s: gradient is all zero", prm.Name)
					}
					testutil.GradCheck(t, prm.Name, prm.Data, g, loss, 1e-3, 2e-3)
				}
			})
		}
	}
}

// TestPostLNForwardByHand: the post-LN encoder's output is, layer by layer,
// LN₂(x₁ + FFN(x₁)) with x₁ = LN₁(x + SelfAttn(x)), written here from the
// kernels without the model's sub-layer code, and no LayerNorm follows the
// last layer; the model has no encoder.layer_norm or decoder.layer_norm.
func TestPostLNForwardByHand(t *testing.T) {
	cfg := postLNConfig(Sinusoidal)
	cfg.EncoderLayers = 1
	m, _ := New(cfg)
	m.Init(3)
	for _, p := range m.Params() {
		if strings.HasPrefix(p.Name, "encoder.layer_norm.") || strings.HasPrefix(p.Name, "decoder.layer_norm.") {
			t.Errorf("post-LN model has %s", p.Name)
		}
	}
	if m.EncNorm.W != nil || m.DecNorm.W != nil {
		t.Error("post-LN model has a LayerNorm at the top of a stack")
	}
	if got, want := cfg.NumParamsFor(), int64(m.NumParams()); got != want {
		t.Errorf("NumParamsFor %d, the model has %d", got, want)
	}
	src := [][]int32{{3, 4, 5}}
	enc, err := m.Encode(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	C, I, S, eps := cfg.DModel, cfg.FFN, 4, float32(cfg.LayerNormEps)
	L := &m.Enc[0]
	x := make([]float32, S*C)
	m.embedForward(x, []int32{3, 4, 5, int32(cfg.EOSID)}, kernels.Dropout{}, 1, S)
	qkv := make([]float32, S*3*C)
	kernels.MatmulForward(qkv, x, L.QKV.W.Data, L.QKV.B.Data, S, C, 3*C)
	q, k, v := make([]float32, S*C), make([]float32, S*C), make([]float32, S*C)
	kernels.SplitQKV(q, k, v, qkv, S, C)
	att := make([]float32, S*C)
	kernels.AttentionForward(att, make([]float32, cfg.Heads*S*S), q, k, v, nil, false, kernels.Dropout{}, 1, S, cfg.Heads, cfg.HeadSize())
	sum := make([]float32, S*C)
	kernels.MatmulForward(sum, att, L.Out.W.Data, L.Out.B.Data, S, C, C)
	kernels.AddForward(sum, sum, x, S*C)
	x1 := make([]float32, S*C)
	kernels.LayerNormForward(x1, nil, nil, sum, L.AttnNorm.W.Data, L.AttnNorm.B.Data, eps, S, C)
	h := make([]float32, S*I)
	kernels.MatmulForward(h, x1, L.FC1.W.Data, L.FC1.B.Data, S, C, I)
	kernels.ActivationForward(h, h, kernels.ReLU, S*I)
	kernels.MatmulForward(sum, h, L.FC2.W.Data, L.FC2.B.Data, S, I, C)
	kernels.AddForward(sum, sum, x1, S*C)
	want := make([]float32, S*C)
	kernels.LayerNormForward(want, nil, nil, sum, L.FFNNorm.W.Data, L.FFNNorm.B.Data, eps, S, C)
	testutil.AssertClose(t, "encoder output", enc.Out, want, 1e-5, 1e-5)
}

// TestPostLNCachedStepEqualsForward: cached decoding of the post-LN model,
// one token at a time, gives the logits of the full forward pass.
func TestPostLNCachedStepEqualsForward(t *testing.T) {
	for _, pos := range []string{Rotary, Sinusoidal} {
		t.Run(pos, func(t *testing.T) {
			cfg := postLNConfig(pos)
			m, _ := New(cfg)
			m.Init(7)
			src := [][]int32{{3, 4, 5, 6, 7}, {8, 9}}
			tgt := [][]int32{{5, 6, 7, 8}, {9, 10, 3, 4}}
			b, err := NewBatch(cfg, src, tgt)
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.Forward(context.Background(), b, Options{})
			if err != nil {
				t.Fatal(err)
			}
			enc, _ := m.Encode(context.Background(), src)
			st, _ := m.NewState(enc, []int{0, 1}, 2)
			V := cfg.VocabSize
			for tt := 0; tt < b.T; tt++ {
				got, err := m.Step(st, []int32{b.DecIn[tt], b.DecIn[b.T+tt]})
				if err != nil {
					t.Fatal(err)
				}
				for r := 0; r < 2; r++ {
					want := p.Logits[(r*b.T+tt)*V : (r*b.T+tt+1)*V]
					testutil.AssertClose(t, fmt.Sprintf("row %d position %d", r, tt), got[r*V:(r+1)*V], want, 1e-5, 1e-5)
				}
			}
			// Prefill of a longer prompt takes the same path as the steps.
			d := m.NewDecoder(enc, []int{0})
			got, err := d.Prefill(context.Background(), [][]int32{b.DecIn[:3]}, generate.Room{Beams: 1, NewTokens: 4})
			if err != nil {
				t.Fatal(err)
			}
			testutil.AssertClose(t, "prefill", got, p.Logits[2*V:3*V], 1e-5, 1e-5)
		})
	}
}

// TestPostLNConfigJSON: layer_norm_position is written for post-LN and
// read back; a config.json without it (every one written before it
// existed) is pre-LN, and pre-LN configs are written without the key, as
// before; an unknown placement is refused by name.
func TestPostLNConfigJSON(t *testing.T) {
	m, _ := New(postLNConfig(Rotary))
	m.Init(4)
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if !strings.Contains(string(raw), `"layer_norm_position": "post"`) {
		t.Errorf("config.json lacks the post-LN key:\n%s", raw)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config != m.Config || !got.Config.postLN() {
		t.Errorf("config %+v, want %+v", got.Config, m.Config)
	}
	for i, p := range m.Params() {
		if !slices.Equal(got.Params()[i].Data, p.Data) {
			t.Fatalf("%s differs after Load", p.Name)
		}
	}
	pre, _ := json.Marshal(tinyConfig(Rotary))
	if strings.Contains(string(pre), "layer_norm_position") {
		t.Errorf("a pre-LN config is written with layer_norm_position: %s", pre)
	}
	var old Config
	if err := json.Unmarshal([]byte(`{"vocab_size": 11, "d_model": 8, "num_heads": 2, "ffn_size": 12, "encoder_layers": 1, "decoder_layers": 1, "position": "rotary", "layer_norm_eps": 1e-5}`), &old); err != nil {
		t.Fatal(err)
	}
	if err := old.Validate(); err != nil || old.postLN() {
		t.Errorf("a config without layer_norm_position: %v, post-LN %v; want a valid pre-LN config", err, old.postLN())
	}
	om, _ := New(old)
	if om.EncNorm.W == nil || om.DecNorm.W == nil {
		t.Error("a config without layer_norm_position has no top LayerNorms")
	}
	bad := tinyConfig(Rotary)
	bad.LayerNorm = "sandwich"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `layer_norm_position "sandwich"`) {
		t.Errorf("got %v", err)
	}
	// A pre-LN checkpoint does not load as post-LN: the top norms are unexpected.
	pm, _ := New(tinyConfig(Rotary))
	pm.Init(1)
	pdir := t.TempDir()
	pm.Save(pdir)
	cfg := tinyConfig(Rotary)
	cfg.LayerNorm = PostLN
	b, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(pdir, "config.json"), b, 0o644)
	if _, err := Load(pdir); err == nil || !strings.Contains(err.Error(), "unexpected encoder.layer_norm.weight") {
		t.Errorf("pre-LN weights under a post-LN config: %v", err)
	}
}
