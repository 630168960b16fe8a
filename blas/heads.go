package blas

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// HeadSgemm computes C = alpha·op(A)·op(B) + beta·C (row-major) like Sgemm,
// with the backend chosen for the products of attention heads: the scores
// and context of one head (one dimension is the head size, 64 in the
// model's sizes; the others a tile of queries or keys, 128–512), which
// the kernels package issues thousands of times a pass. A library tuned for
// the layers' large products is not always the fastest on them: on one
// AMD Zen 5 (2 threads) oneDNN 2.6.3 ran the fused attention at 141 GFLOP/s
// and go-asm at 234. The automatic choice measures the layers' backend and
// go-asm on these shapes and keeps the layers' backend unless go-asm is
// more than 5% faster; every explicit choice (ROFORMER_BLAS, Set, UseGo,
// Open) runs the heads on the same backend as the layers. It panics if a
// slice is too short for its dimensions and leading dimension.
func HeadSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	CurrentHeads().Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// CurrentHeads returns the backend of HeadSgemm, choosing the backends
// first if that has not been done yet.
func CurrentHeads() Backend {
	Init()
	mu.RLock()
	defer mu.RUnlock()
	return heads
}

// headShapes are the products of one attention head (head size 64) as
// the kernels issue them: a 128-query tile against 128 keys (the fused
// attention on 128-token inputs, and the blocked training kernels), the
// fused kernel's 192 × 512 tiles at long lengths, and a backward product
// with the transposed operand. About 0.1 GFLOP a round.
var headShapes = []probeShape{
	{false, true, 128, 128, 64, 16},  // scores: queries · keysᵀ
	{false, false, 128, 64, 128, 16}, // context: probabilities · values
	{false, true, 192, 512, 64, 4},   // fused attention's long-input tile, scores
	{false, false, 192, 64, 512, 4},  // and context
	{true, false, 128, 64, 128, 8},   // backward: dV = Pᵀ·dO, dK = dSᵀ·Q
}

// chooseHeads picks the backend of HeadSgemm for the automatic choice:
// layers (the backend of the layers, candidate lc) unless go-asm, measured
// in alternating rounds on headShapes, is more than margin faster. The
// rounds run on as many goroutines at once as the kernels' workers will
// (GOMAXPROCS, at most 4), each on its own operands, and are timed by the
// wall clock: on AMD Zen 5 one oneDNN call at a time matched go-asm on
// these shapes, while two workers calling it at once ran the fused
// attention at 0.6 times go-asm's speed.
func chooseHeads(layers Backend, lc Candidate) (Backend, *Choice) {
	g := goAsmBest()
	if g == nil || lc.Kind == KindGoAsm || lc.Kind == KindGo {
		return layers, &Choice{Candidate: lc, Name: layers.Name(), Reason: "the layers' backend (no other candidate for the heads)", Measured: time.Now().UTC()}
	}
	t0 := time.Now()
	cands := []Backend{layers, g}
	ms := []Measurement{{Candidate: lc, Name: layers.Name()}, {Candidate: Candidate{Kind: KindGoAsm}, Name: g.Name()}}
	workers := min(max(runtime.GOMAXPROCS(0), 1), 4)
	bufs := make([][]probeBuf, workers)
	for w := range bufs {
		bufs[w] = newProbeBufs(headShapes)
	}
	for _, b := range cands { // warm-up (oneDNN compiles its kernels on a shape's first calls)
		concurrentRound(b, bufs)
	}
	for r := 0; r < 5; r++ {
		for i, b := range cands {
			ms[i].GFLOPS = max(ms[i].GFLOPS, concurrentRound(b, bufs))
		}
	}
	took := time.Since(t0)
	i := 0
	if ms[1].GFLOPS > margin*ms[0].GFLOPS {
		i = 1
	}
	return cands[i], &Choice{Candidate: ms[i].Candidate, Name: ms[i].Name, Measurements: ms, Measured: time.Now().UTC(),
		Reason: fmt.Sprintf("fastest on one attention head's products, %d workers at once (%d ms): %s", workers, took.Milliseconds(),
			strings.Replace(describe(ms), "on one thread", fmt.Sprintf("on %d threads", workers), 1))}
}

// concurrentRound runs two rounds of headShapes on each of len(bufs)
// goroutines at once and returns their summed rate in GFLOP/s (wall clock).
func concurrentRound(b Backend, bufs [][]probeBuf) float64 {
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range bufs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probeRound(b, headShapes, bufs[w])
			probeRound(b, headShapes, bufs[w])
		}()
	}
	wg.Wait()
	sec := time.Since(t0).Seconds()
	flops := 0.0
	for _, s := range headShapes {
		flops += 2 * float64(s.m*s.n*s.k*s.reps)
	}
	return 2 * float64(len(bufs)) * flops / sec / 1e9
}
