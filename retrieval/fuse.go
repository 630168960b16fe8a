package retrieval

import (
	"fmt"
	"math"
	"slices"
)

// Fuse merges rankings by reciprocal-rank fusion (Cormack, Clarke and
// Büttcher 2009): a document's score is
//
//	Σ_lists 1 / (k + rank)
//
// over the lists whose first depth hits (each list taken best first as
// given) hold it, rank counted from 1. The result holds every document of
// those hits, best first; equal scores keep the order of first appearance
// (list by list, rank by rank). k is usually 60; k ≥ 0 and depth ≥ 1.
func Fuse(k float64, depth int, lists ...[]Hit) ([]Hit, error) {
	return WeightedFuse(k, depth, nil, lists...)
}

// WeightedFuse is Fuse with a weight per list: a document's score is
//
//	Σ_lists weights[l] / (k + rank)
//
// weights has one finite, non-negative entry per list, or is nil for
// weights of 1 (Fuse). A list of weight 0 still adds its documents, at the
// end, in its order: the result holds the same documents whatever the
// weights.
func WeightedFuse(k float64, depth int, weights []float64, lists ...[]Hit) ([]Hit, error) {
	if k < 0 || depth < 1 {
		return nil, fmt.Errorf("retrieval: fusion k %g must not be negative and depth %d must be at least 1", k, depth)
	}
	return sumLists(depth, weights, lists, func([]Hit) (func(r int) float64, error) {
		return func(r int) float64 { return 1 / (k + float64(r+1)) }, nil
	})
}

// sumLists gives each document of the lists' first depth hits the sum over
// the lists of weights[l]·part(l)(its rank there, from 0), best first;
// equal scores keep the order of first appearance (list by list, rank by
// rank).
func sumLists(depth int, weights []float64, lists [][]Hit, part func(l []Hit) (func(r int) float64, error)) ([]Hit, error) {
	if err := checkWeights(weights, len(lists)); err != nil {
		return nil, err
	}
	pos := map[string]int{}
	var out []Hit
	for li, l := range lists {
		w := 1.0
		if weights != nil {
			w = weights[li]
		}
		l = l[:min(depth, len(l))]
		f, err := part(l)
		if err != nil {
			return nil, err
		}
		for r, h := range l {
			i, ok := pos[h.ID]
			if !ok {
				i = len(out)
				pos[h.ID] = i
				out = append(out, Hit{ID: h.ID})
			}
			out[i].Score += w * f(r)
		}
	}
	slices.SortStableFunc(out, byScore)
	return out, nil
}

// ConvexFuse merges rankings by a convex combination of their scores, each
// list's scores min-max normalised over its first depth hits: a document's
// score is
//
//	Σ_lists weights[l] · (s − min_l) / (max_l − min_l)
//
// where s is its score in list l (a list that does not hold it adds 0),
// and a list whose hits all score alike gives each of them 1. Unlike
// reciprocal-rank fusion, how far ahead a hit is counts, not only its
// place: a lexical match that stands out from the rest of its list can
// rise above a dense ranking's near-ties (Bruch, Gai and Ingber 2023 find
// it ahead of rank fusion once the weight is tuned; Weaviate's
// relativeScoreFusion and Elasticsearch's linear retriever with the
// minmax normaliser are the same). weights are as WeightedFuse's (nil for
// 1 each) and the result holds every document of the lists' first depth
// hits, best first; equal scores keep the order of first appearance. Each
// list must be sorted best first with finite scores.
func ConvexFuse(depth int, weights []float64, lists ...[]Hit) ([]Hit, error) {
	if depth < 1 {
		return nil, fmt.Errorf("retrieval: fusion depth %d must be at least 1", depth)
	}
	return sumLists(depth, weights, lists, func(l []Hit) (func(r int) float64, error) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, h := range l {
			if math.IsNaN(h.Score) || math.IsInf(h.Score, 0) {
				return nil, fmt.Errorf("retrieval: document %q has score %g: convex fusion needs finite scores", h.ID, h.Score)
			}
			lo, hi = min(lo, h.Score), max(hi, h.Score)
		}
		return func(r int) float64 {
			if hi > lo {
				return (l[r].Score - lo) / (hi - lo)
			}
			return 1
		}, nil
	})
}

