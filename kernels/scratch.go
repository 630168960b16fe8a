package kernels

import "sync"

// scratchPool keeps the float32 work buffers of the kernels' workers between
// calls, so that a warm inference call or training step allocates none of
// them. Buffers come back with old contents: users overwrite them.
var scratchPool sync.Pool // of *[]float32

// getScratch returns a buffer of length n from the pool, or a new one when
// the pooled buffer is too small. Return it with putScratch.
func getScratch(n int) *[]float32 {
	if p, _ := scratchPool.Get().(*[]float32); p != nil && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

// putScratch gives a buffer from getScratch back to the pool.
func putScratch(p *[]float32) { scratchPool.Put(p) }
