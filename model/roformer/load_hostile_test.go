package roformer_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/hostile"
	"github.com/roformer-go/roformer/model/roformer"
)

// Each of hostile.ConfigCases, a few-KB folder whose config.json asks for
// gigabytes, is refused by Load with an error naming config.json and the
// key, allocating no more than a few MB; the same folder without the
// overrides loads.
func TestLoadHostileConfig(t *testing.T) {
	root := t.TempDir()
	normal := filepath.Join(root, "normal")
	if err := hostile.ConfigFolder(normal, nil); err != nil {
		t.Fatal(err)
	}
	for _, h := range []roformer.Head{roformer.HeadBase, roformer.HeadMaskedLM} {
		if _, err := roformer.Load(normal, h, roformer.LoadOptions{}); err != nil {
			t.Fatalf("the normal folder, %s: %v", h, err)
		}
	}
	for name, ov := range hostile.ConfigCases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			if err := hostile.ConfigFolder(dir, ov); err != nil {
				t.Fatal(err)
			}
			for _, h := range []roformer.Head{roformer.HeadBase, roformer.HeadSequenceCls} {
				var err error
				var a, b runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&a)
				_, err = roformer.Load(dir, h, roformer.LoadOptions{Bind: roformer.BindOptions{AllowMissingHead: true}})
				runtime.ReadMemStats(&b)
				if err == nil {
					t.Fatalf("%s: loaded", h)
				}
				msg := err.Error()
				if !strings.Contains(msg, filepath.Join(dir, "config.json")) {
					t.Errorf("%s: error %q does not name config.json", h, msg)
				}
				named := false
				for k := range ov {
					if ov[k] != nil && strings.Contains(msg, k) {
						named = true
					}
				}
				if !named {
					t.Errorf("%s: error %q names none of the keys %v", h, msg, keys(ov))
				}
				if n := b.TotalAlloc - a.TotalAlloc; n > 16<<20 {
					t.Errorf("%s: Load allocated %d bytes before refusing, want ≤ 16 MiB", h, n)
				}
			}
		})
	}
}

// hostile.HeadConfigCases are refused by the heads that would allocate
// from them, naming the key; the base model loads.
func TestLoadHostileHeadConfig(t *testing.T) {
	for name, ov := range hostile.HeadConfigCases {
		dir := filepath.Join(t.TempDir(), name)
		if err := hostile.ConfigFolder(dir, ov); err != nil {
			t.Fatal(err)
		}
		if _, err := roformer.Load(dir, roformer.HeadBase, roformer.LoadOptions{}); err != nil {
			t.Errorf("%s: base: %v", name, err)
		}
		for _, h := range []roformer.Head{roformer.HeadSequenceCls, roformer.HeadTokenCls} {
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			_, err := roformer.Load(dir, h, roformer.LoadOptions{Bind: roformer.BindOptions{AllowMissingHead: true}})
			runtime.ReadMemStats(&b)
			if err == nil || !strings.Contains(err.Error(), "num_labels 1048576") || !strings.Contains(err.Error(), "config.json") {
				t.Errorf("%s: %s: error %v, want it to name config.json and num_labels 1048576", name, h, err)
			}
			if n := b.TotalAlloc - a.TotalAlloc; n > 16<<20 {
				t.Errorf("%s: %s: Load allocated %d bytes before refusing, want ≤ 16 MiB", name, h, n)
			}
		}
	}
}

// A config.json within every limit whose sizes disagree with the
// checkpoint's tensors is refused naming the file, the tensor, its shape
// and the key.
func TestLoadShapeMismatch(t *testing.T) {
	cases := []struct {
		ov   map[string]any
		head roformer.Head
		want string
	}{
		{map[string]any{"vocab_size": 10}, roformer.HeadBase,
			"tensor roformer.embeddings.word_embeddings.weight has shape [12 16], but vocab_size 10, embedding_size 16 need [10 16]"},
		{map[string]any{"intermediate_size": 64}, roformer.HeadBase,
			"tensor roformer.encoder.layer.0.intermediate.dense.weight has shape [32 16], but intermediate_size 64, hidden_size 16 need [64 16]"},
		{map[string]any{"hidden_size": 32, "embedding_size": 32}, roformer.HeadBase,
			"tensor roformer.embeddings.word_embeddings.weight has shape [12 16], but vocab_size 12, embedding_size 32 need [12 32]"},
		{map[string]any{"embedding_size": 8}, roformer.HeadBase,
			"tensor roformer.embeddings.word_embeddings.weight has shape [12 16], but vocab_size 12, embedding_size 8 need [12 8]"},
		{map[string]any{"type_vocab_size": 3}, roformer.HeadBase,
			"tensor roformer.embeddings.token_type_embeddings.weight has shape [2 16], but type_vocab_size 3, embedding_size 16 need [3 16]"},
		{map[string]any{"num_hidden_layers": 2}, roformer.HeadBase, "num_hidden_layers 2"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if err := hostile.ConfigFolder(dir, c.ov); err != nil {
			t.Fatal(err)
		}
		_, err := roformer.Load(dir, c.head, roformer.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), filepath.Join(dir, "config.json")) || !strings.Contains(err.Error(), filepath.Join(dir, "model.safetensors")) {
			t.Errorf("%v: error %v, want both files and %q", c.ov, err, c.want)
		}
	}
}

// A head the checkpoint lacks is still reported as ErrHeadMissing (the
// callers that fall back to another head test for it).
func TestLoadHeadMissingStillReported(t *testing.T) {
	dir := t.TempDir()
	if err := hostile.ConfigFolder(dir, nil); err != nil {
		t.Fatal(err)
	}
	_, err := roformer.Load(dir, roformer.HeadSequenceCls, roformer.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "no weights for this head") {
		t.Errorf("error %v, want ErrHeadMissing", err)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
