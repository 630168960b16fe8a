package retrieval

import (
	"context"
	"fmt"
)

// Dense finds, for each query vector, the k corpus vectors of highest dot
// product (the cosine similarity when the vectors have unit length), by
// brute force over a corpus given in blocks, so that only one block of
// corpus vectors and k hits per query are held at a time. The dot
// products are summed in float64 in the order of the components; equal
// scores rank the earlier corpus vector first.
type Dense struct {
	queries [][]float32
	heaps   []topK
	n       int // corpus vectors seen
}

// NewDense returns a search for the k best corpus vectors of each query.
// All vectors must have the length of the first query; k must be at
// least 1.
func NewDense(queries [][]float32, k int) (*Dense, error) {
	if k < 1 {
		return nil, fmt.Errorf("retrieval: dense top-k %d: want at least 1", k)
	}
	for i, q := range queries {
		if len(q) != len(queries[0]) {
			return nil, fmt.Errorf("retrieval: query vector %d has %d components, query 0 has %d", i, len(q), len(queries[0]))
		}
	}
	d := &Dense{queries: queries, heaps: make([]topK, len(queries))}
	for i := range d.heaps {
		d.heaps[i].k = k
	}
	return d, nil
}

// Add scores the next block of corpus vectors; their positions continue
// from the previous blocks'.
func (d *Dense) Add(block [][]float32) error {
	for j, v := range block {
		if len(d.queries) > 0 && len(v) != len(d.queries[0]) {
			return fmt.Errorf("retrieval: corpus vector %d has %d components, the queries %d", d.n+j, len(v), len(d.queries[0]))
		}
	}
	for i, q := range d.queries {
		for j, v := range block {
			s := 0.0
			for t, x := range q {
				s += float64(x) * float64(v[t])
			}
			d.heaps[i].offer(Scored{Index: d.n + j, Score: s})
		}
	}
	d.n += len(block)
	return nil
}

// Results returns each query's best corpus vectors, best first.
func (d *Dense) Results() [][]Scored {
	out := make([][]Scored, len(d.heaps))
	for i := range d.heaps {
		out[i] = d.heaps[i].sorted()
	}
	return out
}

// Embedder returns one vector per text, in order.
type Embedder func(ctx context.Context, texts []string) ([][]float32, error)

// DenseSearch embeds the queries and then the corpus, block documents at a
// time (block ≥ 1), and returns each query's k best documents by dot
// product, keyed by query id (see Dense). The embedder should return unit
// vectors for the scores to be cosines.
func DenseSearch(ctx context.Context, embed Embedder, queries, corpus []Doc, k, block int) (map[string][]Hit, error) {
	if block < 1 {
		return nil, fmt.Errorf("retrieval: dense block %d: want at least 1", block)
	}
	qv, err := embed(ctx, texts(queries))
	if err != nil {
		return nil, err
	}
	if len(qv) != len(queries) {
		return nil, fmt.Errorf("retrieval: the embedder returned %d vectors for %d queries", len(qv), len(queries))
	}
	d, err := NewDense(qv, k)
	if err != nil {
		return nil, err
	}
	for from := 0; from < len(corpus); from += block {
		to := min(from+block, len(corpus))
		cv, err := embed(ctx, texts(corpus[from:to]))
		if err != nil {
			return nil, err
		}
		if len(cv) != to-from {
			return nil, fmt.Errorf("retrieval: the embedder returned %d vectors for %d documents", len(cv), to-from)
		}
		if err := d.Add(cv); err != nil {
			return nil, err
		}
	}
	return hits(queries, corpus, d.Results()), nil
}

func texts(docs []Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Content()
	}
	return out
}

// hits names the corpus positions of each query's results by id.
func hits(queries, corpus []Doc, res [][]Scored) map[string][]Hit {
	out := make(map[string][]Hit, len(queries))
	for i, q := range queries {
		hs := make([]Hit, len(res[i]))
		for j, s := range res[i] {
			hs[j] = Hit{ID: corpus[s.Index].ID, Score: s.Score}
		}
		out[q.ID] = hs
	}
	return out
}
