package sentence

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/checkpoint"
)

// A row of T = 4 positions, H = 2, the last one padding.
var (
	rowH    = []float32{1, -2, 3, 4, -5, 6, 100, 100}
	rowMask = []int32{1, 1, 1, 0}
)

func TestPoolModes(t *testing.T) {
	for _, c := range []struct {
		modes string
		skip  int
		want  []float64
	}{
		{"cls", 0, []float64{1, -2}},
		{"max", 0, []float64{3, 6}},
		{"mean", 0, []float64{-1.0 / 3, 8.0 / 3}},
		{"mean_sqrt_len_tokens", 0, []float64{-1 / math.Sqrt(3), 8 / math.Sqrt(3)}},
		// weights 1, 2, 3 for positions 0, 1, 2.
		{"weightedmean", 0, []float64{(1 + 6 - 15) / 6.0, (-2 + 8 + 18) / 6.0}},
		{"lasttoken", 0, []float64{-5, 6}},
		// Output order is sentence-transformers', whatever the order named.
		{"mean+cls", 0, []float64{1, -2, -1.0 / 3, 8.0 / 3}},
		{"cls+max+mean", 0, []float64{1, -2, 3, 6, -1.0 / 3, 8.0 / 3}},
		// A prompt of [CLS] + 1 token left out: positions 2 only; CLS stays.
		{"cls+mean", 2, []float64{1, -2, -5, 6}},
		{"weightedmean", 2, []float64{-5, 6}},
		{"max", 2, []float64{-5, 6}},
		// Everything left out: mean is 0, max the fill value, lasttoken 0.
		{"mean+max+lasttoken", 4, []float64{maskedMax, maskedMax, 0, 0, 0, 0}},
	} {
		p, err := ParseModes(c.modes, 2)
		if err != nil {
			t.Fatal(err)
		}
		got := p.Pool(rowH, rowMask, 4, c.skip)
		if len(got) != len(c.want) || len(got) != p.OutDim() {
			t.Fatalf("%s skip %d: %v, want %v", c.modes, c.skip, got, c.want)
		}
		for j := range got {
			if math.Abs(float64(got[j])-c.want[j]) > 1e-6 {
				t.Fatalf("%s skip %d: %v, want %v", c.modes, c.skip, got, c.want)
			}
		}
	}
	if _, err := ParseModes("median", 2); err == nil || !strings.Contains(err.Error(), "weightedmean") {
		t.Fatalf("ParseModes(median): %v", err)
	}
}

func TestDenseAndNormalize(t *testing.T) {
	d := &Dense{In: 2, Out: 2, Weight: []float32{1, 2, 3, 4}, Bias: []float32{0.5, -1}, Activation: "torch.nn.modules.activation.Tanh"}
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
	got := d.Forward([]float32{1, -1})
	want := []float64{math.Tanh(1 - 2 + 0.5), math.Tanh(3 - 4 - 1)}
	for j := range got {
		if math.Abs(float64(got[j])-want[j]) > 1e-7 {
			t.Fatalf("Forward: %v, want %v", got, want)
		}
	}
	for _, c := range []struct {
		act  string
		x, y float64
	}{
		{"torch.nn.modules.linear.Identity", -3, -3}, {"torch.nn.ReLU", -3, 0}, {"torch.nn.modules.activation.GELU", 1, 0.8413447460685429},
		{"torch.nn.modules.activation.Sigmoid", 0, 0.5}, {"torch.nn.modules.activation.LeakyReLU", -1, -0.01},
	} {
		d := &Dense{In: 1, Out: 1, Weight: []float32{1}, Activation: c.act}
		if got := d.Forward([]float32{float32(c.x)}); math.Abs(float64(got[0])-c.y) > 1e-6 {
			t.Errorf("%s(%g) = %g, want %g", c.act, c.x, got[0], c.y)
		}
	}
	for _, bad := range []string{"torch.nn.Softmax", "os.system", "Tanh2"} {
		if err := (&Dense{In: 1, Out: 1, Weight: []float32{1}, Activation: bad}).Check(); err == nil {
			t.Errorf("activation %q accepted", bad)
		}
	}
	v := []float32{3, 4}
	Normalize(v)
	if v[0] != 0.6 || v[1] != 0.8 {
		t.Fatalf("Normalize: %v", v)
	}
	z := []float32{0, 0}
	Normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Fatalf("Normalize of zero: %v", z)
	}
}

func TestLower(t *testing.T) {
	for in, want := range map[string]string{
		"Hello WORLD":   "hello world",
		"İstanbul":      "i\u0307stanbul",
		"ΟΔΟΣ ΣΑΣ":      "οδος σας",
		"Σ":             "σ", // no cased letter before it
		"ΑΣ'Β":          "ασ'β",
		"ÀÉÎ straße 中文": "àéî straße 中文",
	} {
		if got := Lower(in); got != want {
			t.Errorf("Lower(%q) = %q, want %q", in, got, want)
		}
	}
}

