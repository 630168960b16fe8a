package roformer

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/tensor"
)

func int8Model(t *testing.T) (*Model, string) {
	t.Helper()
	cfg := tinyConfig(func(c *Config) { c.HiddenSize, c.NumAttentionHeads, c.IntermediateSize = 24, 3, 40 })
	m := randomModel(t, cfg, HeadMaskedLM, 5)
	if err := m.SetPrecision(PrecisionInt8); err != nil {
		t.Skipf("this machine cannot run int8: %v", err)
	}
	if err := m.SetPrecision(""); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(filepath.Join(dir, "fp32")); err != nil {
		t.Fatal(err)
	}
	if err := m.SaveQuantized(filepath.Join(dir, "int8"), PrecisionInt8); err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// An int8 folder holds the codes and scales of every weight int8 quantizes,
// says so in config.json, loads in int8 as it is (mapped or read) and
// computes what quantizing the float32 folder at load computes, to the bit
// (the word embedding rounded to bfloat16, as the folder stores it).
func TestSaveQuantizedInt8RoundTrip(t *testing.T) {
	m, dir := int8Model(t)
	f, err := checkpoint.ReadDir(filepath.Join(dir, "int8"))
	if err != nil {
		t.Fatal(err)
	}
	want := m.int8WeightNames()
	n := 6*m.Config.NumHiddenLayers + 1 // q, k, v, out, ff in, ff out; the LM transform
	if m.Config.EmbeddingSize != m.Config.HiddenSize {
		n++ // embeddings_project
	}
	if len(want) != n {
		t.Fatalf("%d weights to quantize: %v", len(want), want)
	}
	for name := range want {
		e, s := f.Tensors[name], f.Tensors[name+"_scale"]
		if e == nil || e.DType != "I8" || s == nil || s.DType != "F32" || len(s.Shape) != 2 || s.Shape[1] != 1 {
			t.Fatalf("%s: stored as %+v with scales %+v", name, e, s)
		}
	}
	if e := f.Tensors["roformer.embeddings.word_embeddings.weight"]; e.DType != "BF16" {
		t.Fatalf("the word embedding is stored as %s", e.DType)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "int8", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Q struct {
			Method string `json:"quant_method"`
			Format string `json:"format"`
		} `json:"quantization_config"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Q.Method != "compressed-tensors" || cfg.Q.Format != "int-quantized" {
		t.Fatalf("config.json's quantization_config: %+v (%v)", cfg.Q, err)
	}

	ref, err := Load(filepath.Join(dir, "fp32"), HeadMaskedLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range ref.Encoder.Embeddings.Word.Data { // as the folder stores it
		ref.Encoder.Embeddings.Word.Data[i] = tensor.BF16ToF32(tensor.F32ToBF16(v))
	}
	if err := ref.SetPrecision(PrecisionInt8); err != nil {
		t.Fatal(err)
	}
	want32 := tinyLogits(t, ref.Model)
	for _, nomap := range []bool{false, true} {
		l, err := Load(filepath.Join(dir, "int8"), HeadMaskedLM, LoadOptions{NoMap: nomap})
		if err != nil {
			t.Fatal(err)
		}
		n := len(want)
		if !nomap {
			n++ // the word embedding, BF16 where it lies
		}
		if _, ok := l.stored[l.Encoder.Embeddings.Word]; l.Precision() != PrecisionInt8 || len(l.stored) != n || ok == nomap {
			t.Fatalf("NoMap %v: loaded in %s with %d stored weights (the word embedding's: %v), want int8 and %d", nomap, l.Precision(), len(l.stored), ok, n)
		}
		storedOnly(t, l.Model)
		sameBits(t, fmt.Sprintf("NoMap %v: logits from the int8 folder against quantizing at load", nomap), tinyLogits(t, l.Model), want32)
		// Save writes float32 again: the codes' values.
		out := filepath.Join(t.TempDir(), "back")
		if err := l.Save(out); err != nil {
			t.Fatal(err)
		}
		back, err := Load(out, HeadMaskedLM, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if back.Precision() != PrecisionFP32 {
			t.Fatalf("the float32 folder saved from an int8 model loads in %s", back.Precision())
		}
	}
	// Asked for float32, the codes are dequantized (the BF16 word
	// embedding may stay as it is stored).
	l, err := Load(filepath.Join(dir, "int8"), HeadMaskedLM, LoadOptions{Precision: PrecisionFP32})
	if err != nil {
		t.Fatal(err)
	}
	q := l.Encoder.Layers[0].FFIn.W
	if len(q.Data) != tensor.Numel(q.Shape) {
		t.Fatalf("fp32 load of an int8 folder: %d values for %v", len(q.Data), q.Shape)
	}
	for p, s := range l.stored {
		if s.codes != nil {
			t.Fatalf("fp32 load of an int8 folder: %s kept as codes", p.Name)
		}
	}
}

// A bf16 folder is every tensor in BF16 (but for the F32 sinusoid table
// Hugging Face computes with) with torch_dtype bfloat16 (what Hugging Face
// loads with torch_dtype=torch.bfloat16), and loads back to the float32
// weights rounded to bfloat16.
func TestSaveQuantizedBF16(t *testing.T) {
	cfg := tinyConfig(nil)
	m := randomModel(t, cfg, HeadMaskedLM, 6)
	dir := t.TempDir()
	if err := m.SaveQuantized(dir, PrecisionBF16); err != nil {
		t.Fatal(err)
	}
	f, err := checkpoint.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range f.Tensors {
		if want := map[bool]string{true: "F32", false: "BF16"}[name == keyEmbedPositions]; e.DType != want {
			t.Fatalf("%s stored as %s, want %s", name, e.DType, want)
		}
	}
	if f.Tensors[keyEmbedPositions] == nil {
		t.Fatalf("no %s", keyEmbedPositions)
	}
	l, err := Load(dir, HeadMaskedLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.TorchDtype != "bfloat16" {
		t.Fatalf("torch_dtype %q", l.Config.TorchDtype)
	}
	w, g := m.Weights(), l.Weights()
	for i := range w {
		for j, v := range w[i].Data {
			if r := tensor.BF16ToF32(tensor.F32ToBF16(v)); g[i].Data[j] != r {
				t.Fatalf("%s[%d] = %v, want %v rounded to bfloat16 (%v)", w[i].Name, j, g[i].Data[j], v, r)
			}
		}
	}
	if err := m.SaveQuantized(dir, "fp16"); err == nil {
		t.Fatal("SaveQuantized took fp16")
	}
}

// A bf16 folder mapped and served in bf16 keeps each linear layer's BF16
// bytes where they lie (no float32 copy: the Params have no values) and
// computes what the folder read into memory and prepared computes, to the
// bit; Save and a float32 precision give the values back.
func TestLoadBF16Stored(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skipf("this CPU runs no bf16: %v", err)
	}
	cfg := tinyConfig(nil)
	m := randomModel(t, cfg, HeadMaskedLM, 6)
	dir := t.TempDir()
	if err := m.SaveQuantized(dir, PrecisionBF16); err != nil {
		t.Fatal(err)
	}
	ref, err := Load(dir, HeadMaskedLM, LoadOptions{NoMap: true, Precision: PrecisionBF16})
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.stored) != 0 {
		t.Fatalf("the folder read into memory keeps %d stored weights", len(ref.stored))
	}
	want := tinyLogits(t, ref.Model)
	l, err := Load(dir, HeadMaskedLM, LoadOptions{Precision: PrecisionBF16})
	if err != nil {
		t.Fatal(err)
	}
	n := 6*cfg.NumHiddenLayers + 2 // q, k, v, out, ff in, ff out; the LM transform; the word embedding
	if cfg.EmbeddingSize != cfg.HiddenSize {
		n++
	}
	if len(l.stored) != n {
		t.Fatalf("%d stored weights, want %d", len(l.stored), n)
	}
	storedOnly(t, l.Model)
	sameBits(t, "logits from the mapped folder against the folder read", tinyLogits(t, l.Model), want)
	sd, rsd := l.StateDict(), ref.StateDict()
	for name, tt := range rsd {
		if !slices.Equal(sd[name].Data, tt.Data) {
			t.Fatalf("StateDict %s differs from the read folder's", name)
		}
	}
	// In float32 (kept BF16 and packed where oneDNN packs float32, else
	// widened) and once it trains (its own float32 weights), it computes
	// what the folder read computes.
	for _, p := range []Precision{PrecisionFP32, ""} {
		if p == "" {
			l.Params()
			if len(l.stored) != 0 {
				t.Fatalf("training: %d stored weights left", len(l.stored))
			}
		}
		if err := l.SetPrecision(PrecisionFP32); err != nil {
			t.Fatal(err)
		}
		if err := ref.SetPrecision(PrecisionFP32); err != nil {
			t.Fatal(err)
		}
		// Bit for bit where the products are prepared (oneDNN) or split
		// by columns without changing a sum (go-asm); a library's SGEMM
		// may sum the mapped model's three q/k/v products otherwise than
		// the read model's fused one.
		tol := 0.0
		if k := blas.Chosen().Kind; k != blas.KindOneDNN && k != blas.KindGoAsm {
			tol = 1e-4
		}
		want, got := tinyLogits(t, ref.Model), tinyLogits(t, l.Model)
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > tol || tol == 0 && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("fp32 (trained %v): logit %d: %v from the mapped folder, %v read (tolerance %g, %s)", p == "", i, got[i], want[i], tol, blas.Name())
			}
		}
	}
}

// A NaN among a bf16 folder's stored weights is refused naming it.
func TestLoadBF16StoredRefusesNaN(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skipf("this CPU runs no bf16: %v", err)
	}
	m := randomModel(t, tinyConfig(nil), HeadMaskedLM, 6)
	m.Encoder.Layers[1].FFOut.W.Data[5] = float32(math.NaN())
	dir := t.TempDir()
	if err := m.SaveQuantized(dir, PrecisionBF16); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir, HeadMaskedLM, LoadOptions{Precision: PrecisionBF16})
	if err == nil || !strings.Contains(err.Error(), "encoder.layer.1.output.dense.weight") {
		t.Fatalf("Load: %v, want an error naming the weight", err)
	}
}

// The codes and scales of an int8 folder are untrusted input: each fault
// is refused naming the tensor.
func TestLoadInt8Refuses(t *testing.T) {
	_, dir := int8Model(t)
	src := filepath.Join(dir, "int8")
	name := "roformer.encoder.layer.0.intermediate.dense.weight"
	cases := []struct {
		what, want string
		edit       func(map[string]*checkpoint.Entry)
	}{
		{"a NaN scale", "scale is NaN", func(e map[string]*checkpoint.Entry) { e[name+"_scale"].Data[3] = float32(math.NaN()) }},
		{"a zero scale", "scale is 0", func(e map[string]*checkpoint.Entry) { e[name+"_scale"].Data[0] = 0 }},
		{"a negative scale", "scale is -1", func(e map[string]*checkpoint.Entry) { e[name+"_scale"].Data[1] = -1 }},
		{"code -128", "code -128", func(e map[string]*checkpoint.Entry) { e[name].Data[7] = -128 }},
		{"scales of the wrong size", "needs [40, 1] or [40]", func(e map[string]*checkpoint.Entry) {
			s := e[name+"_scale"]
			s.Shape, s.Data = []int{39, 1}, s.Data[:39]
		}},
		{"codes without scales", "has no " + name + "_scale", func(e map[string]*checkpoint.Entry) { delete(e, name+"_scale") }},
		{"scales without codes", "has no I8 weight", func(e map[string]*checkpoint.Entry) {
			e[name].DType = "F32"
		}},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			f, err := checkpoint.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			c.edit(f.Tensors)
			out := t.TempDir()
			cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
			if err := os.WriteFile(filepath.Join(out, "config.json"), cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			var entries []*checkpoint.Entry
			for _, e := range f.Tensors {
				entries = append(entries, e)
			}
			if err := checkpoint.WriteSafetensors(filepath.Join(out, "model.safetensors"), entries, nil); err != nil {
				t.Fatal(err)
			}
			_, err = Load(out, HeadMaskedLM, LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v; want an error saying %q", err, c.want)
			}
		})
	}
}

// A folder SaveQuantized wrote from each HF fixture model, loaded in its
// precision, stays as close to float32 as --precision does (hidden states
// within cosine 0.99 per token, the masked-LM's top token mostly
// unchanged), and refuses to train.
func TestQuantizedFoldersAgainstFP32(t *testing.T) {
	ctx := context.Background()
	fs := loadFixtures(t)
	for _, p := range []Precision{PrecisionInt8, PrecisionBF16} {
		t.Run(string(p), func(t *testing.T) {
			if err := precisionSupported(p); err != nil {
				t.Skip(err)
			}
			for _, f := range fs {
				ref, err := Load(f.dir, HeadMaskedLM, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Forward(ctx, f.batch(), nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				if err := ref.SaveQuantized(dir, p); err != nil {
					t.Fatal(err)
				}
				l, err := Load(dir, HeadMaskedLM, LoadOptions{Precision: map[Precision]Precision{PrecisionBF16: PrecisionBF16}[p]})
				if err != nil {
					t.Fatal(err)
				}
				if l.Precision() != p || len(l.stored) == 0 {
					t.Fatalf("%s: the %s folder loads in %s with %d stored weights", f.Case, p, l.Precision(), len(l.stored))
				}
				got, err := l.Forward(ctx, f.batch(), nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				nearFP32(t, f.Case, got, want, l.Config.HiddenSize, l.Config.VocabSize)
				s := l.NewState(f.batch().B, f.batch().T, true)
				if _, err := l.ForwardBackward(ctx, s, f.batch(), &Labels{IDs: flat(f.Outputs.RoFormerForMaskedLM.Labels)}, StepOptions{}); err == nil {
					t.Errorf("%s: a model loaded in %s trained", f.Case, p)
				}
			}
		})
	}
}

// A model whose word embedding is only looked up (the base head), with
// and without scale_embedding, computes from a mapped folder's BF16 table
// (read by rows where it lies) what it computes from the table read into
// memory, to the bit.
func TestLoadBF16StoredWordTable(t *testing.T) {
	for _, scaled := range []bool{false, true} {
		cfg := tinyConfig(func(c *Config) { c.ScaleEmbedding = scaled })
		m := randomModel(t, cfg, HeadBase, 7)
		dir := t.TempDir()
		if err := m.SaveQuantized(dir, PrecisionBF16); err != nil {
			t.Fatal(err)
		}
		ref, err := Load(dir, HeadBase, LoadOptions{NoMap: true})
		if err != nil {
			t.Fatal(err)
		}
		l, err := Load(dir, HeadBase, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.wordBF16() == nil || ref.wordBF16() != nil {
			t.Fatalf("scale_embedding %v: the mapped model's word table stored %v, the read one's %v", scaled, l.wordBF16() != nil, ref.wordBF16() != nil)
		}
		ids := make([]int32, 2*9)
		for i := range ids {
			ids[i] = int32(i%10 + 1)
		}
		b := &Batch{B: 2, T: 9, InputIDs: ids}
		want, err := ref.Forward(context.Background(), b, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Forward(context.Background(), b, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		testutil.AssertClose(t, fmt.Sprintf("scale_embedding %v: hidden", scaled), got.LastHiddenState.Data, want.LastHiddenState.Data, layoutTol(), 0)
	}
}

// storedOnly fails unless every weight m keeps as stored has no float32
// values beside its stored form.
func storedOnly(t *testing.T, m *Model) {
	t.Helper()
	for p := range m.stored {
		if len(p.Data) != 0 {
			t.Fatalf("%s holds %d float32 values beside its stored form", p.Name, len(p.Data))
		}
	}
}

// sameBits fails unless got and want are equal to the bit.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}
