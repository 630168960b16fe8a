package roformer

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/generate"
)

// GenerateCost counts the rows, the cached tokens and the vocabulary-wide
// work from the sizes, with the cache (twice under beam search) in its
// bytes; sizes whose products overflow int64 are an error, and Generate
// refuses them before it allocates anything (num_beams 2^62 would need
// exabytes).
func TestGenerateCost(t *testing.T) {
	m := genModel(t, nil, 2)
	cfg := &m.Config
	V, H, layers := int64(cfg.VocabSize), int64(cfg.HiddenSize), int64(cfg.NumHiddenLayers)
	greedy, err := m.GenerateCost(2, 5, generate.Options{MaxNewTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	beam, err := m.GenerateCost(2, 5, generate.Options{MaxNewTokens: 3, Strategy: generate.Beam, NumBeams: 4})
	if err != nil {
		t.Fatal(err)
	}
	if greedy.Rows != 2 || greedy.Tokens != 16 || greedy.Work != 16*V || beam.Rows != 8 || beam.Tokens != 64 || beam.Work != 64*V {
		t.Errorf("greedy %+v, beam %+v", greedy, beam)
	}
	if cache := 2 * layers * beam.Tokens * H * 4 * 2; beam.Bytes < cache || greedy.Bytes < 2*layers*greedy.Tokens*H*4 || beam.Bytes <= greedy.Bytes {
		t.Errorf("bytes: greedy %d, beam %d (its cache alone %d)", greedy.Bytes, beam.Bytes, cache)
	}
	for _, c := range []struct {
		B, L int
		o    generate.Options
		want string
	}{
		{1, 3, generate.Options{MaxNewTokens: 3, Strategy: generate.Beam, NumBeams: 1 << 62}, "overflows int64"},
		{1, 3, generate.Options{MaxNewTokens: math.MaxInt - 3}, "overflow"},
		{1 << 40, 1 << 20, generate.Options{MaxNewTokens: 1 << 20}, "overflows int64"},
		{1, 0, generate.Options{MaxNewTokens: 3}, "at least 1"},
		{1, 3, generate.Options{MaxNewTokens: 0}, "at least 1"},
	} {
		if _, err := m.GenerateCost(c.B, c.L, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("GenerateCost(%d, %d, %+v): %v, want %q", c.B, c.L, c.o, err, c.want)
		}
	}
	if _, err := generateWith(context.Background(), m, [][]int32{{1, 2}}, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: generate.Beam, NumBeams: 1 << 62}}); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("Generate with 2^62 beams: %v", err)
	}
	// Sizes that generate's own checks let through (one row, a vocabulary
	// of 2^62 · V work) are refused by the Decoder's Prefill, through
	// GenerateCost, before the cache is allocated.
	for _, o := range []generate.Options{
		{MaxNewTokens: math.MaxInt - 3, EOS: -1},
		{MaxNewTokens: 1 << 40, EOS: -1, Strategy: generate.Beam, NumBeams: 1 << 20},
	} {
		if _, err := generateWith(context.Background(), m, [][]int32{{1, 2}}, genOptions{Options: o}); err == nil || !strings.Contains(err.Error(), "overflows") {
			t.Errorf("Generate of %d new tokens, %d beams: %v", o.MaxNewTokens, o.NumBeams, err)
		}
	}
}