// ZScoreFuse merges rankings by a weighted sum of their scores, each list's
// scores standardised over its first depth hits and shifted so that its
// last hit scores 0: a document's score is
//
//	Σ_lists weights[l] · (s − min_l) / σ_l
//
// where σ_l is the standard deviation of list l's scores over those hits
// (a list that does not hold a document adds 0, as its last hit does; a
// list whose hits all score alike gives each of them 1). It is ConvexFuse
// with σ in place of the range max − min: a list whose best hit stands out
// from the rest by many deviations weighs more than one whose scores are
// spread evenly, where min-max normalisation gives every list's best hit
// the same 1 (the z-score normalisation of Montague and Aslam 2001; Qdrant's
// distribution-based score fusion standardises likewise). weights, the
// result and the scores' requirements are as ConvexFuse's.
func ZScoreFuse(depth int, weights []float64, lists ...[]Hit) ([]Hit, error) {
	if depth < 1 {
		return nil, fmt.Errorf("retrieval: fusion depth %d must be at least 1", depth)
	}
	return sumLists(depth, weights, lists, func(l []Hit) (func(r int) float64, error) {
		lo, mean := math.Inf(1), 0.0
		for _, h := range l {
			if math.IsNaN(h.Score) || math.IsInf(h.Score, 0) {
				return nil, fmt.Errorf("retrieval: document %q has score %g: z-score fusion needs finite scores", h.ID, h.Score)
			}
			lo = min(lo, h.Score)
			mean += h.Score
		}
		mean /= float64(len(l))
		var ss float64
		for _, h := range l {
			ss += (h.Score - mean) * (h.Score - mean)
		}
		sd := math.Sqrt(ss / float64(len(l)))
		return func(r int) float64 {
			if sd > 0 {
				return (l[r].Score - lo) / sd
			}
			return 1
		}, nil
	})
}

// checkWeights checks fusion weights for n lists: nil, or n finite
// non-negative values.
func checkWeights(weights []float64, n int) error {
	if weights != nil && len(weights) != n {
		return fmt.Errorf("retrieval: %d fusion weights for %d rankings", len(weights), n)
	}
	for _, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("retrieval: fusion weight %g must be finite and not negative", w)
		}
	}
	return nil
}

// A Fuser merges one query's rankings with a weight per ranking (nil for 1
// each): RRF, Convex and ZScore make the three of this package.
type Fuser func(weights []float64, lists ...[]Hit) ([]Hit, error)

// RRF is WeightedFuse with k and depth as a Fuser.
func RRF(k float64, depth int) Fuser {
	return func(weights []float64, lists ...[]Hit) ([]Hit, error) {
		return WeightedFuse(k, depth, weights, lists...)
	}
}

// Convex is ConvexFuse with depth as a Fuser.
func Convex(depth int) Fuser {
	return func(weights []float64, lists ...[]Hit) ([]Hit, error) {
		return ConvexFuse(depth, weights, lists...)
	}
}

// ZScore is ZScoreFuse with depth as a Fuser.
func ZScore(depth int) Fuser {
	return func(weights []float64, lists ...[]Hit) ([]Hit, error) {
		return ZScoreFuse(depth, weights, lists...)
	}
}

// FusionGrid is the weights TuneFusion tries by default: 0, 0.05, …, 1.
var FusionGrid = func() []float64 {
	g := make([]float64, 21)
	for i := range g {
		g[i] = float64(i) / 20
	}
	return g
}()

// Tuned is the weight TuneFusion chose and what it scored.
type Tuned struct {
	// Weight is the second ranking's weight w; the first has 1 − w.
	Weight float64 `json:"dense_weight"`
	// Metric is the metric maximised and Score its value at Weight.
	Metric string  `json:"metric"`
	Score  float64 `json:"score"`
}

// TuneFusion chooses the weight w of fuse({1 − w, w}, a[q], b[q]) (such
// as RRF(60, 100) or Convex(100)) that maximises metric (a name of Scores.Metrics, such as
// "mrr@10") over queryIDs, trying each weight of grid (each in [0, 1];
// FusionGrid when nil). Of equal scores it keeps the weight nearest 0.5
// (the unweighted fusion), then the smaller. Tune on a split other
// than the one the fused ranking is reported on: the chosen weight is
// fitted to these queries.
func TuneFusion(queryIDs []string, a, b map[string][]Hit, qrels Qrels, c Cutoffs, fuse Fuser, metric string, grid []float64) (Tuned, error) {
	if fuse == nil {
		return Tuned{}, fmt.Errorf("retrieval: no fusion to tune")
	}
	if grid == nil {
		grid = FusionGrid
	}
	if len(grid) == 0 {
		return Tuned{}, fmt.Errorf("retrieval: no fusion weights to try")
	}
	best := Tuned{Metric: metric, Score: math.Inf(-1)}
	for _, w := range grid {
		if !(w >= 0 && w <= 1) {
			return Tuned{}, fmt.Errorf("retrieval: fusion weight %g is not in [0, 1]", w)
		}
		fused := make(map[string][]Hit, len(queryIDs))
		for _, q := range queryIDs {
			h, err := fuse([]float64{1 - w, w}, a[q], b[q])
			if err != nil {
				return Tuned{}, err
			}
			fused[q] = h
		}
		s, err := Evaluate(queryIDs, fused, qrels, c)
		if err != nil {
			return Tuned{}, err
		}
		v, ok := s.Metrics[metric]
		if !ok {
			return Tuned{}, fmt.Errorf("retrieval: no metric %q at these cutoffs (have %v)", metric, s.Names)
		}
		d, bd := math.Abs(w-0.5), math.Abs(best.Weight-0.5)
		if v > best.Score || v == best.Score && (d < bd || d == bd && w < best.Weight) {
			best.Weight, best.Score = w, v
		}
	}
	return best, nil
}
