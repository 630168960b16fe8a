package blas

import "fmt"

// WeightPanels is a linear layer's weight W [OC, C] (PyTorch's nn.Linear
// layout) packed once into go-asm's panels of B, for inference: a product
// then reads the panels as one stream instead of packing the weight again
// on every call, which is what a product of few rows (a short query) spends
// most of its time on. The panels hold the values, the blocks and the
// microkernel of Sgemm's own packing, so a product gives the bits of
// go-asm's Sgemm(false, true, …) on the plain weight, whatever the rows.
type WeightPanels struct {
	p     HeadPacker
	b     Operand
	OC, C int
}

// NewWeightPanels packs w [OC, C] (the first OC·C values; w is not kept)
// for the current layers' backend, which must be go-asm.
func NewWeightPanels(w []float32, OC, C int) (*WeightPanels, error) {
	g, ok := Current().(*goAsm)
	if !ok {
		return nil, fmt.Errorf("blas: weight panels need the go-asm backend (the layers run on %s)", Current().Name())
	}
	if OC <= 0 || C <= 0 || len(w) < OC*C {
		return nil, fmt.Errorf("blas: weight panels of a %d×%d layer from %d values", OC, C, len(w))
	}
	p := HeadPacker{g}
	b := p.PackB(make([]float32, p.LenB(C, OC)), true, C, OC, w[:OC*C], C)
	return &WeightPanels{p: p, b: b, OC: OC, C: C}, nil
}

// Unit is the width of a panel: a block of columns (Sgemm's lo) starts at
// a multiple of it.
func (w *WeightPanels) Unit() int { return w.p.g.k.nr }

// Bytes returns the bytes the panels hold (OC rounded up to Unit, times C,
// float32).
func (w *WeightPanels) Bytes() int64 { return 4 * int64(len(w.b.s.f)) }

// Sgemm computes columns lo..hi of C = A·Wᵀ + beta·C: for each of the m
// rows of A [m, C] (leading dimension lda) and each output o in [lo, hi),
// C[i, o] = Σ_c A[i, c]·W[o, c] + beta·C[i, o], C row-major with leading
// dimension ldc (c[0] is C[0, 0]). beta 0 writes C without reading it. It
// panics if lo is not a multiple of Unit, if the columns lie outside
// [0, OC], or if a slice is too short.
func (w *WeightPanels) Sgemm(m, lo, hi int, a []float32, lda int, beta float32, c []float32, ldc int) {
	if lo < 0 || hi > w.OC || lo > hi || lo%w.Unit() != 0 {
		panic(fmt.Sprintf("blas: WeightPanels.Sgemm of columns %d..%d of %d (blocks start at multiples of %d)", lo, hi, w.OC, w.Unit()))
	}
	if m == 0 || lo == hi {
		return
	}
	checkOperand("WeightPanels.Sgemm", "A", m, w.C, lda, len(a))
	checkOperand("WeightPanels.Sgemm", "C", m, hi, ldc, len(c))
	b := w.b.s
	b.f = b.f[lo*w.C:]
	w.p.g.sgemm(m, hi-lo, w.C, 1, side{f: a, ld: lda}, b, beta, c[lo:], ldc)
}
