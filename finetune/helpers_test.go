package finetune

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
)

// testWords is the vocabulary of the synthetic data.
var testWords = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
	"good", "bad", "the", "movie", "was", "a", "film", "plot", "and", "it", "very", "quite", "story", "acting", "seen",
	"new", "york", "paris", "john", "mary", "went", "to", "lives", "in", "##s"}

// tinyModel writes a small masked-LM RoFormer (randomly initialised, as if
// pretrained) with a BERT tokenizer over testWords into a folder.
func tinyModel(t testing.TB) string {
	t.Helper()
	return testmodel.Tiny{Words: testWords, Seed: 7, MaxPositions: 64}.Folder(t)
}

// synth returns n sentences of filler words with "good" or "bad" among
// them; the label is positive for good.
func synth(seed uint64, n int, name string) *Dataset {
	r := rand.New(rand.NewPCG(seed, 1))
	filler := testWords[7:20]
	ds := &Dataset{File: name}
	for i := 0; i < n; i++ {
		w := make([]string, 3+r.IntN(6))
		for j := range w {
			w[j] = filler[r.IntN(len(filler))]
		}
		label := "negative"
		key := "bad"
		if r.IntN(2) == 0 {
			label, key = "positive", "good"
		}
		w[r.IntN(len(w))] = key
		ds.Examples = append(ds.Examples, Example{Line: i + 1, Text: strings.Join(w, " "), Label: label, HasLabel: true})
	}
	return ds
}

// writeFile writes content to name in a fresh temporary folder.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fastOptions are options that let the tiny model learn the synthetic rule
// in a few epochs.
func fastOptions() Options {
	o := DefaultOptions()
	o.MaxLength, o.BatchSize, o.Epochs, o.LR, o.WarmupRatio, o.LogEvery = 16, 16, 4, 1e-2, 0, 0
	return o
}

func jsonl(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func mustf(t testing.TB, err error, format string, a ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, a...), err)
	}
}
