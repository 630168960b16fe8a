package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/roformer-go/roformer/tokenizer/jieba"
	"golang.org/x/text/unicode/norm"
)

// Kind selects the tokenization algorithm, named after the Hugging Face
// class that it reproduces.
type Kind int

const (
	// RoFormer is RoFormerTokenizer: lower-case, cut with jieba (HMM off),
	// keep in-vocabulary words whole, send the others through Bert's rules.
	// It is the zero value: this is a RoFormer toolkit.
	RoFormer Kind = iota
	// Bert is BertTokenizer: BasicTokenizer, then WordPiece.
	Bert
)

// String returns the Hugging Face class name.
func (k Kind) String() string {
	switch k {
	case RoFormer:
		return "RoFormerTokenizer"
	case Bert:
		return "BertTokenizer"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ErrUnsupported is wrapped by errors about tokenizer classes, models and
// options this package does not implement.
var ErrUnsupported = errors.New("tokenizer: unsupported")

// ParseKind accepts "roformer", "bert" and the HF class names
// RoFormerTokenizer, RoFormerTokenizerFast, BertTokenizer, BertTokenizerFast
// (case-insensitive).
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "roformer", "roformertokenizer", "roformertokenizerfast":
		return RoFormer, nil
	case "bert", "berttokenizer", "berttokenizerfast":
		return Bert, nil
	}
	return 0, fmt.Errorf("%w: tokenizer class %q (want RoFormerTokenizer or BertTokenizer)", ErrUnsupported, s)
}

// Config holds the options of a tokenizer; the field comments give the HF
// tokenizer_config.json keys. Start from DefaultConfig.
type Config struct {
	Kind Kind // tokenizer_class
	// DoLowerCase lower-cases the text (Python's str.lower, one character at
	// a time) except inside special tokens. do_lower_case, default true.
	DoLowerCase bool
	// StripAccents removes accents (NFD, then drop category Mn). nil follows
	// DoLowerCase, as in BERT. strip_accents, default null.
	StripAccents *bool
	// TokenizeChineseChars makes every CJK ideograph a word of its own in
	// the Bert rules. tokenize_chinese_chars, default true.
	TokenizeChineseChars bool
	// NeverSplit lists words that BasicTokenizer keeps as they are (no
	// lower-casing, no punctuation split, no WordPiece). never_split.
	NeverSplit []string
	// ModelMaxLength is the longest input the model takes (0: no limit);
	// EncodeOptions use it when they ask for truncation or max_length
	// padding without a MaxLength. model_max_length.
	ModelMaxLength int
	// Special tokens (unk_token, sep_token, pad_token, cls_token, mask_token,
	// additional_special_tokens). They are never split; an empty MaskToken
	// means none.
	UnkToken, SepToken, PadToken, ClsToken, MaskToken string
	AdditionalSpecialTokens                           []string
	// MaxInputCharsPerWord: longer words become UnkToken (WordPiece's
	// max_input_chars_per_word, 100).
	MaxInputCharsPerWord int
	// Segmenter cuts words for Kind RoFormer; nil means the embedded jieba
	// 0.42.1 dictionary (jieba.NewDefault).
	Segmenter *jieba.Segmenter
}

// DefaultConfig returns HF's defaults for kind: lower-casing, accents
// following it, Chinese characters split, [UNK] [SEP] [PAD] [CLS] [MASK],
// 100 characters per word, no model_max_length.
func DefaultConfig(kind Kind) Config {
	return Config{
		Kind:                 kind,
		DoLowerCase:          true,
		TokenizeChineseChars: true,
		UnkToken:             "[UNK]",
		SepToken:             "[SEP]",
		PadToken:             "[PAD]",
		ClsToken:             "[CLS]",
		MaskToken:            "[MASK]",
		MaxInputCharsPerWord: 100,
	}
}

// stripAccents resolves StripAccents against DoLowerCase as BasicTokenizer does.
func (c *Config) stripAccents() bool {
	if c.StripAccents != nil {
		return *c.StripAccents
	}
	return c.DoLowerCase
}

