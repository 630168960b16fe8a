package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestTrainWordPieceSmall(t *testing.T) {
	// Words ab ×3 and ac ×1: alphabet a b c, continuations ##b ##c, and
	// the first merge is the most frequent pair (a, ##b) → "ab".
	corpus := []string{"ab ab", "AB ac"}
	opts := DefaultTrainOptions()
	for _, tc := range []struct {
		size int
		want []string
	}{
		{11, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "##b", "##c", "ab"}},
		{12, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "##b", "##c", "ab", "ac"}},
		{50, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "##b", "##c", "ab", "ac"}}, // no pair left
		{8, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "##b", "##c"}},              // the alphabet always goes in
	} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			opts.VocabSize = tc.size
			v, err := TrainWordPiece(slices.Values(corpus), opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Tokens(); !slices.Equal(got, tc.want) {
				t.Errorf("tokens %q, want %q", got, tc.want)
			}
		})
	}
	// min_frequency stops before rare merges: ac (1) is not merged at 2.
	opts.VocabSize, opts.MinFrequency = 50, 2
	v, err := TrainWordPiece(slices.Values(corpus), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.ID("ac"); ok {
		t.Error("min_frequency 2 merged a pair seen once")
	}
	if _, err := TrainWordPiece(slices.Values([]string{" ", ""}), opts); err == nil {
		t.Error("empty corpus: want an error")
	}
	if _, err := TrainWordPiece(slices.Values(corpus), TrainOptions{VocabSize: 3}); err == nil {
		t.Error("size below the special tokens: want an error")
	}
}

func TestTrainWordPieceMergeChain(t *testing.T) {
	// "aaaa" ×1 is a ##a ##a ##a: pairs (a, ##a) 1 and (##a, ##a) 2.
	v, err := TrainWordPiece(slices.Values([]string{"aaaa"}), TrainOptions{VocabSize: 100, SpecialTokens: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	got := v.Tokens()
	// (##a, ##a) wins (2) and merges left to right: a ##aa ##a; then
	// (a, ##aa) and (##aa, ##a) tie at 1 and the smaller ids go first: aaa
	// ##a, then aaaa.
	if want := []string{"a", "##a", "##aa", "aaa", "aaaa"}; !slices.Equal(got, want) {
		t.Errorf("tokens %q, want %q", got, want)
	}
}

// TestTrainWordPieceOpticks trains on Newton's Opticks (in every Go
// installation) and checks the size, the order of the ids, determinism,
// and that the vocabulary tokenizes the corpus without [UNK].
func TestTrainWordPieceOpticks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt"))
	if err != nil {
		t.Skipf("Opticks text absent: %v", err)
	}
	lines := strings.Split(string(raw), "\n")
	opts := DefaultTrainOptions()
	opts.VocabSize = 3000
	v1, err := TrainWordPiece(slices.Values(lines), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Workers = 1
	v2, err := TrainWordPiece(slices.Values(lines), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v1.Tokens(), v2.Tokens()) {
		t.Fatal("training is not deterministic across worker counts")
	}
	if v1.Size() != 3000 {
		t.Fatalf("size %d, want 3000", v1.Size())
	}
	toks := v1.Tokens()
	if !slices.Equal(toks[:5], DefaultSpecialTokens) {
		t.Errorf("first ids %q", toks[:5])
	}
	for _, w := range []string{"the", "light", "rays", "of"} {
		if _, ok := v1.ID(w); !ok {
			t.Errorf("frequent word %q not in the vocabulary", w)
		}
	}
	tok, err := New(v1, DefaultConfig(Bert))
	if err != nil {
		t.Fatal(err)
	}
	unk := 0
	n := 0
	for _, l := range lines[:2000] {
		for _, id := range tok.EncodeIDs(l) {
			n++
			if id == tok.UnkID() {
				unk++
			}
		}
	}
	if unk != 0 {
		t.Errorf("%d of %d tokens of the training text are [UNK]", unk, n)
	}
}

func TestTrainChineseWords(t *testing.T) {
	corpus := []string{"今天天气非常好。", "今天天气很好！", "我们今天去北京。", "今天去北京", "Hello 世界", "北京大学的学生"}
	v, err := TrainChineseWords(slices.Values(corpus), ChineseVocabOptions{VocabSize: 200, MinWordFrequency: 2})
	if err != nil {
		t.Fatal(err)
	}
	toks := v.Tokens()
	if !slices.Equal(toks[:5], DefaultSpecialTokens) {
		t.Errorf("first ids %q", toks[:5])
	}
	for _, want := range []string{"今", "天", "。", "h", "##e", "##o", "今天", "北京"} {
		if _, ok := v.ID(want); !ok {
			t.Errorf("%q missing from %q", want, toks)
		}
	}
	if _, ok := v.ID("学生"); ok {
		t.Error("a word seen once passed MinWordFrequency 2")
	}
	if _, ok := v.ID("##天"); ok {
		t.Error("CJK characters need no ## form")
	}
	tok, err := New(v, DefaultConfig(RoFormer))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Tokenize("今天北京"); !slices.Equal(got, []string{"今天", "北京"}) {
		t.Errorf("Tokenize = %q", got)
	}
	// A small size keeps the most frequent characters and no words.
	v, err = TrainChineseWords(slices.Values(corpus), ChineseVocabOptions{VocabSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	if v.Size() != 8 {
		t.Errorf("size %d, want 8", v.Size())
	}
	if _, err := TrainChineseWords(slices.Values([]string{""}), ChineseVocabOptions{VocabSize: 100}); err == nil {
		t.Error("empty corpus: want an error")
	}
}

func ExampleTrainWordPiece() {
	texts := []string{"low lower lowest", "newer wider new", "low new"}
	opts := DefaultTrainOptions()
	opts.VocabSize = 24
	v, _ := TrainWordPiece(slices.Values(texts), opts)
	fmt.Println(v.Tokens()[5:])
	// Output:
	// [d e i l n o r s t w ##o ##w ##e ##r ##s ##t ##i ##d lo]
}
