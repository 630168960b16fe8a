package finetune

import (
	"slices"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/tokenizer"
)

// A pair reaches the model as Hugging Face's BertTokenizer builds it
// (build_inputs_with_special_tokens, create_token_type_ids_from_sequences,
// truncation="longest_first"): [CLS] a [SEP] b [SEP], token types 0 for
// [CLS] a [SEP] and 1 for b [SEP], padding with type 0 and mask 0; an
// over-long pair loses tokens from the end of its longer text, one at a time,
// and keeps both [SEP]. (Issue #18 suspected the pair handling of the
// paraphrase task; this is what it does.)
func TestPairBatch(t *testing.T) {
	tok, _, err := LoadTokenizer(tinyModel(t), "")
	if err != nil {
		t.Fatal(err)
	}
	id := func(w string) int32 {
		i, ok := tok.TokenToID(w)
		if !ok {
			t.Fatalf("no token %q", w)
		}
		return int32(i)
	}
	ids := func(ws ...string) []int32 {
		out := make([]int32, len(ws))
		for i, w := range ws {
			out[i] = id(w)
		}
		return out
	}
	spec := &labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"no", "yes"}, Pair: true}
	b1, b2 := "the movie was good", "a film"
	ds := &labelled.Dataset{File: "pairs", Examples: []labelled.Example{
		{Line: 1, Text: "good plot", TextPair: &b1, Label: "yes", HasLabel: true},
		{Line: 2, Text: "the story and the acting were seen", TextPair: &b2, Label: "no", HasLabel: true},
	}}
	for _, c := range []struct {
		name   string
		maxLen int
		want   [][]string
		types  [][]int32
		cut    int
	}{
		{"whole", 64,
			[][]string{{"[CLS]", "good", "plot", "[SEP]", "the", "movie", "was", "good", "[SEP]"},
				{"[CLS]", "the", "story", "and", "the", "acting", "[UNK]", "seen", "[SEP]", "a", "film", "[SEP]"}},
			[][]int32{{0, 0, 0, 0, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}}, 0},
		// 9 tokens: the longer text of each pair is cut (the second of the
		// first pair, the first of the second), both [SEP] stay.
		{"longest_first", 9,
			[][]string{{"[CLS]", "good", "plot", "[SEP]", "the", "movie", "was", "good", "[SEP]"},
				{"[CLS]", "the", "story", "and", "the", "[SEP]", "a", "film", "[SEP]"}},
			[][]int32{{0, 0, 0, 0, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 1, 1, 1}}, 1},
		{"longest_first tie", 7,
			[][]string{{"[CLS]", "good", "plot", "[SEP]", "the", "movie", "[SEP]"},
				{"[CLS]", "the", "story", "[SEP]", "a", "film", "[SEP]"}},
			[][]int32{{0, 0, 0, 0, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1}}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			feats, cut, err := encodeAll(tok, spec, ds, encodeOptions{maxLen: c.maxLen, truncation: tokenizer.TruncateLongestFirst})
			if err != nil {
				t.Fatal(err)
			}
			if cut != c.cut {
				t.Errorf("%d truncated, want %d", cut, c.cut)
			}
			b, lab := makeBatch(feats, spec, int32(tok.PadID()), true)
			if b.T%padMultiple != 0 || !slices.Equal(lab.IDs, []int32{1, 0}) {
				t.Errorf("batch length %d (want a multiple of %d), labels %v (want [1 0])", b.T, padMultiple, lab.IDs)
			}
			for r := range c.want {
				want := ids(c.want[r]...)
				row := b.InputIDs[r*b.T : r*b.T+b.T]
				types := b.TokenTypeIDs[r*b.T : r*b.T+b.T]
				mask := b.AttentionMask[r*b.T : r*b.T+b.T]
				n := len(want)
				if !slices.Equal(row[:n], want) || !slices.Equal(types[:n], c.types[r]) {
					t.Errorf("row %d: ids %v types %v\nwant %v types %v", r, row[:n], types[:n], want, c.types[r])
				}
				for j := range row {
					inside := j < n
					if (mask[j] == 1) != inside || !inside && (row[j] != int32(tok.PadID()) || types[j] != 0) {
						t.Errorf("row %d position %d: id %d type %d mask %d; want padding after %d tokens", r, j, row[j], types[j], mask[j], n)
						break
					}
				}
			}
		})
	}
}
