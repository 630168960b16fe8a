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

	// match finds the special tokens in a text; specialFirst holds their
	// first runes and specialSpan bounds, in bytes of the original text, how
	// far before a position a match that reaches it can start (see cutAt).
	match        *specialMatcher
	specialFirst map[rune]bool
	specialSpan  int
	specialIDs   map[int]bool   // ids of the special tokens present in the vocabulary
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
	if cfg.MaxInputCharsPerWord > MaxWordChars {
		return nil, fmt.Errorf("tokenizer: max_input_chars_per_word %d is more than the limit of %d", cfg.MaxInputCharsPerWord, MaxWordChars)
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
	t.neverSplit = map[string]int{}
	for _, s := range t.SpecialTokens() {
		t.neverSplit[s] = 2
		if id, ok := v.ID(s); ok {
			t.specialIDs[id] = true
		}
	}
	t.indexSpecials(t.SpecialTokens())
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

// indexSpecials builds the matcher of the special tokens (non-empty,
// distinct) and the tables of cutAt.
func (t *Tokenizer) indexSpecials(specials []string) {
	t.match = newSpecialMatcher(specials)
	t.specialFirst = map[rune]bool{}
	t.specialSpan = 0
	for _, s := range specials {
		r, _ := utf8.DecodeRuneInString(s)
		t.specialFirst[r] = true
		// A match in the original text spans len(s) bytes; one in the
		// lower-cased runes spans as many original runes as s has runes at
		// most, each of at most utf8.UTFMax bytes.
		t.specialSpan = max(t.specialSpan, len(s), utf8.UTFMax*utf8.RuneCountInString(s))
	}
}

// Limits of the special tokens a configuration may add
// (additional_special_tokens). They are matched in time linear in the text
// whatever they are (specialMatcher); the limits bound the matcher's
// memory (16 bytes a rune of the tokens: 16 MiB at most). Real tokenizers
// add at most a few hundred (T5's 100 sentinels), of a few bytes each.
const (
	MaxSpecialTokens     = 4096
	MaxSpecialTokenBytes = 256
)

// MaxWordChars bounds MaxInputCharsPerWord (tokenizer.json's
// max_input_chars_per_word; HF's default is 100). WordPiece's greedy longest match tries up to
// n lengths at each of a word's n characters, each looked up by its bytes,
// so a word costs up to n³ byte reads: with this limit at most 512² per
// character (measured: 16 KB of 512-character words beside a vocabulary
// built to defeat the match, about 80 ms on one Zen 4 core, against 1 ms for
// English text). A larger value is refused, not clamped, because words
// between the two would become [UNK] where HF splits them.
const MaxWordChars = 512

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
	// src and srcOff are a chunk's runes and their byte offsets (one more:
	// the end); at is specialMatcher.longest of src, then of r.
	src    []rune
	srcOff []int32
	at     []int32
	it     norm.Iter
	out    seq
	out2   seq
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

// tokenize runs PreTrainedTokenizer.tokenize on the whole text into out
// (reset first).
func (t *Tokenizer) tokenize(text string, sc *scratch, out *seq) {
	t.tokenizeN(text, sc, out, -1, false)
}

// chunkBytes is the length from which a text is tokenized a chunk at a
// time (tokenizeN): the scratch of a chunk is about 130 bytes a byte. A
// variable for the tests.
var chunkBytes = 64 << 10

// tokenizeN tokenizes text into out (reset first) as tokenize does, but a
// chunk at a time, and with keep ≥ 0 holds no more than it must: once out
// has more than keep tokens it stops (count false) or goes on counting
// the tokens past keep without keeping them (count true). It returns the
// tokens counted (all of them when complete) and whether the whole text
// was read; out holds at least min(n, keep+1) tokens, the first ones.
//
// The chunks are cut where no token, word or special token can cross
// (cutAt), so the tokens are those of the whole text. A text with no such
// place for long (one word of megabytes, a run of Chinese characters that
// jieba cuts as one block) is held whole up to the next one.
func (t *Tokenizer) tokenizeN(text string, sc *scratch, out *seq, keep int, count bool) (n int, complete bool) {
	out.reset()
	dropped := 0
	for pos := 0; pos < len(text); {
		end := len(text)
		if end-pos > chunkBytes && keep >= 0 {
			end = t.cutAt(text, pos+chunkBytes)
		}
		t.tokenizeChunk(text[pos:end], pos, sc, out)
		pos = end
		if keep >= 0 && len(out.ids) > keep {
			if !count {
				return dropped + len(out.ids), pos == len(text)
			}
			dropped += len(out.ids) - keep - 1
			out.truncate(keep + 1)
		}
	}
	return dropped + len(out.ids), true
}

// cjkStops are the Chinese punctuation marks after which a text may be cut
// for RoFormer's jieba: each is a word of its own there and has no case.
var cjkStops = map[rune]bool{'，': true, '。': true, '、': true, '！': true, '？': true, '；': true, '：': true}

// cutAt returns the first byte offset c ≥ from (or len(text)) at which
// tokenizing text[:c] and text[c:] apart gives the tokens of the whole:
//   - the rune before c ends a word and the one at c starts one: it is
//     ASCII whitespace (BasicTokenizer splits there; jieba makes each
//     whitespace character a word), or a Chinese character for Bert's rules
//     with TokenizeChineseChars (a word of its own), or one of cjkStops for
//     RoFormer; and the rune at c is not whitespace (so the stripping of
//     whitespace next to special tokens is the same);
//   - no special token can match across or at c: no rune within
//     specialSpan bytes before c, nor the one at c, is (or lower-cases to)
//     the first rune of one.
func (t *Tokenizer) cutAt(text string, from int) int {
	lastFirst := -1 << 62 // offset of the last rune that may start a special token
	prev := rune(-1)
	for i := max(0, from-t.specialSpan); i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if i >= from && i-lastFirst > t.specialSpan && !isPySpace(r) && !isBertWhitespace(r) && t.cutAfter(prev) && !t.mayStartSpecial(r) {
			return i
		}
		if t.mayStartSpecial(r) {
			lastFirst = i
		}
		prev = r
		i += size
	}
	return len(text)
}

