package pipeline

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// stFixture is a folder of ../sentence/testdata/st: a sentence-transformers
// folder saved by sentence-transformers itself, with the vectors its encode
// gave (make_fixtures.py there).
type stFixture struct {
	STVersion string   `json:"st_version"`
	Texts     []string `json:"texts"`
	Cases     []struct {
		PromptName *string     `json:"prompt_name"`
		Vectors    [][]float64 `json:"vectors"`
	} `json:"cases"`
}

// stTolerance is the bound: our vectors equal
// SentenceTransformer(folder).encode(texts) within 1e-4 absolute. Measured
// largest difference: see TestSentenceTransformersFolders' log.
const stTolerance = 1e-4

// stFolders returns the fixture folders.
func stFolders(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("..", "sentence", "testdata", "st", "*", "expected.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures under ../sentence/testdata/st: %v", err)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	return dirs
}

func readSTFixture(t *testing.T, dir string) stFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f stFixture
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// Every pooling mode, Dense, Normalize, prompts (include_prompt either way),
// max_seq_length and do_lower_case, in folders saved by sentence-transformers
// 2.2.2 (pytorch_model.bin) and 2.7.0 (model.safetensors): Embed gives what
// SentenceTransformer(folder).encode gave.
func TestSentenceTransformersFolders(t *testing.T) {
	worst := 0.0
	for _, dir := range stFolders(t) {
		name := filepath.Base(dir)
		fx := readSTFixture(t, dir)
		m, err := Open(dir, OpenOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.Sentence == nil {
			t.Fatalf("%s: Open did not read the sentence-transformers files", name)
		}
		inputs := make([]EmbedInput, len(fx.Texts))
		for i, s := range fx.Texts {
			inputs[i] = EmbedInput{Text: s}
		}
		for _, c := range fx.Cases {
			o := EmbedOptions{Sentence: m.Sentence, Truncate: true, MaxBatch: 3}
			label := name
			if c.PromptName != nil {
				o.PromptName = *c.PromptName
				label += "/" + *c.PromptName
			}
			vecs, _, err := Embed(context.Background(), m.Model, m.Tokenizer, inputs, o)
			if err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			for i, want := range c.Vectors {
				if len(vecs[i]) != len(want) {
					t.Fatalf("%s: text %d: %d values, want %d", label, i, len(vecs[i]), len(want))
				}
				d := 0.0
				for j := range want {
					d = max(d, math.Abs(float64(vecs[i][j])-want[j]))
				}
				worst = max(worst, d)
				if d > stTolerance {
					t.Errorf("%s (sentence-transformers %s): text %d %q: max |ours − theirs| = %.3g > %g",
						label, fx.STVersion, i, fx.Texts[i], d, stTolerance)
				}
			}
		}
	}
	t.Logf("largest difference from sentence-transformers over every folder, case and text: %.3g", worst)
}