// A folder written by Save reads back as it was.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	f := &Folder{
		Pooling: Pooling{Dim: 3, Mean: true, Max: true, IncludePrompt: false},
		Steps: []Step{
			{Dense: &Dense{In: 6, Out: 2, Activation: DefaultActivation, Weight: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Bias: []float32{0.5, -0.5}}},
			{Dense: &Dense{In: 2, Out: 2, Activation: "torch.nn.modules.linear.Identity", Weight: []float32{1, 0, 0, 1}}},
			{},
		},
		MaxSeqLength: 128, DoLowerCase: true,
		Prompts:           map[string]string{"query": "query: ", "passage": "passage: "},
		DefaultPromptName: "query", SimilarityFn: "cosine",
	}
	if err := f.Save(dir); err != nil {
		t.Fatal(err)
	}
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if g.Version != WrittenVersion || g.TransformerPath != "" || len(g.Modules) != 5 {
		t.Fatalf("read back: version %q, transformer %q, %d modules", g.Version, g.TransformerPath, len(g.Modules))
	}
	g.Modules, g.Version = nil, ""
	if !reflect.DeepEqual(f, g) {
		t.Fatalf("read back\n%+v\nwant\n%+v", g, f)
	}
	if g.OutDim() != 2 || !g.Normalizes() {
		t.Fatalf("OutDim %d, Normalizes %v", g.OutDim(), g.Normalizes())
	}
	if p, err := g.Prompt(""); err != nil || p != "query: " {
		t.Fatalf("default prompt %q, %v", p, err)
	}
	if _, err := g.Prompt("doc"); err == nil || !strings.Contains(err.Error(), "passage, query") {
		t.Fatalf("unknown prompt: %v", err)
	}
	if err := g.Check(4); err == nil || !strings.Contains(err.Error(), "hidden_size is 4") {
		t.Fatalf("Check(4): %v", err)
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	modsPooling = `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
		{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}`
	poolMean = `{"word_embedding_dimension": 4, "pooling_mode_mean_tokens": true}`
)

