package tokenizer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"
)

// Vocab is a WordPiece vocabulary: token ↔ id, where the id of a token is
// its line number (from 0) in vocab.txt. A Vocab is immutable and safe for
// concurrent use.
type Vocab struct {
	tokens []string       // id → token
	ids    map[string]int // token → id; a repeated token keeps its last id (HF's load_vocab)
	// maxRunes is the length in runes of the longest token: WordPiece never
	// tries a longer substring.
	maxRunes int
}

// ErrBadVocab is wrapped by the errors about malformed vocabularies.
var ErrBadVocab = errors.New("tokenizer: invalid vocabulary")

// Limits on the vocabularies the readers accept, far above every released
// model's (the largest vocabularies have about 2.6·10⁵ tokens in a few MB),
// so that a file built to exhaust memory is refused: ReadVocab and
// tokenizer.json's vocabulary hold at most MaxVocabTokens tokens, and
// vocab.txt is at most MaxVocabBytes long. Reading one takes about twice
// the file's size plus 16 bytes a line and a map entry per distinct token.
const (
	MaxVocabTokens = 1 << 22  // 4,194,304 tokens
	MaxVocabBytes  = 64 << 20 // 64 MiB of vocab.txt
)

// maxVocabTokens is MaxVocabTokens; the tests lower it.
var maxVocabTokens = MaxVocabTokens

// NewVocab returns the vocabulary whose id i is tokens[i]. Tokens must not
// contain line breaks (vocab.txt could not hold them); the empty token is
// allowed, as in HF.
func NewVocab(tokens []string) (*Vocab, error) {
	return newVocab(append([]string(nil), tokens...))
}

// newVocab is NewVocab taking ownership of tokens.
func newVocab(tokens []string) (*Vocab, error) {
	// A repeated token (the many empty lines of a file of line breaks) is
	// one map entry; the map grows only with the distinct tokens.
	v := &Vocab{tokens: tokens, ids: make(map[string]int, min(len(tokens), 1<<16))}
	for i, t := range tokens {
		if strings.ContainsAny(t, "\n\r") {
			return nil, fmt.Errorf("%w: token %d (%q) contains a line break", ErrBadVocab, i, t)
		}
		if !utf8.ValidString(t) {
			return nil, fmt.Errorf("%w: token %d is not valid UTF-8", ErrBadVocab, i)
		}
		v.ids[t] = i
		v.maxRunes = max(v.maxRunes, utf8.RuneCountInString(t))
	}
	return v, nil
}

// ReadVocab reads vocab.txt: one token per line, id = line number from 0.
// Lines end in "\n", "\r\n" or "\r" (Python's universal newlines, which HF's
// load_vocab reads with); a final line break does not start another token.
// A text longer than MaxVocabBytes or of more than MaxVocabTokens lines is
// refused, with the numbers, before the tokens are made.
func ReadVocab(r io.Reader) (*Vocab, error) {
	// Read in chunks and join them once, into the string the tokens are
	// substrings of: about twice the text is allocated, where a growing
	// buffer would take four times.
	var chunks [][]byte
	total := 0
	for size := 4 << 10; ; size = min(2*size, 1<<20) {
		b := make([]byte, size)
		k, err := io.ReadFull(r, b)
		chunks = append(chunks, b[:k])
		total += k
		if total > MaxVocabBytes {
			return nil, fmt.Errorf("%w: more than %d bytes (MaxVocabBytes); the largest real vocab.txt files are a few MB", ErrBadVocab, MaxVocabBytes)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: reading vocabulary: %w", err)
		}
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, b := range chunks {
		sb.Write(b)
	}
	return parseVocab(sb.String())
}

// parseVocab is ReadVocab on the text of vocab.txt.
func parseVocab(text string) (*Vocab, error) {
	// Count the lines first, so that the token slice is made once, and only
	// for a vocabulary within the limit.
	n := 0
	for i := 0; i < len(text); i++ {
		if c := text[i]; c == '\n' || c == '\r' {
			n++
			if c == '\r' && i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
		}
	}
	if len(text) > 0 && text[len(text)-1] != '\n' && text[len(text)-1] != '\r' {
		n++ // a last line without a line break
	}
	if n > maxVocabTokens {
		return nil, fmt.Errorf("%w: %d lines, more than the %d tokens a vocabulary may have (MaxVocabTokens); %d bytes", ErrBadVocab, n, maxVocabTokens, len(text))
	}
	tokens := make([]string, 0, n)
	for start, i := 0, 0; i <= len(text); i++ {
		if i < len(text) && text[i] != '\n' && text[i] != '\r' {
			continue
		}
		if i == len(text) && start == i {
			break // the text ended with a line break (or is empty)
		}
		line := text[start:i]
		if !utf8.ValidString(line) {
			return nil, fmt.Errorf("%w: line %d is not valid UTF-8", ErrBadVocab, len(tokens)+1)
		}
		tokens = append(tokens, line)
		if i+1 < len(text) && text[i] == '\r' && text[i+1] == '\n' {
			i++
		}
		start = i + 1
	}
	return newVocab(tokens)
}

// LoadVocab reads a vocab.txt file, as ReadVocab does.
func LoadVocab(path string) (*Vocab, error) {
	data, ok, err := readLimited(path, MaxVocabBytes)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("tokenizer: open %s: %w", path, fs.ErrNotExist)
	}
	v, err := parseVocab(string(data)) // one copy; the tokens are substrings of it
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// WriteTo writes the vocabulary in vocab.txt form: each token followed by
// "\n", in id order (HF's save_vocabulary).
func (v *Vocab) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	for _, t := range v.tokens {
		k, _ := bw.WriteString(t)
		bw.WriteByte('\n')
		n += int64(k) + 1
	}
	return n, bw.Flush()
}

// Save writes the vocabulary to path as vocab.txt.
func (v *Vocab) Save(path string) error {
	var buf bytes.Buffer
	v.WriteTo(&buf)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	return nil
}

// Size returns the number of ids (lines of vocab.txt).
func (v *Vocab) Size() int { return len(v.tokens) }

// ID returns the id of token and whether it is in the vocabulary.
func (v *Vocab) ID(token string) (int, bool) {
	id, ok := v.ids[token]
	return id, ok
}

// idBytes is ID for a byte slice, without allocating.
func (v *Vocab) idBytes(token []byte) (int, bool) {
	id, ok := v.ids[string(token)]
	return id, ok
}

// Token returns the token of id and whether id is in range.
func (v *Vocab) Token(id int) (string, bool) {
	if id < 0 || id >= len(v.tokens) {
		return "", false
	}
	return v.tokens[id], true
}

// Tokens returns a copy of the tokens in id order.
func (v *Vocab) Tokens() []string { return append([]string(nil), v.tokens...) }
