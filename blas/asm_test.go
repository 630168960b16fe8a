package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// goAsmVariants are the configurations of the go-asm driver under test:
// each assembly microkernel this processor runs (AVX-512, with and without
// its edge kernels, and the AVX2 one forced on an AVX-512 processor), with
// the packers in assembly and in Go, and the pure-Go microkernel twin at the assembly kernels'
// tile shapes and at an odd one. The "small" ones use tiny blocks, so that
// every loop of the five runs several times (kc, mc and nc edges) on
// small shapes.
func goAsmVariants(t testing.TB) []*goAsm {
	var gs []*goAsm
	for _, k := range asmKernels() {
		gs = append(gs, newGoAsm(k, 0, 0, asmPackOK), newGoAsm(k, 0, 0, false))
		gs = append(gs, &goAsm{k: k, kc: 16, mc: 2 * k.mr, nc: 2 * k.nr, asmPack: asmPackOK})
		if k.edges != nil {
			// The full kernel on the last tiles too, through the edge tile.
			k.edges = nil
			gs = append(gs, newGoAsm(k, 0, 0, asmPackOK))
		}
	}
	if len(gs) == 0 {
		t.Logf("no assembly microkernel here (purego tag, or not amd64 with AVX2): testing the Go twin only")
	}
	for _, s := range [][2]int{{12, 32}, {4, 24}, {3, 5}} {
		k := microkernel{isa: "go", mr: s[0], nr: s[1]}
		gs = append(gs, newGoAsm(k, 0, 0, false), &goAsm{k: k, kc: 8, mc: 2 * k.mr, nc: 3 * k.nr, asmPack: asmPackOK})
	}
	return gs
}

func variantName(g *goAsm) string {
	return fmt.Sprintf("%s_%dx%d_edges%d_kc%d_mc%d_nc%d_asmpack%v", g.k.isa, g.k.mr, g.k.nr, len(g.k.edges), g.kc, g.mc, g.nc, g.asmPack)
}

// gemmCase is one product with its operands laid out with strides larger
// than their rows and starting one element into their slices (so that no
// operand is 64-byte aligned).
type gemmCase struct {
	ta, tb        bool
	m, n, k       int
	alpha, beta   float32
	lda, ldb, ldc int
	a, b, c       []float32
}

func newGemmCase(r *rand.Rand, ta, tb bool, m, n, k int, alpha, beta float32, pad int) gemmCase {
	g := gemmCase{ta: ta, tb: tb, m: m, n: n, k: k, alpha: alpha, beta: beta}
	ar, ac := m, k
	if ta {
		ar, ac = k, m
	}
	br, bc := k, n
	if tb {
		br, bc = n, k
	}
	g.lda, g.ldb, g.ldc = ac+pad, bc+pad+1, n+pad
	g.a = randSlice(r, 1+ar*g.lda)[1:]
	g.b = randSlice(r, 1+br*g.ldb)[1:]
	g.c = randSlice(r, 1+m*g.ldc)[1:]
	if beta == 0 {
		// beta = 0 must not read C: NaNs there stay out of the result.
		for i := range g.c {
			g.c[i] = float32(math.NaN())
		}
	}
	return g
}

// naiveSgemmBound is the naive reference twin (the triple loop, in
// float64) that also returns, per element, the bound on float32 rounding
// error: 2·(k+2)·u·(|alpha|·Σ_p |a_ip||b_pj| + |beta|·|c_ij|) with
// u = 2⁻²⁴, twice the classic γ_k bound of a float32 dot product.
func naiveSgemmBound(g gemmCase) (want, tol []float64) {
	const u = 1.0 / (1 << 24)
	want = make([]float64, g.m*g.n)
	tol = make([]float64, g.m*g.n)
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			s, abs := 0.0, 0.0
			for p := 0; p < g.k; p++ {
				var x, y float32
				if g.ta {
					x = g.a[p*g.lda+i]
				} else {
					x = g.a[i*g.lda+p]
				}
				if g.tb {
					y = g.b[j*g.ldb+p]
				} else {
					y = g.b[p*g.ldb+j]
				}
				s += float64(x) * float64(y)
				abs += math.Abs(float64(x) * float64(y))
			}
			v := float64(g.alpha) * s
			bound := math.Abs(float64(g.alpha)) * abs
			if g.beta != 0 {
				cv := float64(g.c[i*g.ldc+j])
				v += float64(g.beta) * cv
				bound += math.Abs(float64(g.beta) * cv)
			}
			want[i*g.n+j] = v
			tol[i*g.n+j] = 2*float64(g.k+2)*u*bound + 1e-30
		}
	}
	return want, tol
}

