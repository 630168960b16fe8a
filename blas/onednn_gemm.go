//go:build !windows

package blas

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// maxGemmPlans bounds the primitives SgemmBF16 keeps. A training job uses
// a few dozen shapes (each layer's products, split over the workers);
// beyond the bound a shape gets a primitive for the one call.
const maxGemmPlans = 512

// gemmKey identifies one SgemmBF16 primitive.
type gemmKey struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
	beta           float32
	in16           bool // GemmBF16: A and B are bfloat16 already
}

// gemmPlan is a bfloat16 matmul primitive with the reorders that round its
// float32 operands, and a free list of execution contexts.
type gemmPlan struct {
	key          gemmKey
	pd, prim     uintptr
	cvtAPD, cvtA uintptr // A float32 (strided) → bfloat16 [m, k] row-major
	cvtBPD, cvtB uintptr // B float32 (strided) → bfloat16 in the layout the matmul asks for
	aMD, a16MD   dnnlMemDesc
	bMD, b16MD   dnnlMemDesc
	cMD, scrMD   dnnlMemDesc
	a16Size      int
	b16Size      int
	scrSize      int

	ctxs ctxPool[*gemmExec]
}

// gemmExec is what one call needs besides the primitives: a stream, memory
// objects and the bfloat16 copies of the operands.
type gemmExec struct {
	dnnlStream
	a, a16, b, b16, c  uintptr
	s                  uintptr
	a16Buf, b16Buf     []byte
	scrBuf             []byte
	mmArgs             [4]dnnlExecArg
	nmm                int
	cvtAArgs, cvtBArgs [2]dnnlExecArg

	sys [4]uintptr
	a32 []float32 // the operands during a call
	b32 []float32
	c32 []float32

	a16in, b16in []uint16 // GemmBF16's operands during a call
}

var gemmPlans struct {
	m     sync.Map // gemmKey → *gemmPlan
	mu    sync.Mutex
	count atomic.Int32
}

// SgemmBF16 computes C = beta·C + op(A)·op(B) as Sgemm does with alpha 1,
// except that the entries of A and B are first rounded to bfloat16 (to
// nearest, ties to even) and the products of those are accumulated in
// float32: the matrix product of mixed-precision training (Micikevicius et
// al. 2018; Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning
// Training"). A, B and C keep their float32 storage; the rounded copies
// are made inside, by oneDNN's reorders, which also pack B for its matmul
// kernels.
//
// Its error against the float32 product is that of rounding each operand
// to 8 significant bits: |ΔC_ij| ≤ 2·2⁻⁹·Σ_l |A_il|·|B_lj| plus float32
// accumulation, about 1e-3 relative for operands of one sign.
//
// One oneDNN matmul primitive is created for each shape, transposition,
// leading dimension and beta (0.3–1 ms) and kept for the life of the
// process, up to 512 of them; a fixed shape runs faster kernels than a
// run-time one. SgemmBF16 is safe for concurrent use and single-threaded
// inside (callers split the rows, as kernels.MatmulForward does).
//
// It panics if BF16Supported reports an error (check it first), if a
// slice is too short for its dimensions, or if oneDNN fails, which after
// BF16Supported indicates a bug.
func SgemmBF16(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	d, p, e, transient := gemmStart("SgemmBF16", gemmKey{transA, transB, m, n, k, lda, ldb, ldc, beta, false}, c)
	if e == nil {
		return
	}
	key := p.key
	e.a32, e.b32, e.c32 = a, b, c
	e.setHandle(d, e.a, unsafe.Pointer(&e.a32[0]))
	e.setHandle(d, e.b, unsafe.Pointer(&e.b32[0]))
	e.setHandle(d, e.c, unsafe.Pointer(&e.c32[0]))
	e.execute(d, p.cvtA, e.cvtAArgs[:], "reorder A f32 to bf16", false, key.m, key.n, key.k)
	e.execute(d, p.cvtB, e.cvtBArgs[:], "reorder B f32 to bf16", false, key.m, key.n, key.k)
	e.execute(d, p.prim, e.mmArgs[:e.nmm], "bf16 matmul", true, key.m, key.n, key.k)
	e.sys = [4]uintptr{}
	e.a32, e.b32, e.c32 = nil, nil, nil
	p.done(d, e, transient)
}