// cutAfter reports whether a word ends after r whatever follows (cutAt).
func (t *Tokenizer) cutAfter(r rune) bool {
	switch {
	case r == ' ' || r == '\t' || r == '\n' || r == '\r':
		return true
	case t.cfg.Kind == Bert:
		return t.cfg.TokenizeChineseChars && isChineseChar(r)
	}
	return cjkStops[r]
}

// mayStartSpecial reports whether r, or r lower-cased, is the first rune of
// a special token.
func (t *Tokenizer) mayStartSpecial(r rune) bool {
	if t.specialFirst[r] {
		return true
	}
	if !t.cfg.DoLowerCase {
		return false
	}
	r1, r2 := pyLower(r)
	return t.specialFirst[r1] || r2 >= 0 && t.specialFirst[r2]
}

// tokenizeChunk runs PreTrainedTokenizer.tokenize on text, which starts at
// byte base of the whole, appending to out: lower-case outside special
// tokens, split on the special tokens (leftmost, longest; stripping the
// whitespace next to them), and tokenize each remaining piece.
func (t *Tokenizer) tokenizeChunk(text string, base int, sc *scratch, out *seq) {
	sc.r, sc.s, sc.e = sc.r[:0], sc.s[:0], sc.e[:0]
	if t.cfg.DoLowerCase {
		// Special tokens written in the original text are kept as they are.
		sc.src, sc.srcOff = sc.src[:0], sc.srcOff[:0]
		for i, r := range text {
			sc.src = append(sc.src, r)
			sc.srcOff = append(sc.srcOff, int32(i))
		}
		sc.srcOff = append(sc.srcOff, int32(len(text)))
		sc.at = t.match.longest(sc.at, sc.src)
		for i := 0; i < len(sc.src); {
			if k := sc.at[i]; k > 0 {
				for j := i + int(t.match.runes[k-1]); i < j; i++ {
					sc.push(sc.src[i], base+int(sc.srcOff[i]), base+int(sc.srcOff[i+1]))
				}
				continue
			}
			s, e := base+int(sc.srcOff[i]), base+int(sc.srcOff[i+1])
			r1, r2 := pyLower(sc.src[i])
			sc.push(r1, s, e)
			if r2 >= 0 {
				sc.push(r2, s, e)
			}
			i++
		}
	} else {
		for i := 0; i < len(text); {
			r, size := utf8.DecodeRuneInString(text[i:])
			sc.push(r, base+i, base+i+size)
			i += size
		}
	}
	// Split on special tokens (leftmost, longest) in the lower-cased text.
	sc.at = t.match.longest(sc.at, sc.r)
	n := len(sc.r)
	pieceStart, afterSpecial := 0, false
	for j := 0; j <= n; {
		k := 0
		if j < n {
			if sc.at[j] == 0 {
				j++
				continue
			}
			k = int(t.match.runes[sc.at[j]-1])
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

// truncate keeps the first n tokens.
func (o *seq) truncate(n int) { o.ids, o.toks, o.offs = o.ids[:n], o.toks[:n], o.offs[:n] }

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
