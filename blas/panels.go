package blas

import "fmt"

// HeadPacker runs products of attention heads on the go-asm backend with
// operands packed once for many calls. A product of go-asm packs both
// operands into the microkernel's panels every time it runs; the fused
// attention multiplies each tile of a head's keys and values by every tile
// of its queries (86 query tiles at 16,384 tokens), so packing the keys
// and values once per head, and a tile of queries once for all key tiles,
// removes most of that work (at 16,384 tokens on Zen 4 the packing fell
// from 16% of the fused attention's time to 5%).
// Packed or not, an operand gives the same products to the bit: the
// packed values, the blocks and the microkernel are those of Sgemm.
type HeadPacker struct{ g *goAsm }

// HeadPacking returns the packer for a product of m×n×k, and for the
// tiles of one, when HeadSgemm runs it on go-asm (the heads' backend for
// a dimension of at least 256, or the layers' backend when that is
// go-asm), and false when HeadSgemm would run it on a library, which packs
// its own operands (call HeadSgemm then). The fused attention asks with a
// head's whole product (queries × keys × head size) and runs its tiles
// through the packer: on go-asm with packed operands even its backward's
// 128-wide tiles ran 1.1–1.3 times faster than through oneDNN (Zen 4,
// 4,096 tokens).
func HeadPacking(m, n, k int) (HeadPacker, bool) {
	be := Current()
	if max(m, n, k) >= headLongDim {
		be = CurrentHeads()
	}
	g, ok := be.(*goAsm)
	return HeadPacker{g}, ok
}

// Operand is one side of a HeadPacker product: a row-major matrix as it
// is (Matrix), or panels packed once by PackA or PackB.
type Operand struct {
	s     side
	rows  int  // panels: op(A)'s rows or op(B)'s columns
	k     int  // panels: the inner dimension
	b     bool // panels of op(B) (else of op(A))
	owner *goAsm
}

// Matrix is the operand op(x) of a row-major x with leading dimension
// ld, transposed when trans is set; HeadPacker.Sgemm packs it as it runs.
func Matrix(trans bool, x []float32, ld int) Operand {
	return Operand{s: side{f: x, ld: ld, trans: trans}}
}

// Sub returns the leading part of packed panels: the first rows rows of
// op(A) (columns of op(B)) and the first k values of the inner dimension,
// as the products of a shorter tile need them (a causal mask's last tile
// of keys). It panics on a Matrix or past the packed dimensions.
func (x Operand) Sub(rows, k int) Operand {
	if !x.s.panels {
		panic("blas: Operand.Sub of a matrix")
	}
	if rows < 0 || k < 0 || rows > x.rows || k > x.k {
		panic(fmt.Sprintf("blas: Operand.Sub %d×%d of panels packed for %d×%d", rows, k, x.rows, x.k))
	}
	x.rows, x.k = rows, k
	return x
}

// LenA returns how many float32 values PackA needs for op(A) [m, k]:
// m rounded up to the microkernel's rows, times k.
func (p HeadPacker) LenA(m, k int) int { return roundUp(m, p.g.k.mr) * k }

// LenB returns how many float32 values PackB needs for op(B) [k, n]: n
// rounded up to the microkernel's columns, times k.
func (p HeadPacker) LenB(k, n int) int { return roundUp(n, p.g.k.nr) * k }

// PackA packs op(A) [m, k] (A row-major with leading dimension lda,
// transposed when trans is set) into dst, which must hold LenA(m, k)
// values, and returns it as an operand of p's products. dst is the
// operand's storage: it must not change while the operand is used.
func (p HeadPacker) PackA(dst []float32, trans bool, m, k int, a []float32, lda int) Operand {
	return p.pack("PackA", false, dst, trans, m, k, a, lda)
}

// PackB packs op(B) [k, n] (B row-major with leading dimension ldb,
// transposed when trans is set) into dst, which must hold LenB(k, n)
// values, and returns it as an operand of p's products, as PackA.
func (p HeadPacker) PackB(dst []float32, trans bool, k, n int, b []float32, ldb int) Operand {
	return p.pack("PackB", true, dst, trans, n, k, b, ldb)
}

// pack is PackA (b false: op(x) is rows×k) and PackB (b set: op(x) is
// k×rows).
func (p HeadPacker) pack(fn string, b bool, dst []float32, trans bool, rows, k int, x []float32, ld int) Operand {
	r, c := stored(b, trans, rows, k)
	need := p.LenA(rows, k)
	if b {
		need = p.LenB(k, rows)
	}
	checkOperand(fn, "the matrix", r, c, ld, len(x))
	if len(dst) < need {
		panic(fmt.Sprintf("blas: %s of %d×%d needs %d values, dst has %d", fn, r, c, need, len(dst)))
	}
	dst = dst[:need]
	switch {
	case rows == 0 || k == 0:
	case b:
		p.g.packB(dst, x, ld, trans, 0, 0, k, rows)
	default:
		p.g.packA(dst, x, ld, trans, 0, 0, rows, k)
	}
	return Operand{s: side{f: dst, panels: true, pk: k}, rows: rows, k: k, b: b, owner: p.g}
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (row-major) on go-asm
// like HeadSgemm, each operand a Matrix or the panels of PackA (for a) and
// PackB (for b) from this packer. It panics if an operand does not match
// m, n and k, if panels come from another packer or the other side, or if
// a slice is too short for its dimensions and leading dimension.
func (p HeadPacker) Sgemm(m, n, k int, alpha float32, a, b Operand, beta float32, c []float32, ldc int) {
	p.check(a, false, m, k)
	p.check(b, true, n, k)
	checkOperand("Sgemm", "C", m, n, ldc, len(c))
	p.g.sgemm(m, n, k, alpha, a.s, b.s, beta, c, ldc)
}

// check panics unless x can be side b (op(B), with rows = n) or A
// (rows = m) of a product with inner dimension k.
func (p HeadPacker) check(x Operand, b bool, rows, k int) {
	what := "A"
	if b {
		what = "B"
	}
	if !x.s.panels {
		r, c := stored(b, x.s.trans, rows, k)
		checkOperand("Sgemm", what, r, c, x.s.ld, len(x.s.f))
		return
	}
	switch {
	case x.owner != p.g:
		panic("blas: HeadPacker.Sgemm: operand " + what + " was packed by another packer")
	case x.b != b:
		panic("blas: HeadPacker.Sgemm: operand " + what + " holds panels of the other side")
	case x.rows != rows || x.k != k:
		panic(fmt.Sprintf("blas: HeadPacker.Sgemm: panels %s were packed for %d×%d, the product needs %d×%d", what, x.rows, x.k, rows, k))
	}
}
