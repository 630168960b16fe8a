package kernels

import (
	"math/bits"
	"sync"
)

// scratchPools keep the float32 work buffers of the kernels' workers between
// calls, one pool per power-of-two capacity, so that a warm inference call or
// training step allocates none of them whatever mix of sizes it asks for.
// Buffers come back with old contents: users overwrite them.
var scratchPools [64]sync.Pool // class k holds *[]float32 of capacity 2^k

// getScratch returns a buffer of length n (capacity the next power of two)
// from the pool of its size class, or a new one. Return it with putScratch.
func getScratch(n int) *[]float32 {
	k := bits.Len(uint(max(n, 1) - 1))
	if p, _ := scratchPools[k].Get().(*[]float32); p != nil {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n, 1<<k)
	return &s
}

// putScratch gives a buffer from getScratch back to the pool of its class.
func putScratch(p *[]float32) {
	c := cap(*p)
	if c == 0 || c&(c-1) != 0 {
		return // not from getScratch
	}
	scratchPools[bits.Len(uint(c-1))].Put(p)
}
