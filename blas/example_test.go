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
