package tokenizer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// testVocabTokens is a small vocabulary that covers printable ASCII (with
// "##" forms of letters and digits), a few words and some CJK characters and
// words, so that tests run without the shared fixtures.
func testVocabTokens() []string {
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for c := '!'; c <= '~'; c++ {
		toks = append(toks, string(c))
	}
	for c := 'a'; c <= 'z'; c++ {
		toks = append(toks, "##"+string(c))
	}
	for c := '0'; c <= '9'; c++ {
		toks = append(toks, "##"+string(c))
	}
	toks = append(toks, "hello", "world", "cafe", "##ing", "play", "中", "国", "人", "中国", "今", "天", "今天", "é", "ǆ", "，", "。")
	return toks
}

func newTestTokenizer(t testing.TB, kind Kind, edit func(*Config)) *Tokenizer {
	t.Helper()
	v, err := NewVocab(testVocabTokens())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(kind)
	if edit != nil {
		edit(&cfg)
	}
	tok, err := New(v, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTokenizeTable(t *testing.T) {
	bert := newTestTokenizer(t, Bert, nil)
	rof := newTestTokenizer(t, RoFormer, nil)
	cased := newTestTokenizer(t, Bert, func(c *Config) { c.DoLowerCase = false })
	casedStrip := newTestTokenizer(t, Bert, func(c *Config) { c.DoLowerCase = false; b := true; c.StripAccents = &b })
	never := newTestTokenizer(t, Bert, func(c *Config) { c.NeverSplit = []string{"c++", "{x}"} })
	extra := newTestTokenizer(t, Bert, func(c *Config) { c.AdditionalSpecialTokens = []string{"<x>"} })
	noCJK := newTestTokenizer(t, Bert, func(c *Config) { c.TokenizeChineseChars = false })
	long := strings.Repeat("a", 101)
	for _, tc := range []struct {
		name    string
		tok     *Tokenizer
		text    string
		tokens  []string
		offsets [][2]int
	}{
		{"punctuation", bert, "Hello, World!", []string{"hello", ",", "world", "!"}, [][2]int{{0, 5}, {5, 6}, {7, 12}, {12, 13}}},
		{"accents stripped, byte offsets", bert, "Café", []string{"cafe"}, [][2]int{{0, 5}}},
		{"decomposed input composes", bert, "cafe\u0301!", []string{"cafe", "!"}, [][2]int{{0, 6}, {6, 7}}},
		{"dotted capital I", bert, "İ", []string{"i"}, [][2]int{{0, 2}}},
		{"special tokens stay whole", bert, "hello [MASK] world", []string{"hello", "[MASK]", "world"}, [][2]int{{0, 5}, {6, 12}, {13, 18}}},
		{"special token glued to words", bert, "hello[SEP]world", []string{"hello", "[SEP]", "world"}, [][2]int{{0, 5}, {5, 10}, {10, 15}}},
		{"lower-case special is text", bert, "[mask]", []string{"[", "m", "##a", "##s", "##k", "]"}, nil},
		{"zero-width space joins", bert, "hel\u200blo", []string{"hello"}, [][2]int{{0, 8}}},
		{"invalid byte dropped", bert, "hel\xfflo", []string{"hello"}, [][2]int{{0, 6}}},
		{"control characters dropped", bert, "\x00hello\x7f \x01", []string{"hello"}, [][2]int{{1, 6}}},
		{"CJK characters split", bert, "中国人", []string{"中", "国", "人"}, [][2]int{{0, 3}, {3, 6}, {6, 9}}},
		{"CJK not split when off", noCJK, "中国 x", []string{"中国", "x"}, nil},
		{"unknown piece makes the word unknown", bert, "hello☃x", []string{"[UNK]"}, [][2]int{{0, 9}}},
		{"wordpiece", bert, "playing", []string{"play", "##ing"}, [][2]int{{0, 4}, {4, 7}}},
		{"over 100 characters", bert, long + " x", []string{"[UNK]", "x"}, [][2]int{{0, 101}, {102, 103}}},
		{"exactly 100 characters", bert, long[:100], append([]string{"a"}, slices.Repeat([]string{"##a"}, 99)...), nil},
		{"roformer keeps vocabulary words", rof, "中国人今天", []string{"中国", "人", "今天"}, [][2]int{{0, 6}, {6, 9}, {9, 15}}},
		{"roformer splits other words", rof, "中国人民", []string{"中国", "人", "[UNK]"}, [][2]int{{0, 6}, {6, 9}, {9, 12}}},
		{"roformer cuts before stripping accents", rof, "Café", []string{"c", "##a", "##f", "é"}, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 5}}},
		{"roformer special tokens", rof, "[CLS]中国[SEP]", []string{"[CLS]", "中国", "[SEP]"}, [][2]int{{0, 5}, {5, 11}, {11, 16}}},
		{"cased keeps case", cased, "Hello hello", []string{"H", "##e", "##l", "##l", "##o", "hello"}, nil},
		{"cased keeps accents", cased, "é", []string{"é"}, nil},
		{"cased, accents stripped", casedStrip, "é", []string{"e"}, nil},
		{"titlecase digraph lowers", bert, "ǅ", []string{"ǆ"}, nil},
		{"never_split kept as is (after lower-casing)", never, "C++ c+ {x}", []string{"c++", "c", "+", "{x}"}, [][2]int{{0, 3}, {4, 5}, {5, 6}, {7, 10}}},
		{"additional special token outside the vocabulary", extra, "a<x>b", []string{"a", "<x>", "b"}, [][2]int{{0, 1}, {1, 4}, {4, 5}}},
		{"empty", bert, "", nil, nil},
		{"whitespace only", rof, " \t\r\n\u3000", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toks, offs := tc.tok.TokenizeWithOffsets(tc.text)
			if !slices.Equal(toks, tc.tokens) {
				t.Fatalf("Tokenize(%q)\n got %q\nwant %q", tc.text, toks, tc.tokens)
			}
			if tc.offsets != nil && !slices.Equal(offs, tc.offsets) {
				t.Errorf("offsets of %q: got %v, want %v", tc.text, offs, tc.offsets)
			}
		})
	}
	// The additional special token outside the vocabulary gets the unknown id.
	if ids := extra.EncodeIDs("<x>"); !slices.Equal(ids, []int{extra.UnkID()}) {
		t.Errorf("EncodeIDs(<x>) = %v, want [%d]", ids, extra.UnkID())
	}
}

