package tokenizer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// naiveLongest is specialMatcher.longest's twin: every token tried at every
// position.
func naiveLongest(tokens []string, rs []rune) []int32 {
	at := make([]int32, len(rs))
	for i := range rs {
		for k, tok := range tokens {
			tr := []rune(tok)
			if len(tr) <= len(rs)-i && slices.Equal(tr, rs[i:i+len(tr)]) && (at[i] == 0 || len(tr) > len([]rune(tokens[at[i]-1]))) {
				at[i] = int32(k) + 1
			}
		}
	}
	return at
}

// The matcher finds the longest token at every position, as trying every
// token does, on token sets built to share prefixes and suffixes (where a
// failure link or the best token of a state is easy to get wrong).
func TestSpecialMatcher(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab[]é界")
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for trial := range 300 {
		seen := map[string]bool{}
		var tokens []string
		for range 1 + rng.IntN(12) {
			w := word(1 + rng.IntN(6))
			if !seen[w] {
				seen[w] = true
				tokens = append(tokens, w)
			}
		}
		m := newSpecialMatcher(tokens)
		rs := []rune(word(rng.IntN(60)))
		got := m.longest(nil, rs)
		want := naiveLongest(tokens, rs)
		// Compare the lengths (equal lengths at one position are one token).
		for i := range rs {
			gl, wl := 0, 0
			if got[i] > 0 {
				gl = int(m.runes[got[i]-1])
			}
			if want[i] > 0 {
				wl = len([]rune(tokens[want[i]-1]))
			}
			if gl != wl || got[i] > 0 && tokens[got[i]-1] != string(rs[i:i+gl]) {
				t.Fatalf("trial %d: tokens %q, text %q, position %d: matched %d runes, want %d", trial, tokens, string(rs), i, gl, wl)
			}
		}
	}
}

