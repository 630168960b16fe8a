package blas_test

import (
	"fmt"

	"github.com/roformer-go/roformer/blas"
)

// Which matrix-product backend this machine uses, and why: measured once
// per machine and library build, then read from the cache.
func ExampleChosen() {
	c := blas.Chosen()
	fmt.Println(c.Kind != "", c.Reason != "")
	// Output: true true
}

// Every product goes through Sgemm: C = alpha·op(A)·op(B) + beta·C,
// row-major.
func ExampleSgemm() {
	a := []float32{1, 2, 3, 4} // 2×2
	b := []float32{5, 6, 7, 8} // 2×2
	c := make([]float32, 4)
	blas.Sgemm(false, true, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2) // A·Bᵀ
	fmt.Println(c)
	// Output: [17 23 39 53]
}

// A head's keys packed once serve every tile of queries: scores q·kᵀ of
// two query tiles against the same packed keys. Where the heads' products
// do not run on go-asm (a library packs its own operands), HeadSgemm does
// the same products.
func ExampleHeadPacker() {
	const T, HS = 300, 2 // 300 keys and queries of 2 values
	q, k := make([]float32, T*HS), make([]float32, T*HS)
	for i := range T {
		q[i*HS], q[i*HS+1] = 1, float32(i%3)
		k[i*HS], k[i*HS+1] = float32(i%5), 1
	}
	s := make([]float32, 2*T) // two query rows' scores
	p, ok := blas.HeadPacking(T, T, HS)
	if ok {
		keys := p.PackB(make([]float32, p.LenB(HS, T)), true, HS, T, k, HS) // kᵀ [HS, T]
		for _, i0 := range []int{0, 1} {                                    // two tiles of one query each
			p.Sgemm(1, T, HS, 1, blas.Matrix(false, q[i0*HS:], HS), keys, 0, s[i0*T:], T)
		}
	} else {
		blas.HeadSgemm(false, true, 2, T, HS, 1, q, HS, k, HS, 0, s, T)
	}
	fmt.Println(s[:6], s[T:T+6])
	// Output: [0 1 2 3 4 0] [1 2 3 4 5 1]
}
