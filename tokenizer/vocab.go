package tokenizer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
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

// NewVocab returns the vocabulary whose id i is tokens[i]. Tokens must not
// contain line breaks (vocab.txt could not hold them); the empty token is
// allowed, as in HF.
func NewVocab(tokens []string) (*Vocab, error) {
	v := &Vocab{tokens: make([]string, len(tokens)), ids: make(map[string]int, len(tokens))}
	for i, t := range tokens {
		if strings.ContainsAny(t, "\n\r") {
			return nil, fmt.Errorf("%w: token %d (%q) contains a line break", ErrBadVocab, i, t)
		}
		if !utf8.ValidString(t) {
			return nil, fmt.Errorf("%w: token %d is not valid UTF-8", ErrBadVocab, i)
		}
		v.tokens[i] = t
		v.ids[t] = i
		v.maxRunes = max(v.maxRunes, utf8.RuneCountInString(t))
	}
	return v, nil
}

// ReadVocab reads vocab.txt: one token per line, id = line number from 0.
// Lines end in "\n", "\r\n" or "\r" (Python's universal newlines, which HF's
// load_vocab reads with); a final line break does not start another token.
func ReadVocab(r io.Reader) (*Vocab, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var tokens []string
	var line []byte
	for {
		b, err := br.ReadSlice('\n')
		line = append(line, b...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if len(line) > 0 {
			// Universal newlines: a lone \r also ends a line.
			for _, part := range splitCR(line) {
				if !utf8.Valid(part) {
					return nil, fmt.Errorf("%w: line %d is not valid UTF-8", ErrBadVocab, len(tokens)+1)
				}
				tokens = append(tokens, string(part))
			}
			line = line[:0]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: reading vocabulary after line %d: %w", len(tokens), err)
		}
	}
	return NewVocab(tokens)
}

// splitCR splits one "\n"-terminated line at universal line breaks and drops
// the terminators: "a\r\n" → ["a"], "a\rb\n" → ["a", "b"], "a\r" → ["a"].
func splitCR(line []byte) [][]byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if bytes.IndexByte(line, '\r') < 0 {
		return [][]byte{line}
	}
	return bytes.Split(line, []byte{'\r'})
}

// LoadVocab reads a vocab.txt file.
func LoadVocab(path string) (*Vocab, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	v, err := ReadVocab(f)
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
