package retrieval

import (
	"container/heap"
	"slices"
)

// Scored is a corpus position and its score.
type Scored struct {
	Index int
	Score float64
}

// better reports whether a ranks above b: a higher score, or the same
// score and an earlier position.
func better(a, b Scored) bool {
	return a.Score > b.Score || a.Score == b.Score && a.Index < b.Index
}

// topK keeps the k best of the Scored values offered to it: a heap with
// the worst kept value at its root, so memory is O(k) however many are
// offered.
type topK struct {
	k int
	h []Scored
}

func (t *topK) Len() int           { return len(t.h) }
func (t *topK) Less(i, j int) bool { return better(t.h[j], t.h[i]) }
func (t *topK) Swap(i, j int)      { t.h[i], t.h[j] = t.h[j], t.h[i] }
func (t *topK) Push(x any)         { t.h = append(t.h, x.(Scored)) }
func (t *topK) Pop() any {
	x := t.h[len(t.h)-1]
	t.h = t.h[:len(t.h)-1]
	return x
}

// offer keeps s if it is among the k best so far.
func (t *topK) offer(s Scored) {
	switch {
	case t.k <= 0:
	case len(t.h) < t.k:
		heap.Push(t, s)
	case better(s, t.h[0]):
		t.h[0] = s
		heap.Fix(t, 0)
	}
}

// sorted returns the kept values, best first.
func (t *topK) sorted() []Scored {
	out := slices.Clone(t.h)
	slices.SortFunc(out, func(a, b Scored) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	return out
}
