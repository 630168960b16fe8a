package blas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveSgemm is the reference: C = alpha·op(A)·op(B) + beta·C in float64.
func naiveSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for p := 0; p < k; p++ {
				var x, y float32
				if transA {
					x = a[p*lda+i]
				} else {
					x = a[i*lda+p]
				}
				if transB {
					y = b[j*ldb+p]
				} else {
					y = b[p*ldb+j]
				}
				s += float64(x) * float64(y)
			}
			c[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func backends(t testing.TB) []Backend {
	bs := Available()
	if len(bs) < 3 {
		t.Logf("only %d backends to test (OpenBLAS or oneDNN missing): %v", len(bs), errors.Join(findLibraries().errs...))
	}
	return bs
}

func TestSgemmAgainstNaive(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(strings.Fields(be.Name())[0], func(t *testing.T) { testBackend(t, be) })
	}
}

// testBackend checks be against the float64 reference: every transpose,
// odd shapes, strides larger than the rows, alpha and beta not 1 or 0.
func testBackend(t *testing.T, be Backend) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {64, 64, 64}, {3, 129, 2}, {5, 4, 0}}
	{
		for _, s := range shapes {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					m, n, k := s[0], s[1], s[2]
					name := fmt.Sprintf("m%d_n%d_k%d_ta%v_tb%v", m, n, k, ta, tb)
					t.Run(name, func(t *testing.T) {
						// Leading dimensions larger than the rows, to test strides.
						lda, ldb, ldc := k+3, n+2, n+1
						if ta {
							lda = m + 3
						}
						if tb {
							ldb = k + 2
						}
						ar, br := m, k
						if ta {
							ar = k
						}
						if tb {
							br = n
						}
						a := randSlice(r, ar*lda)
						b := randSlice(r, br*ldb)
						c := randSlice(r, m*ldc)
						want := append([]float32(nil), c...)
						naiveSgemm(ta, tb, m, n, k, 0.7, a, lda, b, ldb, 0.3, want, ldc)
						be.Sgemm(ta, tb, m, n, k, 0.7, a, lda, b, ldb, 0.3, c, ldc)
						for i := range c {
							if d := math.Abs(float64(c[i] - want[i])); d > 1e-4*math.Sqrt(float64(k+1)) {
								t.Fatalf("element %d: got %v, want %v", i, c[i], want[i])
							}
						}
					})
				}
			}
		}
	}
}

func TestSgemmChecksSizes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("short C slice did not panic")
		}
	}()
	Sgemm(false, false, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 2, 0, make([]float32, 3), 2)
}

func BenchmarkSgemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, be := range backends(b) {
		for _, s := range [][3]int{{1024, 768, 768}, {1024, 3072, 768}, {128, 128, 64}} {
			m, n, k := s[0], s[1], s[2]
			a, bb, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
			b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", strings.Fields(be.Name())[0], m, n, k), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					be.Sgemm(false, false, m, n, k, 1, a, k, bb, n, 0, c, n)
				}
				b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func TestInt8AgainstReference(t *testing.T) {
	be, err := Int8()
	if err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range [][3]int{{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {64, 96, 768}, {3, 129, 2}} {
		m, n, k := s[0], s[1], s[2]
		for _, tb := range []bool{false, true} {
			a := make([]uint8, m*k)
			b := make([]int8, k*n)
			for i := range a {
				a[i] = uint8(r.IntN(256))
			}
			wmax := Int8WeightMax()
			for i := range b {
				b[i] = int8(r.IntN(2*wmax+1) - wmax)
			}
			ldb := n
			if tb {
				ldb = k
			}
			got, want := make([]int32, m*n), make([]int32, m*n)
			be.GemmU8S8S32(false, tb, m, n, k, a, k, b, ldb, got, n)
			GoInt8{}.GemmU8S8S32(false, tb, m, n, k, a, k, b, ldb, want, n)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%v transB=%v: element %d is %d, want %d", s, tb, i, got[i], want[i])
				}
			}
		}
	}
}
