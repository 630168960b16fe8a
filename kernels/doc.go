// Package kernels holds the math of the transformer on flat []float32 slices
// with explicit dimensions, in the style of llm.c: each Forward has its
// Backward, outputs and caches come first in the argument list, inputs next,
// dimensions last, and each slice argument is commented with its shape.
//
// Dimension legend:
//
//	B   batch size
//	T   sequence length (tokens per row)
//	C   channels (hidden size; E for the embedding size when it differs)
//	OC  output channels of a linear layer
//	NH  attention heads
//	HS  head size, C / NH
//	V   vocabulary size
//	I   feed-forward (intermediate) size
//	N   a flat element count
//
// Gradient policy, the same in every kernel: parameter gradients are
// accumulated (+=), so that two backward calls give doubled gradients and
// gradient accumulation over micro-batches needs no extra buffer; activation
// gradients are written (=), except where a kernel documents that it adds
// into a residual stream.
//
// Matrix products go through package blas; every kernel that is not a plain
// loop has an unexported naive twin that the tests compare it with.
// Parallelism goes through one bounded helper (parallelFor) that splits the
// outermost independent dimension into disjoint ranges and hands them to a
// pool of persistent worker goroutines; SetThreads sets how many ranges a
// call makes. Results do not depend on which worker runs which range. The
// packages above kernels use the same helper, exported as ParallelFor (RoPE
// rows in rope, AdamW's update in optim), rather than goroutines of their
// own, so SetThreads bounds them too.
//
// Element-wise work (exp in softmax and cross-entropy, GELU and its
// derivative, LayerNorm rows, RoPE pairs, AdamW, additions) runs in Go
// assembly on amd64: AVX2+FMA (vec_amd64.s), and AVX-512F for exp and GELU
// (vec512_amd64.s), chosen at start-up from the CPU's features (VectorPath
// says which). Each has a scalar twin in vec.go that runs elsewhere, or with
// the purego build tag; the tests run every level the CPU has against float64
// references, and the element-wise parts that claim the twins' bits (RoPE,
// AdamW, LayerNorm's element-wise steps, dropout) are checked bit for bit.
package kernels
