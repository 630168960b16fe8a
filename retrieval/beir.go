package retrieval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/internal/lines"
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

// DefaultMaxLineBytes bounds a line of ReadDocs and ReadQrels when they
// are given no limit: 1 MiB, the default of every line reader of the
// toolkit (data/labelled's DefaultMaxLineBytes too).
const DefaultMaxLineBytes = lines.DefaultMaxBytes

// ReadDocs reads BEIR's JSONL documents, one {"_id", "text"} object per line
// (an optional "title"; other fields are ignored; blank lines are skipped).
// name labels errors, which give the line. An id must be a non-empty string
// seen once. A line is at most maxLineBytes (DefaultMaxLineBytes when ≤ 0):
// a longer one is refused as soon as the limit is passed, without reading
// the rest of it; a line that is not valid UTF-8 is refused.
func ReadDocs(r io.Reader, name string, maxLineBytes int) ([]Doc, error) {
	var docs []Doc
	seen := map[string]int{}
	err := lines.Each(r, name, maxLineBytes, func(n int, line []byte) error {
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
// Lines are bounded and checked as ReadDocs's are.
func ReadQrels(r io.Reader, name string, maxLineBytes int) (Qrels, error) {
	qr := Qrels{}
	err := lines.Each(r, name, maxLineBytes, func(n int, line []byte) error {
		s := string(line)
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

// Check refuses qrels that judge nothing the queries and corpus can score:
// no relevant judgement (score > 0) pairs a query of queries with a
// document of corpus. Evaluate would then score no query, and every metric
// would read 0. The error names up to five of the query ids and document
// ids of qrels that are not there. Judgements of ids that are absent beside
// others that match are allowed (BEIR's splits have them), as the
// evaluator allows them.
func (qr Qrels) Check(queries, corpus []Doc) error {
	isQuery := make(map[string]bool, len(queries))
	for _, q := range queries {
		isQuery[q.ID] = true
	}
	inCorpus := make(map[string]bool, len(corpus))
	for _, d := range corpus {
		inCorpus[d.ID] = true
	}
	var noQuery, noDoc []string
	seenDoc := map[string]bool{}
	for q, docs := range qr {
		if !isQuery[q] {
			noQuery = append(noQuery, q)
		}
		for d, s := range docs {
			if isQuery[q] && inCorpus[d] && s > 0 {
				return nil
			}
			if !inCorpus[d] && !seenDoc[d] {
				seenDoc[d] = true
				noDoc = append(noDoc, d)
			}
		}
	}
	var why []string
	if len(noQuery) > 0 {
		why = append(why, fmt.Sprintf("%d of its %d query ids are not queries (%s)", len(noQuery), len(qr), someIDs(noQuery)))
	}
	if len(noDoc) > 0 {
		why = append(why, fmt.Sprintf("%d document ids are not in the corpus (%s)", len(noDoc), someIDs(noDoc)))
	}
	if len(why) == 0 {
		why = append(why, "every judgement of a query and a document has score 0")
	}
	return fmt.Errorf("retrieval: no relevant judgement of the qrels pairs a query with a document of the corpus, so every metric would be 0: %s", strings.Join(why, "; "))
}

// someIDs quotes the first five of ids in sorted order, with "…" when
// there are more.
func someIDs(ids []string) string {
	slices.Sort(ids)
	q := make([]string, 0, 6)
	for _, id := range ids[:min(len(ids), 5)] {
		q = append(q, strconv.Quote(id))
	}
	if len(ids) > 5 {
		q = append(q, "…")
	}
	return strings.Join(q, ", ")
}
