package blas

import (
	"fmt"
	"runtime"
	"sync"
)

// KindGoAsm is the backend of our own SGEMM: Go blocking and packing around
// a microkernel in Go assembly (AVX-512 or AVX2+FMA), needing no library.
const KindGoAsm = "go-asm"

// microkernel is one register-blocked kernel: it multiplies a packed mr×kc
// panel of A by a packed kc×nr panel of B and writes
// C = alpha·(A·B) + beta·C into an mr×nr tile of C (row r at c[r·ldc:]);
// beta == 0 writes without reading C. fn is nil for the pure-Go twin.
type microkernel struct {
	isa    string // "avx512", "avx2" or "go"
	mr, nr int
	fn     kernelFunc
	// edges are kernels on the first rows (ascending) of the same mr-wide
	// A panels, for a last tile of fewer rows: no multiply-adds on the
	// padding's zeros.
	edges []edgeKernel
}

type kernelFunc func(kc int, a, b, c *float32, ldc int, alpha, beta float32)

type edgeKernel struct {
	rows int
	fn   kernelFunc
}

// goAsm is the go-asm backend: the five loops of BLIS (Goto's algorithm,
// as in BLIS and OpenBLAS) around one microkernel, single-threaded per
// call like the libraries (the callers in kernels split rows or heads
// across the worker pool, each calling Sgemm on its block).
//
//	for jc in steps of nc over N         B block kc×nc packed (L3)
//	  for pc in steps of kc over K         into nr-wide panels
//	    for ic in steps of mc over M       A block mc×kc packed (L2)
//	      for jr in steps of nr             B panel kc×nr stays in L1
//	        for ir in steps of mr           microkernel on one tile
//
// When M fits one A block (m ≤ mc: each worker's rows in the model), each
// B panel is packed just before its tiles instead (still in L1 when they
// run). Edges are padded with zeros by the packing, so every tile is a
// full mr×nr product; a tile that sticks out of C is computed into a
// local tile and only its valid part is written back. beta applies on the
// first kc block, later blocks accumulate (beta = 1). The microkernels
// run at 240–250 GFLOP/s on one Zen 5 core with their panels in L1/L2
// (AVX-512; AVX2 at 120, the 256-bit peak); kc from 128 to 768 measured
// alike on the model's shapes once the kernels prefetch their C tile.
type goAsm struct {
	k          microkernel
	kc, mc, nc int  // block sizes (multiples of 8, mr and nr)
	asmPack    bool // packs through packT4x8AVX and packCopy32AVX … packCopy4AVX
}

// Name says which kernel and blocks run, e.g.
// "go-asm (avx512 12x32 microkernel; kc 192, mc 672, nc 4096)".
func (g *goAsm) Name() string {
	return fmt.Sprintf("go-asm (%s %dx%d microkernel; kc %d, mc %d, nc %d)", g.k.isa, g.k.mr, g.k.nr, g.kc, g.mc, g.nc)
}

// maxTile bounds mr·nr (the Go twin's accumulators live on the stack).
const maxTile = 16 * 32

// newGoAsm sizes the blocks of kernel k to the caches (l1 and l2 in bytes;
// 0 when unknown takes 32 KiB and 512 KiB): a kc×nr panel of B fills half
// of L1, leaving room for the streamed mr×kc panels of A and the C tile,
// and an mc×kc block of A fills half of L2. kc is kept within [128, 512]
// so that the loop overhead and the C tile's loads and stores stay small
// against the kc·mr·nr multiply-adds.
func newGoAsm(k microkernel, l1, l2 int, asmPack bool) *goAsm {
	if l1 <= 0 {
		l1 = 32 << 10
	}
	if l2 <= 0 {
		l2 = 512 << 10
	}
	kc := min(max(l1/2/(4*k.nr)/8*8, 128), 512)
	mc := min(max(l2/2/(4*kc)/k.mr*k.mr, k.mr), 4096/k.mr*k.mr)
	nc := 4096 / k.nr * k.nr
	return &goAsm{k: k, kc: kc, mc: mc, nc: nc, asmPack: asmPack}
}

