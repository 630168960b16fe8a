package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// repeatReader yields n copies of b without holding them.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n)
	for i := range p[:k] {
		p[i] = r.b
	}
	r.n -= k
	return int(k), nil
}

// sparseFile makes a file of size bytes without writing them.
func sparseFile(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// A vocab.txt of 20 MB of "\r" (20,971,520 empty lines under universal
// newlines) is refused with the count and the limit, allocating a small
// multiple of the file instead of 2 GB of tokens.
func TestReadVocabManyEmptyLines(t *testing.T) {
	const size = 20 << 20
	dir := t.TempDir()
	path := filepath.Join(dir, VocabFile)
	if err := os.WriteFile(path, bytes.Repeat([]byte{'\r'}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() error{
		"LoadVocab": func() error { _, err := LoadVocab(path); return err },
		"ReadVocab": func() error { _, err := ReadVocab(&repeatReader{'\r', size}); return err },
		"Load":      func() error { _, err := Load(dir); return err },
	} {
		var err error
		n := allocated(func() { err = read() })
		if !errors.Is(err, ErrBadVocab) || !strings.Contains(err.Error(), "20971520 lines, more than the 4194304 tokens") {
			t.Errorf("%s: error %v, want the line count and the limit", name, err)
		}
		if name != "ReadVocab" && !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v does not name %s", name, err, path)
		}
		if n > 2*size+2<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte file, want ≤ 2× + 2 MiB", name, n, size)
		}
	}
}

// At the limit, MaxVocabTokens empty lines are a vocabulary, held in 16
// bytes a token plus about twice the text.
func TestReadVocabAtLimit(t *testing.T) {
	const n = MaxVocabTokens
	var v *Vocab
	var err error
	alloc := allocated(func() { v, err = ReadVocab(&repeatReader{'\n', n}) })
	if err != nil || v.Size() != n {
		t.Fatalf("%d empty lines: %v", n, err)
	}
	if id, _ := v.ID(""); id != n-1 {
		t.Errorf("the empty token has id %d, want the last, %d", id, n-1)
	}
	if want := uint64(16*n + 4*n + 1<<20); alloc > want {
		t.Errorf("allocated %d bytes, want ≤ %d", alloc, want)
	}
}

// A file over MaxVocabBytes is refused: from its size, without reading it,
// when it is a file; after MaxVocabBytes+1 bytes from a reader. One long
// line within the limit is a token, within a small multiple of its size.
func TestReadVocabTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), VocabFile)
	sparseFile(t, path, 100<<20)
	var err error
	n := allocated(func() { _, err = LoadVocab(path) })
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "104857600 bytes, more than the 67108864") {
		t.Errorf("100 MB file: error %v, want the path, the size and the limit", err)
	}
	if n > 1<<20 {
		t.Errorf("100 MB file: allocated %d bytes, want ≤ 1 MiB", n)
	}
	n = allocated(func() { _, err = ReadVocab(&repeatReader{'a', 100 << 20}) })
	if !errors.Is(err, ErrBadVocab) || !strings.Contains(err.Error(), "more than 67108864 bytes") {
		t.Errorf("100 MB reader: error %v", err)
	}
	if n > 2*MaxVocabBytes {
		t.Errorf("100 MB reader: allocated %d bytes, want ≤ %d", n, 2*MaxVocabBytes)
	}
	const line = 48 << 20
	var v *Vocab
	n = allocated(func() { v, err = ReadVocab(&repeatReader{'a', line}) })
	if err != nil || v.Size() != 1 || v.maxRunes != line {
		t.Fatalf("a %d-byte line: %v", line, err)
	}
	if n > 3*line {
		t.Errorf("a %d-byte line: allocated %d bytes, want ≤ 3×", line, n)
	}
}