// Tokenizer turns text into WordPiece ids exactly as Hugging Face's slow
// RoFormerTokenizer or BertTokenizer (transformers 4.30.2) does, and records
// where each token came from. It is immutable and safe for concurrent use.
type Tokenizer struct {
	cfg   Config
	vocab *Vocab
	seg   *jieba.Segmenter // Kind RoFormer only
	strip bool

	unkID, sepID, padID, clsID, maskID int

	specials     [][]rune       // special tokens, longest first
	specialIDs   map[int]bool   // ids of the special tokens present in the vocabulary
	specialFirst map[rune]bool  // first runes of the special tokens
	specialASCII [128]bool      // specialFirst for ASCII runes
	specialWide  bool           // some special token starts with a non-ASCII rune
	neverSplit   map[string]int // 1: configured never_split (kept as is); 2: special token only
}

// New returns a tokenizer over v. The unknown, separator, padding and
// classifier tokens must be in v; the mask token may be absent (MaskID −1).
// For Kind RoFormer with a nil cfg.Segmenter it builds the embedded jieba
// dictionary on first use in the process (see docs/tokenizer.md for the
// time it takes).
func New(v *Vocab, cfg Config) (*Tokenizer, error) {
	if v == nil {
		return nil, fmt.Errorf("%w: nil vocabulary", ErrBadVocab)
	}
	if cfg.Kind != RoFormer && cfg.Kind != Bert {
		return nil, fmt.Errorf("%w: kind %v", ErrUnsupported, cfg.Kind)
	}
	if cfg.MaxInputCharsPerWord <= 0 {
		cfg.MaxInputCharsPerWord = 100
	}
	if cfg.ModelMaxLength < 0 {
		return nil, fmt.Errorf("tokenizer: model_max_length %d is negative", cfg.ModelMaxLength)
	}
	if n := len(cfg.AdditionalSpecialTokens); n > MaxSpecialTokens {
		return nil, fmt.Errorf("tokenizer: %d additional_special_tokens, more than the limit of %d", n, MaxSpecialTokens)
	}
	for _, sp := range cfg.AdditionalSpecialTokens {
		if len(sp) > MaxSpecialTokenBytes {
			return nil, fmt.Errorf("tokenizer: an additional special token of %d bytes, more than the limit of %d", len(sp), MaxSpecialTokenBytes)
		}
	}
	t := &Tokenizer{cfg: cfg, vocab: v, strip: cfg.stripAccents(), maskID: -1}
	t.cfg.NeverSplit = slices.Clone(cfg.NeverSplit)
	t.cfg.AdditionalSpecialTokens = slices.Clone(cfg.AdditionalSpecialTokens)
	var missing []string
	for _, s := range []struct {
		name, tok string
		id        *int
	}{{"unk_token", cfg.UnkToken, &t.unkID}, {"sep_token", cfg.SepToken, &t.sepID}, {"pad_token", cfg.PadToken, &t.padID}, {"cls_token", cfg.ClsToken, &t.clsID}} {
		id, ok := v.ID(s.tok)
		if s.tok == "" || !ok {
			missing = append(missing, fmt.Sprintf("%s %q", s.name, s.tok))
			continue
		}
		*s.id = id
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: the vocabulary of %d tokens lacks %s", ErrBadVocab, v.Size(), strings.Join(missing, ", "))
	}
	if cfg.MaskToken != "" {
		if id, ok := v.ID(cfg.MaskToken); ok {
			t.maskID = id
		}
	}
	t.specialIDs = map[int]bool{}
	t.specialFirst = map[rune]bool{}
	t.neverSplit = map[string]int{}
	for _, s := range t.SpecialTokens() {
		t.specials = append(t.specials, []rune(s))
		t.specialFirst[[]rune(s)[0]] = true
		t.neverSplit[s] = 2
		if id, ok := v.ID(s); ok {
			t.specialIDs[id] = true
		}
	}
	t.indexSpecials()
	for _, s := range t.cfg.NeverSplit {
		t.neverSplit[s] = 1
	}
	if cfg.Kind == RoFormer {
		t.seg = cfg.Segmenter
		if t.seg == nil {
			s, err := jieba.NewDefault()
			if err != nil {
				return nil, err
			}
			t.seg = s
		}
	}
	return t, nil
}

