package blas

import (
	"runtime"
	"time"
)

// probeShapes are the products of one encoder layer of a BERT-base-sized
// model (hidden 768, 12 heads, intermediate 3072) as each worker issues
// them: a 128-row block of the linear layers and one head's attention over
// 128 tokens in 64-query blocks, with the transposes the model uses, and one
// weight-gradient product. They are the shapes the model spends its time in.
var probeShapes = []probeShape{
	{false, true, 128, 2304, 768, 1}, // q, k, v
	{false, true, 128, 3072, 768, 1}, // feed-forward in
	{false, true, 128, 768, 3072, 1}, // feed-forward out
	{false, true, 64, 128, 64, 8},    // attention scores, one head
	{false, false, 64, 64, 128, 8},   // attention context, one head
	{true, false, 256, 768, 128, 1},  // weight gradient
}

// probeShape is one product of a probe, run reps times a round.
type probeShape struct {
	transA, transB bool
	m, n, k, reps  int
}

type probeBuf struct{ a, b, c []float32 }

// newProbeBufs allocates and fills the operands of shapes once, so that
// every candidate is timed on warm memory.
func newProbeBufs(shapes []probeShape) []probeBuf {
	bs := make([]probeBuf, len(shapes))
	for i, s := range shapes {
		bs[i] = probeBuf{make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)}
		for j := range bs[i].a {
			bs[i].a[j] = float32(j%7) * 0.25
		}
		for j := range bs[i].b {
			bs[i].b[j] = float32(j%5) * 0.5
		}
	}
	return bs
}

// probeRound runs shapes once on one thread and returns the speed in
// GFLOP/s. A round of probeShapes is 1.1 GFLOP, about 11 ms at 100 GFLOP/s.
func probeRound(b Backend, shapes []probeShape, bs []probeBuf) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	flops := 0.0
	t0 := time.Now()
	for i, s := range shapes {
		lda, ldb := s.k, s.n
		if s.transA {
			lda = s.m
		}
		if s.transB {
			ldb = s.k
		}
		for r := 0; r < s.reps; r++ {
			b.Sgemm(s.transA, s.transB, s.m, s.n, s.k, 1, bs[i].a, lda, bs[i].b, ldb, 0, bs[i].c, s.n)
		}
		flops += 2 * float64(s.m*s.n*s.k*s.reps)
	}
	return flops / time.Since(t0).Seconds() / 1e9
}