// tokenizer.json: a file over MaxTokenizerJSONBytes is refused from its
// size; a vocabulary over the token limit, or with ids that are not small
// integers, is refused naming the file and the numbers.
func TestTokenizerJSONLimits(t *testing.T) {
	dir := t.TempDir()
	tj := filepath.Join(dir, TokenizerJSONFile)
	sparseFile(t, tj, MaxTokenizerJSONBytes+1)
	var err error
	n := allocated(func() { _, err = load(dir) })
	if err == nil || !strings.Contains(err.Error(), tj) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes, more than the %d", MaxTokenizerJSONBytes+1, MaxTokenizerJSONBytes)) {
		t.Errorf("huge tokenizer.json: error %v", err)
	}
	if n > 1<<20 {
		t.Errorf("huge tokenizer.json: allocated %d bytes", n)
	}

	defer func(old int) { maxVocabTokens = old }(maxVocabTokens)
	maxVocabTokens = 100
	var b strings.Builder
	b.WriteString(`{"model": {"type": "WordPiece", "vocab": {`)
	for i := 0; i < 101; i++ {
		fmt.Fprintf(&b, "%s\"t%d\": 0", map[bool]string{true: "", false: ","}[i == 0], i)
	}
	b.WriteString(`}}}`)
	for text, want := range map[string]string{
		b.String(): "model.vocab has more than 100 tokens (MaxVocabTokens)",
		`{"model": {"type": "WordPiece", "vocab": {"a": 1e10}}}`:  `the id 1e10 of "a" is not an integer in [0, 100)`,
		`{"model": {"type": "WordPiece", "vocab": {"a": -1}}}`:    `the id -1 of "a" is not an integer`,
		`{"model": {"type": "WordPiece", "vocab": {"a": [1]}}}`:   `the id of "a" is not a number`,
		`{"model": {"type": "WordPiece", "vocab": [["a", 0.5]]}}`: "model.vocab is not an object",
		// added_tokens count against the same limit: their ids are in [0, MaxVocabTokens).
		`{"model": {"type": "WordPiece", "vocab": {"a": 0}}, "added_tokens": [{"id": 100, "content": "[X]"}]}`: `added_tokens: the id 100 of "[X]" is not in [0, 100)`,
	} {
		if err := os.WriteFile(tj, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := load(dir)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tj) {
			t.Errorf("%.60s: error %v, want %q and the path", text, err, want)
		}
	}
	// Within the limits the vocabulary still loads.
	good := `{"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "a": 5}}}`
	if err := os.WriteFile(tj, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := load(dir)
	if err != nil || tok.VocabSize() != 6 {
		t.Fatalf("a small tokenizer.json: %v", err)
	}
}

// The small JSON files are refused over MaxSmallJSONBytes, from their size.
func TestSmallJSONLimits(t *testing.T) {
	for _, name := range []string{ConfigFile, SpecialTokensFile, modelConfigFile} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, VocabFile), []byte(vocabText()), 0o644); err != nil {
			t.Fatal(err)
		}
		if name == SpecialTokensFile {
			os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"tokenizer_class": "BertTokenizer"}`), 0o644)
		}
		path := filepath.Join(dir, name)
		sparseFile(t, path, 100<<20)
		var err error
		n := allocated(func() { _, err = load(dir) })
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "104857600 bytes, more than the 16777216") {
			t.Errorf("%s: error %v, want the path, the size and the limit", name, err)
		}
		if n > 1<<20 {
			t.Errorf("%s: allocated %d bytes", name, n)
		}
	}
}

// FuzzReadVocab: any text either reads to one token per line or is
// refused, allocating no more than a small multiple of its size: 16 bytes
// a line for the tokens, twice the text, a map entry per distinct token.
func FuzzReadVocab(f *testing.F) {
	for _, s := range []string{"a\nb\n", "\r\r\r\r", "a\r\nb\rc", "\xff\n", "", "x\nx\nx\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v *Vocab
		var err error
		n := allocated(func() { v, err = ReadVocab(bytes.NewReader(data)) })
		if limit := uint64(96*len(data) + 1<<20); n > limit {
			t.Fatalf("ReadVocab of %d bytes allocated %d, want ≤ %d", len(data), n, limit)
		}
		if err != nil {
			return
		}
		want := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) - bytes.Count(data, []byte("\r\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' && data[len(data)-1] != '\r' {
			want++
		}
		if v.Size() != want {
			t.Fatalf("%q: %d tokens, want %d", data, v.Size(), want)
		}
	})
}
