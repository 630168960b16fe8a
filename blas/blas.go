package blas

import (
	"fmt"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Backend is one implementation of single-precision GEMM in row-major order.
type Backend interface {
	// Name says which implementation this is, e.g. "openblas 0.3.21 (…)" or "go (gonum)".
	Name() string
	// Sgemm computes C = alpha·op(A)·op(B) + beta·C with op(X) = Xᵀ when the
	// transpose flag is set. op(A) is m×k, op(B) is k×n, C is m×n; all are
	// row-major with leading dimensions lda, ldb, ldc.
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (row-major) with the backend
// in use. op(A) is m×k, op(B) is k×n, C is m×n. It panics if a slice is too
// short for its dimensions and leading dimension: that is a programmer error.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	Current().Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func checkGemm(transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) {
	ar, ac := stored(false, transA, m, k)
	br, bc := stored(true, transB, n, k)
	checkOperand("sgemm", "A", ar, ac, lda, la)
	checkOperand("sgemm", "B", br, bc, ldb, lb)
	checkOperand("sgemm", "C", m, n, ldc, lc)
}

// stored returns the shape of the row-major matrix behind one side of a
// product with inner dimension k: op(A) is rows×k (b false), op(B) is
// k×rows (b set), and the matrix is their transpose under trans.
func stored(b, trans bool, rows, k int) (r, c int) {
	r, c = rows, k
	if b {
		r, c = k, rows
	}
	if trans {
		r, c = c, r
	}
	return r, c
}

// checkOperand panics unless a slice of have values holds a rows×cols
// row-major matrix with leading dimension ld.
func checkOperand(fn, what string, rows, cols, ld, have int) {
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols || (rows-1)*ld+cols > have {
		panic(fmt.Sprintf("blas: %s: %s is %dx%d with leading dimension %d but has %d elements", fn, what, rows, cols, ld, have))
	}
}

// goBackend is gonum's pure-Go BLAS: correct everywhere, and slower than
// OpenBLAS (about 3–40% of its speed on the target machines).
type goBackend struct{}

func (goBackend) Name() string { return "go (gonum native sgemm; slower fallback)" }

func (goBackend) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := gblas.NoTrans, gblas.NoTrans
	if transA {
		ta = gblas.Trans
	}
	if transB {
		tb = gblas.Trans
	}
	if k == 0 {
		// gonum rejects k == 0; the product is then beta·C.
		scaleC(m, n, beta, c, ldc)
		return
	}
	gonum.Implementation{}.Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// scaleC sets C = beta·C (the product of an empty inner dimension).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}