// goAsmBufs keeps the packed blocks of finished calls for the next ones:
// a free list that the garbage collector does not empty (a sync.Pool
// would, and then every product after a collection would allocate and
// zero megabytes again). At most maxFree buffers are kept, each of
// max(need, 1 Mi) floats (4 MiB: the blocks of the default sizes, mc·kc +
// nc·kc, fit), so the memory held is bounded by about 4 MiB per thread;
// more concurrent calls than that allocate and drop their own.
var goAsmBufs struct {
	mu   sync.Mutex
	free [][]float32
}

// maxFree is how many packing buffers are kept between calls.
var maxFree = runtime.GOMAXPROCS(0) + 2

func getBuf(need int) []float32 {
	goAsmBufs.mu.Lock()
	var buf []float32
	if n := len(goAsmBufs.free); n > 0 {
		buf = goAsmBufs.free[n-1]
		goAsmBufs.free = goAsmBufs.free[:n-1]
	}
	goAsmBufs.mu.Unlock()
	if cap(buf) < need {
		buf = make([]float32, max(need, 1<<20))
	}
	return buf[:need]
}

func putBuf(buf []float32) {
	goAsmBufs.mu.Lock()
	if len(goAsmBufs.free) < maxFree {
		goAsmBufs.free = append(goAsmBufs.free, buf)
	}
	goAsmBufs.mu.Unlock()
}

// split divides n into the fewest blocks of at most block elements, of
// equal size rounded up to a multiple of unit (the last may be shorter), so
// that m = 200 with mc = 192 runs 2×100 rather than 192 + 8 (the rows and
// the columns; the inner dimension's blocks are kc long from its start).
func split(n, block, unit int) int {
	nb := (n + block - 1) / block
	s := (n + nb - 1) / nb
	return (s + unit - 1) / unit * unit
}

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (row-major). The arguments
// are checked by the package-level Sgemm; called directly, a slice too
// short for its dimensions panics on a bounds check before any assembly
// runs.
func (g *goAsm) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	g.sgemm(m, n, k, alpha, side{f: a, ld: lda, trans: transA}, side{f: b, ld: ldb, trans: transB}, beta, c, ldc)
}

// side is one operand of goAsm's loops: a row-major matrix (f, leading
// dimension ld, transposed if trans) packed block by block as the loops
// reach it, or, with panels set, op(A) or op(B) already packed whole by
// packA or packB with kc = pk (panel q at f[q·w·pk:], w = mr for A, nr
// for B), so that block [pc, pc+kc) of panel q is f[q·w·pk + pc·w:][:kc·w]
// for any product whose inner dimension is at most pk.
type side struct {
	f      []float32
	ld     int
	trans  bool
	panels bool
	pk     int
}

