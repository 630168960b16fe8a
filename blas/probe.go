package blas

import (
	"runtime"
	"time"
)

// probeShapes are the products of one encoder layer of a BERT-base-sized
// model (hidden 768, 12 heads, intermediate 3072) as each worker issues
// them: a 128-row block of the linear layers and one head's attention over
// 128 tokens in 64-query blocks, with the transposes the model uses, and one
// weight-gradient product, and the same linear layers for a short query
// (16 rows, a worker's share of a 32-token one), whose weights come from
// memory (cold: a different weight each repetition, cycled through
// probeColdFloats, past the caches), as they do when a model serves one
// query at a time. They are the shapes the model spends its time in.
var probeShapes = []probeShape{
	{false, true, 128, 2304, 768, 1, false}, // q, k, v
	{false, true, 128, 3072, 768, 1, false}, // feed-forward in
	{false, true, 128, 768, 3072, 1, false}, // feed-forward out
	{false, true, 64, 128, 64, 8, false},    // attention scores, one head
	{false, false, 64, 64, 128, 8, false},   // attention context, one head
	{true, false, 256, 768, 128, 1, false},  // weight gradient
	{false, true, 16, 2304, 768, 2, true},   // q, k, v of a short query
	{false, true, 16, 3072, 768, 2, true},   // its feed-forward in
	{false, true, 16, 768, 3072, 2, true},   // its feed-forward out
}

// probeShape is one product of a probe, run reps times a round; a cold
// one reads its B from the shared cold buffer, a new part each time.
type probeShape struct {
	transA, transB bool
	m, n, k, reps  int
	cold           bool
}

// probeColdFloats is the cold buffer's length: 48 MiB of float32, more
// than the last-level cache of the machines this runs on (32 MiB on a
// Zen 4 or Zen 5 CCD), so that a cold product's weights come from memory.
const probeColdFloats = 12 << 20

// probeBufs are a probe's operands: per shape (b empty for a cold one)
// and the cold buffer with the offset of its next part.
type probeBufs struct {
	shapes []probeBuf
	cold   []float32
	next   int
}

type probeBuf struct{ a, b, c []float32 }

// newProbeBufs allocates and fills the operands of shapes once, so that
// every candidate is timed on warm memory, but for the cold ones.
func newProbeBufs(shapes []probeShape) *probeBufs {
	bs := &probeBufs{shapes: make([]probeBuf, len(shapes))}
	for i, s := range shapes {
		nb := s.k * s.n
		if s.cold {
			nb = 0
			if bs.cold == nil {
				bs.cold = make([]float32, probeColdFloats)
				for j := range bs.cold {
					bs.cold[j] = float32(j%5) * 0.5
				}
			}
		}
		bs.shapes[i] = probeBuf{make([]float32, s.m*s.k), make([]float32, nb), make([]float32, s.m*s.n)}
		for j := range bs.shapes[i].a {
			bs.shapes[i].a[j] = float32(j%7) * 0.25
		}
		for j := range bs.shapes[i].b {
			bs.shapes[i].b[j] = float32(j%5) * 0.5
		}
	}
	return bs
}

// b returns shape i's B: its own, or the next part of the cold buffer.
func (bs *probeBufs) b(i int, s probeShape) []float32 {
	if !s.cold {
		return bs.shapes[i].b
	}
	n := s.k * s.n
	if bs.next+n > len(bs.cold) {
		bs.next = 0
	}
	b := bs.cold[bs.next : bs.next+n]
	bs.next += n
	return b
}

// probeRound runs shapes once on one thread and returns the speed in
// GFLOP/s. A round of probeShapes is 2.1 GFLOP, about 15 ms at 150 GFLOP/s.
func probeRound(b Backend, shapes []probeShape, bs *probeBufs) float64 {
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
			b.Sgemm(s.transA, s.transB, s.m, s.n, s.k, 1, bs.shapes[i].a, lda, bs.b(i, s), ldb, 0, bs.shapes[i].c, s.n)
		}
		flops += 2 * float64(s.m*s.n*s.k*s.reps)
	}
	return flops / time.Since(t0).Seconds() / 1e9
}
