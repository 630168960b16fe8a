package finetune

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
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
func synth(seed uint64, n int, name string) *labelled.Dataset {
	r := rand.New(rand.NewPCG(seed, 1))
	filler := testWords[7:20]
	ds := &labelled.Dataset{File: name}
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
		ds.Examples = append(ds.Examples, labelled.Example{Line: i + 1, Text: strings.Join(w, " "), Label: label, HasLabel: true})
	}
	return ds
}

// fastOptions are options that let the tiny model learn the synthetic rule
// in a few epochs.
func fastOptions() Options {
	o := DefaultOptions()
	o.MaxLength, o.BatchSize, o.Epochs, o.LR, o.WarmupRatio, o.LogEvery = 16, 16, 4, 1e-2, 0, 0
	return o
}

func mustf(t testing.TB, err error, format string, a ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, a...), err)
	}
}
