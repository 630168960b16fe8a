package tokenizer

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/roformer-go/roformer/tokenizer/internal/merge"
	"github.com/roformer-go/roformer/tokenizer/jieba"
)

// DefaultSpecialTokens are the special tokens a trained vocabulary starts
// with: [PAD]=0 (the models' pad_token_id), [UNK]=1, [CLS]=2, [SEP]=3,
// [MASK]=4.
var DefaultSpecialTokens = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}

// TrainOptions configure TrainWordPiece. Start from DefaultTrainOptions.
type TrainOptions struct {
	// VocabSize is the size to reach, special tokens included (HF
	// vocab_size). Training stops earlier when no pair is left to merge.
	VocabSize int
	// MinFrequency: pairs seen fewer times are not merged (HF min_frequency).
	MinFrequency int
	// SpecialTokens take the first ids (default DefaultSpecialTokens).
	SpecialTokens []string
	// LimitAlphabet keeps only the most frequent characters (0: all).
	LimitAlphabet int
	// InitialAlphabet characters are included even when unseen.
	InitialAlphabet []rune
	// The Bert rules that split texts into words (BertNormalizer +
	// BertPreTokenizer in HF's recipe): lower-casing, accent stripping (nil
	// follows Lowercase) and CJK characters as words of their own.
	Lowercase            bool
	StripAccents         *bool
	TokenizeChineseChars bool
	// Workers count words in parallel (0: one per CPU).
	Workers int
}

// DefaultTrainOptions returns HF's WordPieceTrainer defaults with BERT's
// uncased normalisation: vocab_size 30000, min_frequency 0, no alphabet
// limit, lower-casing, Chinese characters split.
func DefaultTrainOptions() TrainOptions {
	return TrainOptions{VocabSize: 30000, Lowercase: true, TokenizeChineseChars: true}
}

// counts is a word → count table.
type counts map[string]*int64

func (c counts) add(b []byte, n int64) {
	if p := c[string(b)]; p != nil {
		*p += n
		return
	}
	v := n
	c[string(b)] = &v
}

func (c counts) merge(o counts) {
	for k, p := range o {
		if q := c[k]; q != nil {
			*q += *p
		} else {
			c[k] = p
		}
	}
}

// countTexts runs fn over texts on workers goroutines, each with its own
// tables, and merges the tables.
func countTexts(texts iter.Seq[string], workers, tables int, fn func(sc *scratch, text string, tabs []counts)) []counts {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	newTabs := func() []counts {
		t := make([]counts, tables)
		for i := range t {
			t[i] = counts{}
		}
		return t
	}
	const batch = 256
	ch := make(chan []string, workers)
	results := make(chan []counts, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := new(scratch)
			tabs := newTabs()
			for b := range ch {
				for _, text := range b {
					fn(sc, text, tabs)
				}
			}
			results <- tabs
		}()
	}
	go func() { wg.Wait(); close(results) }()
	buf := make([]string, 0, batch)
	for text := range texts {
		buf = append(buf, text)
		if len(buf) == batch {
			ch <- buf
			buf = make([]string, 0, batch)
		}
	}
	if len(buf) > 0 {
		ch <- buf
	}
	close(ch)
	total := newTabs()
	for tabs := range results {
		for i := range tabs {
			total[i].merge(tabs[i])
		}
	}
	return total
}

// wordSplitter returns a tokenizer that only runs the Bert rules and hands
// each word to sc.collect instead of WordPiece.
func wordSplitter(lower bool, strip *bool, chinese bool, specials []string) *Tokenizer {
	cfg := DefaultConfig(Bert)
	cfg.DoLowerCase, cfg.StripAccents, cfg.TokenizeChineseChars = lower, strip, chinese
	t := &Tokenizer{cfg: cfg, strip: cfg.stripAccents(), vocab: &Vocab{ids: map[string]int{}}, neverSplit: map[string]int{}}
	var distinct []string
	seen := map[string]bool{}
	for _, s := range specials {
		if s != "" && !seen[s] {
			seen[s] = true
			distinct = append(distinct, s)
		}
	}
	t.indexSpecials(distinct)
	return t
}