// Tokenizing 16 KB of text with 4,096 special tokens of 255 bytes that
// share their first 250 with the text takes about as long as without them
// (it took longer than 20 s when each position tried every token). Counted
// in work, not time: the matcher's transitions per rune.
func TestSpecialTokensLinear(t *testing.T) {
	var specials []string
	for i := range MaxSpecialTokens {
		specials = append(specials, strings.Repeat("a", 250)+fmt.Sprintf("%05d", i))
	}
	tk := testTokenizer(t, Bert, specials)
	text := strings.Repeat("a", 16<<10)
	done := make(chan []string)
	go func() { done <- tk.Tokenize(text) }()
	select {
	case toks := <-done:
		if len(toks) != 1 || toks[0] != "[UNK]" {
			t.Fatalf("tokens %q, want one [UNK] (a word longer than 100 characters)", toks)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tokenizing 16 KB beside 4,096 long special tokens did not end in 5 s")
	}
	// The matcher's failure steps are amortized: at most two edge lookups
	// per rune read, whatever the tokens.
	m := tk.match
	rs := []rune(text)
	steps := 0
	n := int32(0)
	for i := len(rs) - 1; i >= 0; i-- {
		for {
			steps++
			if c := m.edge(n, rs[i]); c >= 0 || n == 0 {
				if c >= 0 {
					n = c
				}
				break
			}
			n = m.fail[n]
		}
	}
	if steps > 2*len(rs) {
		t.Errorf("%d edge lookups for %d runes, want ≤ 2 a rune", steps, len(rs))
	}
}

// testTokenizer returns a tokenizer of kind over a small English and
// Chinese vocabulary with the extra special tokens.
func testTokenizer(t testing.TB, kind Kind, extra []string) *Tokenizer {
	t.Helper()
	v, err := NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<x>", "a", "##a", "b", "##b", "ab", "##ab",
		"whale", "##s", "the", "中", "国", "中国", "人", "，", "。", " ", "i", "##i", "é", "##é", "e"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(kind)
	cfg.AdditionalSpecialTokens = extra
	tk, err := New(v, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// A text tokenized a chunk at a time gives the tokens, ids and offsets of
// the whole, for both kinds, with and without lower-casing, on texts made
// of what could go wrong at a cut: special tokens written in upper and
// lower case and with spaces, whitespace next to them, "\r\n", Chinese
// text and punctuation, İ (two runes lower-cased), combining accents,
// control characters and invalid UTF-8.
func TestChunkedTokenizeIsWhole(t *testing.T) {
	pieces := []string{"a", "b", "ab", "whale", "whales", " ", "  ", "\t", "\r\n", "\n", "\r", "[MASK]", "[mask]", "[Mask]",
		"<x>", "< x >", "<X>", "中国", "中", "人", "，", "。", "İ", "é", "e\u0301", "\u0301", "\x00", "\u200b", "\xff", "\xe4\xb8", "THE", "x y"}
	defer func(n int) { chunkBytes = n }(chunkBytes)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, kind := range []Kind{Bert, RoFormer} {
		for _, lower := range []bool{true, false} {
			tk := testTokenizer(t, kind, []string{"< x >", "x y"})
			tk.cfg.DoLowerCase = lower
			tk.strip = tk.cfg.stripAccents()
			for trial := range 400 {
				var b strings.Builder
				for range rng.IntN(80) {
					b.WriteString(pieces[rng.IntN(len(pieces))])
				}
				text := b.String()
				chunkBytes = 1 << 30
				sc := getScratch()
				var whole seq
				tk.tokenizeN(text, sc, &whole, -1, false)
				for _, cb := range []int{1, 2, 3, 7, 16} {
					chunkBytes = cb
					var got seq
					n, complete := tk.tokenizeN(text, sc, &got, 1<<30, false)
					if !complete || n != len(whole.ids) || !slices.Equal(got.ids, whole.ids) || !slices.Equal(got.toks, whole.toks) || !slices.Equal(got.offs, whole.offs) {
						t.Fatalf("%v lower=%v trial %d chunk %d: text %q\n got %q %v\nwant %q %v", kind, lower, trial, cb, text, got.toks, got.offs, whole.toks, whole.offs)
					}
					// Kept and counted: the first keep+1 tokens and the count.
					keep := rng.IntN(len(whole.ids) + 1)
					n, complete = tk.tokenizeN(text, sc, &got, keep, true)
					if !complete || n != len(whole.ids) || len(got.ids) != min(keep+1, n) || !slices.Equal(got.ids, whole.ids[:len(got.ids)]) {
						t.Fatalf("%v trial %d chunk %d keep %d: counted %d of %d, kept %d", kind, trial, cb, keep, n, len(whole.ids), len(got.ids))
					}
				}
				putScratch(sc)
			}
		}
	}
}

// Truncation keeps the same tokens when each sequence is known only up to
// the length less the special tokens, plus one (what encodeOne tokenizes),
// for every strategy, length and pair of lengths; the errors are the same.
func TestTruncationCap(t *testing.T) {
	tk := testTokenizer(t, Bert, nil)
	mk := func(n int) *seq {
		s := &seq{}
		for i := range n {
			s.emit(6+i%2, "a", int32(i), int32(i+1))
		}
		return s
	}
	for _, tr := range []Truncation{TruncateLongestFirst, TruncateOnlyFirst, TruncateOnlySecond} {
		for _, pair := range []bool{false, true} {
			for maxLen := 1; maxLen < 24; maxLen++ {
				for la := 0; la < 30; la++ {
					for lb := 0; lb < 30; lb++ {
						if !pair && lb > 0 {
							break
						}
						ns := 2
						a, b := mk(la), (*seq)(nil)
						if pair {
							ns, b = 3, mk(lb)
						}
						keep := max(maxLen-ns, 0) + 1
						full, errFull := tk.build(a, b, la, lb, EncodeOptions{}, maxLen, tr)
						ca, cb := min(la, keep), min(lb, keep)
						capped, errCap := tk.build(a, b, ca, cb, EncodeOptions{}, maxLen, tr)
						if (errFull == nil) != (errCap == nil) || errFull == nil && (!slices.Equal(full.IDs, capped.IDs) || !slices.Equal(full.TypeIDs, capped.TypeIDs) || full.Truncated != capped.Truncated) {
							t.Fatalf("%v pair=%v max %d, lengths %d %d: full %v %v, capped %v %v", tr, pair, maxLen, la, lb, full, errFull, capped, errCap)
						}
					}
				}
			}
		}
	}
}

// Encoding a 20 MB text with truncation to 512 tokens allocates what 512
// tokens need, not what 3.5 million do (1.14 GB of RSS before); without
// truncation, a Limit refuses it with the exact count in the same bound.
// The tokens are those of the whole text.
func TestEncodeBoundedByLength(t *testing.T) {
	for _, kind := range []Kind{Bert, RoFormer} {
		tk := testTokenizer(t, kind, nil)
		text := strings.Repeat("whale ", 20<<20/6)
		short := strings.Repeat("whale ", 600)
		want, err := tk.Encode(short, EncodeOptions{MaxLength: 512, Truncation: TruncateLongestFirst})
		if err != nil || !want.Truncated || want.Len() != 512 {
			t.Fatalf("%v: short text: %v, %v", kind, want, err)
		}
		measure := func(f func()) uint64 {
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			f()
			runtime.ReadMemStats(&b)
			return b.TotalAlloc - a.TotalAlloc
		}
		var got *Encoding
		n := measure(func() { got, err = tk.Encode(text, EncodeOptions{MaxLength: 512, Truncation: TruncateLongestFirst}) })
		if err != nil || !slices.Equal(got.IDs, want.IDs) || !slices.Equal(got.Offsets, want.Offsets) || !got.Truncated {
			t.Fatalf("%v: truncated 20 MB text: %v, %v", kind, got, err)
		}
		if n > 32<<20 {
			t.Errorf("%v: truncating a 20 MB text to 512 tokens allocated %d MB, want ≤ 32", kind, n>>20)
		}
		n = measure(func() { _, err = tk.Encode(text, EncodeOptions{Limit: 512}) })
		var le *LengthError
		unit := len(tk.Tokenize(strings.Repeat("whale ", 10))) / 10 // RoFormer keeps the in-vocabulary " "
		if !errors.As(err, &le) || le.Tokens != unit*(20<<20/6)+2 || le.Limit != 512 {
			t.Fatalf("%v: Limit 512: %v", kind, err)
		}
		if n > 32<<20 {
			t.Errorf("%v: counting a 20 MB text past a limit of 512 allocated %d MB, want ≤ 32", kind, n>>20)
		}
		// Within the limit: the encoding, whole.
		if e, err := tk.Encode(short, EncodeOptions{Limit: 600*unit + 2}); err != nil || e.Len() != 600*unit+2 || e.Truncated {
			t.Fatalf("%v: within the limit: %v, %v", kind, e, err)
		}
		if _, err := tk.EncodePair(short, short, EncodeOptions{Limit: 1200*unit + 2}); !errors.As(err, &le) || le.Tokens != 1200*unit+3 {
			t.Fatalf("%v: a pair one over the limit: %v", kind, err)
		}
	}
}

// tokenizer.json's max_input_chars_per_word above MaxWordChars is refused
// naming the file and the field (a billion let one 40,000-character word
// beside a 40,000-character piece run for longer than 10 s); the limit
// itself loads, and New refuses the same value.
func TestMaxWordCharsLimit(t *testing.T) {
	tk := testTokenizer(t, Bert, nil)
	dir := t.TempDir()
	if err := tk.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, TokenizerJSONFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for n, ok := range map[int]bool{MaxWordChars: true, MaxWordChars + 1: false, 1_000_000_000: false} {
		edited := strings.Replace(string(raw), `"max_input_chars_per_word": 100`, fmt.Sprintf(`"max_input_chars_per_word": %d`, n), 1)
		if edited == string(raw) {
			t.Fatal("tokenizer.json has no max_input_chars_per_word of 100")
		}
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(dir)
		switch {
		case ok && (err != nil || got.Config().MaxInputCharsPerWord != n):
			t.Errorf("max_input_chars_per_word %d: %v", n, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "max_input_chars_per_word") || !strings.Contains(err.Error(), "limit of 512")):
			t.Errorf("max_input_chars_per_word %d: error %v, want it to name the file, the field and the limit", n, err)
		}
	}
	cfg := tk.Config()
	cfg.MaxInputCharsPerWord = MaxWordChars + 1
	if _, err := New(tk.Vocab(), cfg); err == nil {
		t.Error("New accepted max_input_chars_per_word above the limit")
	}
}
