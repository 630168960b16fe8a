package blas

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Packed operands give go-asm's products to the bit, for every variant of
// the driver (tiny blocks: several kc, mc and nc blocks per call), every
// transposition, beta 0 and not, each side packed or not; and C's padding
// stays untouched.
func TestHeadPackerMatchesSgemm(t *testing.T) {
	shapes := append(awkwardShapes(), [3]int{192, 512, 64}, [3]int{192, 64, 512}, [3]int{100, 88, 64}, [3]int{37, 64, 300})
	for _, g := range goAsmVariants(t) {
		t.Run(variantName(g), func(t *testing.T) {
			p := HeadPacker{g}
			r := rand.New(rand.NewPCG(21, 22))
			for si, s := range shapes {
				if s[0]*s[1]*s[2] > 1<<20 && (g.kc < 64 || si%3 != 0) {
					continue // a third of the large products, default blocks only
				}
				tr := si % 4
				gc := newGemmCase(r, tr&1 != 0, tr&2 != 0, s[0], s[1], s[2], -0.7, float32(si%2)*0.3, 1+si%5)
				want := append([]float32(nil), gc.c...)
				g.Sgemm(gc.ta, gc.tb, gc.m, gc.n, gc.k, gc.alpha, gc.a, gc.lda, gc.b, gc.ldb, gc.beta, want, gc.ldc)
				pa := p.PackA(make([]float32, p.LenA(gc.m, gc.k)), gc.ta, gc.m, gc.k, gc.a, gc.lda)
				pb := p.PackB(make([]float32, p.LenB(gc.k, gc.n)), gc.tb, gc.k, gc.n, gc.b, gc.ldb)
				ma, mb := Matrix(gc.ta, gc.a, gc.lda), Matrix(gc.tb, gc.b, gc.ldb)
				for ci, ops := range [][2]Operand{{ma, mb}, {pa, mb}, {ma, pb}, {pa, pb}} {
					got := append([]float32(nil), gc.c...)
					p.Sgemm(gc.m, gc.n, gc.k, gc.alpha, ops[0], ops[1], gc.beta, got, gc.ldc)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s, operands %d (1: A packed, 2: B packed, 3: both): C[%d] = %v, Sgemm gives %v", gc, ci, i, got[i], want[i])
						}
					}
				}
				// The leading part of the panels (Sub) is the product of the
				// leading parts of the matrices.
				m2, n2, k2 := gc.m-gc.m/3, gc.n-gc.n/3, gc.k-gc.k/3
				want2 := append([]float32(nil), gc.c...)
				g.Sgemm(gc.ta, gc.tb, m2, n2, k2, gc.alpha, gc.a, gc.lda, gc.b, gc.ldb, gc.beta, want2, gc.ldc)
				got := append([]float32(nil), gc.c...)
				p.Sgemm(m2, n2, k2, gc.alpha, pa.Sub(m2, k2), pb.Sub(n2, k2), gc.beta, got, gc.ldc)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want2[i]) {
						t.Fatalf("%s, leading %d×%d×%d of the panels: C[%d] = %v, Sgemm gives %v", gc, m2, n2, k2, i, got[i], want2[i])
					}
				}
			}
		})
	}
}

// Misuse panics with what was wrong, before any assembly runs.
func TestHeadPackerMisuse(t *testing.T) {
	g := goAsmVariants(t)[0]
	p, q := HeadPacker{g}, HeadPacker{&goAsm{k: g.k, kc: g.kc, mc: g.mc, nc: g.nc}}
	x := make([]float32, 64*64)
	c := make([]float32, 64*64)
	pa := p.PackA(make([]float32, p.LenA(8, 16)), false, 8, 16, x, 16)
	pb := p.PackB(make([]float32, p.LenB(16, 8)), false, 16, 8, x, 8)
	qb := q.PackB(make([]float32, q.LenB(16, 8)), false, 16, 8, x, 8)
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"short dst", "needs", func() { p.PackA(make([]float32, 3), false, 8, 16, x, 16) }},
		{"short source", "has 10 elements", func() { p.PackB(make([]float32, p.LenB(16, 8)), true, 16, 8, x[:10], 16) }},
		{"wrong k", "packed for 8×16", func() { p.Sgemm(8, 8, 15, 1, pa, Matrix(false, x, 8), 0, c, 8) }},
		{"wrong side", "other side", func() { p.Sgemm(8, 8, 16, 1, pb, pb, 0, c, 8) }},
		{"other packer", "another packer", func() { p.Sgemm(8, 8, 16, 1, pa, qb, 0, c, 8) }},
		{"short C", "C is 8x8", func() { p.Sgemm(8, 8, 16, 1, pa, pb, 0, c[:20], 8) }},
		{"short matrix", "A is 8x16", func() { p.Sgemm(8, 8, 16, 1, Matrix(false, x[:100], 16), pb, 0, c, 8) }},
		{"sub past the panels", "Sub 9×16", func() { pa.Sub(9, 16) }},
		{"sub of a matrix", "of a matrix", func() { Matrix(false, x, 8).Sub(1, 1) }},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Errorf("%s: panic %v, want one saying %q", tc.name, r, tc.want)
				}
			}()
			tc.f()
		}()
	}
}

// HeadPacking hands out a packer exactly when HeadSgemm runs the product
// on go-asm.
func TestHeadPacking(t *testing.T) {
	for _, s := range [][3]int{{192, 512, 64}, {8, 16, 16}} {
		_, ok := HeadPacking(s[0], s[1], s[2])
		be := Current()
		if max(s[0], s[1], s[2]) >= headLongDim {
			be = CurrentHeads()
		}
		if _, asm := be.(*goAsm); ok != asm {
			t.Errorf("%v: HeadPacking %v, but HeadSgemm runs it on %s", s, ok, be.Name())
		}
	}
}
