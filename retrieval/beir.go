package retrieval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Doc is a query or a corpus document.
type Doc struct {
	ID    string `json:"_id"`
	Title string `json:"title,omitempty"`
	Text  string `json:"text"`
}

// Content is the text that is embedded and indexed: the title, a space and
// the text when there is a title (as BEIR's dense models read a document),
// else the text.
func (d Doc) Content() string {
	if d.Title == "" {
		return d.Text
	}
	return d.Title + " " + d.Text
}

// MaxLineBytes bounds a line of ReadDocs and ReadQrels.
const MaxLineBytes = 16 << 20

// ReadDocs reads BEIR's JSONL documents, one {"_id", "text"} object per line
// (an optional "title"; other fields are ignored; blank lines are skipped).
// name labels errors, which give the line. An id must be a non-empty string
// seen once.
func ReadDocs(r io.Reader, name string) ([]Doc, error) {
	var docs []Doc
	seen := map[string]int{}
	err := eachLine(r, name, func(n int, line []byte) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		var d Doc
		if err := json.Unmarshal(line, &d); err != nil {
			return fmt.Errorf("%s:%d: %v (want a {\"_id\", \"text\"} object)", name, n, err)
		}
		if d.ID == "" {
			return fmt.Errorf("%s:%d: no \"_id\" (or an empty one)", name, n)
		}
		if first, ok := seen[d.ID]; ok {
			return fmt.Errorf("%s:%d: id %q was already given on line %d", name, n, d.ID, first)
		}
		seen[d.ID] = n
		docs = append(docs, d)
		return nil
	})
	return docs, err
}

// ReadQrels reads a BEIR qrels TSV: a header line, then "query-id
// corpus-id score" per line, separated by tabs, the score an integer.
// name labels errors, which give the line. A pair given twice is an error.
func ReadQrels(r io.Reader, name string) (Qrels, error) {
	qr := Qrels{}
	err := eachLine(r, name, func(n int, line []byte) error {
		s := strings.TrimRight(string(line), "\r")
		if n == 1 || strings.TrimSpace(s) == "" {
			return nil
		}
		f := strings.Split(s, "\t")
		if len(f) != 3 {
			return fmt.Errorf("%s:%d: %d tab-separated fields, want 3 (query-id, corpus-id, score)", name, n, len(f))
		}
		score, err := strconv.Atoi(strings.TrimSpace(f[2]))
		if err != nil {
			return fmt.Errorf("%s:%d: score %q is not an integer", name, n, f[2])
		}
		q, d := f[0], f[1]
		if q == "" || d == "" {
			return fmt.Errorf("%s:%d: an empty query or corpus id", name, n)
		}
		if qr[q] == nil {
			qr[q] = map[string]int{}
		}
		if _, ok := qr[q][d]; ok {
			return fmt.Errorf("%s:%d: query %q and document %q were already judged", name, n, q, d)
		}
		qr[q][d] = score
		return nil
	})
	return qr, err
}

// eachLine calls f with each line of r (1-based number, without its "\n"),
// refusing a line longer than MaxLineBytes.
func eachLine(r io.Reader, name string, f func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		if err := f(n, sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s:%d: a line longer than %d bytes", name, n+1, MaxLineBytes)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