func TestNewErrors(t *testing.T) {
	v, _ := NewVocab([]string{"[PAD]", "[UNK]", "x"})
	if _, err := New(v, DefaultConfig(Bert)); !errors.Is(err, ErrBadVocab) {
		t.Errorf("missing [CLS]/[SEP]: err = %v, want ErrBadVocab", err)
	}
	if _, err := New(nil, DefaultConfig(Bert)); !errors.Is(err, ErrBadVocab) {
		t.Errorf("nil vocab: err = %v", err)
	}
	v, _ = NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]"})
	tok, err := New(v, DefaultConfig(Bert))
	if err != nil {
		t.Fatal(err)
	}
	if tok.MaskID() != -1 {
		t.Errorf("MaskID = %d without [MASK], want -1", tok.MaskID())
	}
	if _, err := New(v, Config{Kind: Kind(7), UnkToken: "[UNK]"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("bad kind: err = %v", err)
	}
	if _, err := ParseKind("GPT2Tokenizer"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("ParseKind: err = %v", err)
	}
}

func TestAccessors(t *testing.T) {
	tok := newTestTokenizer(t, Bert, nil)
	if tok.PadID() != 0 || tok.UnkID() != 1 || tok.ClsID() != 2 || tok.SepID() != 3 || tok.MaskID() != 4 {
		t.Errorf("special ids %d %d %d %d %d", tok.PadID(), tok.UnkID(), tok.ClsID(), tok.SepID(), tok.MaskID())
	}
	if got := tok.ConvertTokensToIDs([]string{"hello", "nope"}); got[1] != tok.UnkID() {
		t.Errorf("ConvertTokensToIDs = %v", got)
	}
	if got := tok.ConvertIDsToTokens([]int{2, -1, 1 << 20}); !slices.Equal(got, []string{"[CLS]", "[UNK]", "[UNK]"}) {
		t.Errorf("ConvertIDsToTokens = %q", got)
	}
	id, _ := tok.TokenToID("##ing")
	if !tok.IsContinuation(id) || tok.IsContinuation(tok.ClsID()) {
		t.Error("IsContinuation")
	}
	if !tok.IsSpecialID(tok.MaskID()) || tok.IsSpecialID(id) {
		t.Error("IsSpecialID")
	}
	if tok.Kind() != Bert || tok.VocabSize() != len(testVocabTokens()) || tok.Kind().String() != "BertTokenizer" {
		t.Error("Kind/VocabSize")
	}
}

