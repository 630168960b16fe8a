package retrieval

import (
	"math"
	"math/bits"
	"strings"
	"unicode"
)

// BM25Options configure a BM25 index. The zero value of a field means its
// default.
type BM25Options struct {
	// K1 and B are BM25's term-frequency saturation and length
	// normalisation (defaults 0.9 and 0.4, Pyserini's).
	K1, B float64
	// ExactLengths uses each document's exact length in the length
	// normalisation. Without it the length is first rounded as Lucene 8+
	// stores it in its one-byte norm (see LuceneLength), as Pyserini's
	// indexes do.
	ExactLengths bool
	// Tokenize splits a text into terms (default Tokens).
	Tokenize func(string) []string
}

// BM25 is an inverted index of a corpus scored with BM25 as Lucene 8+
// scores it (BM25Similarity), which Pyserini uses. For a query with terms
// t, each of count qtf(t) in the query,
//
//	score(d) = Σ_t qtf(t) · idf(t) · tf / (tf + K1·(1 − B + B·dl/avgdl))
//	idf(t)   = ln(1 + (N − df + 0.5) / (df + 0.5))
//
// with tf the count of t in d, df the number of documents holding t, N the
// number of documents with at least one term, dl the length of d in terms
// (rounded as LuceneLength unless ExactLengths) and avgdl the exact total
// of terms over N. Lucene 8 dropped the factor (K1 + 1) of the classic
// formula, which changes no ranking; it is dropped here too. Lucene sums in
// float32, this in float64, so scores agree to float32 rounding and near
// ties may order differently.
//
// Pyserini's English analyzer also stems (Porter) and drops stop words;
// the default Tokens does neither, so scores equal Pyserini's only with
// the same terms.
type BM25 struct {
	o       BM25Options
	post    map[string][]posting
	norm    []float64 // K1·(1 − B + B·dl/avgdl) per document
	n       int       // documents with at least one term
	ndocs   int
	scratch []float64
}

type posting struct {
	doc, tf int
}

// NewBM25 indexes docs, in order: a hit's Index is its position in docs.
func NewBM25(docs []string, o BM25Options) *BM25 {
	if o.K1 == 0 {
		o.K1 = 0.9
	}
	if o.B == 0 {
		o.B = 0.4
	}
	if o.Tokenize == nil {
		o.Tokenize = Tokens
	}
	x := &BM25{o: o, post: map[string][]posting{}, norm: make([]float64, len(docs)), ndocs: len(docs)}
	lengths := make([]int, len(docs))
	total := 0
	for i, d := range docs {
		terms := o.Tokenize(d)
		tf := map[string]int{}
		for _, t := range terms {
			if tf[t] == 0 {
				x.post[t] = append(x.post[t], posting{doc: i})
			}
			tf[t]++
		}
		for t, c := range tf {
			p := x.post[t]
			p[len(p)-1].tf = c
		}
		lengths[i] = len(terms)
		total += len(terms)
		if len(terms) > 0 {
			x.n++
		}
	}
	avgdl := 1.0
	if x.n > 0 {
		avgdl = float64(total) / float64(x.n)
	}
	for i, l := range lengths {
		dl := float64(l)
		if !o.ExactLengths {
			dl = float64(LuceneLength(l))
		}
		x.norm[i] = o.K1 * (1 - o.B + o.B*dl/avgdl)
	}
	return x
}

// IDF returns the inverse document frequency of term t (0 when no document
// holds it).
func (x *BM25) IDF(t string) float64 {
	df := len(x.post[t])
	if df == 0 {
		return 0
	}
	return math.Log(1 + (float64(x.n)-float64(df)+0.5)/(float64(df)+0.5))
}

// Search returns the k documents (k ≥ 1) of highest score for query, best
// first, equal scores in corpus order; documents that share no term with
// the query are not returned. Search reuses one buffer of the index: it is
// not safe for concurrent use.
func (x *BM25) Search(query string, k int) []Scored {
	qtf := map[string]int{}
	var order []string
	for _, t := range x.o.Tokenize(query) {
		if qtf[t] == 0 {
			order = append(order, t)
		}
		qtf[t]++
	}
	if x.scratch == nil {
		x.scratch = make([]float64, x.ndocs)
	}
	acc := x.scratch
	var touched []int
	for _, t := range order {
		w := float64(qtf[t]) * x.IDF(t)
		for _, p := range x.post[t] {
			if acc[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			tf := float64(p.tf)
			acc[p.doc] += w * tf / (tf + x.norm[p.doc])
		}
	}
	top := topK{k: k}
	for _, d := range touched {
		top.offer(Scored{Index: d, Score: acc[d]})
		acc[d] = 0
	}
	return top.sorted()
}

// Tokens splits s into lower-case terms: runs of letters, marks and digits,
// with each Han, Hiragana or Katakana character a term of its own (a
// character-level split for Chinese and Japanese, which are written without
// spaces).
func Tokens(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		cjk := unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
		word := !cjk && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
		if !word && start >= 0 {
			out = append(out, strings.ToLower(s[start:i]))
			start = -1
		}
		switch {
		case cjk:
			out = append(out, string(r))
		case word && start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, strings.ToLower(s[start:]))
	}
	return out
}

// LuceneLength returns the document length n as Lucene 8+ reads it back
// from its one-byte norm (SmallFloat.intToByte4, then byte4ToInt): exact
// below 24, above that rounded down to 4 significant bits of n − 24 (so
// 24..31 stay, 40 reads 40, 41 reads 40, 100 reads 96).
func LuceneLength(n int) int {
	const free = 24 // 255 − the 4-bit code of 2³¹−1
	if n < free {
		return n
	}
	v := uint64(n - free)
	nb := bits.Len64(v)
	if nb < 4 {
		return n
	}
	shift := nb - 4
	return free + int(v>>shift<<shift)
}

// BM25Search indexes corpus (each Doc's Content) and returns each query's
// k best documents (k ≥ 1), keyed by query id.
func BM25Search(queries, corpus []Doc, k int, o BM25Options) map[string][]Hit {
	x := NewBM25(texts(corpus), o)
	res := make([][]Scored, len(queries))
	for i, q := range queries {
		res[i] = x.Search(q.Content(), k)
	}
	return hits(queries, corpus, res)
}
