package blas

import (
	"fmt"
	"time"
)

// HeadSgemm computes C = alpha·op(A)·op(B) + beta·C (row-major) like Sgemm,
// for the products of one attention head (the scores and context of a
// tile of queries against a tile of keys; one dimension is the head size).
// The tiles of long inputs (a dimension of at least headLongDim, as the
// fused attention's 192 × 512 tiles) run on the heads' backend, the others
// on the layers' backend. The heads' backend is go-asm where the layers'
// is a C library (oneDNN, OpenBLAS) and go-asm runs: measured on AMD Zen 5
// with 2 workers, the fused attention over 4,096 tokens ran at the same
// rate per CPU-second through oneDNN and go-asm but 1.3–1.4 times faster by
// the clock through go-asm, and the small model's 16,384-token pass 1.4–1.5
// times faster (12.0–12.2 s against 16.9–18.4 s): calls into C of tens of
// microseconds from every worker at once, between Go's softmax passes,
// leave the cores idle part of the time, which no probe of products alone
// reproduced. Short tiles stay on the library (there the saved-probability
// backward at 128 tokens ran twice as fast through oneDNN).
// ROFORMER_BLAS_HEADS fixes the heads' backend; every explicit choice of
// the layers' (ROFORMER_BLAS, Set, UseGo, Open) runs the heads on it too.
// It panics if a slice is too short for its dimensions and leading dimension.
func HeadSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	be := Current()
	if max(m, n, k) >= headLongDim {
		be = CurrentHeads()
	}
	be.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// headLongDim is the smallest dimension of a long input's tile: the fused
// attention's key tiles are 512 wide once the input has that many tokens,
// the saved-probability kernels' products T wide.
const headLongDim = 256

// CurrentHeads returns the backend of HeadSgemm's long tiles, choosing
// the backends first if that has not been done yet.
func CurrentHeads() Backend {
	Init()
	mu.RLock()
	defer mu.RUnlock()
	return heads
}

// chooseHeads picks the heads' backend for the automatic choice: go-asm
// when the layers' backend (layers, candidate lc) is a C library and
// go-asm runs here, else the layers'.
func chooseHeads(layers Backend, lc Candidate) (Backend, *Choice) {
	g := goAsmBest()
	if g == nil || lc.Kind == KindGoAsm || lc.Kind == KindGo {
		return layers, &Choice{Candidate: lc, Name: layers.Name(), Reason: "the layers' backend (no other candidate for the heads)", Measured: time.Now().UTC()}
	}
	return g, &Choice{Candidate: Candidate{Kind: KindGoAsm}, Name: g.Name(), Measured: time.Now().UTC(),
		Reason: fmt.Sprintf("long-input tiles (a dimension ≥ %d) in Go, not through C calls from every worker at once; shorter ones on %s", headLongDim, lc)}
}