// indexSpecials sorts the special tokens longest first and fills the
// first-rune tables.
func (t *Tokenizer) indexSpecials() {
	slices.SortStableFunc(t.specials, func(a, b []rune) int { return len(b) - len(a) })
	for r := range t.specialFirst {
		if r < 128 {
			t.specialASCII[r] = true
		} else {
			t.specialWide = true
		}
	}
}

// isSpecialFirst reports whether some special token starts with r.
func (t *Tokenizer) isSpecialFirst(r rune) bool {
	if r < 128 {
		return r >= 0 && t.specialASCII[r]
	}
	return t.specialWide && t.specialFirst[r]
}

// Limits of the special tokens a configuration may add
// (additional_special_tokens): each is matched at every position of a
// text that starts as one does, so their number bounds the cost of
// tokenizing. Real tokenizers add at most a few hundred (T5's 100
// sentinels), of a few bytes each.
const (
	MaxSpecialTokens     = 4096
	MaxSpecialTokenBytes = 256
)

// SpecialTokens returns the distinct non-empty special tokens: unk, sep,
// pad, cls, mask, then the additional ones (HF's all_special_tokens).
func (t *Tokenizer) SpecialTokens() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range append([]string{t.cfg.UnkToken, t.cfg.SepToken, t.cfg.PadToken, t.cfg.ClsToken, t.cfg.MaskToken}, t.cfg.AdditionalSpecialTokens...) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Config returns a copy of the tokenizer's options.
func (t *Tokenizer) Config() Config {
	c := t.cfg
	c.NeverSplit = slices.Clone(c.NeverSplit)
	c.AdditionalSpecialTokens = slices.Clone(c.AdditionalSpecialTokens)
	if c.StripAccents != nil {
		b := *c.StripAccents
		c.StripAccents = &b
	}
	return c
}

// Kind returns the tokenization algorithm.
func (t *Tokenizer) Kind() Kind { return t.cfg.Kind }

// Vocab returns the vocabulary.
func (t *Tokenizer) Vocab() *Vocab { return t.vocab }

// VocabSize returns the number of ids.
func (t *Tokenizer) VocabSize() int { return t.vocab.Size() }

// UnkID returns the id of the unknown token [UNK].
func (t *Tokenizer) UnkID() int { return t.unkID }

// SepID returns the id of the separator token [SEP].
func (t *Tokenizer) SepID() int { return t.sepID }

// PadID returns the id of the padding token [PAD].
func (t *Tokenizer) PadID() int { return t.padID }

// ClsID returns the id of the classifier token [CLS].
func (t *Tokenizer) ClsID() int { return t.clsID }

// MaskID returns the id of the mask token [MASK], or −1 when the vocabulary
// has none.
func (t *Tokenizer) MaskID() int { return t.maskID }

// TokenToID returns the id of token and whether it is in the vocabulary.
func (t *Tokenizer) TokenToID(token string) (int, bool) { return t.vocab.ID(token) }

// IDToToken returns the token of id and whether id is in range.
func (t *Tokenizer) IDToToken(id int) (string, bool) { return t.vocab.Token(id) }

// ConvertTokensToIDs maps tokens to ids, unknown tokens to UnkID (HF's
// convert_tokens_to_ids).
func (t *Tokenizer) ConvertTokensToIDs(tokens []string) []int {
	ids := make([]int, len(tokens))
	for i, tok := range tokens {
		id, ok := t.vocab.ID(tok)
		if !ok {
			id = t.unkID
		}
		ids[i] = id
	}
	return ids
}

