package retrieval

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestEvaluateByHand(t *testing.T) {
	l2 := math.Log2
	for _, tc := range []struct {
		name string
		hits []Hit
		rel  []string
		c    Cutoffs
		want map[string]float64
	}{
		{
			name: "relevant at ranks 2 and 4",
			hits: []Hit{{"d2", .9}, {"d1", .8}, {"d4", .7}, {"d3", .6}},
			rel:  []string{"d1", "d3"},
			c:    DefaultCutoffs,
			want: map[string]float64{
				"mrr@10": 0.5, "accuracy@1": 0, "accuracy@3": 1, "accuracy@10": 1,
				"precision@1": 0, "precision@3": 1.0 / 3, "precision@10": 0.2, "precision@100": 0.02,
				"recall@1": 0, "recall@3": 0.5, "recall@10": 1, "recall@100": 1,
				"ndcg@10": (1/l2(3) + 1/l2(5)) / (1 + 1/l2(3)),
				"map@100": (1.0/2 + 2.0/4) / 2,
			},
		},
		{
			name: "no relevant document retrieved",
			hits: []Hit{{"d1", 2}, {"d2", 1}},
			rel:  []string{"d9"},
			c:    DefaultCutoffs,
			want: map[string]float64{"mrr@10": 0, "ndcg@10": 0, "recall@100": 0, "map@100": 0, "accuracy@10": 0, "precision@1": 0},
		},
		{
			name: "more relevant documents than k",
			hits: []Hit{{"a", 3}, {"x", 2}, {"b", 1}},
			rel:  []string{"a", "b", "c"},
			c:    Cutoffs{MRR: []int{2}, NDCG: []int{2}, PrecisionRecall: []int{2}, MAP: []int{2}},
			want: map[string]float64{
				"mrr@2": 1, "recall@2": 1.0 / 3, "precision@2": 0.5,
				"ndcg@2": 1 / (1 + 1/l2(3)), // IDCG over min(k, |R|) = 2 places
				"map@2":  1.0 / 2,           // AP divided by min(k, |R|) = 2
			},
		},
		{
			name: "ties keep the given order; the list is sorted by score first",
			hits: []Hit{{"x", .5}, {"a", .5}, {"b", .9}},
			rel:  []string{"a"},
			c:    Cutoffs{MRR: []int{10}, NDCG: []int{10}, MAP: []int{100}},
			want: map[string]float64{"mrr@10": 1.0 / 3, "ndcg@10": 1 / l2(4), "map@100": 1.0 / 3},
		},
	} {
		qr := Qrels{"q": {}}
		for _, d := range tc.rel {
			qr["q"][d] = 1
		}
		s, err := Evaluate([]string{"q"}, map[string][]Hit{"q": tc.hits}, qr, tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if s.Queries != 1 {
			t.Errorf("%s: %d queries, want 1", tc.name, s.Queries)
		}
		for name, w := range tc.want {
			got, ok := s.Metrics[name]
			if !ok || !near(got, w) {
				t.Errorf("%s: %s = %v (present %v), want %v", tc.name, name, got, ok, w)
			}
		}
	}
}

func TestEvaluateQueries(t *testing.T) {
	// q1 perfect, q2 judged but not ranked, q3 judged only with score 0
	// (not evaluated), q4 unjudged (not evaluated).
	qr := Qrels{"q1": {"a": 1}, "q2": {"b": 2, "c": 0}, "q3": {"a": 0}}
	rk := map[string][]Hit{"q1": {{"a", 1}}, "q3": {{"a", 1}}, "q4": {{"a", 1}}}
	s, err := Evaluate([]string{"q1", "q2", "q3", "q4", "q1"}, rk, qr, DefaultCutoffs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Queries != 2 || !near(s.Metrics["mrr@10"], 0.5) || !near(s.Metrics["recall@1"], 0.5) || !near(s.Metrics["precision@5"], 0.1) {
		t.Errorf("got %d queries, %v", s.Queries, s.Metrics)
	}
	want := []string{"accuracy@1", "accuracy@3", "accuracy@5", "accuracy@10", "precision@1", "recall@1", "precision@3", "recall@3",
		"precision@5", "recall@5", "precision@10", "recall@10", "precision@100", "recall@100", "mrr@10", "ndcg@10", "map@100"}
	if !reflect.DeepEqual(s.Names, want) {
		t.Errorf("names %q, want %q", s.Names, want)
	}
	if _, err := Evaluate(nil, nil, nil, Cutoffs{MRR: []int{0}}); err == nil {
		t.Error("a cutoff of 0 was accepted")
	}
}

func TestBM25ByHand(t *testing.T) {
	docs := []string{"The cat sat.", "the DOG", "cat, cat; dog bird"}
	x := NewBM25(docs, BM25Options{})
	// N = 3, avgdl = 9/3 = 3; df(cat) = df(dog) = 2: idf = ln(1 + 1.5/2.5).
	idf := math.Log(1.6)
	if !near(x.IDF("cat"), idf) || x.IDF("fish") != 0 {
		t.Errorf("idf(cat) %v, want %v; idf(fish) %v, want 0", x.IDF("cat"), idf, x.IDF("fish"))
	}
	norm := func(dl float64) float64 { return 0.9 * (1 - 0.4 + 0.4*dl/3) }
	for _, tc := range []struct {
		q    string
		want []Scored
	}{
		{"cat", []Scored{{2, idf * 2 / (2 + norm(4))}, {0, idf * 1 / (1 + norm(3))}}},
		{"dog dog", []Scored{{1, 2 * idf / (1 + norm(2))}, {2, 2 * idf / (1 + norm(4))}}},
		{"bird cat", []Scored{{2, math.Log(1+2.5/1.5)/(1+norm(4)) + idf*2/(2+norm(4))}, {0, idf / (1 + norm(3))}}},
		{"fish", nil},
	} {
		got := x.Search(tc.q, 10)
		if len(got) != len(tc.want) {
			t.Errorf("%q: %v, want %v", tc.q, got, tc.want)
			continue
		}
		for i := range got {
			if got[i].Index != tc.want[i].Index || !near(got[i].Score, tc.want[i].Score) {
				t.Errorf("%q: %v, want %v", tc.q, got, tc.want)
			}
		}
	}
	if got := x.Search("cat", 1); len(got) != 1 || got[0].Index != 2 {
		t.Errorf("top 1 of cat: %v", got)
	}
	// Equal scores: the earlier document first.
	y := NewBM25([]string{"b", "a c", "a c", "c a"}, BM25Options{})
	if got := y.Search("a", 2); len(got) != 2 || got[0].Index != 1 || got[1].Index != 2 {
		t.Errorf("ties: %v, want documents 1 then 2", got)
	}
}

func TestBM25LuceneLengths(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 23: 23, 24: 24, 31: 31, 39: 39, 40: 40, 41: 40, 42: 42, 43: 42, 100: 96, 1000: 984} {
		if got := LuceneLength(n); got != want {
			t.Errorf("LuceneLength(%d) = %d, want %d", n, got, want)
		}
	}
	// A 41-term document is read as 40 terms long; avgdl stays exact (42/2).
	long := "a" + strings.Repeat(" z", 40)
	docs := []string{long, "a"}
	idf := math.Log(1 + 0.5/2.5)
	for _, exact := range []bool{false, true} {
		dl := 40.0
		if exact {
			dl = 41
		}
		got := NewBM25(docs, BM25Options{ExactLengths: exact}).Search("a", 2)
		want := idf / (1 + 0.9*(0.6+0.4*dl/21))
		if len(got) != 2 || got[1].Index != 0 || !near(got[1].Score, want) {
			t.Errorf("exact %v: %v, want document 0 second with %v", exact, got, want)
		}
	}
}

func TestTokens(t *testing.T) {
	got := Tokens("Hello, World! 床前明月光 naïve x2 don't")
	want := []string{"hello", "world", "床", "前", "明", "月", "光", "naïve", "x2", "don", "t"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFuseByHand(t *testing.T) {
	a := []Hit{{"d1", 9}, {"d2", 8}, {"d3", 7}}
	b := []Hit{{"d3", .9}, {"d4", .8}}
	got, err := Fuse(60, 100, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Hit{{"d3", 1.0/63 + 1.0/61}, {"d1", 1.0 / 61}, {"d2", 1.0 / 62}, {"d4", 1.0 / 62}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !near(got[i].Score, want[i].Score) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	got, _ = Fuse(60, 1, a, b)
	if len(got) != 2 || got[0].ID != "d1" || got[1].ID != "d3" || !near(got[1].Score, 1.0/61) {
		t.Errorf("depth 1: got %v, want d1 then d3 at 1/61", got)
	}
	if _, err := Fuse(60, 0, a); err == nil {
		t.Error("depth 0 was accepted")
	}
}

func TestDense(t *testing.T) {
	q := [][]float32{{1, 0}, {0, 1}}
	corpus := [][]float32{{0, 1}, {1, 0}, {1, 0}, {0.6, 0.8}}
	want := [][]Scored{{{1, 1}, {2, 1}, {3, 0.6000000238418579}}, {{0, 1}, {3, 0.800000011920929}, {1, 0}}}
	for _, block := range []int{1, 2, 4} {
		d, err := NewDense(q, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(corpus); i += block {
			if err := d.Add(corpus[i:min(i+block, len(corpus))]); err != nil {
				t.Fatal(err)
			}
		}
		if got := d.Results(); !reflect.DeepEqual(got, want) {
			t.Errorf("block %d: %v, want %v", block, got, want)
		}
	}
	d, _ := NewDense(q, 1)
	if err := d.Add([][]float32{{1, 2, 3}}); err == nil {
		t.Error("a corpus vector of the wrong length was accepted")
	}
	if _, err := NewDense(q, 0); err == nil {
		t.Error("k = 0 was accepted")
	}
}

func TestDenseSearch(t *testing.T) {
	// A toy embedder: the vector of a text counts its a's and b's.
	calls := 0
	embed := func(_ context.Context, texts []string) ([][]float32, error) {
		calls++
		out := make([][]float32, len(texts))
		for i, s := range texts {
			out[i] = []float32{float32(strings.Count(s, "a")), float32(strings.Count(s, "b"))}
		}
		return out, nil
	}
	queries := []Doc{{ID: "q1", Text: "a"}, {ID: "q2", Text: "b"}}
	corpus := []Doc{{ID: "c1", Text: "aa"}, {ID: "c2", Text: "b", Title: "b"}, {ID: "c3", Text: "ab"}}
	got, err := DenseSearch(context.Background(), embed, queries, corpus, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]Hit{"q1": {{"c1", 2}, {"c3", 1}}, "q2": {{"c2", 2}, {"c3", 1}}}
	if !reflect.DeepEqual(got, want) || calls != 3 {
		t.Errorf("got %v in %d calls, want %v in 3", got, calls, want)
	}
}

func TestReadBEIR(t *testing.T) {
	docs, err := ReadDocs(strings.NewReader(`{"_id":"d1","title":"T","text":"x","extra":1}`+"\n\n"+`{"_id":"d2","text":"y"}`), "c.jsonl", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Doc{{"d1", "T", "x"}, {"d2", "", "y"}}; !reflect.DeepEqual(docs, want) || docs[0].Content() != "T x" {
		t.Errorf("got %v, want %v", docs, want)
	}
	qr, err := ReadQrels(strings.NewReader("query-id\tcorpus-id\tscore\nq1\td1\t1\r\nq1\td2\t0\n"), "q.tsv", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Qrels{"q1": {"d1": 1, "d2": 0}}); !reflect.DeepEqual(qr, want) {
		t.Errorf("got %v, want %v", qr, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"_id":"a","text":"x"}` + "\n" + `{"_id":"a","text":"y"}`, `c.jsonl:2: id "a" was already given on line 1`},
		{`{"text":"x"}`, `c.jsonl:1: no "_id"`},
		{`[1]`, `c.jsonl:1: json`},
		{`{"_id":"a","text":"x"}` + "\n" + `{"_id":"b","text":"` + strings.Repeat("y", 100) + `"}`, `c.jsonl:2: the line has more than 64 bytes (the limit`},
		{`{"_id":"a","text":"x"}` + "\n" + "{\"_id\":\"b\",\"text\":\"\xff\"}", `c.jsonl:2: the line is not valid UTF-8`},
	} {
		if _, err := ReadDocs(strings.NewReader(tc.in), "c.jsonl", 64); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"h\nq1\td1\n", "q.tsv:2: 2 tab-separated fields"},
		{"h\nq1\td1\tx\n", `q.tsv:2: score "x"`},
		{"h\nq1\td1\t1\nq1\td1\t1\n", `q.tsv:3: query "q1" and document "d1" were already judged`},
		{"h\nq1\t" + strings.Repeat("d", 100) + "\t1\n", `q.tsv:2: the line has more than 64 bytes`},
		{"h\nq1\td\xe9\t1\n", `q.tsv:2: the line is not valid UTF-8`},
	} {
		if _, err := ReadQrels(strings.NewReader(tc.in), "q.tsv", 64); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.want)
		}
	}
}

// Qrels that pair no query with a document are refused, naming the ids
// that are not there; a partial match passes, as the evaluator takes it.
func TestQrelsCheck(t *testing.T) {
	queries := []Doc{{ID: "q1"}, {ID: "q2"}}
	corpus := []Doc{{ID: "d1"}, {ID: "d2"}}
	for _, tc := range []struct {
		name string
		qr   Qrels
		want string // "" for no error
	}{
		{"match", Qrels{"q1": {"d1": 1}}, ""},
		{"partial", Qrels{"q1": {"d1": 1, "d9": 1}, "x": {"d1": 1}}, ""},
		{"no query", Qrels{"x1": {"d1": 1}, "x2": {"d2": 1}}, `2 of its 2 query ids are not queries ("x1", "x2")`},
		{"no document", Qrels{"q1": {"e1": 1, "e2": 1}, "q2": {"e3": 2}}, `3 document ids are not in the corpus ("e1", "e2", "e3")`},
		{"many", Qrels{"a": {"d1": 1}, "b": {"d1": 1}, "c": {"d1": 1}, "d": {"d1": 1}, "e": {"d1": 1}, "f": {"d1": 1}}, `6 of its 6 query ids are not queries ("a", "b", "c", "d", "e", …)`},
		{"nothing relevant", Qrels{"q1": {"d1": 0}}, "every judgement of a query and a document has score 0"},
		{"empty", Qrels{}, "no relevant judgement"},
	} {
		err := tc.qr.Check(queries, corpus)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestWeightedFuseByHand(t *testing.T) {
	a := []Hit{{"d1", 9}, {"d2", 8}, {"d3", 7}}
	b := []Hit{{"d3", .9}, {"d4", .8}}
	got, err := WeightedFuse(60, 100, []float64{0.25, 0.75}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Hit{{"d3", 0.25/63 + 0.75/61}, {"d4", 0.75 / 62}, {"d1", 0.25 / 61}, {"d2", 0.25 / 62}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !near(got[i].Score, want[i].Score) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	// Weight 0 on the second list: the first list's order, then the
	// second list's new documents at score 0.
	got, _ = WeightedFuse(60, 100, []float64{1, 0}, a, b)
	if ids := hitIDs(got); !reflect.DeepEqual(ids, []string{"d1", "d2", "d3", "d4"}) || got[3].Score != 0 {
		t.Errorf("weights {1, 0}: got %v", got)
	}
	// nil weights are Fuse.
	f, _ := Fuse(60, 100, a, b)
	w, _ := WeightedFuse(60, 100, nil, a, b)
	if !reflect.DeepEqual(f, w) {
		t.Errorf("nil weights %v, Fuse %v", w, f)
	}
	for _, ws := range [][]float64{{1}, {1, -1}, {1, math.NaN()}, {1, math.Inf(1)}} {
		if _, err := WeightedFuse(60, 100, ws, a, b); err == nil {
			t.Errorf("weights %v were accepted", ws)
		}
	}
}

func hitIDs(h []Hit) []string {
	ids := make([]string, len(h))
	for i, x := range h {
		ids[i] = x.ID
	}
	return ids
}

func TestTuneFusion(t *testing.T) {
	// Ranking a is right on q1 and q2 (relevant document first); b puts a
	// wrong document first on both and misses r2, so on q2 its first hit
	// overtakes r2 at any weight above about 0.016: the best weights are
	// the small ones, and TuneFusion keeps the largest of them (nearest
	// 0.5), found here by trying the grid by hand.
	a := map[string][]Hit{"q1": {{"r1", 3}, {"x", 2}}, "q2": {{"r2", 3}, {"y", 2}}}
	b := map[string][]Hit{"q1": {{"x", .9}, {"r1", .8}}, "q2": {{"y", .9}, {"z", .8}}}
	qrels := Qrels{"q1": {"r1": 1}, "q2": {"r2": 1}}
	ids := []string{"q1", "q2"}
	got, err := TuneFusion(ids, a, b, qrels, DefaultCutoffs, RRF(60, 100), "mrr@10", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Score != 1 || got.Weight >= 0.5 {
		t.Errorf("got %+v, want MRR@10 1 at a weight below 0.5", got)
	}
	// Check the choice against the grid by hand: the largest weight of
	// FusionGrid below 0.5 that keeps both relevant documents first.
	want := -1.0
	for _, w := range FusionGrid {
		ok := true
		for _, q := range ids {
			h, _ := WeightedFuse(60, 100, []float64{1 - w, w}, a[q], b[q])
			ok = ok && qrels[q][h[0].ID] > 0
		}
		if ok && w > want {
			want = w
		}
	}
	if got.Weight != want {
		t.Errorf("weight %g, want %g", got.Weight, want)
	}
	// Where b is the better ranking the weight moves above 0.5.
	got, _ = TuneFusion(ids, b, a, qrels, DefaultCutoffs, RRF(60, 100), "mrr@10", nil)
	if got.Score != 1 || got.Weight <= 0.5 {
		t.Errorf("swapped: got %+v, want MRR@10 1 at a weight above 0.5", got)
	}
	// All weights equal: plain fusion's 0.5.
	got, _ = TuneFusion(ids, a, a, qrels, DefaultCutoffs, RRF(60, 100), "mrr@10", nil)
	if got.Weight != 0.5 {
		t.Errorf("equal rankings: weight %g, want 0.5", got.Weight)
	}
	if _, err := TuneFusion(ids, a, b, qrels, DefaultCutoffs, RRF(60, 100), "mrr@7", nil); err == nil {
		t.Error("an unknown metric was accepted")
	}
	if _, err := TuneFusion(ids, a, b, qrels, DefaultCutoffs, RRF(60, 100), "mrr@10", []float64{1.5}); err == nil {
		t.Error("a weight above 1 was accepted")
	}
}

func TestConvexFuseByHand(t *testing.T) {
	// a's scores 9, 8, 7 normalise to 1, 0.5, 0; b's 0.9, 0.8 to 1, 0.
	a := []Hit{{"d1", 9}, {"d2", 8}, {"d3", 7}}
	b := []Hit{{"d3", .9}, {"d4", .8}}
	got, err := ConvexFuse(100, []float64{0.25, 0.75}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Hit{{"d3", 0.75}, {"d1", 0.25}, {"d2", 0.125}, {"d4", 0}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !near(got[i].Score, want[i].Score) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	// Scores, not places: a list's runaway first hit keeps its lead over
	// the other list's near-ties, where rank fusion ties them.
	lex := []Hit{{"x", 20}, {"y", 2}, {"z", 1}}
	den := []Hit{{"y", .81}, {"x", .80}, {"z", .1}}
	if got, _ := ConvexFuse(100, nil, lex, den); got[0].ID != "x" {
		t.Errorf("convex: got %v, want x first", got)
	}
	if got, _ := Fuse(60, 100, lex, den); got[0].Score != got[1].Score {
		t.Errorf("rank fusion: got %v, want x and y tied", got)
	}
	// Depth 2 cuts a to d1, d2 (normalised 1, 0); all-equal scores count
	// 1: d1 1, d2 0 + 1, d5 1, tied in the order they first appeared.
	got, _ = ConvexFuse(2, []float64{1, 1}, a, []Hit{{"d2", .5}, {"d5", .5}})
	if ids := hitIDs(got); !reflect.DeepEqual(ids, []string{"d1", "d2", "d5"}) || !near(got[0].Score, 1) || !near(got[1].Score, 1) || !near(got[2].Score, 1) {
		t.Errorf("depth 2, equal scores: got %v, want d1, d2, d5 at 1 each", got)
	}
	// An empty list adds nothing; nil weights are 1 each.
	e, _ := ConvexFuse(100, nil, a, nil)
	if ids := hitIDs(e); !reflect.DeepEqual(ids, []string{"d1", "d2", "d3"}) {
		t.Errorf("with an empty list: got %v", e)
	}
	for _, ws := range [][]float64{{1}, {1, -1}, {1, math.NaN()}, {1, math.Inf(1)}} {
		if _, err := ConvexFuse(100, ws, a, b); err == nil {
			t.Errorf("weights %v were accepted", ws)
		}
	}
	if _, err := ConvexFuse(0, nil, a); err == nil {
		t.Error("depth 0 was accepted")
	}
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := ConvexFuse(100, nil, []Hit{{"d1", 1}, {"d2", s}}); err == nil {
			t.Errorf("score %g was accepted", s)
		}
	}
	// The Fusers are the functions they wrap.
	if f, _ := Convex(100)(nil, a, b); !reflect.DeepEqual(f, mustHits(ConvexFuse(100, nil, a, b))) {
		t.Errorf("Convex(100) gave %v", f)
	}
	if f, _ := RRF(60, 100)([]float64{.3, .7}, a, b); !reflect.DeepEqual(f, mustHits(WeightedFuse(60, 100, []float64{.3, .7}, a, b))) {
		t.Errorf("RRF(60, 100) gave %v", f)
	}
}

func TestZScoreFuseByHand(t *testing.T) {
	// a's scores 9, 8, 7: mean 8, σ √(2/3); shifted by the last, d1 2/σ,
	// d2 1/σ, d3 0. b's 0.9, 0.8: σ 0.05, d3 2, d4 0.
	a := []Hit{{"d1", 9}, {"d2", 8}, {"d3", 7}}
	b := []Hit{{"d3", .9}, {"d4", .8}}
	sa := math.Sqrt(2.0 / 3)
	got, err := ZScoreFuse(100, []float64{0.25, 0.75}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Hit{{"d3", 1.5}, {"d1", 0.5 / sa}, {"d2", 0.25 / sa}, {"d4", 0}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !near(got[i].Score, want[i].Score) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	// A runaway first hit counts by how far it stands out: the lexical
	// list's x is 4.1 deviations above its 15 tied followers, the dense
	// list's y, first of 16 evenly spaced scores, 3.3 above its last, x
	// (and y is the lexical list's last, x the dense list's), so x leads
	// by z-scores, where min-max normalisation gives both 1 and ties them.
	lex := []Hit{{"x", 20}}
	den := []Hit{{"y", .9}}
	for i := 1; i < 15; i++ {
		lex = append(lex, Hit{fmt.Sprint("t", i), 1})
		den = append(den, Hit{fmt.Sprint("t", i), .9 - .05*float64(i)})
	}
	lex, den = append(lex, Hit{"y", 1}), append(den, Hit{"x", .15})
	if got, _ := ZScoreFuse(100, nil, lex, den); got[0].ID != "x" || got[1].ID != "y" {
		t.Errorf("z-score: got %v, want x first, then y", got[:2])
	}
	if got, _ := ConvexFuse(100, nil, lex, den); !near(got[0].Score, got[1].Score) {
		t.Errorf("convex: got %v, want x and y tied", got[:2])
	}
	// Depth, equal scores, empty lists and bad input as ConvexFuse.
	got, _ = ZScoreFuse(2, nil, a, []Hit{{"d2", .5}, {"d5", .5}})
	if ids := hitIDs(got); !reflect.DeepEqual(ids, []string{"d1", "d2", "d5"}) || !near(got[0].Score, 2) || !near(got[1].Score, 1) || !near(got[2].Score, 1) {
		t.Errorf("depth 2, equal scores: got %v, want d1 2, d2 1, d5 1", got)
	}
	if e, _ := ZScoreFuse(100, nil, a, nil); !reflect.DeepEqual(hitIDs(e), []string{"d1", "d2", "d3"}) {
		t.Errorf("with an empty list: got %v", e)
	}
	if _, err := ZScoreFuse(0, nil, a); err == nil {
		t.Error("depth 0 was accepted")
	}
	if _, err := ZScoreFuse(100, []float64{1}, a, b); err == nil {
		t.Error("one weight for two lists was accepted")
	}
	for _, s := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := ZScoreFuse(100, nil, []Hit{{"d1", 1}, {"d2", s}}); err == nil {
			t.Errorf("score %g was accepted", s)
		}
	}
	if f, _ := ZScore(100)([]float64{.3, .7}, a, b); !reflect.DeepEqual(f, mustHits(ZScoreFuse(100, []float64{.3, .7}, a, b))) {
		t.Errorf("ZScore(100) gave %v", f)
	}
}

func mustHits(h []Hit, err error) []Hit {
	if err != nil {
		panic(err)
	}
	return h
}

// TuneFusion tunes any Fuser: with convex fusion, its choice is the grid's
// best weight found by hand, ties going to the weight nearest 0.5. Here q1
// keeps r1 first only for dense weights below about 0.57 and q2 puts r2
// first only above about 0.52: of the grid, 0.55 alone gets both.
func TestTuneFusionConvex(t *testing.T) {
	a := map[string][]Hit{"q1": {{"r1", 3}, {"x", 2.9}, {"w", 0}}, "q2": {{"y", 3}, {"r2", 2.8}, {"w", 0}}}
	b := map[string][]Hit{"q1": {{"x", .9}, {"r1", .88}, {"w", .1}}, "q2": {{"r2", .9}, {"y", .85}, {"w", .1}}}
	qrels := Qrels{"q1": {"r1": 1}, "q2": {"r2": 1}}
	ids := []string{"q1", "q2"}
	got, err := TuneFusion(ids, a, b, qrels, DefaultCutoffs, Convex(100), "mrr@10", nil)
	if err != nil {
		t.Fatal(err)
	}
	best, want := -1.0, -1.0
	for _, w := range FusionGrid {
		fused := map[string][]Hit{}
		for _, q := range ids {
			fused[q], _ = ConvexFuse(100, []float64{1 - w, w}, a[q], b[q])
		}
		s, _ := Evaluate(ids, fused, qrels, DefaultCutoffs)
		v := s.Metrics["mrr@10"]
		if v > best || v == best && math.Abs(w-0.5) < math.Abs(want-0.5) {
			best, want = v, w
		}
	}
	if got.Weight != want || got.Score != best {
		t.Errorf("got %+v, want weight %g at %g", got, want, best)
	}
	if best != 1 || want != 0.55 {
		t.Errorf("the case should need both rankings: best %g at %g, want 1 at 0.55", best, want)
	}
	if _, err := TuneFusion(ids, a, b, qrels, DefaultCutoffs, nil, "mrr@10", nil); err == nil {
		t.Error("a nil Fuser was accepted")
	}
}
