package retrieval

import (
	"fmt"
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
	if k < 0 || depth < 1 {
		return nil, fmt.Errorf("retrieval: fusion k %g must not be negative and depth %d must be at least 1", k, depth)
	}
	pos := map[string]int{}
	var out []Hit
	for _, l := range lists {
		for r, h := range l[:min(depth, len(l))] {
			i, ok := pos[h.ID]
			if !ok {
				i = len(out)
				pos[h.ID] = i
				out = append(out, Hit{ID: h.ID})
			}
			out[i].Score += 1 / (k + float64(r+1))
		}
	}
	slices.SortStableFunc(out, byScore)
	return out, nil
}
