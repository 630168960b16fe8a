package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// roundBF16 rounds x to bfloat16 (to nearest, ties to even), as oneDNN's
// reorder does; finite inputs only.
func roundBF16(x float32) float32 {
	u := math.Float32bits(x)
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u &^ 0xffff)
}

// sgemmBF16Ref is the reference twin of SgemmBF16: operands rounded to
// bfloat16, products summed in float64. It also returns Σ|a||b| per entry,
// the scale of the float32 accumulation error.
func sgemmBF16Ref(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (out, scale []float64) {
	out = make([]float64, m*n)
	scale = make([]float64, m*n)
	for i := range m {
		for j := range n {
			s, abs := 0.0, 0.0
			for l := range k {
				var av, bv float32
				if transA {
					av = a[l*lda+i]
				} else {
					av = a[i*lda+l]
				}
				if transB {
					bv = b[j*ldb+l]
				} else {
					bv = b[l*ldb+j]
				}
				p := float64(roundBF16(av)) * float64(roundBF16(bv))
				s += p
				abs += math.Abs(p)
			}
			if beta != 0 {
				s += float64(beta) * float64(c[i*ldc+j])
				abs += math.Abs(float64(beta) * float64(c[i*ldc+j]))
			}
			out[i*n+j], scale[i*n+j] = s, abs
		}
	}
	return out, scale
}

func TestSgemmBF16AgainstReference(t *testing.T) {
	if err := BF16Supported(); err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][3]int{{1, 1, 1}, {7, 13, 33}, {64, 48, 96}, {130, 17, 257}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, beta := range []float32{0, 1, 0.5} {
				for _, pad := range []int{0, 3} {
					ta, tb := tr[0], tr[1]
					lda, ldb, ldc := k+pad, n+pad, n+pad
					ra, rb := m, k
					if ta {
						lda, ra = m+pad, k
					}
					if tb {
						ldb, rb = k+pad, n
					}
					a := randSlice(r, ra*lda)
					b := randSlice(r, rb*ldb)
					c := randSlice(r, m*ldc)
					want, scale := sgemmBF16Ref(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)
					got := append([]float32(nil), c...)
					SgemmBF16(ta, tb, m, n, k, a, lda, b, ldb, beta, got, ldc)
					name := fmt.Sprintf("%dx%dx%d trans %v/%v beta %g pad %d", m, n, k, ta, tb, beta, pad)
					check(t, name, got, want, scale, m, n, k, c, ldc, gemmKey{ta, tb, m, n, k, lda, ldb, ldc, beta, false})
					// GemmBF16 on the rounded operands gives the same sums.
					got16 := append([]float32(nil), c...)
					GemmBF16(ta, tb, m, n, k, toBF16(a), lda, toBF16(b), ldb, beta, got16, ldc)
					check(t, name+" (GemmBF16)", got16, want, scale, m, n, k, c, ldc, gemmKey{ta, tb, m, n, k, lda, ldb, ldc, beta, true})
				}
			}
		}
	}
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			key := gemmKey{ta, tb, 64, 64, 64, 64, 64, 64, 0, true}
			if impl := gemmImpl(key); strings.HasPrefix(impl, "ref") {
				t.Errorf("GemmBF16 trans %v/%v runs oneDNN's reference code: %s", ta, tb, impl)
			}
		}
	}
}

// check compares a bf16 product with its float64 reference: float32
// accumulation of exact bf16 products, a few float32 ulps of Σ|a·b| per
// addition; the padding of C (c before the call) must be unchanged.
func check(t *testing.T, name string, got []float32, want, scale []float64, m, n, k int, c []float32, ldc int, key gemmKey) {
	t.Helper()
	for i := range m {
		for j := range n {
			tol := 4e-7*float64(k+1)*scale[i*n+j] + 1e-30
			if d := math.Abs(float64(got[i*ldc+j]) - want[i*n+j]); d > tol {
				t.Fatalf("%s: C[%d,%d] = %g, want %g (|diff| %.3g > %.3g); impl %s", name, i, j, got[i*ldc+j], want[i*n+j], d, tol, gemmImpl(key))
			}
		}
		for j := n; j < ldc && i*ldc+j < len(c); j++ {
			if got[i*ldc+j] != c[i*ldc+j] {
				t.Fatalf("%s: C[%d,%d] (padding) changed", name, i, j)
			}
		}
	}
}