// TrainWordPiece learns a WordPiece vocabulary from texts the way HF
// tokenizers' WordPieceTrainer does: split the texts into words with the
// Bert rules, count them, then run BPE over the words' characters with the
// "##" prefix on non-initial symbols, merging at each step the most frequent
// adjacent pair (ties: the pair of smaller ids) into a new token a + b
// (b without its "##"), until VocabSize tokens exist.
//
// The ids are: the special tokens, the alphabet (every character of the
// words, sorted by code point), the "##" forms of characters in the order
// the sorted words first show them, then the merges in order. HF iterates a
// hash map there, so its order (and its tie-breaks) vary from run to run;
// this one is deterministic.
func TrainWordPiece(texts iter.Seq[string], opts TrainOptions) (*Vocab, error) {
	if opts.VocabSize <= 0 {
		return nil, fmt.Errorf("tokenizer: vocab size %d, want > 0", opts.VocabSize)
	}
	specials := opts.SpecialTokens
	if specials == nil {
		specials = DefaultSpecialTokens
	}
	if opts.VocabSize < len(specials) {
		return nil, fmt.Errorf("tokenizer: vocab size %d is smaller than the %d special tokens", opts.VocabSize, len(specials))
	}
	split := wordSplitter(opts.Lowercase, opts.StripAccents, opts.TokenizeChineseChars, specials)
	tabs := countTexts(texts, opts.Workers, 1, func(sc *scratch, text string, tabs []counts) {
		sc.collect = func(word []rune) {
			sc.hb = appendRunes(sc.hb[:0], word)
			tabs[0].add(sc.hb, 1)
		}
		split.tokenize(text, sc, &sc.out)
		sc.collect = nil
	})
	wc := tabs[0]
	if len(wc) == 0 {
		return nil, fmt.Errorf("tokenizer: %w", errEmptyTraining)
	}
	return trainBPE(wc, specials, opts)
}

var errEmptyTraining = errors.New("no words to train on")

