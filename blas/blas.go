package blas

import (
	"fmt"
	"sync"

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

var (
	mu      sync.RWMutex
	current Backend = goBackend{}
	loadErr error
	once    sync.Once
)

// Init loads OpenBLAS the first time it is called (later calls do nothing)
// and returns the load error, if any; the Go fallback is then in use. Sgemm
// calls Init itself, so calling it is needed only to learn the outcome early.
func Init() error {
	once.Do(func() {
		b, err := openOpenBLAS("")
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			loadErr = err
			return
		}
		current = b
	})
	return loadErr
}

// Open loads OpenBLAS from an explicit shared-library path and makes it the
// backend in use.
func Open(path string) error {
	once.Do(func() {}) // an explicit choice overrides the automatic one
	b, err := openOpenBLAS(path)
	if err != nil {
		return err
	}
	mu.Lock()
	current = b
	mu.Unlock()
	return nil
}

// UseGo makes the pure-Go fallback the backend in use, whether or not
// OpenBLAS is present.
func UseGo() {
	once.Do(func() {})
	mu.Lock()
	current = goBackend{}
	mu.Unlock()
}

// Set makes b the backend in use and returns the previous one (tests use it
// to run the same math through both paths).
func Set(b Backend) Backend {
	prev := Current()
	mu.Lock()
	current = b
	mu.Unlock()
	return prev
}

// Go returns the pure-Go fallback backend.
func Go() Backend { return goBackend{} }

// Current returns the backend in use, loading OpenBLAS first if that has not
// been tried yet.
func Current() Backend {
	Init()
	mu.RLock()
	defer mu.RUnlock()
	return current
}

// Name returns the name of the backend in use.
func Name() string { return Current().Name() }

// LoadError returns why OpenBLAS could not be loaded, or nil.
func LoadError() error {
	Init()
	return loadErr
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
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	need := func(what string, rows, cols, ld, have int) {
		if rows == 0 || cols == 0 {
			return
		}
		if ld < cols || (rows-1)*ld+cols > have {
			panic(fmt.Sprintf("blas: sgemm %s is %dx%d with leading dimension %d but has %d elements", what, rows, cols, ld, have))
		}
	}
	need("A", ar, ac, lda, la)
	need("B", br, bc, ldb, lb)
	need("C", m, n, ldc, lc)
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
		return
	}
	gonum.Implementation{}.Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
