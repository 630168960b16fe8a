package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var threads atomic.Int32

func init() { threads.Store(int32(runtime.NumCPU())) }

// SetThreads sets how many goroutines the kernels use (at least 1). BLAS
// itself stays single-threaded, so this is the only thread knob.
func SetThreads(n int) {
	if n < 1 {
		n = 1
	}
	threads.Store(int32(n))
}

// Threads returns the number of worker goroutines the kernels use.
func Threads() int { return int(threads.Load()) }

// parallelFor calls fn on disjoint ranges [lo, hi) that cover [0, n), on at
// most Threads() goroutines. Ranges are contiguous and at least minChunk long
// (so tiny problems stay serial); fn must only write data owned by its range.
func parallelFor(n, minChunk int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	w := Threads()
	if minChunk < 1 {
		minChunk = 1
	}
	if maxW := n / minChunk; w > maxW {
		w = maxW
	}
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + w - 1) / w
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}