// GemmBF16 is SgemmBF16 on operands that are bfloat16 already (the bits
// tensor.F32ToBF16 gives, stored as Sgemm's operands are, op(A) [m, k]
// and op(B) [k, n] with leading dimensions lda and ldb), with C float32:
// C = beta·C + op(A)·op(B) accumulated in float32. No reorder runs: a
// caller that rounds an operand once uses it in several products (a
// layer's input in its forward product and its weight gradient, the
// output gradient in both backward products), and oneDNN's kernels copy
// B into their blocked layout tile by tile as they go.
//
// Its primitives are cached as SgemmBF16's are, within the same bound; it
// panics as SgemmBF16 does.
func GemmBF16(transA, transB bool, m, n, k int, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	d, p, e, transient := gemmStart("GemmBF16", gemmKey{transA, transB, m, n, k, lda, ldb, ldc, beta, true}, c)
	if e == nil {
		return
	}
	key := p.key
	e.a16in, e.b16in, e.c32 = a, b, c
	e.setHandle(d, e.a, unsafe.Pointer(&e.a16in[0]))
	e.setHandle(d, e.b, unsafe.Pointer(&e.b16in[0]))
	e.setHandle(d, e.c, unsafe.Pointer(&e.c32[0]))
	e.execute(d, p.prim, e.mmArgs[:e.nmm], "bf16 matmul", true, key.m, key.n, key.k)
	e.sys = [4]uintptr{}
	e.a16in, e.b16in, e.c32 = nil, nil, nil
	p.done(d, e, transient)
}

// gemmStart is what SgemmBF16 and GemmBF16 do before their products (the
// operands' lengths checked): it refuses a NaN beta, handles m, n or k = 0
// itself (e nil: nothing left to run), and otherwise returns key's plan
// (beta −0 made 0) and an execution context. It panics as they do.
func gemmStart(fn string, key gemmKey, c []float32) (d *dnnlMatmul, p *gemmPlan, e *gemmExec, transient bool) {
	if key.beta != key.beta {
		panic("blas: " + fn + ": beta is NaN")
	}
	if key.m == 0 || key.n == 0 {
		return nil, nil, nil, false
	}
	if key.k == 0 {
		scaleC(key.m, key.n, key.beta, c, key.ldc)
		return nil, nil, nil, false
	}
	if err := BF16Supported(); err != nil {
		panic("blas: " + fn + ": " + err.Error())
	}
	d, err := loadDNNLMatmul()
	if err != nil {
		panic("blas: " + fn + ": " + err.Error())
	}
	if key.beta == 0 {
		key.beta = 0 // -0 → 0
	}
	p, transient, err = gemmPlanFor(d, key)
	if err != nil {
		panic(err.Error())
	}
	if e, err = p.get(d); err != nil {
		panic(err.Error())
	}
	return d, p, e, transient
}

// done returns e to p after a call, or destroys a transient p.
func (p *gemmPlan) done(d *dnnlMatmul, e *gemmExec, transient bool) {
	if transient {
		p.destroy(d)
		return
	}
	p.put(e)
}

// gemmPlanFor returns the cached primitive for key, creating it; past
// maxGemmPlans it returns a new one that the caller destroys (transient).
func gemmPlanFor(d *dnnlMatmul, key gemmKey) (p *gemmPlan, transient bool, err error) {
	if v, ok := gemmPlans.m.Load(key); ok {
		return v.(*gemmPlan), false, nil
	}
	gemmPlans.mu.Lock()
	defer gemmPlans.mu.Unlock()
	if v, ok := gemmPlans.m.Load(key); ok {
		return v.(*gemmPlan), false, nil
	}
	p, err = newGemmPlan(d, key)
	if err != nil {
		return nil, false, err
	}
	if gemmPlans.count.Load() >= maxGemmPlans {
		return p, true, nil
	}
	gemmPlans.count.Add(1)
	gemmPlans.m.Store(key, p)
	return p, false, nil
}

// mdStrided initialises md as a 2-D rows×cols matrix of type dt; with
// trans it is stored column-major (element (i, j) at j·ld + i), else
// row-major (i·ld + j).
func (d *dnnlMatmul) mdStrided(md *dnnlMemDesc, rows, cols int, dt uintptr, trans bool, ld int) error {
	var dims, strides [12]int64 // dnnl_dims_t
	dims[0], dims[1] = int64(rows), int64(cols)
	strides[0], strides[1] = int64(ld), 1
	if trans {
		strides[0], strides[1] = 1, int64(ld)
	}
	if st := d.call(d.memDescByStrides, uintptr(unsafe.Pointer(md)), 2, uintptr(unsafe.Pointer(&dims)), dt, uintptr(unsafe.Pointer(&strides))); st != dnnlSuccess {
		return dnnlError("dnnl_memory_desc_init_by_strides", st)
	}
	return nil
}

