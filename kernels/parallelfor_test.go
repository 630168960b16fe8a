package kernels

import (
	"sync"
	"testing"
)

// ParallelFor covers [0, n) once, in at most Threads() and n/minChunk
// ranges, all but the last at least minChunk long.
func TestParallelForExported(t *testing.T) {
	defer SetThreads(Threads())
	for _, th := range []int{1, 2, 4} {
		SetThreads(th)
		for _, tc := range []struct{ n, minChunk int }{{0, 1}, {7, 10}, {100, 1}, {100, 30}, {1001, 250}, {5, 0}} {
			var mu sync.Mutex
			var ranges [][2]int
			hits := make([]int, tc.n)
			ParallelFor(tc.n, tc.minChunk, func(lo, hi int) {
				mu.Lock()
				ranges = append(ranges, [2]int{lo, hi})
				mu.Unlock()
				for i := lo; i < hi; i++ {
					hits[i]++
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads %d %+v: index %d visited %d times", th, tc, i, h)
				}
			}
			most := min(th, max(tc.n/max(tc.minChunk, 1), 1))
			if len(ranges) > most {
				t.Errorf("threads %d %+v: %d ranges %v, want at most %d", th, tc, len(ranges), ranges, most)
			}
			for _, r := range ranges {
				if r[1] < tc.n && r[1]-r[0] < tc.minChunk {
					t.Errorf("threads %d %+v: range %v shorter than minChunk", th, tc, r)
				}
			}
		}
	}
}