// check runs the case through be and compares with the reference; the
// padding of C between rows (ldc > n) must be left as it was.
func (g gemmCase) check(t testing.TB, be Backend) {
	t.Helper()
	want, tol := naiveSgemmBound(g)
	c := append([]float32(nil), g.c...)
	be.Sgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.ldc && i*g.ldc+j < len(c); j++ {
			got := c[i*g.ldc+j]
			if j >= g.n {
				if math.Float32bits(got) != math.Float32bits(g.c[i*g.ldc+j]) {
					t.Fatalf("%s: C padding (%d, %d) changed from %v to %v", g, i, j, g.c[i*g.ldc+j], got)
				}
				continue
			}
			w, e := want[i*g.n+j], tol[i*g.n+j]
			if d := math.Abs(float64(got) - w); !(d <= e) {
				t.Fatalf("%s: C(%d, %d) = %v, want %v (error %.3g > bound %.3g)", g, i, j, got, w, d, e)
			}
		}
	}
}

func (g gemmCase) String() string {
	return fmt.Sprintf("m%d n%d k%d transA %v transB %v alpha %v beta %v lda %d ldb %d ldc %d", g.m, g.n, g.k, g.ta, g.tb, g.alpha, g.beta, g.lda, g.ldb, g.ldc)
}

// awkwardShapes are every combination of 1, 7, 13 and 127, and shapes
// with 1,000 in one or two dimensions (all three would take the float64
// reference seconds).
func awkwardShapes() [][3]int {
	var ss [][3]int
	small := []int{1, 7, 13, 127}
	for _, m := range small {
		for _, n := range small {
			for _, k := range small {
				ss = append(ss, [3]int{m, n, k})
			}
		}
	}
	return append(ss, [3]int{1000, 13, 7}, [3]int{7, 1000, 13}, [3]int{13, 7, 1000}, [3]int{1000, 1, 127},
		[3]int{127, 1000, 1}, [3]int{1, 127, 1000}, [3]int{1000, 1000, 7}, [3]int{127, 127, 1000}, [3]int{1000, 127, 127})
}

func TestGoAsmAgainstNaive(t *testing.T) {
	shapes := awkwardShapes()
	for _, g := range goAsmVariants(t) {
		t.Run(variantName(g), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			for si, s := range shapes {
				big := s[0]*s[1]*s[2] > 1<<20
				if big && g.kc < 64 {
					continue // the tiny blocks are for the small shapes
				}
				for tr := 0; tr < 4; tr++ {
					ta, tb := tr&1 != 0, tr&2 != 0
					for _, beta := range []float32{0, 0.3} {
						if big && (tr+int(beta*10)+si)%2 == 1 {
							continue // half of the large products, each transpose twice
						}
						newGemmCase(r, ta, tb, s[0], s[1], s[2], -0.7, beta, 1+si%5).check(t, g)
					}
				}
			}
		})
	}
}

// The model's shapes and the edges of the default blocks: k just past a
// kc block, m past an mc block, the per-head attention products.
func TestGoAsmBlockEdges(t *testing.T) {
	g := goAsmBest()
	if g == nil {
		t.Skip("no assembly microkernel")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range [][3]int{{64, 128, 64}, {64, 64, 128}, {128, 768, 768}, {2*g.mc + 1, 33, g.kc + 1}, {g.k.mr + 1, g.nc + g.k.nr + 1, 3}} {
		for tr := 0; tr < 4; tr++ {
			newGemmCase(r, tr&1 != 0, tr&2 != 0, s[0], s[1], s[2], 1, float32(tr%2), 0).check(t, g)
		}
	}
}

// alpha = 0 and k = 0 do not read A and B (NaNs there stay out): C = beta·C.
func TestGoAsmAlphaZeroAndEmptyK(t *testing.T) {
	for _, g := range goAsmVariants(t)[:1] {
		nan := float32(math.NaN())
		a := []float32{nan, nan, nan, nan}
		c := []float32{1, 2, 3, 4}
		g.Sgemm(false, false, 2, 2, 2, 0, a, 2, a, 2, 0.5, c, 2)
		if c[0] != 0.5 || c[3] != 2 {
			t.Errorf("alpha 0: C = %v, want 0.5·C", c)
		}
		c = []float32{nan, nan, nan, nan}
		g.Sgemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0, c, 2)
		if c[0] != 0 || c[3] != 0 {
			t.Errorf("k 0, beta 0: C = %v, want zeros", c)
		}
	}
}