// sgemm is Sgemm on operands that may be packed already (see side).
func (g *goAsm) sgemm(m, n, k int, alpha float32, a, b side, beta float32, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	if k <= 0 || alpha == 0 {
		// A and B are not read (BLAS semantics): C = beta·C.
		scaleC(m, n, beta, c, ldc)
		return
	}
	mr, nr := g.k.mr, g.k.nr
	// Blocks of the inner dimension are g.kc long from its start (the
	// last one shorter), not split evenly: a sum's grouping then depends
	// on where it starts and not on k, so a product with trailing zero
	// terms (a shorter row's attention over a padded batch's keys) gives
	// the bits of the product without them.
	kc := min(g.kc, k)
	mc := split(m, g.mc, mr)
	nc := split(n, g.nc, nr)
	// With a single A block (m ≤ mc, the model's case: each worker's rows)
	// every B panel is used by that block only, so it is packed just before
	// its tiles and is still in L1 when they run; a packed kc×nc block of B
	// would round-trip through L3 (2.4 MB at kc 192, n 3072).
	fused := m <= mc
	// One buffer: the packed A block, the packed B block (or panel) and
	// the edge tile (a local array would escape through the kernel's func
	// value). Operands packed already need no room.
	na, nb := mc*kc, roundUp(min(nc, n), nr)*kc
	switch {
	case b.panels:
		nb = 0
	case fused:
		nb = nr * kc
	}
	if a.panels {
		na = 0
	}
	buf := getBuf(na + nb + mr*nr)
	defer putBuf(buf)
	ap, bp, edge := buf[:na], buf[na:na+nb], buf[na+nb:]
	for jc := 0; jc < n; jc += nc {
		ncc := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kcc := min(kc, k-pc)
			if !fused && !b.panels {
				g.packB(bp, b.f, b.ld, b.trans, pc, jc, kcc, ncc)
			}
			bt := beta
			if pc > 0 {
				bt = 1
			}
			for ic := 0; ic < m; ic += mc {
				mcc := min(mc, m-ic)
				av, as := ap, mr*kcc // the A block and its panels' stride
				if a.panels {
					av, as = a.f[ic*a.pk+pc*mr:], mr*a.pk
				} else {
					g.packA(ap, a.f, a.ld, a.trans, ic, pc, mcc, kcc)
				}
				for jr := 0; jr < ncc; jr += nr {
					cols := min(nr, ncc-jr)
					var bpan []float32
					switch {
					case b.panels:
						o := (jc+jr)*b.pk + pc*nr
						bpan = b.f[o : o+nr*kcc]
					case fused:
						bpan = bp[:nr*kcc]
						g.packB(bpan, b.f, b.ld, b.trans, pc, jc+jr, kcc, cols)
					default:
						bpan = bp[jr*kcc : (jr+nr)*kcc]
					}
					g.panel(kcc, av, as, bpan, c, ic*ldc+jc+jr, mcc, cols, ldc, alpha, bt, edge)
				}
			}
		}
	}
}

// panel runs the microkernel down one packed B panel: the tiles of rows
// [0, mc) of the packed A block (panel q of mr rows at ap[q·as:]) against
// it, into C from c[off:]. cols (≤ nr) columns of the panel are valid.
func (g *goAsm) panel(kc int, ap []float32, as int, bpan, c []float32, off, mc, cols, ldc int, alpha, beta float32, edge []float32) {
	mr, nr := g.k.mr, g.k.nr
	for ir := 0; ir < mc; ir += mr {
		apan := ap[ir/mr*as : ir/mr*as+mr*kc]
		rows := min(mr, mc-ir)
		o := off + ir*ldc
		if rows == mr && cols == nr {
			g.tile(kc, apan, bpan, c[o:o+(mr-1)*ldc+nr], ldc, alpha, beta)
			continue
		}
		if rows < mr {
			if e, ok := g.edgeKernel(rows); ok {
				if rows == e.rows && cols == nr {
					_ = c[o+(rows-1)*ldc+nr-1]
					e.fn(kc, &apan[0], &bpan[0], &c[o], ldc, alpha, beta)
					continue
				}
				t := edge[:e.rows*nr]
				e.fn(kc, &apan[0], &bpan[0], &t[0], nr, alpha, 0)
				mergeTile(c[o:], t, rows, cols, ldc, nr, beta)
				continue
			}
		}
		t := edge[:mr*nr]
		g.tile(kc, apan, bpan, t, nr, alpha, 0)
		mergeTile(c[o:], t, rows, cols, ldc, nr, beta)
	}
}

// edgeKernel returns the smallest edge kernel for a last tile of rows.
func (g *goAsm) edgeKernel(rows int) (edgeKernel, bool) {
	for _, e := range g.k.edges {
		if rows <= e.rows {
			return e, true
		}
	}
	return edgeKernel{}, false
}

// mergeTile writes rows×cols of the tile t (row stride nr, holding
// alpha·A·B) into C: C = t + beta·C, or t where beta is 0.
func mergeTile(c, t []float32, rows, cols, ldc, nr int, beta float32) {
	for r := 0; r < rows; r++ {
		cr := c[r*ldc : r*ldc+cols]
		tr := t[r*nr : r*nr+cols]
		if beta == 0 {
			copy(cr, tr)
			continue
		}
		for j := range cr {
			cr[j] = tr[j] + beta*cr[j]
		}
	}
}

