package retrieval_test

import (
	"fmt"

	"github.com/roformer-go/roformer/retrieval"
)

func Example() {
	queries := []retrieval.Doc{{ID: "q1", Text: "a cat on a mat"}, {ID: "q2", Text: "dogs barking"}}
	corpus := []retrieval.Doc{
		{ID: "d1", Text: "The cat sat on the mat."},
		{ID: "d2", Text: "A dog barked at the cat."},
		{ID: "d3", Text: "Dogs barking all night."},
	}
	qrels := retrieval.Qrels{"q1": {"d1": 1}, "q2": {"d3": 1, "d2": 1}}
	bm25 := retrieval.BM25Search(queries, corpus, 100, retrieval.BM25Options{})
	s, err := retrieval.Evaluate([]string{"q1", "q2"}, bm25, qrels, retrieval.DefaultCutoffs)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(bm25["q2"])
	fmt.Printf("%d queries: mrr@10 %.4f ndcg@10 %.4f recall@1 %.4f map@100 %.4f\n",
		s.Queries, s.Metrics["mrr@10"], s.Metrics["ndcg@10"], s.Metrics["recall@1"], s.Metrics["map@100"])
	// Output:
	// [{d3 1.0837892298472114}]
	// 2 queries: mrr@10 1.0000 ndcg@10 0.8066 recall@1 0.7500 map@100 0.7500
}

func ExampleFuse() {
	lexical := []retrieval.Hit{{ID: "d1", Score: 7.1}, {ID: "d2", Score: 3.0}, {ID: "d3", Score: 1.2}}
	dense := []retrieval.Hit{{ID: "d3", Score: 0.91}, {ID: "d1", Score: 0.85}}
	fused, _ := retrieval.Fuse(60, 100, lexical, dense)
	for _, h := range fused {
		fmt.Printf("%s %.5f\n", h.ID, h.Score)
	}
	// Output:
	// d1 0.03252
	// d3 0.03227
	// d2 0.01613
}

func ExampleConvexFuse() {
	// BM25's first hit stands far ahead of its others; the dense ranker
	// has d3 just above d1. Rank fusion would tie d1 and d3 (each once
	// first, once second); the scores put d1 first.
	lexical := []retrieval.Hit{{ID: "d1", Score: 7.1}, {ID: "d2", Score: 3.0}, {ID: "d3", Score: 1.2}}
	dense := []retrieval.Hit{{ID: "d3", Score: 0.91}, {ID: "d1", Score: 0.89}, {ID: "d4", Score: 0.30}}
	fused, _ := retrieval.ConvexFuse(100, []float64{0.5, 0.5}, lexical, dense)
	for _, h := range fused {
		fmt.Printf("%s %.3f\n", h.ID, h.Score)
	}
	// Output:
	// d1 0.984
	// d3 0.500
	// d2 0.153
	// d4 0.000
}

func ExampleZScoreFuse() {
	// The rankings of ExampleConvexFuse: standardised, BM25's runaway
	// first hit counts by how many deviations it stands above the rest.
	lexical := []retrieval.Hit{{ID: "d1", Score: 7.1}, {ID: "d2", Score: 3.0}, {ID: "d3", Score: 1.2}}
	dense := []retrieval.Hit{{ID: "d3", Score: 0.91}, {ID: "d1", Score: 0.89}, {ID: "d4", Score: 0.30}}
	fused, _ := retrieval.ZScoreFuse(100, []float64{0.5, 0.5}, lexical, dense)
	for _, h := range fused {
		fmt.Printf("%s %.3f\n", h.ID, h.Score)
	}
	// Output:
	// d1 2.237
	// d3 1.078
	// d2 0.365
	// d4 0.000
}

func ExampleLuceneLength() {
	for _, n := range []int{10, 23, 24, 40, 41, 100} {
		fmt.Print(retrieval.LuceneLength(n), " ")
	}
	fmt.Println()
	// Output: 10 23 24 40 40 96
}

func ExampleTuneFusion() {
	// BM25 finds the relevant document first on both queries; the dense
	// ranker puts a wrong one first and misses r2. Plain fusion (0.5) would
	// rank y above r2; any dense weight above about 0.016 does, so of the
	// grid only 0 keeps both right: the fused ranking is BM25's.
	ids := []string{"q1", "q2"}
	qrels := retrieval.Qrels{"q1": {"r1": 1}, "q2": {"r2": 1}}
	bm25 := map[string][]retrieval.Hit{"q1": {{ID: "r1", Score: 3}, {ID: "x", Score: 2}}, "q2": {{ID: "r2", Score: 3}, {ID: "y", Score: 2}}}
	dense := map[string][]retrieval.Hit{"q1": {{ID: "x", Score: .9}, {ID: "r1", Score: .8}}, "q2": {{ID: "y", Score: .9}, {ID: "z", Score: .8}}}
	t, err := retrieval.TuneFusion(ids, bm25, dense, qrels, retrieval.DefaultCutoffs, retrieval.RRF(60, 100), "mrr@10", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("dense weight %.2f: %s %.4f\n", t.Weight, t.Metric, t.Score)
	// Output: dense weight 0.00: mrr@10 1.0000
}