// mdTag initialises md as a 2-D rows×cols matrix of type dt with a format tag.
func (d *dnnlMatmul) mdTag(md *dnnlMemDesc, rows, cols int, dt, tag uintptr) error {
	dims := [2]int64{int64(rows), int64(cols)}
	if st := d.call(d.memDescByTag, uintptr(unsafe.Pointer(md)), 2, uintptr(unsafe.Pointer(&dims)), dt, tag); st != dnnlSuccess {
		return dnnlError("dnnl_memory_desc_init_by_tag", st)
	}
	return nil
}

// newGemmPlan creates the primitives for key: reorders of A [m, k] and
// B [k, n] from float32 to bfloat16 and the matmul bf16·bf16 → f32 C
// [m, n], with a sum post-op scaled by beta when beta ≠ 0.
func newGemmPlan(d *dnnlMatmul, key gemmKey) (p *gemmPlan, err error) {
	m, n, k := key.m, key.n, key.k
	p = &gemmPlan{key: key}
	defer func() {
		if err != nil {
			p.destroy(d)
			p = nil
		}
	}()
	if key.in16 {
		return newGemmPlan16(d, p)
	}
	var anyMD dnnlMemDesc
	for _, e := range []error{
		d.mdStrided(&p.aMD, m, k, dnnlF32, key.transA, key.lda),
		d.mdTag(&p.a16MD, m, k, dnnlBF16, dnnlTagAB),
		d.mdStrided(&p.bMD, k, n, dnnlF32, key.transB, key.ldb),
		d.mdTag(&anyMD, k, n, dnnlBF16, dnnlFormatAny),
		d.mdStrided(&p.cMD, m, n, dnnlF32, false, key.ldc),
	} {
		if e != nil {
			return nil, e
		}
	}
	var op dnnlMatmulDesc
	if st := d.call(d.matmulDescInit, uintptr(unsafe.Pointer(&op)), uintptr(unsafe.Pointer(&p.a16MD)), uintptr(unsafe.Pointer(&anyMD)), 0, uintptr(unsafe.Pointer(&p.cMD))); st != dnnlSuccess {
		return nil, dnnlError("dnnl_matmul_desc_init", st)
	}
	attr, _, err := d.matmulAttr(key.beta, epilogue{}, nil)
	if err != nil {
		return nil, err
	}
	defer d.call(d.attrDestroy, attr)
	if st := d.call(d.pdCreate, uintptr(unsafe.Pointer(&p.pd)), uintptr(unsafe.Pointer(&op)), attr, d.engine, 0); st != dnnlSuccess {
		return nil, fmt.Errorf("%w (bf16 gemm m=%d, n=%d, k=%d)", dnnlError("dnnl_primitive_desc_create", st), m, n, k)
	}
	if err := copyMD(&p.b16MD, d, p.pd, dnnlQueryWeightsMD); err != nil {
		return nil, err
	}
	if err := copyMD(&p.scrMD, d, p.pd, dnnlQueryScratchMD); err == nil {
		p.scrSize = int(d.call64(d.memDescGetSize, uintptr(unsafe.Pointer(&p.scrMD))))
	}
	p.a16Size = int(d.call64(d.memDescGetSize, uintptr(unsafe.Pointer(&p.a16MD))))
	p.b16Size = int(d.call64(d.memDescGetSize, uintptr(unsafe.Pointer(&p.b16MD))))
	if st := d.call(d.primCreate, uintptr(unsafe.Pointer(&p.prim)), p.pd); st != dnnlSuccess {
		return nil, dnnlError("dnnl_primitive_create (bf16 gemm)", st)
	}
	for _, r := range []struct {
		pd, prim *uintptr
		from, to *dnnlMemDesc
		what     string
	}{
		{&p.cvtAPD, &p.cvtA, &p.aMD, &p.a16MD, "A"},
		{&p.cvtBPD, &p.cvtB, &p.bMD, &p.b16MD, "B"},
	} {
		if st := d.call(d.reorderPDCreate, uintptr(unsafe.Pointer(r.pd)), uintptr(unsafe.Pointer(r.from)), d.engine, uintptr(unsafe.Pointer(r.to)), d.engine, 0); st != dnnlSuccess {
			return nil, dnnlError("dnnl_reorder_primitive_desc_create ("+r.what+" f32 to bf16)", st)
		}
		if st := d.call(d.primCreate, uintptr(unsafe.Pointer(r.prim)), *r.pd); st != dnnlSuccess {
			return nil, dnnlError("dnnl_primitive_create ("+r.what+" f32 to bf16)", st)
		}
	}
	// One context now, so that errors in creating it surface here.
	e, err := p.get(d)
	if err != nil {
		return nil, err
	}
	p.put(e)
	return p, nil
}