// Bad folders get an error that names the file and the field, never a panic or
// an allocation of what they claim.
func TestLoadRefuses(t *testing.T) {
	if _, err := Load(t.TempDir()); err != ErrNotFolder {
		t.Fatalf("empty folder: %v", err)
	}
	for _, c := range []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"not json", map[string]string{"modules.json": "{"}, "modules.json"},
		{"no modules", map[string]string{"modules.json": "[]"}, "lists no modules"},
		{"no pooling", map[string]string{"modules.json": `[{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"}]`}, "must follow the Transformer"},
		{"unknown module", map[string]string{"modules.json": modsPooling + `,{"idx":2,"path":"2_LSTM","type":"sentence_transformers.models.LSTM"}]`, "1_Pooling/config.json": poolMean}, `"sentence_transformers.models.LSTM"`},
		{"path escapes", map[string]string{"modules.json": `[{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"},{"idx":1,"path":"../../etc","type":"sentence_transformers.models.Pooling"}]`}, "leaves the folder"},
		{"no mode", map[string]string{"modules.json": modsPooling + "]", "1_Pooling/config.json": `{"word_embedding_dimension": 4}`}, "no pooling_mode_"},
		{"huge dim", map[string]string{"modules.json": modsPooling + "]", "1_Pooling/config.json": `{"word_embedding_dimension": 1e12, "pooling_mode_mean_tokens": true}`}, "1_Pooling/config.json"},
		{"huge dense", map[string]string{"modules.json": modsPooling + `,{"idx":2,"path":"2_Dense","type":"sentence_transformers.models.Dense"}]`, "1_Pooling/config.json": poolMean,
			"2_Dense/config.json": `{"in_features": 4, "out_features": 65536000}`}, "out_features 65536000"},
		{"dense too many params", map[string]string{"modules.json": modsPooling + `,{"idx":2,"path":"2_Dense","type":"sentence_transformers.models.Dense"}]`, "1_Pooling/config.json": poolMean,
			"2_Dense/config.json": `{"in_features": 65536, "out_features": 65536}`}, "more than the limit"},
		{"dense activation", map[string]string{"modules.json": modsPooling + `,{"idx":2,"path":"2_Dense","type":"sentence_transformers.models.Dense"}]`, "1_Pooling/config.json": poolMean,
			"2_Dense/config.json": `{"in_features": 4, "out_features": 2, "activation_function": "builtins.eval"}`}, `"builtins.eval"`},
		{"dense in mismatch", map[string]string{"modules.json": modsPooling + `,{"idx":2,"path":"2_Dense","type":"sentence_transformers.models.Dense"}]`, "1_Pooling/config.json": poolMean,
			"2_Dense/config.json": `{"in_features": 5, "out_features": 2}`}, "in_features 5, but the vector before it has 4"},
		{"dense no weights", map[string]string{"modules.json": modsPooling + `,{"idx":2,"path":"2_Dense","type":"sentence_transformers.models.Dense"}]`, "1_Pooling/config.json": poolMean,
			"2_Dense/config.json": `{"in_features": 4, "out_features": 2}`}, "no checkpoint found"},
		{"max_seq_length", map[string]string{"modules.json": modsPooling + "]", "1_Pooling/config.json": poolMean, "sentence_bert_config.json": `{"max_seq_length": 1000000000}`}, "max_seq_length 1000000000"},
		{"default prompt", map[string]string{"modules.json": modsPooling + "]", "1_Pooling/config.json": poolMean,
			"config_sentence_transformers.json": `{"prompts": {"q": "q: "}, "default_prompt_name": "query"}`}, `default_prompt_name "query"`},
		{"similarity", map[string]string{"modules.json": modsPooling + "]", "1_Pooling/config.json": poolMean,
			"config_sentence_transformers.json": `{"similarity_fn_name": "jaccard"}`}, `"jaccard"`},
		{"big modules.json", map[string]string{"modules.json": "[" + strings.Repeat(" ", MaxConfigBytes) + "]"}, "limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				write(t, dir, name, content)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Load: %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

// The Dense weights must have the configured shapes.
func TestLoadDenseShapes(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "modules.json", modsPooling+`,{"idx":2,"path":"2_Dense","type":"sentence_transformers.models.Dense"}]`)
	write(t, dir, "1_Pooling/config.json", poolMean)
	write(t, dir, "2_Dense/config.json", `{"in_features": 4, "out_features": 2, "bias": false}`)
	w := &checkpoint.Entry{Name: "linear.weight", DType: "F32", Shape: []int{4, 2}, Data: make([]float32, 8)}
	if err := checkpoint.WriteSafetensors(filepath.Join(dir, "2_Dense", "model.safetensors"), []*checkpoint.Entry{w}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "shape [2 4]") {
		t.Fatalf("transposed weight: %v", err)
	}
	big := &checkpoint.Entry{Name: "linear.weight", DType: "F32", Shape: []int{512, 1024}, Data: make([]float32, 512*1024)}
	if err := checkpoint.WriteSafetensors(filepath.Join(dir, "2_Dense", "model.safetensors"), []*checkpoint.Entry{big}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "a Dense module of 2 × 4") {
		t.Fatalf("a 2 MiB weights file for a 2 × 4 module: %v", err)
	}
	w.Shape = []int{2, 4}
	b := &checkpoint.Entry{Name: "linear.bias", DType: "F32", Shape: []int{2}, Data: make([]float32, 2)}
	if err := checkpoint.WriteSafetensors(filepath.Join(dir, "2_Dense", "model.safetensors"), []*checkpoint.Entry{w, b}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "says bias false") {
		t.Fatalf("bias against the config: %v", err)
	}
	if err := checkpoint.WriteSafetensors(filepath.Join(dir, "2_Dense", "model.safetensors"), []*checkpoint.Entry{w}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Steps[0].Dense; d.Bias != nil || d.Activation != DefaultActivation || f.OutDim() != 2 {
		t.Fatalf("read %+v", d)
	}
}

// Every folder sentence-transformers saved (testdata/st) reads, saves and
// reads back the same; a folder saved by 2.2.2 is saved again with the
// pooling keys 2.2.2 knows only (its Pooling refuses others), so that both
// versions load what Save writes. (That they give the same vectors was
// checked with testdata/st/st_encode.py: max difference 0.0 in 2.2.2 and
// 2.7.0.)
func TestSaveFixtures(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "st", "*", "modules.json"))
	if len(dirs) == 0 {
		t.Fatal("no fixtures")
	}
	for _, m := range dirs {
		src := filepath.Dir(m)
		f, err := Load(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		dst := t.TempDir()
		if err := f.Save(dst); err != nil {
			t.Fatal(err)
		}
		g, err := Load(dst)
		if err != nil {
			t.Fatalf("%s saved again: %v", src, err)
		}
		f.Modules, g.Modules, g.Version, f.Version = nil, nil, "", ""
		if !reflect.DeepEqual(f, g) {
			t.Errorf("%s: saved and read back\n%+v\nwant\n%+v", src, g, f)
		}
		keys := func(dir string) map[string]bool {
			raw, err := os.ReadFile(filepath.Join(dir, "1_Pooling", "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			out := map[string]bool{}
			for k := range m {
				out[k] = true
			}
			return out
		}
		if strings.Contains(readFile(t, filepath.Join(src, "config_sentence_transformers.json")), `"2.2.2"`) {
			if want, got := keys(src), keys(dst); !reflect.DeepEqual(want, got) {
				t.Errorf("%s: 1_Pooling/config.json keys %v, want 2.2.2's %v", src, got, want)
			}
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInferMaxSeqLength(t *testing.T) {
	for _, c := range []struct {
		given, positions, modelMax, want int
	}{
		{0, 512, 0, 512},   // no model_max_length: the positions
		{0, 512, 128, 128}, // min of the two
		{0, 128, 512, 128},
		{64, 512, 16, 64}, // a given max_seq_length is kept
		{0, 0, 16, 0},     // no positions: nothing inferred
	} {
		f := &Folder{MaxSeqLength: c.given}
		f.InferMaxSeqLength(c.positions, c.modelMax)
		if f.MaxSeqLength != c.want {
			t.Errorf("given %d, max_position_embeddings %d, model_max_length %d: MaxSeqLength %d, want %d",
				c.given, c.positions, c.modelMax, f.MaxSeqLength, c.want)
		}
	}
}
