package retrieval

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Hit is a retrieved document and its score.
type Hit struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// Qrels holds the relevance judgements: Qrels[query][document] is the
// judged score; a document is relevant when its score is above 0.
type Qrels map[string]map[string]int

// Relevant returns the relevant documents of query q (score > 0).
func (qr Qrels) Relevant(q string) map[string]bool {
	rel := map[string]bool{}
	for d, s := range qr[q] {
		if s > 0 {
			rel[d] = true
		}
	}
	return rel
}

// Cutoffs are the ranks k each metric is computed at.
type Cutoffs struct {
	MRR, NDCG, Accuracy, PrecisionRecall, MAP []int
}

// DefaultCutoffs are the evaluator's defaults with 100 added to precision
// and recall: MRR@10, nDCG@10, Accuracy@{1,3,5,10},
// Precision/Recall@{1,3,5,10,100}, MAP@100.
var DefaultCutoffs = Cutoffs{
	MRR:             []int{10},
	NDCG:            []int{10},
	Accuracy:        []int{1, 3, 5, 10},
	PrecisionRecall: []int{1, 3, 5, 10, 100},
	MAP:             []int{100},
}

// Max returns the largest cutoff: how many hits a ranking needs.
func (c Cutoffs) Max() int {
	m := 0
	for _, ks := range [][]int{c.MRR, c.NDCG, c.Accuracy, c.PrecisionRecall, c.MAP} {
		for _, k := range ks {
			m = max(m, k)
		}
	}
	return m
}

// Scores are the mean metrics over the evaluated queries.
type Scores struct {
	// Queries is the number of queries evaluated: those with at least one
	// relevant document.
	Queries int `json:"queries"`
	// Metrics maps a metric's name, "mrr@10", "ndcg@10", "accuracy@1",
	// "precision@10", "recall@100", "map@100", to its mean.
	Metrics map[string]float64 `json:"metrics"`
	// Names lists the metrics in the order of Cutoffs' fields and their
	// ks, precision and recall alternating by k.
	Names []string `json:"-"`
}

// Evaluate scores rankings, rankings[q] the hits of query q, against qrels
// at the cutoffs c (each at least 1). It evaluates the queries of
// queryIDs that have a relevant document, in that order; a query with no
// ranking scores 0 everywhere. Each ranking is sorted by score, highest
// first, stably (equal scores keep their order), before it is scored.
func Evaluate(queryIDs []string, rankings map[string][]Hit, qrels Qrels, c Cutoffs) (*Scores, error) {
	s := &Scores{Metrics: map[string]float64{}}
	add := func(name string) {
		if _, ok := s.Metrics[name]; !ok {
			s.Names = append(s.Names, name)
			s.Metrics[name] = 0
		}
	}
	for _, f := range []struct {
		name string
		ks   []int
	}{{"accuracy", c.Accuracy}, {"precision", c.PrecisionRecall}, {"mrr", c.MRR}, {"ndcg", c.NDCG}, {"map", c.MAP}} {
		for _, k := range f.ks {
			if k < 1 {
				return nil, fmt.Errorf("retrieval: %s cutoff %d: want at least 1", f.name, k)
			}
			add(f.name + "@" + strconv.Itoa(k))
			if f.name == "precision" {
				add("recall@" + strconv.Itoa(k))
			}
		}
	}
	seen := map[string]bool{}
	for _, q := range queryIDs {
		rel := qrels.Relevant(q)
		if len(rel) == 0 || seen[q] {
			continue
		}
		seen[q] = true
		s.Queries++
		hits := slices.Clone(rankings[q])
		slices.SortStableFunc(hits, byScore)
		// isRel[i] says whether the hit at rank i+1 is relevant.
		isRel := make([]bool, len(hits))
		for i, h := range hits {
			isRel[i] = rel[h.ID]
		}
		for _, k := range c.Accuracy {
			if firstRelevant(isRel, k) > 0 {
				s.Metrics["accuracy@"+strconv.Itoa(k)]++
			}
		}
		for _, k := range c.PrecisionRecall {
			n := float64(countRelevant(isRel, k))
			s.Metrics["precision@"+strconv.Itoa(k)] += n / float64(k)
			s.Metrics["recall@"+strconv.Itoa(k)] += n / float64(len(rel))
		}
		for _, k := range c.MRR {
			if r := firstRelevant(isRel, k); r > 0 {
				s.Metrics["mrr@"+strconv.Itoa(k)] += 1 / float64(r)
			}
		}
		for _, k := range c.NDCG {
			dcg, idcg := 0.0, 0.0
			for i := 0; i < min(k, len(isRel)); i++ {
				if isRel[i] {
					dcg += 1 / math.Log2(float64(i+2))
				}
			}
			for i := 0; i < min(k, len(rel)); i++ {
				idcg += 1 / math.Log2(float64(i+2))
			}
			s.Metrics["ndcg@"+strconv.Itoa(k)] += dcg / idcg
		}
		for _, k := range c.MAP {
			n, sum := 0, 0.0
			for i := 0; i < min(k, len(isRel)); i++ {
				if isRel[i] {
					n++
					sum += float64(n) / float64(i+1)
				}
			}
			s.Metrics["map@"+strconv.Itoa(k)] += sum / float64(min(k, len(rel)))
		}
	}
	if s.Queries > 0 {
		for name := range s.Metrics {
			s.Metrics[name] /= float64(s.Queries)
		}
	}
	return s, nil
}

// firstRelevant is the 1-based rank of the first relevant hit among the
// top k, or 0.
func firstRelevant(isRel []bool, k int) int {
	for i := 0; i < min(k, len(isRel)); i++ {
		if isRel[i] {
			return i + 1
		}
	}
	return 0
}

func countRelevant(isRel []bool, k int) int {
	n := 0
	for i := 0; i < min(k, len(isRel)); i++ {
		if isRel[i] {
			n++
		}
	}
	return n
}

// byScore orders hits by score, highest first; a stable sort keeps the
// order they came in among equal scores (Python's sorted, as
// sentence-transformers sorts).
func byScore(a, b Hit) int {
	switch {
	case a.Score > b.Score:
		return -1
	case a.Score < b.Score:
		return 1
	}
	return 0
}