// newGemmPlan16 creates GemmBF16's primitive for p.key: the matmul of
// strided bfloat16 A [m, k] and B [k, n] into float32 C [m, n], with a sum
// post-op scaled by beta when beta ≠ 0; no reorders.
func newGemmPlan16(d *dnnlMatmul, p *gemmPlan) (*gemmPlan, error) {
	key := p.key
	for _, e := range []error{
		d.mdStrided(&p.aMD, key.m, key.k, dnnlBF16, key.transA, key.lda),
		d.mdStrided(&p.bMD, key.k, key.n, dnnlBF16, key.transB, key.ldb),
		d.mdStrided(&p.cMD, key.m, key.n, dnnlF32, false, key.ldc),
	} {
		if e != nil {
			return nil, e
		}
	}
	var op dnnlMatmulDesc
	if st := d.call(d.matmulDescInit, uintptr(unsafe.Pointer(&op)), uintptr(unsafe.Pointer(&p.aMD)), uintptr(unsafe.Pointer(&p.bMD)), 0, uintptr(unsafe.Pointer(&p.cMD))); st != dnnlSuccess {
		return nil, dnnlError("dnnl_matmul_desc_init", st)
	}
	attr, _, err := d.matmulAttr(key.beta, epilogue{}, nil)
	if err != nil {
		return nil, err
	}
	defer d.call(d.attrDestroy, attr)
	if st := d.call(d.pdCreate, uintptr(unsafe.Pointer(&p.pd)), uintptr(unsafe.Pointer(&op)), attr, d.engine, 0); st != dnnlSuccess {
		return nil, fmt.Errorf("%w (bf16 gemm of bf16 operands m=%d, n=%d, k=%d)", dnnlError("dnnl_primitive_desc_create", st), key.m, key.n, key.k)
	}
	if err := copyMD(&p.scrMD, d, p.pd, dnnlQueryScratchMD); err == nil {
		p.scrSize = int(d.call64(d.memDescGetSize, uintptr(unsafe.Pointer(&p.scrMD))))
	}
	if st := d.call(d.primCreate, uintptr(unsafe.Pointer(&p.prim)), p.pd); st != dnnlSuccess {
		return nil, dnnlError("dnnl_primitive_create (bf16 gemm of bf16 operands)", st)
	}
	e, err := p.get(d)
	if err != nil {
		return nil, err
	}
	p.put(e)
	return p, nil
}

// get takes an execution context from the free list or makes one.
func (p *gemmPlan) get(d *dnnlMatmul) (*gemmExec, error) {
	if e, ok := p.ctxs.take(); ok {
		return e, nil
	}
	if p.key.in16 {
		return p.get16(d)
	}
	e := &gemmExec{a16Buf: alignedBytes(p.a16Size), b16Buf: alignedBytes(p.b16Size)}
	if p.scrSize > 0 {
		e.scrBuf = alignedBytes(p.scrSize)
	}
	if st := d.call(d.streamCreate, uintptr(unsafe.Pointer(&e.stream)), d.engine, dnnlStreamDefault); st != dnnlSuccess {
		return nil, dnnlError("dnnl_stream_create", st)
	}
	for _, m := range []struct {
		mem *uintptr
		md  *dnnlMemDesc
		buf unsafe.Pointer
	}{
		{&e.a, &p.aMD, nil}, // the float32 operands and C: set per call
		{&e.b, &p.bMD, nil},
		{&e.c, &p.cMD, nil},
		{&e.a16, &p.a16MD, ptr(e.a16Buf)},
		{&e.b16, &p.b16MD, ptr(e.b16Buf)},
		{&e.s, &p.scrMD, ptr(e.scrBuf)},
	} {
		if m.mem == &e.s && p.scrSize == 0 {
			continue
		}
		if st := d.call(d.memCreate, uintptr(unsafe.Pointer(m.mem)), uintptr(unsafe.Pointer(m.md)), d.engine, uintptr(m.buf)); st != dnnlSuccess {
			e.destroy(d)
			return nil, dnnlError("dnnl_memory_create", st)
		}
	}
	e.cvtAArgs = [2]dnnlExecArg{{arg: dnnlArgSrc, mem: e.a}, {arg: dnnlArgDst, mem: e.a16}}
	e.cvtBArgs = [2]dnnlExecArg{{arg: dnnlArgSrc, mem: e.b}, {arg: dnnlArgDst, mem: e.b16}}
	e.mmArgs[0] = dnnlExecArg{arg: dnnlArgSrc, mem: e.a16}
	e.mmArgs[1] = dnnlExecArg{arg: dnnlArgWeights, mem: e.b16}
	e.mmArgs[2] = dnnlExecArg{arg: dnnlArgDst, mem: e.c}
	e.nmm = 3
	if e.s != 0 {
		e.mmArgs[3] = dnnlExecArg{arg: dnnlArgScratchpad, mem: e.s}
		e.nmm = 4
	}
	p.ctxs.add(e)
	return e, nil
}

