package bpe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/internal/boundedfile"
)

// FileName is the file Save writes into a folder.
const FileName = "bpe.json"

// file is bpe.json: the alphabet and the merges (each "left right"), from
// which the vocabulary is rebuilt.
type file struct {
	Format    string    `json:"format"` // "roformer-bpe"
	Version   int       `json:"version"`
	VocabSize int       `json:"vocab_size"`
	EndOfWord string    `json:"end_of_word"`
	Specials  []string  `json:"specials"`
	Alphabet  []string  `json:"alphabet"`
	Merges    mergeList `json:"merges"`
}

// Limits on bpe.json, far above a real one (the largest BPE vocabularies
// have about 2.8·10⁵ merges in a few MB): the file is at most MaxFileBytes
// and holds at most MaxMerges merges, counted while they are decoded.
const (
	MaxFileBytes = 64 << 20
	MaxMerges    = 1 << 21
)

// maxMerges is MaxMerges; the tests lower it.
var maxMerges = MaxMerges

// mergeList is bpe.json's merges, decoded one at a time so that more than
// MaxMerges are refused before they are all held.
type mergeList []string

func (ml *mergeList) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("merges is not an array of strings")
	}
	var out mergeList
	for dec.More() {
		var s string
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("merges[%d] is not a string", len(out))
		}
		if len(out) == maxMerges {
			return fmt.Errorf("more than %d merges (MaxMerges)", maxMerges)
		}
		out = append(out, s)
	}
	*ml = out
	return nil
}

const formatName = "roformer-bpe"

// Save writes the model to dir/bpe.json (dir is created if missing), as a
// temporary file renamed into place.
func (m *Model) Save(dir string) error {
	f := file{Format: formatName, Version: 1, VocabSize: m.VocabSize(), EndOfWord: EndOfWord, Specials: specials[:],
		Alphabet: m.keys[firstSym : firstSym+m.alphabet]}
	for _, p := range m.Merges() {
		f.Merges = append(f.Merges, p[0]+" "+p[1])
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("bpe: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bpe: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, FileName), b.Bytes()); err != nil {
		return fmt.Errorf("bpe: %w", err)
	}
	return nil
}

// Load reads dir/bpe.json and checks it; a file over MaxFileBytes, or of
// more than MaxMerges merges, is refused with the numbers.
func Load(dir string) (*Model, error) {
	path := filepath.Join(dir, FileName)
	data, err := boundedfile.Read(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	m, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", path, err)
	}
	return m, nil
}

// parse rebuilds a model from bpe.json's bytes.
func parse(data []byte) (*Model, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if f.Format != formatName || f.Version != 1 {
		return nil, fmt.Errorf("format %q version %d, want %q version 1", f.Format, f.Version, formatName)
	}
	if f.EndOfWord != EndOfWord || strings.Join(f.Specials, " ") != strings.Join(specials[:], " ") {
		return nil, fmt.Errorf("end_of_word %q and specials %q, want %q and %q", f.EndOfWord, f.Specials, EndOfWord, specials)
	}
	for i, k := range f.Alphabet {
		t, _ := strings.CutSuffix(k, EndOfWord)
		if !utf8.ValidString(t) || utf8.RuneCountInString(t) != 1 || strings.TrimSpace(t) != t {
			return nil, fmt.Errorf("alphabet[%d] %q is not one non-space character (optionally with %s)", i, k, EndOfWord)
		}
		if i > 0 && f.Alphabet[i-1] >= k {
			return nil, fmt.Errorf("alphabet[%d] %q does not sort after %q", i, k, f.Alphabet[i-1])
		}
	}
	m := newModel(f.Alphabet)
	for i, s := range f.Merges {
		l, r, ok := strings.Cut(s, " ")
		a, okA := m.ids[l]
		b, okB := m.ids[r]
		switch {
		case !ok || strings.Contains(r, " "):
			return nil, fmt.Errorf("merges[%d] %q is not two symbols separated by one space", i, s)
		case !okA || !okB:
			return nil, fmt.Errorf("merges[%d] %q: a symbol is neither in the alphabet nor made by an earlier merge", i, s)
		case strings.HasSuffix(l, EndOfWord):
			return nil, fmt.Errorf("merges[%d] %q: the left symbol ends a word", i, s)
		}
		if _, dup := m.rank[pairKey(a, b)]; dup {
			return nil, fmt.Errorf("merges[%d] %q repeats an earlier merge", i, s)
		}
		m.addMerge(a, b)
	}
	if f.VocabSize != m.VocabSize() {
		return nil, fmt.Errorf("vocab_size %d, but the alphabet and merges make %d tokens", f.VocabSize, m.VocabSize())
	}
	return m, nil
}
