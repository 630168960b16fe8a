package bpe

import (
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/roformer-go/roformer/tokenizer/internal/merge"
)

// ErrNoText is returned by Train when the texts hold no word.
var ErrNoText = errors.New("bpe: no word to train on")

// start counts the pieces of texts and returns the model with the fixed
// tokens and the alphabet, and each distinct piece as alphabet symbols, in
// sorted order.
func start(texts []string, vocabSize int) (*Model, []merge.Word, error) {
	counts := map[string]int{}
	for _, t := range texts {
		pieces(t, func(p string, final bool) {
			if final {
				counts["\x01"+p]++ // the first byte tells whether the piece ends a word
			} else {
				counts["\x00"+p]++
			}
		})
	}
	if len(counts) == 0 {
		return nil, nil, ErrNoText
	}
	keys := make([]string, 0, len(counts))
	alpha := map[string]bool{}
	for k := range counts {
		keys = append(keys, k)
		p, final := k[1:], k[0] == 1
		for i, r := range p {
			n := i + utf8.RuneLen(r)
			alpha[symbolKey(p[i:n], final && n == len(p))] = true
		}
	}
	sort.Strings(keys)
	alphabet := make([]string, 0, len(alpha))
	for k := range alpha {
		alphabet = append(alphabet, k)
	}
	sort.Strings(alphabet)
	if base := firstSym + len(alphabet); vocabSize < base {
		return nil, nil, fmt.Errorf("bpe: vocabulary size %d is below the %d fixed tokens plus the %d symbols of the alphabet (%d)",
			vocabSize, firstSym, len(alphabet), base)
	}
	m := newModel(alphabet)
	words := make([]merge.Word, len(keys))
	for w, k := range keys {
		p, final := k[1:], k[0] == 1
		syms := make([]int32, 0, utf8.RuneCountInString(p))
		for i, r := range p {
			n := i + utf8.RuneLen(r)
			syms = append(syms, m.ids[symbolKey(p[i:n], final && n == len(p))])
		}
		words[w] = merge.Word{Syms: syms, Count: int64(counts[k])}
	}
	return m, words, nil
}

// trainer is the vocabulary that Train grows: m, up to size tokens; ties
// between pairs go to the smaller left key, then the smaller right key.
type trainer struct {
	m    *Model
	size int
}

func (t trainer) Full() bool             { return t.m.VocabSize() >= t.size }
func (t trainer) Merge(a, b int32) int32 { return t.m.addMerge(a, b) }
func (t trainer) Before(a, b, c, d int32) bool {
	k := t.m.keys
	if k[a] != k[c] {
		return k[a] < k[c]
	}
	return k[b] < k[d]
}

// Train learns a vocabulary of at most vocabSize tokens from texts (the
// sentences of both languages): the 261 fixed tokens, the alphabet, and
// merges learned as the package documentation says until the size is
// reached or no pair occurs twice. The result depends only on the multiset
// of pieces in texts, not on their order.
func Train(texts []string, vocabSize int) (*Model, error) {
	m, words, err := start(texts, vocabSize)
	if err != nil {
		return nil, err
	}
	merge.Learn(trainer{m, vocabSize}, words, 2)
	return m, nil
}

// trainNaive is Train's reference twin: every step recounts every pair of
// every piece and scans them all for the best.
func trainNaive(texts []string, vocabSize int) (*Model, error) {
	m, words, err := start(texts, vocabSize)
	if err != nil {
		return nil, err
	}
	merge.Naive(trainer{m, vocabSize}, words, 2)
	return m, nil
}