// The rounding is really to bfloat16: a product of operands that float32
// holds exactly but bfloat16 does not differs from Sgemm's.
func TestSgemmBF16RoundsOperands(t *testing.T) {
	if err := BF16Supported(); err != nil {
		t.Skip(err)
	}
	a := []float32{1 + 1.0/1024} // not a bfloat16 (8 significant bits)
	b := []float32{1}
	c := []float32{0}
	SgemmBF16(false, false, 1, 1, 1, a, 1, b, 1, 0, c, 1)
	if c[0] != 1 {
		t.Fatalf("1+2⁻¹⁰ times 1 = %g, want 1 (rounded to bfloat16)", c[0])
	}
	if impl := gemmImpl(gemmKey{false, false, 64, 64, 64, 64, 64, 64, 0, false}); !strings.Contains(impl, "bf16") && !strings.Contains(impl, "amx") {
		t.Logf("oneDNN implementation for 64³: %s", impl)
	}
}

func TestSgemmBF16EdgeShapes(t *testing.T) {
	if err := BF16Supported(); err != nil {
		t.Skip(err)
	}
	c := []float32{1, 2, 3, 4}
	SgemmBF16(false, false, 2, 2, 0, nil, 1, nil, 2, 0.5, c, 2) // k = 0: C = beta·C
	if c[0] != 0.5 || c[3] != 2 {
		t.Fatalf("k = 0 with beta 0.5: C = %v", c)
	}
	SgemmBF16(false, false, 0, 2, 3, nil, 3, make([]float32, 6), 2, 0, nil, 2) // m = 0: nothing
	defer func() {
		if recover() == nil {
			t.Fatal("a short A did not panic")
		}
	}()
	SgemmBF16(false, false, 2, 2, 2, make([]float32, 3), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2)
}

// Concurrent calls on one shape use separate contexts.
func TestSgemmBF16Concurrent(t *testing.T) {
	if err := BF16Supported(); err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 32, 40, 48
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	want := make([]float32, m*n)
	SgemmBF16(false, false, m, n, k, a, k, b, n, 0, want, n)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				got := make([]float32, m*n)
				SgemmBF16(false, false, m, n, k, a, k, b, n, 0, got, n)
				for i := range got {
					if got[i] != want[i] {
						errs <- fmt.Sprintf("entry %d: %g vs %g", i, got[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// BenchmarkSgemmBF16 compares SgemmBF16 with the chosen backend's Sgemm on
// one thread for the products of a training step of the small model
// (H 384, I 1536, 16×128 tokens split over two workers): forward x·Wᵀ, the
// input gradient dy·W and the weight gradient dyᵀ·x.
//
//	go test ./blas -run '^$' -bench SgemmBF16
func BenchmarkSgemmBF16(b *testing.B) {
	if err := BF16Supported(); err != nil {
		b.Skip(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []struct {
		name          string
		ta, tb        bool
		m, n, k       int
		lda, ldb, ldc int
		beta          float32
	}{
		{"fwd-ffin-1024x1536x384", false, true, 1024, 1536, 384, 384, 384, 1536, 1},
		{"dx-ffin-1024x384x1536", false, false, 1024, 384, 1536, 1536, 384, 384, 0},
		{"dw-ffin-768x384x2048", true, false, 768, 384, 2048, 1536, 384, 384, 1},
		{"fwd-lm-1024x12000x384", false, true, 1024, 12000, 384, 384, 384, 12000, 1},
	} {
		ra, rb := s.m, s.k
		if s.ta {
			ra = s.k
		}
		if s.tb {
			rb = s.n
		}
		a, bb, c := randSlice(r, ra*s.lda), randSlice(r, rb*s.ldb), randSlice(r, s.m*s.ldc)
		flop := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		b.Run(s.name+"/fp32", func(b *testing.B) {
			for b.Loop() {
				Sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, s.lda, bb, s.ldb, s.beta, c, s.ldc)
			}
			b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(s.name+"/bf16", func(b *testing.B) {
			for b.Loop() {
				SgemmBF16(s.ta, s.tb, s.m, s.n, s.k, a, s.lda, bb, s.ldb, s.beta, c, s.ldc)
			}
			b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