// tile runs the microkernel on one full tile; a, b and c are exactly the
// panels and the tile's span of C, so their bounds were checked by the
// slicing.
func (g *goAsm) tile(kc int, a, b, c []float32, ldc int, alpha, beta float32) {
	if g.k.fn != nil {
		g.k.fn(kc, &a[0], &b[0], &c[0], ldc, alpha, beta)
		return
	}
	kernelGo(g.k.mr, g.k.nr, kc, a, b, c, ldc, alpha, beta)
}

// kernelGo is the pure-Go twin of the assembly microkernels: the same
// packed panels, float32 accumulation in the same order over p (without
// fused multiply-adds, so it differs from them by rounding only).
func kernelGo(mr, nr, kc int, a, b, c []float32, ldc int, alpha, beta float32) {
	var acc [maxTile]float32
	t := acc[:mr*nr]
	for p := 0; p < kc; p++ {
		ar := a[p*mr : p*mr+mr]
		br := b[p*nr : p*nr+nr]
		for i, x := range ar {
			row := t[i*nr : i*nr+nr]
			for j, y := range br {
				row[j] += x * y
			}
		}
	}
	for i := 0; i < mr; i++ {
		cr := c[i*ldc : i*ldc+nr]
		row := t[i*nr : i*nr+nr]
		for j := range cr {
			if beta == 0 {
				cr[j] = alpha * row[j]
			} else {
				cr[j] = alpha*row[j] + beta*cr[j]
			}
		}
	}
}

// packA packs rows [i0, i0+mc) and columns [p0, p0+kc) of op(A) into
// panels of mr rows, panel q at dst[q·mr·kc:], value (i, p) of the panel
// at p·mr + i; rows past mc are zeros.
func (g *goAsm) packA(dst, a []float32, lda int, trans bool, i0, p0, mc, kc int) {
	mr := g.k.mr
	for q := 0; q*mr < mc; q++ {
		rows := min(mr, mc-q*mr)
		panel := dst[q*mr*kc : (q+1)*mr*kc]
		i := i0 + q*mr
		if trans { // op(A)[i][p] = a[p·lda + i]: contiguous along i
			packCopy(panel, mr, a, p0*lda+i, lda, kc, rows, g.asmPack)
		} else { // a[i·lda + p]: contiguous along p
			g.packTrans(panel, mr, a, i*lda+p0, lda, kc, rows)
		}
	}
}

// packB packs rows [p0, p0+kc) and columns [j0, j0+nc) of op(B) into
// panels of nr columns, panel q at dst[q·nr·kc:], value (p, j) of the panel
// at p·nr + j; columns past nc are zeros.
func (g *goAsm) packB(dst, b []float32, ldb int, trans bool, p0, j0, kc, nc int) {
	nr := g.k.nr
	for q := 0; q*nr < nc; q++ {
		cols := min(nr, nc-q*nr)
		panel := dst[q*nr*kc : (q+1)*nr*kc]
		j := j0 + q*nr
		if trans { // op(B)[p][j] = b[j·ldb + p]: contiguous along p
			g.packTrans(panel, nr, b, j*ldb+p0, ldb, kc, cols)
		} else {
			packCopy(panel, nr, b, p0*ldb+j, ldb, kc, cols, g.asmPack)
		}
	}
}

// packCopy fills panel (kc groups of w) with group p = src[off+p·ld :][:valid]
// followed by w−valid zeros. Full groups of the kernels' widths (32 and 12
// for AVX-512, 24 and 4 for AVX2) go through packCopy32AVX … packCopy4AVX
// when asm is set, and are copied as fixed-size arrays otherwise (the
// pure-Go build).
func packCopy(panel []float32, w int, src []float32, off, ld, kc, valid int, asm bool) {
	if valid == w && asm && kc > 0 && (w == 32 || w == 24 || w == 12 || w == 4) {
		// The last element read and written, checked here so that the
		// assembly stays within both slices.
		_ = src[off+(kc-1)*ld+w-1]
		_ = panel[kc*w-1]
		d, s := &panel[0], &src[off]
		switch w {
		case 32:
			packCopy32AVX(d, s, ld, kc)
		case 24:
			packCopy24AVX(d, s, ld, kc)
		case 12:
			packCopy12AVX(d, s, ld, kc)
		case 4:
			packCopy4AVX(d, s, ld, kc)
		}
		return
	}
	if valid == w {
		switch w {
		case 32:
			packCopy32(panel, src, off, ld, kc)
			return
		case 24:
			packCopy24(panel, src, off, ld, kc)
			return
		case 12:
			packCopy12(panel, src, off, ld, kc)
			return
		case 4:
			packCopy4(panel, src, off, ld, kc)
			return
		}
	}
	for p := 0; p < kc; p++ {
		d := panel[p*w : p*w+w]
		s := src[off+p*ld : off+p*ld+valid]
		copy(d, s)
		clear(d[valid:])
	}
}