// ConvertIDsToTokens maps ids to tokens, ids out of range to the unknown
// token (HF's convert_ids_to_tokens).
func (t *Tokenizer) ConvertIDsToTokens(ids []int) []string {
	toks := make([]string, len(ids))
	for i, id := range ids {
		tok, ok := t.vocab.Token(id)
		if !ok {
			tok = t.cfg.UnkToken
		}
		toks[i] = tok
	}
	return toks
}

// IsSpecialID reports whether id is the id of a special token.
func (t *Tokenizer) IsSpecialID(id int) bool { return t.specialIDs[id] }

// IsContinuation reports whether token id continues the word of the token
// before it: WordPiece pieces spelt "##…". Whole-word masking needs it.
func (t *Tokenizer) IsContinuation(id int) bool {
	tok, ok := t.vocab.Token(id)
	return ok && len(tok) > len(continuationPrefix) && strings.HasPrefix(tok, continuationPrefix)
}

// Tokenize returns the tokens of text without special tokens added, as HF's
// tokenizer.tokenize(text).
func (t *Tokenizer) Tokenize(text string) []string {
	sc := getScratch()
	defer putScratch(sc)
	t.tokenize(text, sc, &sc.out)
	return slices.Clone(sc.out.toks)
}

// TokenizeWithOffsets is Tokenize that also returns each token's byte
// offsets [start, end) into text.
func (t *Tokenizer) TokenizeWithOffsets(text string) ([]string, [][2]int) {
	sc := getScratch()
	defer putScratch(sc)
	t.tokenize(text, sc, &sc.out)
	return slices.Clone(sc.out.toks), slices.Clone(sc.out.offs)
}

// EncodeIDs returns the ids of text without special tokens
// (convert_tokens_to_ids(tokenize(text))). It makes Tokenizer a
// data.Encoder.
func (t *Tokenizer) EncodeIDs(text string) []int {
	sc := getScratch()
	defer putScratch(sc)
	t.tokenize(text, sc, &sc.out)
	return slices.Clone(sc.out.ids)
}

// seq is one tokenized sequence.
type seq struct {
	ids  []int
	toks []string
	offs [][2]int
}

func (s *seq) reset() { s.ids, s.toks, s.offs = s.ids[:0], s.toks[:0], s.offs[:0] }

// scratch holds the buffers of one tokenization; pooled so that steady-state
// tokenization allocates only its results.
type scratch struct {
	r    []rune  // decoded, lower-cased text
	s, e []int32 // original byte span of each rune of r
	w    runeBuf // the current BasicTokenizer word
	n    runeBuf // normalization output
	b    []byte  // UTF-8 scratch
	hb   []byte  // "##" + piece scratch
	rb   []int32 // rune index → byte offset in b
	ends []int   // jieba word ends
	it   norm.Iter
	out  seq
	out2 seq
	// collect, when set, receives each word that would go to WordPiece
	// (vocabulary training uses the Bert rules without a vocabulary).
	collect func(word []rune)
}

// runeBuf is runes with their original byte spans.
type runeBuf struct {
	r    []rune
	s, e []int32
}

func (b *runeBuf) reset() { b.r, b.s, b.e = b.r[:0], b.s[:0], b.e[:0] }

func (b *runeBuf) push(r rune, s, e int32) {
	b.r = append(b.r, r)
	b.s = append(b.s, s)
	b.e = append(b.e, e)
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) {
	if cap(sc.r) > 1<<20 { // do not keep huge buffers alive
		return
	}
	scratchPool.Put(sc)
}

