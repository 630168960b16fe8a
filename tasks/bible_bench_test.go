package tasks_test

// The benchmarks of tokenizer/bpe on the real corpus live here, so that
// the bpe package's test binary (which CI also builds for fuzzing) does not
// pull in this package and everything under it.

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/roformer-go/roformer/tasks"
	"github.com/roformer-go/roformer/tokenizer/bpe"
)

// bibleTexts returns the training verses of tasks.BibleParallel, both
// languages (59,090 sentences), from the default cache; it skips when the
// packages are not there.
func bibleTexts(b *testing.B) []string {
	dir, err := os.UserCacheDir()
	if err != nil {
		b.Skip(err)
	}
	cache := filepath.Join(dir, "roformer", "tasks")
	for _, s := range tasks.BibleSources {
		if !tasks.Fetched(s, cache) {
			b.Skipf("%s is not in %s", s, cache)
		}
	}
	p, err := tasks.BibleParallel(context.Background(), cache, nil)
	if err != nil {
		b.Fatal(err)
	}
	var texts []string
	for _, x := range p.Train {
		texts = append(texts, x.Src, x.Tgt)
	}
	return texts
}

// BenchmarkTrainBible trains the shared English–Spanish BPE vocabulary of
// the translation experiment (package tokenizer/bpe).
func BenchmarkTrainBible(b *testing.B) {
	texts := bibleTexts(b)
	for _, size := range []int{8000, 16000} {
		b.Run(map[int]string{8000: "V8000", 16000: "V16000"}[size], func(b *testing.B) {
			for b.Loop() {
				if _, err := bpe.Train(texts, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeBible encodes every training sentence with a fresh BPE model
// (so the piece cache starts empty), reporting sentences/s and tokens/s.
func BenchmarkEncodeBible(b *testing.B) {
	texts := bibleTexts(b)
	m, err := bpe.Train(texts, 8000)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := m.Save(dir); err != nil {
		b.Fatal(err)
	}
	tokens := 0
	for b.Loop() {
		m, _ := bpe.Load(dir)
		tokens = 0
		for _, t := range texts {
			tokens += len(m.Encode(t))
		}
	}
	b.ReportMetric(float64(len(texts)*b.N)/b.Elapsed().Seconds(), "sentences/s")
	b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