// packCopy32 … packCopy4 are packCopy of full groups of 32 … 4 values.
func packCopy32(panel, src []float32, off, ld, kc int) {
	for p := 0; p < kc; p++ {
		*(*[32]float32)(panel[p*32:]) = *(*[32]float32)(src[off+p*ld:])
	}
}

func packCopy24(panel, src []float32, off, ld, kc int) {
	for p := 0; p < kc; p++ {
		*(*[24]float32)(panel[p*24:]) = *(*[24]float32)(src[off+p*ld:])
	}
}

func packCopy12(panel, src []float32, off, ld, kc int) {
	for p := 0; p < kc; p++ {
		*(*[12]float32)(panel[p*12:]) = *(*[12]float32)(src[off+p*ld:])
	}
}

func packCopy4(panel, src []float32, off, ld, kc int) {
	for p := 0; p < kc; p++ {
		*(*[4]float32)(panel[p*4:]) = *(*[4]float32)(src[off+p*ld:])
	}
}

// packTrans fills panel (kc groups of w) with the transpose of valid rows
// of kc values (row q at src[off+q·ld:]): panel[p·w + q] = row q's value p;
// the w−valid groups' tails are zeros. Blocks of 4 rows × 8 columns go
// through packT4x8AVX when asmPack is set; the rest (kc mod 8 columns,
// valid mod 4 rows) is copied one value at a time.
func (g *goAsm) packTrans(panel []float32, w int, src []float32, off, ld, kc, valid int) {
	q0 := 0
	if g.asmPack && kc >= 8 {
		n8 := kc / 8
		for ; q0+4 <= valid; q0 += 4 {
			// The last element read and written, checked here so that
			// the assembly stays within both slices.
			_ = src[off+(q0+3)*ld+8*n8-1]
			_ = panel[(8*n8-1)*w+q0+3]
			packT4x8AVX(&panel[q0], w, &src[off+q0*ld], ld, n8)
			for q := q0; q < q0+4; q++ {
				row := src[off+q*ld+8*n8 : off+q*ld+kc]
				for p, v := range row {
					panel[(8*n8+p)*w+q] = v
				}
			}
		}
	}
	for q := q0; q < valid; q++ {
		row := src[off+q*ld : off+q*ld+kc]
		for p, v := range row {
			panel[p*w+q] = v
		}
	}
	if valid < w {
		for p := 0; p < kc; p++ {
			clear(panel[p*w+valid : p*w+w])
		}
	}
}

// goAsmFor returns the go-asm backend with the microkernel of isa
// ("avx512", "avx2", or "" for the fastest this processor runs), blocks
// sized to its caches. It fails off amd64, with the purego tag, or when
// the processor lacks the instruction set.
func goAsmFor(isa string) (*goAsm, error) {
	ks := asmKernels()
	if len(ks) == 0 {
		return nil, fmt.Errorf("blas: go-asm needs amd64 with AVX2 and FMA, built without the purego tag")
	}
	for _, k := range ks {
		if isa == "" || isa == k.isa {
			l1, l2 := cacheSizes()
			return newGoAsm(k, l1, l2, asmPackOK), nil
		}
	}
	return nil, fmt.Errorf("blas: go-asm:%s: this processor runs only %s", isa, kernelNames(ks))
}

func kernelNames(ks []microkernel) string {
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += ", "
		}
		s += k.isa
	}
	return s
}

// goAsmBest is the go-asm backend with the fastest kernel (nil when there
// is none).
var goAsmBest = sync.OnceValue(func() *goAsm {
	g, _ := goAsmFor("")
	return g
})