// trainBPE lays out the ids (specials, alphabet, "##" forms) and runs the
// merges of TrainWordPiece over the counted words wc.
func trainBPE(wc counts, specials []string, opts TrainOptions) (*Vocab, error) {
	v := &wordPieces{ids: map[string]int32{}, size: opts.VocabSize}
	for _, s := range specials {
		v.add(s)
	}
	// Words in a fixed order: by count, then text.
	words := make([]string, 0, len(wc))
	for w := range wc {
		words = append(words, w)
	}
	slices.SortFunc(words, func(a, b string) int {
		if c := cmp.Compare(*wc[b], *wc[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	// The alphabet: character counts, optionally limited, sorted by code point.
	charCount := map[rune]int64{}
	for _, w := range words {
		for _, r := range w {
			charCount[r] += *wc[w]
		}
	}
	for _, r := range opts.InitialAlphabet {
		charCount[r] = 1 << 62
	}
	alphabet := make([]rune, 0, len(charCount))
	for r := range charCount {
		alphabet = append(alphabet, r)
	}
	if opts.LimitAlphabet > 0 && len(alphabet) > opts.LimitAlphabet {
		slices.SortFunc(alphabet, func(a, b rune) int {
			if c := cmp.Compare(charCount[b], charCount[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		alphabet = alphabet[:opts.LimitAlphabet]
	}
	slices.Sort(alphabet)
	kept := map[rune]bool{}
	for _, r := range alphabet {
		v.add(string(r))
		kept[r] = true
	}
	// Words as symbols; "##" forms of non-initial characters.
	tw := make([]merge.Word, 0, len(words))
	for _, w := range words {
		var syms []int32
		first := true
		for _, r := range w {
			if !kept[r] {
				continue // dropped by the alphabet limit, as HF does
			}
			s := string(r)
			if !first {
				s = continuationPrefix + s
			}
			first = false
			syms = append(syms, v.add(s))
		}
		if len(syms) > 0 {
			tw = append(tw, merge.Word{Syms: syms, Count: *wc[w]})
		}
	}
	merge.Learn(v, tw, int64(opts.MinFrequency))
	return NewVocab(v.tokens)
}

// wordPieces is the vocabulary TrainWordPiece grows: a merge of a and b
// makes a + b, without b's "##"; ties go to the pair of smaller ids.
type wordPieces struct {
	tokens []string
	ids    map[string]int32
	size   int // the vocabulary size to reach
}

// add returns the id of token s, added if new.
func (v *wordPieces) add(s string) int32 {
	if id, ok := v.ids[s]; ok {
		return id
	}
	id := int32(len(v.tokens))
	v.tokens = append(v.tokens, s)
	v.ids[s] = id
	return id
}

func (v *wordPieces) Full() bool { return len(v.tokens) >= v.size }

func (v *wordPieces) Merge(a, b int32) int32 {
	return v.add(v.tokens[a] + strings.TrimPrefix(v.tokens[b], continuationPrefix))
}

func (v *wordPieces) Before(a, b, c, d int32) bool {
	if a != c {
		return a < c
	}
	return b < d
}

// ChineseVocabOptions configure TrainChineseWords.
type ChineseVocabOptions struct {
	VocabSize int // total size, special tokens included
	// MinCharFrequency and MinWordFrequency drop rarer characters and words
	// (0 means 1 and 2).
	MinCharFrequency, MinWordFrequency int
	SpecialTokens                      []string         // default DefaultSpecialTokens
	Segmenter                          *jieba.Segmenter // nil: the embedded jieba dictionary
	Workers                            int              // 0: one per CPU
}

// TrainChineseWords builds a character + word vocabulary for
// RoFormerTokenizer, the way RoFormer's own was made (BERT's Chinese
// characters plus frequent jieba words): the special tokens; every
// character that the Bert rules leave (lower-cased, accents stripped),
// most frequent first; the "##" forms of the non-CJK characters seen inside
// words, so that English and numbers still tokenize; then the most frequent
// jieba words (HMM off, on the lower-cased text, as the tokenizer cuts it) of
// two or more characters containing a CJK ideograph, until VocabSize.
// Characters come before words: if they alone exceed VocabSize, the rarest
// are dropped and no word is added.
func TrainChineseWords(texts iter.Seq[string], opts ChineseVocabOptions) (*Vocab, error) {
	if opts.VocabSize <= 0 {
		return nil, fmt.Errorf("tokenizer: vocab size %d, want > 0", opts.VocabSize)
	}
	minChar, minWord := int64(max(opts.MinCharFrequency, 1)), int64(opts.MinWordFrequency)
	if minWord <= 0 {
		minWord = 2
	}
	specials := opts.SpecialTokens
	if specials == nil {
		specials = DefaultSpecialTokens
	}
	seg := opts.Segmenter
	if seg == nil {
		s, err := jieba.NewDefault()
		if err != nil {
			return nil, err
		}
		seg = s
	}
	split := wordSplitter(true, nil, true, specials)
	const (
		tabChars = iota
		tabCont
		tabWords
	)
	tabs := countTexts(texts, opts.Workers, 3, func(sc *scratch, text string, tabs []counts) {
		sc.collect = func(word []rune) {
			for i, r := range word {
				sc.hb = utf8.AppendRune(sc.hb[:0], r)
				tabs[tabChars].add(sc.hb, 1)
				if i > 0 && !isChineseChar(r) {
					sc.hb = append(append(sc.hb[:0], continuationPrefix...), string(r)...)
					tabs[tabCont].add(sc.hb, 1)
				}
			}
		}
		split.tokenize(text, sc, &sc.out)
		sc.collect = nil
		// Words: jieba over the lower-cased text, as RoFormerTokenizer cuts it.
		sc.r = sc.r[:0]
		for _, r := range text {
			r1, r2 := pyLower(r)
			sc.r = append(sc.r, r1)
			if r2 >= 0 {
				sc.r = append(sc.r, r2)
			}
		}
		sc.ends = seg.AppendCut(sc.ends[:0], sc.r)
		start := 0
		for _, e := range sc.ends {
			w := sc.r[start:e]
			start = e
			if len(w) < 2 || !slices.ContainsFunc(w, isChineseChar) {
				continue
			}
			sc.hb = appendRunes(sc.hb[:0], w)
			tabs[tabWords].add(sc.hb, 1)
		}
	})
	byCount := func(c counts, minN int64) []string {
		var out []string
		for k, p := range c {
			if *p >= minN {
				out = append(out, k)
			}
		}
		slices.SortFunc(out, func(a, b string) int {
			if x := cmp.Compare(*c[b], *c[a]); x != 0 {
				return x
			}
			return cmp.Compare(a, b)
		})
		return out
	}
	chars := byCount(tabs[tabChars], minChar)
	if len(chars) == 0 {
		return nil, fmt.Errorf("tokenizer: %w", errEmptyTraining)
	}
	var tokens []string
	seen := map[string]bool{}
	add := func(s string) bool {
		if len(tokens) >= opts.VocabSize {
			return false
		}
		if !seen[s] {
			seen[s] = true
			tokens = append(tokens, s)
		}
		return true
	}
	for _, group := range [][]string{specials, chars, byCount(tabs[tabCont], minChar), byCount(tabs[tabWords], minWord)} {
		for _, s := range group {
			if !add(s) {
				break
			}
		}
	}
	if len(tokens) < len(specials) {
		return nil, fmt.Errorf("tokenizer: vocab size %d is smaller than the %d special tokens", opts.VocabSize, len(specials))
	}
	return NewVocab(tokens)
}