// tokenize runs PreTrainedTokenizer.tokenize: lower-case outside special
// tokens, split on the special tokens (stripping the whitespace next to
// them), and tokenize each remaining piece. Results go to out (reset first).
func (t *Tokenizer) tokenize(text string, sc *scratch, out *seq) {
	out.reset()
	sc.r, sc.s, sc.e = sc.r[:0], sc.s[:0], sc.e[:0]
	lower := t.cfg.DoLowerCase
	for i := 0; i < len(text); {
		if lower {
			if n := t.specialAtString(text, i); n > 0 {
				for j := i; j < i+n; {
					r, size := utf8.DecodeRuneInString(text[j:])
					sc.push(r, j, j+size)
					j += size
				}
				i += n
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if lower {
			r1, r2 := pyLower(r)
			sc.push(r1, i, i+size)
			if r2 >= 0 {
				sc.push(r2, i, i+size)
			}
		} else {
			sc.push(r, i, i+size)
		}
		i += size
	}
	// Split on special tokens (leftmost, longest) in the lower-cased text.
	n := len(sc.r)
	pieceStart, afterSpecial := 0, false
	for j := 0; j <= n; {
		k := 0
		if j < n {
			k = t.specialAtRunes(sc.r[j:])
			if k == 0 {
				j++
				continue
			}
		}
		// The piece sc.r[pieceStart:j] ends at a special token (k > 0) or at
		// the end of the text.
		a, b := pieceStart, j
		if afterSpecial {
			for a < b && isPySpace(sc.r[a]) {
				a++
			}
		}
		if k > 0 {
			for b > a && isPySpace(sc.r[b-1]) {
				b--
			}
		}
		if a < b {
			t.piece(sc, a, b, out)
		}
		if k == 0 {
			break
		}
		tok := string(sc.r[j : j+k])
		id, ok := t.vocab.ID(tok)
		if !ok {
			id = t.unkID
		}
		tokStr, _ := t.vocab.Token(id)
		if !ok {
			tokStr = tok
		}
		out.emit(id, tokStr, sc.s[j], sc.e[j+k-1])
		j += k
		pieceStart, afterSpecial = j, true
	}
}

func (sc *scratch) push(r rune, s, e int) {
	sc.r = append(sc.r, r)
	sc.s = append(sc.s, int32(s))
	sc.e = append(sc.e, int32(e))
}

func (o *seq) emit(id int, tok string, s, e int32) {
	o.ids = append(o.ids, id)
	o.toks = append(o.toks, tok)
	o.offs = append(o.offs, [2]int{int(s), int(e)})
}

// specialAtString returns the byte length of the longest special token that
// starts at text[i:], or 0.
func (t *Tokenizer) specialAtString(text string, i int) int {
	if c := text[i]; c < utf8.RuneSelf {
		if !t.specialASCII[c] {
			return 0
		}
	} else if r, _ := utf8.DecodeRuneInString(text[i:]); !t.isSpecialFirst(r) {
		return 0
	}
	for _, sp := range t.specials { // longest first
		if s := string(sp); strings.HasPrefix(text[i:], s) {
			return len(s)
		}
	}
	return 0
}

// specialAtRunes returns the rune length of the longest special token that
// starts at rs[0], or 0.
func (t *Tokenizer) specialAtRunes(rs []rune) int {
	if !t.isSpecialFirst(rs[0]) {
		return 0
	}
	for _, sp := range t.specials {
		if len(sp) <= len(rs) && slices.Equal(sp, rs[:len(sp)]) {
			return len(sp)
		}
	}
	return 0
}

// piece tokenizes sc.r[a:b], a stretch of text between special tokens:
// RoFormerTokenizer._tokenize or BertTokenizer._tokenize.
func (t *Tokenizer) piece(sc *scratch, a, b int, out *seq) {
	if t.cfg.Kind == Bert {
		t.basic(sc, a, b, out)
		return
	}
	// RoFormer: cut with jieba; a word in the vocabulary is one token.
	sc.ends = t.seg.AppendCut(sc.ends[:0], sc.r[a:b])
	start := a
	for _, e := range sc.ends {
		w0, w1 := start, a+e
		start = w1
		sc.b = appendRunes(sc.b[:0], sc.r[w0:w1])
		if id, ok := t.vocab.idBytes(sc.b); ok {
			out.emit(id, t.vocab.tokens[id], sc.s[w0], sc.e[w1-1])
			continue
		}
		t.basic(sc, w0, w1, out)
	}
}

func appendRunes(b []byte, rs []rune) []byte {
	for _, r := range rs {
		if r < utf8.RuneSelf {
			b = append(b, byte(r))
		} else {
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}
