package roformer

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// Sizes built to exhaust memory are refused by ParseConfig, naming the key,
// the value and the limit, within a few KB of allocation.
func TestConfigLimits(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"vocab_size": 10000000000}`, "vocab_size 10000000000 is above the limit 16777216"},
		{`{"vocab_size": 1e10}`, `key "vocab_size" must be an integer in the int range, got 1e10`},
		{`{"vocab_size": 99999999999999999999}`, `key "vocab_size" must be an integer in the int range, got 99999999999999999999`},
		{`{"hidden_size": 4294967296, "num_attention_heads": 2}`, "hidden_size 4294967296 is above the limit 65536"},
		{`{"hidden_size": 16.5}`, `key "hidden_size" must be an integer in the int range, got 16.5`},
		{`{"num_labels": 10000000000}`, "num_labels 10000000000 is above the limit 1048576"},
		{`{"num_labels": 1e10}`, `key "num_labels" must be an integer in the int range, got 1e10`},
		{`{"num_labels": 0}`, "num_labels 0 must be positive"},
		{`{"intermediate_size": 1099511627776}`, "intermediate_size 1099511627776 is above the limit 262144"},
		{`{"intermediate_size": -5}`, "intermediate_size -5 must be positive"},
		{`{"num_hidden_layers": 1000000000}`, "num_hidden_layers 1000000000 is above the limit 1024"},
		{`{"num_hidden_layers": 0}`, "num_hidden_layers 0 must be positive"},
		{`{"num_attention_heads": 100000}`, "num_attention_heads 100000 is above the limit 4096"},
		{`{"hidden_size": 768, "num_attention_heads": 7}`, "hidden_size 768 is not divisible by num_attention_heads 7"},
		{`{"type_vocab_size": 1000000000}`, "type_vocab_size 1000000000 is above the limit 65536"},
		{`{"embedding_size": 1000000}`, "embedding_size 1000000 is above the limit 65536"},
		{`{"max_position_embeddings": 1099511627776, "position_embedding_type": "learned"}`, "max_position_embeddings 1099511627776 is above the limit 16777216"},
		{`{"relative_max_distance": 1000000000, "position_embedding_type": "relative"}`, "relative_max_distance 1000000000 is above the limit 65536"},
		{`{"performer_features": 1000000000, "attention_type": "performer"}`, "performer_features 1000000000 is above the limit 65536"},
		// Every field within its limit, their products not.
		{`{"hidden_size": 65536, "embedding_size": 65536, "num_attention_heads": 256}`, "the sizes imply 214274445312 encoder parameters (vocab_size 50000, embedding_size 65536, hidden_size 65536, num_hidden_layers 12"},
		{`{"hidden_size": 16384, "num_attention_heads": 128, "num_hidden_layers": 1024, "intermediate_size": 65536}`, "above the limit 17179869184"},
		{`{"vocab_size": 16777216, "embedding_size": 65536, "hidden_size": 64, "num_attention_heads": 2}`, "the sizes imply"},
	}
	for _, c := range cases {
		var err error
		n := allocated(func() { _, err = ParseConfig([]byte(c.json), "config.json") })
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: error %v, want it to name config.json and mention %q", c.json, err, c.want)
		}
		if n > 1<<20 {
			t.Errorf("%s: ParseConfig allocated %d bytes, want ≤ 1 MiB", c.json, n)
		}
	}
}

// A config.json larger than MaxConfigBytes is refused before it is parsed.
func TestLoadConfigTooLarge(t *testing.T) {
	path := t.TempDir() + "/config.json"
	big := make([]byte, MaxConfigBytes+10)
	for i := range big {
		big[i] = ' '
	}
	copy(big, `{"vocab_size": 5}`)
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	n := allocated(func() { _, err = LoadConfig(path) })
	if err == nil || !strings.Contains(err.Error(), "larger than 16777216 bytes") || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want the path and the limit", err)
	}
	if n > 3*MaxConfigBytes {
		t.Errorf("LoadConfig allocated %d bytes for a refused file, want ≤ %d", n, 3*MaxConfigBytes)
	}
}

// ParamCount, computed from the sizes alone, equals what New allocates, for
// every head and the switches that add or drop parameters.
func TestParamCountMatchesNew(t *testing.T) {
	f := false
	mods := map[string]func(*Config){
		"default":     nil,
		"E≠H":         func(c *Config) { c.EmbeddingSize = 4 },
		"v2":          func(c *Config) { c.NormType, c.UseBias = "rms_norm", &f },
		"learned":     func(c *Config) { c.PositionEmbeddingType = PosLearned },
		"relative":    func(c *Config) { c.PositionEmbeddingType, c.RelativeMaxDistance = PosRelative, 3 },
		"performer":   func(c *Config) { c.AttentionType, c.PerformerFeatures = AttnPerformer, 6 },
		"many labels": func(c *Config) { c.NumLabels = 17 },
	}
	for name, mod := range mods {
		cfg := tinyConfig(mod)
		for _, h := range Heads {
			if cfg.RMSNorm() && (h == HeadMaskedLM || h == HeadCausalLM) && cfg.EmbeddingSize != cfg.HiddenSize {
				continue
			}
			m, err := New(cfg, h)
			if err != nil {
				t.Fatalf("%s %s: %v", name, h, err)
			}
			enc, hd, err := cfg.ParamCount(h)
			if err != nil {
				t.Fatalf("%s %s: %v", name, h, err)
			}
			if got := int64(m.NumParams()); enc+hd != got {
				t.Errorf("%s %s: ParamCount %d + %d = %d, New allocated %d", name, h, enc, hd, enc+hd, got)
			}
			b, _, _ := cfg.ParamCount(HeadBase)
			if b != enc {
				t.Errorf("%s %s: encoder count %d differs from the base model's %d", name, h, enc, b)
			}
		}
	}
}

// The counter refuses products that overflow int64 and negative sizes.
func TestCounterOverflow(t *testing.T) {
	var s counter
	s.add(1<<40, 1<<40)
	if s.err == nil || !strings.Contains(s.err.Error(), "overflows") {
		t.Errorf("2⁸⁰: error %v", s.err)
	}
	s = counter{}
	s.add(1<<62, 1)
	s.add(1<<62, 1)
	if s.err == nil || !strings.Contains(s.err.Error(), "overflows") {
		t.Errorf("2⁶³ as a sum: error %v", s.err)
	}
	s = counter{}
	s.add(3, -1)
	if s.err == nil || !strings.Contains(s.err.Error(), "negative size -1") {
		t.Errorf("negative: error %v", s.err)
	}
	s = counter{}
	s.add(1<<31, 1<<31)
	s.add(5)
	if s.err != nil || s.n != 1<<62+5 {
		t.Errorf("2⁶² + 5: %d, %v", s.n, s.err)
	}
}

// CheckShapes names the tensor, its shape and the keys behind the shape it
// wanted; a checkpoint that fits passes.
func TestCheckShapes(t *testing.T) {
	cfg := tinyConfig(nil) // V 11, E = H 8, I 6, 2 layers, 3 labels
	m := randomModel(t, cfg, HeadSequenceCls, 1)
	fits := map[string][]int{}
	for n, tt := range m.StateDict() {
		fits[n] = tt.Shape
	}
	for _, h := range Heads {
		if err := cfg.CheckShapes(h, fits); err != nil {
			t.Errorf("%s: the model's own tensors: %v", h, err)
		}
	}
	with := func(edit func(map[string][]int)) map[string][]int {
		s := map[string][]int{"padding": {1 << 20}} // enough values that the counts pass
		for k, v := range fits {
			s[k] = v
		}
		edit(s)
		return s
	}
	cases := []struct {
		name   string
		mod    func(*Config)
		shapes map[string][]int
		head   Head
		want   string
	}{
		{"vocab", func(c *Config) { c.VocabSize = 12 }, with(func(map[string][]int) {}), HeadBase,
			"tensor roformer.embeddings.word_embeddings.weight has shape [11 8], but vocab_size 12, embedding_size 8 need [12 8]"},
		{"no prefix", func(c *Config) { c.VocabSize = 12 }, with(func(s map[string][]int) {
			s["embeddings.word_embeddings.weight"] = s["roformer.embeddings.word_embeddings.weight"]
			delete(s, "roformer.embeddings.word_embeddings.weight")
		}), HeadBase, "tensor embeddings.word_embeddings.weight has shape [11 8], but vocab_size 12"},
		{"intermediate", func(c *Config) { c.IntermediateSize = 5 }, with(func(map[string][]int) {}), HeadBase,
			"tensor roformer.encoder.layer.0.intermediate.dense.weight has shape [6 8], but intermediate_size 5, hidden_size 8 need [5 8]"},
		{"last layer", nil, with(func(s map[string][]int) { s["roformer.encoder.layer.1.attention.self.key.weight"] = []int{8, 9} }), HeadBase,
			"tensor roformer.encoder.layer.1.attention.self.key.weight has shape [8 9], but hidden_size 8 need [8 8]"},
		{"layers", func(c *Config) { c.NumHiddenLayers = 40 }, with(func(map[string][]int) {}), HeadBase,
			"num_hidden_layers 40, but the checkpoint's layers end at encoder.layer.1"},
		{"labels", func(c *Config) { c.NumLabels = 4 }, with(func(map[string][]int) {}), HeadSequenceCls,
			"tensor classifier.out_proj.weight has shape [3 8], but num_labels 4, hidden_size 8 need [4 8]"},
		{"pooler", nil, with(func(s map[string][]int) { s["roformer.pooler.dense.weight"] = []int{8, 7} }), HeadBase,
			"tensor roformer.pooler.dense.weight has shape [8 7], but hidden_size 8 need [8 8]"},
		{"encoder too big", func(c *Config) { c.VocabSize = 1 << 24 }, with(func(s map[string][]int) {
			delete(s, "padding")
			delete(s, "roformer.embeddings.word_embeddings.weight")
		}), HeadBase,
			"vocab_size 16777216, embedding_size 8, hidden_size 8, num_hidden_layers 2, intermediate_size 6, type_vocab_size 2 imply 134218620 encoder parameters (512 MB as float32), but the checkpoint holds only 1055 values in 40 tensors"},
		{"head too big", func(c *Config) { c.NumLabels = 1 << 20 }, fits, HeadTokenCls,
			"the token-classification head needs 9437184 parameters (num_labels 1048576, hidden_size 8, vocab_size 11), more than twice the checkpoint's 1143 values plus 2²⁰"},
		// The performer's random directions are no checkpoint's tensors, but
		// New allocates layers × features × head size of them.
		{"performer buffers", func(c *Config) { c.AttentionType, c.PerformerFeatures, c.NumAttentionHeads = AttnPerformer, 1<<16, 1 }, map[string][]int{
			"roformer.embeddings.word_embeddings.weight": {11, 8}, "roformer.embeddings.token_type_embeddings.weight": {2, 8}}, HeadBase,
			"encoder parameters"},
		{"negative shape", nil, map[string][]int{"x": {-1, 3}}, HeadBase, "tensor x [-1 3]: negative size -1"},
	}
	for _, c := range cases {
		cfg := tinyConfig(c.mod)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err := cfg.CheckShapes(c.head, c.shapes)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzParseConfig: any config.json either parses to sizes whose parameter
// count is computable and within MaxParams, or is refused; neither
// allocates more than a small multiple of the input.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"vocab_size": 99, "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1, "intermediate_size": 37}`))
	f.Add([]byte(`{"vocab_size": 10000000000}`))
	f.Add([]byte(`{"hidden_size": 65536, "embedding_size": 65536, "num_attention_heads": 256}`))
	f.Add([]byte(`{"num_labels": 1e10, "id2label": {"0": "a"}}`))
	f.Add([]byte(`{"position_embedding_type": "relative", "relative_max_distance": 65536}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		var err error
		n := allocated(func() { c, err = ParseConfig(data, "config.json") })
		if limit := uint64(64*len(data) + 4<<20); n > limit {
			t.Fatalf("ParseConfig of %d bytes allocated %d, want ≤ %d", len(data), n, limit)
		}
		if err != nil {
			return
		}
		for _, h := range Heads {
			enc, hd, err := c.ParamCount(h)
			if err != nil || enc < 0 || hd < 0 || enc > MaxParams {
				t.Fatalf("%s: ParamCount %d, %d, %v after a successful parse", h, enc, hd, err)
			}
		}
	})
}