// TestEncodeTruncationPadding checks HF's truncation and padding rules on a
// vocabulary where each letter is one token.
func TestEncodeTruncationPadding(t *testing.T) {
	tok := newTestTokenizer(t, Bert, func(c *Config) { c.ModelMaxLength = 6 })
	const C, S, P = 2, 3, 0
	id := func(s string) int { i, _ := tok.TokenToID(s); return i }
	a, b, c, d, e := id("a"), id("b"), id("c"), id("d"), id("e")
	x, y, z := id("x"), id("y"), id("z")
	for _, tc := range []struct {
		name     string
		text     string
		pair     *string
		opts     EncodeOptions
		ids      []int
		types    []int
		mask     []int
		errIsTru bool
	}{
		{"plain", "a b c", nil, EncodeOptions{}, []int{C, a, b, c, S}, []int{0, 0, 0, 0, 0}, []int{1, 1, 1, 1, 1}, false},
		{"max_length implies longest_first", "a b c d e", nil, EncodeOptions{MaxLength: 4}, []int{C, a, b, S}, nil, nil, false},
		{"explicit truncation uses model_max_length", "a b c d e", nil, EncodeOptions{Truncation: TruncateLongestFirst}, []int{C, a, b, c, d, S}, nil, nil, false},
		{"do_not_truncate", "a b c d e", nil, EncodeOptions{MaxLength: 4, Truncation: TruncateNone}, []int{C, a, b, c, d, e, S}, nil, nil, false},
		{"max_length padding does not truncate by default", "a b c d e", nil, EncodeOptions{MaxLength: 4, Padding: PadMaxLength}, []int{C, a, b, c, d, e, S}, nil, nil, false},
		{"pair", "a b", ptr("x"), EncodeOptions{}, []int{C, a, b, S, x, S}, []int{0, 0, 0, 0, 1, 1}, nil, false},
		// 5 + 3 tokens, 3 special, max 7: remove 4 → 2 + 2 (one at a time from the longer).
		{"pair longest_first", "a b c d e", ptr("x y z"), EncodeOptions{MaxLength: 7}, []int{C, a, b, S, x, y, S}, []int{0, 0, 0, 0, 1, 1, 1}, nil, false},
		// 3 + 3, max 8: remove 1 from the second on a tie.
		{"pair longest_first tie", "a b c", ptr("x y z"), EncodeOptions{MaxLength: 8}, []int{C, a, b, c, S, x, y, S}, nil, nil, false},
		{"only_first", "a b c d e", ptr("x y z"), EncodeOptions{MaxLength: 8, Truncation: TruncateOnlyFirst}, []int{C, a, b, S, x, y, z, S}, nil, nil, false},
		{"only_second", "a b c", ptr("x y z"), EncodeOptions{MaxLength: 7, Truncation: TruncateOnlySecond}, []int{C, a, b, c, S, x, S}, nil, nil, false},
		{"only_second too short", "a b c d e", ptr("x"), EncodeOptions{MaxLength: 5, Truncation: TruncateOnlySecond}, nil, nil, nil, true},
		{"only_first too short", "a", ptr("x y z"), EncodeOptions{MaxLength: 5, Truncation: TruncateOnlyFirst}, nil, nil, nil, true},
		{"single cannot drop every token", "a", nil, EncodeOptions{MaxLength: 2}, nil, nil, nil, true},
		{"pad to max_length", "a b", nil, EncodeOptions{MaxLength: 6, Padding: PadMaxLength}, []int{C, a, b, S, P, P}, []int{0, 0, 0, 0, 0, 0}, []int{1, 1, 1, 1, 0, 0}, false},
		{"pad left", "a b", nil, EncodeOptions{MaxLength: 6, Padding: PadMaxLength, PadLeft: true}, []int{P, P, C, a, b, S}, nil, []int{0, 0, 1, 1, 1, 1}, false},
		{"pad to multiple", "a b", nil, EncodeOptions{Padding: PadLongest, PadToMultipleOf: 8}, []int{C, a, b, S, P, P, P, P}, nil, nil, false},
		{"pad pair keeps types 0 on padding", "a", ptr("x"), EncodeOptions{MaxLength: 7, Padding: PadMaxLength}, []int{C, a, S, x, S, P, P}, []int{0, 0, 0, 1, 1, 0, 0}, nil, false},
		{"no special tokens", "a b c d", nil, EncodeOptions{NoSpecialTokens: true, MaxLength: 3}, []int{a, b, c}, nil, nil, false},
		{"special token in text", "a [SEP] b", nil, EncodeOptions{}, []int{C, a, S, b, S}, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var enc *Encoding
			var err error
			if tc.pair != nil {
				enc, err = tok.EncodePair(tc.text, *tc.pair, tc.opts)
			} else {
				enc, err = tok.Encode(tc.text, tc.opts)
			}
			if tc.errIsTru {
				if !errors.Is(err, ErrTruncation) {
					t.Fatalf("err = %v, want ErrTruncation", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(enc.IDs, tc.ids) {
				t.Errorf("ids %v, want %v (tokens %q)", enc.IDs, tc.ids, enc.Tokens)
			}
			if tc.types != nil && !slices.Equal(enc.TypeIDs, tc.types) {
				t.Errorf("types %v, want %v", enc.TypeIDs, tc.types)
			}
			if tc.mask != nil && !slices.Equal(enc.AttentionMask, tc.mask) {
				t.Errorf("mask %v, want %v", enc.AttentionMask, tc.mask)
			}
			checkEncodingShape(t, enc)
		})
	}
	if _, err := newTestTokenizer(t, Bert, nil).Encode("a", EncodeOptions{Padding: PadMaxLength}); err == nil {
		t.Error("max_length padding without any length: want an error")
	}
	for _, o := range []EncodeOptions{{MaxLength: -1}, {PadToMultipleOf: -2}, {Truncation: 9}, {Padding: 9}} {
		if _, err := tok.Encode("a", o); err == nil {
			t.Errorf("Encode with %+v: want an error", o)
		}
	}
}

func ptr(s string) *string { return &s }

// checkEncodingShape checks that the parallel slices agree.
func checkEncodingShape(t *testing.T, e *Encoding) {
	t.Helper()
	n := len(e.IDs)
	if len(e.TypeIDs) != n || len(e.AttentionMask) != n || len(e.SpecialTokensMask) != n || len(e.Tokens) != n || len(e.Offsets) != n || len(e.SequenceIDs) != n {
		t.Fatalf("ragged encoding: %d ids, %d types, %d mask, %d special, %d tokens, %d offsets, %d seq",
			n, len(e.TypeIDs), len(e.AttentionMask), len(e.SpecialTokensMask), len(e.Tokens), len(e.Offsets), len(e.SequenceIDs))
	}
	for i := range n {
		if e.AttentionMask[i] == 0 && (e.SpecialTokensMask[i] != 1 || e.SequenceIDs[i] != -1) {
			t.Errorf("padding position %d is not marked special", i)
		}
	}
}

func TestEncodeBatchMatchesSingle(t *testing.T) {
	for _, kind := range []Kind{Bert, RoFormer} {
		tok := newTestTokenizer(t, kind, nil)
		r := rand.New(rand.NewPCG(3, 4))
		inputs := make([]Input, 200)
		for i := range inputs {
			inputs[i] = Input{Text: randomText(r, 30)}
			if i%3 == 0 {
				inputs[i] = PairInput(randomText(r, 20), randomText(r, 20))
			}
		}
		opts := EncodeOptions{MaxLength: 24, Truncation: TruncateLongestFirst, Padding: PadLongest}
		encs, err := tok.EncodeBatch(inputs, opts)
		if err != nil {
			t.Fatal(err)
		}
		longest := 0
		for _, e := range encs {
			longest = max(longest, e.Len())
		}
		for i, in := range inputs {
			single, err := tok.encodeOne(in, opts, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := tok.pad(single, opts, 24, longest); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(single.IDs, encs[i].IDs) || !slices.Equal(single.Offsets, encs[i].Offsets) || encs[i].Len() != longest {
				t.Fatalf("%v input %d: batch %v, single %v", kind, i, encs[i].IDs, single.IDs)
			}
		}
	}
	tok := newTestTokenizer(t, Bert, nil)
	_, err := tok.EncodeBatch([]Input{{Text: "a"}, {Text: "a b c d"}}, EncodeOptions{MaxLength: 3, Truncation: TruncateOnlySecond})
	var be *BatchError
	if !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, ErrTruncation) {
		t.Errorf("EncodeBatch error = %v, want a BatchError at input 1 wrapping ErrTruncation", err)
	}
	if encs, err := tok.EncodeBatch(nil, EncodeOptions{}); err != nil || len(encs) != 0 {
		t.Errorf("empty batch: %v %v", encs, err)
	}
}

// randomText mixes ASCII words, accents (composed and not), Turkish İ,
// CJK, punctuation, emoji, controls, invalid bytes, whitespace and special
// tokens.
func randomText(r *rand.Rand, parts int) string {
	bits := []string{"hello", "World", "playing", "Café", "cafe\u0301", "naïve", "İ", "ΣΑΣ", "中国", "人", "今天天气",
		"，", "。", ",", "!", "-", "'", "😀", "☃", "\u200b", "\x00", "\x7f", "\xff", "\xe4\xb8", " ", "  ", "\t", "\n", "\r\n",
		"\u3000", "\u00a0", "[MASK]", "[CLS]", "[mask]", "ǅ", "x", "42", "3.14", "e.g.", "c++", "a_b"}
	var sb strings.Builder
	for range r.IntN(parts + 1) {
		sb.WriteString(bits[r.IntN(len(bits))])
	}
	return sb.String()
}

// fold is what uncased tokenization preserves of a text: lower case, no
// accents, no control characters, no whitespace.
func fold(s string) string {
	var b strings.Builder
	for _, r := range s {
		r1, r2 := pyLower(r)
		b.WriteRune(r1)
		if r2 >= 0 {
			b.WriteRune(r2)
		}
	}
	var out strings.Builder
	for _, r := range norm.NFD.String(norm.NFC.String(b.String())) {
		if r == 0 || r == utf8.RuneError || isBertControl(r) || isPySpace(r) || isBertWhitespace(r) || unicode.Is(unicode.Mn, r) {
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}

// TestOffsetsProperty: on random texts, every token's offsets lie inside
// the text, on character boundaries, in order, and the text they cover folds
// to the token (for tokens other than [UNK]).
func TestOffsetsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, kind := range []Kind{Bert, RoFormer} {
		tok := newTestTokenizer(t, kind, nil)
		for i := range 400 {
			text := randomText(r, 12)
			toks, offs := tok.TokenizeWithOffsets(text)
			checkOffsetInvariants(t, tok, text, toks, offs)
			if t.Failed() {
				t.Fatalf("%v case %d: %q → %q %v", kind, i, text, toks, offs)
			}
		}
	}
}

func checkOffsetInvariants(t *testing.T, tok *Tokenizer, text string, toks []string, offs [][2]int) {
	t.Helper()
	if len(toks) != len(offs) {
		t.Errorf("%d tokens, %d offsets", len(toks), len(offs))
		return
	}
	prev, valid := 0, utf8.ValidString(text)
	for i, o := range offs {
		if o[0] < 0 || o[1] > len(text) || o[0] >= o[1] {
			t.Errorf("token %d %q: offsets %v outside text of %d bytes", i, toks[i], o, len(text))
			continue
		}
		if o[0] < prev {
			t.Errorf("token %d %q starts at %d, before the previous token's start %d", i, toks[i], o[0], prev)
		}
		prev = o[0]
		piece := text[o[0]:o[1]]
		if valid && !utf8.ValidString(piece) {
			t.Errorf("token %d %q: offsets %v cut a character", i, toks[i], o)
		}
		if toks[i] == tok.cfg.UnkToken {
			continue
		}
		if got, want := fold(strings.TrimPrefix(toks[i], continuationPrefix)), fold(piece); got != want {
			t.Errorf("token %d %q covers %q (folds to %q, token to %q)", i, toks[i], piece, want, got)
		}
	}
}

// TestDecodeRoundTrip: where the vocabulary covers the text,
// decode(encode(x)) gives x back up to case, accents and whitespace.
func TestDecodeRoundTrip(t *testing.T) {
	words := []string{"hello", "World", "PLAYING", "café", "Naïve", "x", "abc", "q", ",", "!", ".", "?", "-", "'", "中国", "人", "今天", "，", "。", "7"}
	r := rand.New(rand.NewPCG(7, 8))
	for _, kind := range []Kind{Bert, RoFormer} {
		tok := newTestTokenizer(t, kind, nil)
		for i := range 300 {
			var sb strings.Builder
			for range 1 + r.IntN(10) {
				sb.WriteString(words[r.IntN(len(words))])
				if r.IntN(2) == 0 {
					sb.WriteString(" ")
				}
			}
			text := sb.String()
			enc, err := tok.Encode(text, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(enc.IDs, tok.UnkID()) {
				t.Fatalf("%v: %q has [UNK] (%q): the generator must stay inside the vocabulary", kind, text, enc.Tokens)
			}
			got := tok.Decode(enc.IDs, true)
			if fold(got) != fold(text) {
				t.Errorf("%v case %d: decode(encode(%q)) = %q", kind, i, text, got)
			}
			if withSpecial := tok.Decode(enc.IDs, false); !strings.HasPrefix(withSpecial, "[CLS]") || !strings.HasSuffix(withSpecial, "[SEP]") {
				t.Errorf("Decode without skipping = %q", withSpecial)
			}
		}
	}
}

func TestDecode(t *testing.T) {
	tok := newTestTokenizer(t, Bert, nil)
	ids := func(toks ...string) []int { return tok.ConvertTokensToIDs(toks) }
	for _, tc := range []struct {
		name string
		ids  []int
		opts DecodeOptions
		want string
	}{
		{"pieces glued", ids("play", "##ing", "world"), DecodeOptions{}, "playing world"},
		{"clean-up spaces", ids("hello", ",", "world", "!", "i", "'", "m", "x", "'", "s"), DecodeOptions{}, "hello, world! i'm x's"},
		{"keep spaces", ids("hello", ",", "world"), DecodeOptions{KeepTokenizationSpaces: true}, "hello , world"},
		{"skip special", ids("[CLS]", "hello", "[SEP]", "[PAD]"), DecodeOptions{SkipSpecialTokens: true}, "hello"},
		{"keep special", ids("[CLS]", "hello", "[SEP]"), DecodeOptions{}, "[CLS] hello [SEP]"},
		{"leading continuation kept", ids("##ing", "##s"), DecodeOptions{}, "##ings"},
		{"out of range", []int{-3, 99999}, DecodeOptions{}, "[UNK] [UNK]"},
		{"empty", nil, DecodeOptions{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tok.DecodeWith(tc.ids, tc.opts); got != tc.want {
				t.Errorf("DecodeWith(%v) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}
}

// FuzzEncode: any bytes give an encoding or an error, never a panic, and
// the encoding is well formed.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Hello, World!", "永和服装饰品有限公司,今天天气非常好", "Café résumé naïve", "\xff\xfe\x00", "[CLS] a [SEP] b", "İΣ\u200b\u0301\u0301", "\r\n\t \u3000", strings.Repeat("ab", 80), "😀☃豈𠀀"} {
		f.Add(s, "pair")
	}
	bert := newTestTokenizer(f, Bert, nil)
	rof := newTestTokenizer(f, RoFormer, nil)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, tok := range []*Tokenizer{bert, rof} {
			toks, offs := tok.TokenizeWithOffsets(a)
			checkOffsetInvariants(t, tok, a, toks, offs)
			enc, err := tok.EncodePair(a, b, EncodeOptions{MaxLength: 16, Padding: PadMaxLength, Truncation: TruncateLongestFirst})
			if err != nil && !errors.Is(err, ErrTruncation) {
				t.Fatalf("EncodePair(%q, %q): %v", a, b, err)
			}
			if err == nil {
				checkEncodingShape(t, enc)
				if enc.Len() != 16 {
					t.Fatalf("EncodePair(%q, %q): length %d, want 16", a, b, enc.Len())
				}
				_ = tok.Decode(enc.IDs, true)
			}
		}
	})
}

func ExampleTokenizer_Encode() {
	vocab, _ := NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!", "play", "##ing"})
	tok, _ := New(vocab, DefaultConfig(Bert))
	enc, _ := tok.EncodePair("Hello, world!", "playing", EncodeOptions{})
	fmt.Println(enc.Tokens)
	fmt.Println(enc.IDs)
	fmt.Println(enc.TypeIDs)
	fmt.Println(enc.Offsets)
	fmt.Println(tok.Decode(enc.IDs, true))
	// Output:
	// [[CLS] hello , world ! [SEP] play ##ing [SEP]]
	// [2 5 6 7 8 3 9 10 3]
	// [0 0 0 0 0 0 1 1 1]
	// [[0 0] [0 5] [5 6] [7 12] [12 13] [0 0] [0 4] [4 7] [0 0]]
	// hello, world! playing
}

func ExampleTokenizer_Tokenize() {
	// RoFormer keeps jieba words that are in the vocabulary whole and splits
	// the others into characters.
	vocab, _ := NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "今天", "天", "气", "今", "好", "非常"})
	tok, _ := New(vocab, DefaultConfig(RoFormer))
	fmt.Println(tok.Tokenize("今天天气非常好"))
	// Output:
	// [今 天 天 气 非常 好]
}
