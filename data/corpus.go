package data

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Document is one unit of text: lines of one file, or one chapter or speech
// of the built-in corpus. Packing never lets a sequence span two documents.
type Document struct {
	Name string // the file path or a label, used in error messages
	Text string // UTF-8 text; lines are separated by "\n" (a trailing "\r" is dropped)
}

// ErrEmptyCorpus is wrapped when a corpus holds no text.
var ErrEmptyCorpus = errors.New("data: empty corpus")

// binaryInvalidRatio is the share of invalid UTF-8 bytes above which a file
// is called binary rather than mis-encoded.
const binaryInvalidRatio = 0.01

// ReadCorpus reads a corpus from path: a single text file, or a folder whose
// .txt files (searched recursively, in lexical path order) are read one
// Document each. Every file must be UTF-8 (a leading byte-order mark is
// dropped); a file with a NUL byte or more than 1% invalid UTF-8 bytes is
// reported as binary, one with a few invalid bytes by the offset of the
// first. A corpus without any non-blank text is an error wrapping
// ErrEmptyCorpus.
func ReadCorpus(path string) ([]Document, error) {
	files, err := CorpusFiles(path)
	if err != nil {
		return nil, err
	}
	var docs []Document
	blank := true
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("data: corpus: %w", err)
		}
		text, err := CheckText(f, b)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(text) != "" {
			blank = false
		}
		docs = append(docs, Document{Name: f, Text: text})
	}
	if blank {
		if len(files) == 1 {
			return nil, fmt.Errorf("%w: %s has no text", ErrEmptyCorpus, path)
		}
		return nil, fmt.Errorf("%w: the %d .txt files in %s have no text", ErrEmptyCorpus, len(files), path)
	}
	return docs, nil
}

// CorpusFiles returns the files of the corpus at path, as ReadCorpus reads
// them: the file itself, or a folder's .txt files, searched recursively, in
// lexical path order. A folder without any is an error wrapping
// ErrEmptyCorpus.
func CorpusFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("data: corpus: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".txt") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("data: corpus folder %s: %w", path, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no .txt files in folder %s", ErrEmptyCorpus, path)
	}
	sort.Strings(files)
	return files, nil
}

// CheckText validates b as the UTF-8 text of the file name and returns it
// without a leading byte-order mark. See ReadCorpus for the rules.
func CheckText(name string, b []byte) (string, error) {
	b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return "", fmt.Errorf("data: %s looks binary (NUL byte at offset %d); the corpus must be UTF-8 text", name, i)
	}
	if utf8.Valid(b) {
		return string(b), nil
	}
	first, bad := -1, 0
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			if first < 0 {
				first = i
			}
			bad++
		}
		i += n
	}
	if float64(bad) > binaryInvalidRatio*float64(len(b)) {
		return "", fmt.Errorf("data: %s looks binary (%d of %d bytes are not UTF-8); the corpus must be UTF-8 text",
			name, bad, len(b))
	}
	return "", fmt.Errorf("data: %s is not valid UTF-8 at byte offset %d (%d bad bytes); re-encode it as UTF-8",
		name, first, bad)
}