// get16 makes a context for a GemmBF16 plan: A, B and C set per call.
func (p *gemmPlan) get16(d *dnnlMatmul) (*gemmExec, error) {
	e := &gemmExec{}
	if p.scrSize > 0 {
		e.scrBuf = alignedBytes(p.scrSize)
	}
	if st := d.call(d.streamCreate, uintptr(unsafe.Pointer(&e.stream)), d.engine, dnnlStreamDefault); st != dnnlSuccess {
		return nil, dnnlError("dnnl_stream_create", st)
	}
	for _, m := range []struct {
		mem *uintptr
		md  *dnnlMemDesc
		buf unsafe.Pointer
	}{
		{&e.a, &p.aMD, nil},
		{&e.b, &p.bMD, nil},
		{&e.c, &p.cMD, nil},
		{&e.s, &p.scrMD, ptr(e.scrBuf)},
	} {
		if m.mem == &e.s && p.scrSize == 0 {
			continue
		}
		if st := d.call(d.memCreate, uintptr(unsafe.Pointer(m.mem)), uintptr(unsafe.Pointer(m.md)), d.engine, uintptr(m.buf)); st != dnnlSuccess {
			e.destroy(d)
			return nil, dnnlError("dnnl_memory_create", st)
		}
	}
	e.mmArgs[0] = dnnlExecArg{arg: dnnlArgSrc, mem: e.a}
	e.mmArgs[1] = dnnlExecArg{arg: dnnlArgWeights, mem: e.b}
	e.mmArgs[2] = dnnlExecArg{arg: dnnlArgDst, mem: e.c}
	e.nmm = 3
	if e.s != 0 {
		e.mmArgs[3] = dnnlExecArg{arg: dnnlArgScratchpad, mem: e.s}
		e.nmm = 4
	}
	p.ctxs.add(e)
	return e, nil
}

func (p *gemmPlan) put(e *gemmExec) { p.ctxs.put(e) }

func (e *gemmExec) destroy(d *dnnlMatmul) {
	e.release(d, e.a, e.a16, e.b, e.b16, e.c, e.s)
}

// destroy frees the C objects of p.
func (p *gemmPlan) destroy(d *dnnlMatmul) {
	for _, e := range p.ctxs.all {
		e.destroy(d)
	}
	for _, h := range []uintptr{p.prim, p.cvtA, p.cvtB} {
		if h != 0 {
			d.call(d.primDestroy, h)
		}
	}
	for _, h := range []uintptr{p.cvtAPD, p.cvtBPD, p.pd} {
		if h != 0 {
			d.call(d.pdDestroy, h)
		}
	}
}

// gemmImpl names the implementation oneDNN chose for a SgemmBF16 shape,
// e.g. "brg:avx512_core_bf16", for tests and benchmarks.
func gemmImpl(key gemmKey) string {
	d, err := loadDNNLMatmul()
	if err != nil {
		return err.Error()
	}
	p, transient, err := gemmPlanFor(d, key)
	if err != nil {
		return err.Error()
	}
	if transient {
		defer p.destroy(d)
	}
	var s *byte
	if d.call(d.pdQuery, p.pd, dnnlQueryImplInfo, 0, uintptr(unsafe.Pointer(&s))) != dnnlSuccess || s == nil {
		return "?"
	}
	n2 := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(s), n2)) != 0 {
		n2++
	}
	return string(unsafe.Slice(s, n2))
}