// The transposing packer against its definition, at every alignment of
// the destination group and with row strides that are not multiples of 8.
func TestPackT4x8(t *testing.T) {
	if !asmPackOK {
		t.Skip("no assembly packer")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][3]int{{8, 4, 8}, {24, 12, 25}, {40, 32, 41}, {17, 6, 17}} {
		kc, w, ld := s[0], s[1], s[2]
		src := randSlice(r, 4*ld+1)[1:]
		n8 := kc / 8
		for q0 := 0; q0+4 <= w; q0++ {
			dst := make([]float32, n8*8*w)
			packT4x8AVX(&dst[q0], w, &src[0], ld, n8)
			for p := 0; p < 8*n8; p++ {
				for q := 0; q < w; q++ {
					want := float32(0)
					if q >= q0 && q < q0+4 {
						want = src[(q-q0)*ld+p]
					}
					if dst[p*w+q] != want {
						t.Fatalf("kc %d w %d ld %d q0 %d: dst[%d·%d+%d] = %v, want %v", kc, w, ld, q0, p, w, q, dst[p*w+q], want)
					}
				}
			}
		}
	}
}

func TestGoAsmBlockSizes(t *testing.T) {
	k := microkernel{isa: "go", mr: 12, nr: 32}
	for _, tc := range []struct{ l1, l2, kc, mc int }{
		{48 << 10, 1 << 20, 192, 672},
		{32 << 10, 2 << 20, 128, 2040},
		{0, 0, 128, 504},
		{1 << 20, 1 << 20, 512, 252},
	} {
		g := newGoAsm(k, tc.l1, tc.l2, false)
		if g.kc != tc.kc || g.mc != tc.mc || g.kc%8 != 0 || g.mc%k.mr != 0 || g.nc%k.nr != 0 {
			t.Errorf("L1 %d, L2 %d: kc %d mc %d nc %d, want kc %d mc %d", tc.l1, tc.l2, g.kc, g.mc, g.nc, tc.kc, tc.mc)
		}
	}
	if l1, l2 := cacheSizes(); l1 != 0 && goAsmBest() != nil {
		t.Logf("this processor: L1d %d KiB, L2 %d KiB: %s", l1>>10, l2>>10, goAsmBest().Name())
	}
}

// FuzzGoAsmSgemm runs random shapes, strides, transposes and scalars
// through the fastest kernel and the Go twin with tiny blocks.
func FuzzGoAsmSgemm(f *testing.F) {
	f.Add(uint8(13), uint8(7), uint8(127), uint8(3), uint8(1), false)
	f.Add(uint8(1), uint8(33), uint8(9), uint8(0), uint8(2), true)
	f.Add(uint8(25), uint8(64), uint8(17), uint8(5), uint8(0), false)
	gs := []*goAsm{{k: microkernel{isa: "go", mr: 3, nr: 5}, kc: 8, mc: 6, nc: 10, asmPack: asmPackOK}}
	if g := goAsmBest(); g != nil {
		gs = append(gs, g, &goAsm{k: g.k, kc: 8, mc: g.k.mr, nc: g.k.nr, asmPack: true})
	}
	f.Fuzz(func(t *testing.T, m, n, k, pad, flags uint8, beta0 bool) {
		r := rand.New(rand.NewPCG(uint64(m)<<16|uint64(n)<<8|uint64(k), uint64(pad)<<8|uint64(flags)))
		beta := float32(0.5)
		if beta0 {
			beta = 0
		}
		c := newGemmCase(r, flags&1 != 0, flags&2 != 0, 1+int(m)%90, 1+int(n)%90, int(k)%90, 1.5, beta, int(pad)%9)
		for _, g := range gs {
			c.check(t, g)
		}
	})
}

// A warm call allocates nothing: the packing buffers come from the free
// list, the edge tile from the same buffer.
func TestGoAsmWarmCallAllocatesNothing(t *testing.T) {
	g := goAsmVariants(t)[0]
	r := rand.New(rand.NewPCG(13, 14))
	a, b, c := randSlice(r, 37*29), randSlice(r, 29*41), make([]float32, 37*41)
	g.Sgemm(false, true, 37, 41, 29, 1, a, 29, b, 29, 0, c, 41)
	if n := testing.AllocsPerRun(10, func() { g.Sgemm(false, true, 37, 41, 29, 1, a, 29, b, 29, 0, c, 41) }); n != 0 {
		t.Errorf("%.0f allocations per warm call", n)
	}
}
