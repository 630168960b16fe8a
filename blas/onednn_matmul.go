//go:build !windows

package blas

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Constants of the oneDNN 2.6 C API, from /usr/include/oneapi/dnnl/dnnl_types.h
// (Debian libdnnl-dev 2.6.3), checked by compiling a C program that prints
// them with gcc on x86-64 Linux.
const (
	dnnlSuccess = 0 // dnnl_status_t dnnl_success

	dnnlCPU = 1 // dnnl_engine_kind_t dnnl_cpu

	dnnlBF16 = 2 // dnnl_data_type_t dnnl_bf16
	dnnlF32  = 3 // dnnl_data_type_t dnnl_f32
	dnnlS32  = 4 // dnnl_data_type_t dnnl_s32
	dnnlS8   = 5 // dnnl_data_type_t dnnl_s8
	dnnlU8   = 6 // dnnl_data_type_t dnnl_u8

	dnnlFormatAny = 1  // dnnl_format_tag_t dnnl_format_tag_any
	dnnlTagAB     = 3  // dnnl_format_tag_t dnnl_ab: row-major 2-D
	dnnlTagBA     = 22 // dnnl_format_tag_t dnnl_ba: column-major 2-D

	dnnlArgSrc        = 1  // DNNL_ARG_SRC (also DNNL_ARG_FROM)
	dnnlArgSrc1       = 2  // DNNL_ARG_SRC_1: a binary post-op's second input
	dnnlArgBias       = 41 // DNNL_ARG_BIAS
	dnnlArgDst        = 17 // DNNL_ARG_DST (also DNNL_ARG_TO)
	dnnlArgWeights    = 33 // DNNL_ARG_WEIGHTS
	dnnlArgScratchpad = 80 // DNNL_ARG_SCRATCHPAD

	dnnlScratchpadUser = 1   // dnnl_scratchpad_mode_t dnnl_scratchpad_mode_user
	dnnlQueryImplInfo  = 8   // dnnl_query_t dnnl_query_impl_info_str
	dnnlQueryWeightsMD = 131 // dnnl_query_t dnnl_query_weights_md
	dnnlQueryScratchMD = 136 // dnnl_query_t dnnl_query_scratchpad_md

	dnnlStreamDefault = 1 // dnnl_stream_flags_t dnnl_stream_default_flags

	dnnlArgPostOpBase = 16384   // DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE: post-op i's arguments are (i+1)·base | arg
	dnnlBinaryAdd     = 0x1fff0 // dnnl_alg_kind_t dnnl_binary_add
)

// dnnlEltwiseAlg maps an Eltwise to its dnnl_alg_kind_t (0: none).
var dnnlEltwiseAlg = [...]int32{
	EltwiseNone:     0,
	EltwiseGELUErf:  0x30, // dnnl_eltwise_gelu_erf
	EltwiseGELUTanh: 0xcf, // dnnl_eltwise_gelu_tanh
	EltwiseReLU:     0x1f, // dnnl_eltwise_relu
	EltwiseSwish:    0xdf, // dnnl_eltwise_swish (alpha 1: x·σ(x))
	EltwiseTanh:     0x2f, // dnnl_eltwise_tanh
}

// dnnlMemDesc holds a dnnl_memory_desc_t (696 bytes in oneDNN 2.6 on
// x86-64; 8-byte aligned since it starts with int64 fields).
type dnnlMemDesc [96]uint64

// dnnlMatmulDesc holds a dnnl_matmul_desc_t (2800 bytes in oneDNN 2.6).
type dnnlMatmulDesc [384]uint64

// dnnlExecArg mirrors dnnl_exec_arg_t {int arg; dnnl_memory_t memory}.
type dnnlExecArg struct {
	arg int32
	_   int32
	mem uintptr
}

// dnnlStatusNames names dnnl_status_t values.
var dnnlStatusNames = [...]string{"success", "out of memory", "invalid arguments", "unimplemented", "iterator ends", "runtime error", "not required"}

// dnnlError describes a failed oneDNN call.
func dnnlError(call string, st int32) error {
	name := "unknown status"
	if st >= 0 && int(st) < len(dnnlStatusNames) {
		name = dnnlStatusNames[st]
	}
	return fmt.Errorf("blas: oneDNN %s failed with status %d (%s)", call, st, name)
}

// dnnlMatmul is the part of oneDNN's primitive API that the bfloat16
// products use: function addresses for purego.SyscallN, and one CPU engine
// shared by all of them (engines may be used from several threads at once).
type dnnlMatmul struct {
	engine uintptr

	engineCreate, streamCreate, streamWait, streamDestroy      uintptr
	memDescByTag, memDescGetSize, memDescEqual                 uintptr
	memDescByStrides                                           uintptr
	memCreate, memSetHandle, memDestroy                        uintptr
	matmulDescInit, pdCreate, pdQuery, pdQueryMD, pdDestroy    uintptr
	reorderPDCreate, primCreate, primExecute, primDestroy      uintptr
	attrCreate, attrSetScratchpad, attrSetPostOps, attrDestroy uintptr
	postOpsCreate, postOpsDestroy, postOpsAppendBinary         uintptr
	postOpsAppendSum                                           func(po uintptr, scale float32) int32
	postOpsAppendEltwise                                       func(po uintptr, scale float32, alg int32, alpha, beta float32) int32
	isa                                                        string
}

// call runs a oneDNN function returning dnnl_status_t. Like
// purego.SyscallN, it moves what its pointer arguments (converted to
// uintptr in the call) point to onto the heap, so that a stack move during
// the call cannot invalidate them.
//
//go:uintptrescapes
func (d *dnnlMatmul) call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(r)
}

var loadDNNLMatmul = sync.OnceValues(func() (d *dnnlMatmul, err error) {
	lib, err := loadOneDNN()
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("blas: loading oneDNN's matmul: %v", r)
		}
	}()
	d = &dnnlMatmul{isa: lib.isa}
	for _, s := range []struct {
		fn   *uintptr
		name string
	}{
		{&d.engineCreate, "dnnl_engine_create"},
		{&d.streamCreate, "dnnl_stream_create"},
		{&d.streamWait, "dnnl_stream_wait"},
		{&d.streamDestroy, "dnnl_stream_destroy"},
		{&d.memDescByTag, "dnnl_memory_desc_init_by_tag"},
		{&d.memDescByStrides, "dnnl_memory_desc_init_by_strides"},
		{&d.memDescGetSize, "dnnl_memory_desc_get_size"},
		{&d.memDescEqual, "dnnl_memory_desc_equal"},
		{&d.memCreate, "dnnl_memory_create"},
		{&d.memSetHandle, "dnnl_memory_set_data_handle"},
		{&d.memDestroy, "dnnl_memory_destroy"},
		{&d.matmulDescInit, "dnnl_matmul_desc_init"},
		{&d.pdCreate, "dnnl_primitive_desc_create"},
		{&d.pdQuery, "dnnl_primitive_desc_query"},
		{&d.pdQueryMD, "dnnl_primitive_desc_query_md"},
		{&d.pdDestroy, "dnnl_primitive_desc_destroy"},
		{&d.reorderPDCreate, "dnnl_reorder_primitive_desc_create"},
		{&d.primCreate, "dnnl_primitive_create"},
		{&d.primExecute, "dnnl_primitive_execute"},
		{&d.primDestroy, "dnnl_primitive_destroy"},
		{&d.attrCreate, "dnnl_primitive_attr_create"},
		{&d.attrSetScratchpad, "dnnl_primitive_attr_set_scratchpad_mode"},
		{&d.attrSetPostOps, "dnnl_primitive_attr_set_post_ops"},
		{&d.attrDestroy, "dnnl_primitive_attr_destroy"},
		{&d.postOpsCreate, "dnnl_post_ops_create"},
		{&d.postOpsDestroy, "dnnl_post_ops_destroy"},
		{&d.postOpsAppendBinary, "dnnl_post_ops_append_binary"},
	} {
		sym, err := purego.Dlsym(lib.lib, s.name)
		if err != nil {
			return nil, fmt.Errorf("blas: oneDNN has no %s: %w", s.name, err)
		}
		*s.fn = sym
	}
	// These take floats, passed in vector registers: SyscallN cannot.
	for _, f := range []struct {
		fn   any
		name string
	}{
		{&d.postOpsAppendSum, "dnnl_post_ops_append_sum"},
		{&d.postOpsAppendEltwise, "dnnl_post_ops_append_eltwise"},
	} {
		sym, err := purego.Dlsym(lib.lib, f.name)
		if err != nil {
			return nil, fmt.Errorf("blas: oneDNN has no %s: %w", f.name, err)
		}
		purego.RegisterFunc(f.fn, sym)
	}
	if st := d.call(d.engineCreate, uintptr(unsafe.Pointer(&d.engine)), dnnlCPU, 0); st != dnnlSuccess {
		return nil, dnnlError("dnnl_engine_create", st)
	}
	return d, nil
})

// BF16Supported reports whether this processor and library can run the
// bfloat16 products (AVX512_BF16 or AMX-BF16, and oneDNN loaded); the error
// says which is missing.
func BF16Supported() error {
	c := CPU()
	if !c.AVX512BF16 && !c.AMXBF16 {
		return fmt.Errorf("blas: bfloat16 products need AVX512_BF16 or AMX-BF16, which this processor (%s) lacks", c)
	}
	d, err := loadDNNLMatmul()
	if err != nil {
		return err
	}
	switch d.isa {
	case "", "avx512_core_bf16", "avx512_core_amx":
		// "" when the library does not say: let it try.
	default:
		return fmt.Errorf("blas: oneDNN's effective instruction set is %s, below avx512_core_bf16 (is DNNL_MAX_CPU_ISA set?)", d.isa)
	}
	return nil
}

// PackedMatmul is oneDNN's matmul primitive, out = inp·Wᵀ + beta·out, with
// the weight W [n, k] (PyTorch nn.Linear layout: n outputs, k inputs) stored
// once: in bfloat16 (NewBF16Matmul), float32 (NewF32Matmul) or int8
// (NewS8Matmul). kernels.PackedLinear makes a layer of it (bias, residual,
// rows split over the workers).
//
// oneDNN picks the weights' memory layout for its fastest kernel (a blocked
// one, for its brgemm kernels) and W is reordered into it once. A primitive
// is created on first use for each number of rows m and each beta (about
// 0.3–0.7 ms each for BERT-sized layers) and kept for the life of the
// PackedMatmul; a fixed m gives faster kernels than a run-time m.
type PackedMatmul struct {
	n, k int
	dt   uintptr // weights: dnnlBF16, dnnlF32 (NewF32Matmul) or dnnlS8 (NewS8Matmul)
	d    *dnnlMatmul
	res  *matmulResources

	mu     sync.Mutex     // serialises the creation of plans
	init   unsafe.Pointer // W as given ([n, k] row-major), during construction only
	initDT uintptr        // its data type: dnnlF32, or dnnlS8
	plans  sync.Map       // planKey → *matmulPlan
	nplans atomic.Int32   // how many plans hold
}

// planKey identifies a primitive: the number of rows, the sum scale and
// the epilogue of Run.
type planKey struct {
	m    int
	beta float32
	ep   epilogue
}

// epilogue is what a primitive does besides the product: the data types of
// its input and output, a bias, an eltwise and a residual post-op.
type epilogue struct {
	in16, out16, bias, res bool
	act                    Eltwise
}

// matmulResources owns the C objects of one PackedMatmul; a cleanup destroys
// them when the PackedMatmul is garbage collected. It must not point back to
// the PackedMatmul.
type matmulResources struct {
	d       *dnnlMatmul
	mu      sync.Mutex
	weights []*packedWeights
	plans   []*matmulPlan
}

// packedWeights is W in one of the layouts a primitive asked for.
type packedWeights struct {
	md  dnnlMemDesc
	buf []byte // 64-byte aligned
}

// matmulPlan is one matmul primitive and a free list of execution contexts
// (oneDNN memory objects, stream, scratch buffers) for concurrent calls.
type matmulPlan struct {
	convert bool // a bfloat16 layer given float32: the input is rounded first
	ep      epilogue
	what    string // names the primitive in a failure: "matmul" and ep
	pd      uintptr
	prim    uintptr
	srcMD   dnnlMemDesc
	dstMD   dnnlMemDesc
	scrMD   dnnlMemDesc
	biasMD  dnnlMemDesc // [1, n] f32, with ep.bias
	resMD   dnnlMemDesc // [m, n] f32, with ep.res
	resArg  int32       // the residual's argument: its binary post-op's SRC_1
	scrSize int
	w       *packedWeights
	m       int

	// cvtPD and cvt are a reorder primitive that rounds the float32 input
	// [m, k] to bfloat16, vectorised; f32MD describes the input.
	cvtPD, cvt uintptr
	f32MD      dnnlMemDesc

	ctxs ctxPool[*matmulExec]
}

// matmulExec is what one Forward call needs besides the primitive.
type matmulExec struct {
	dnnlStream
	src, wei, dst, s uintptr // memory objects; s is 0 without scratchpad
	bias, res        uintptr // memory objects of Run's bias and residual, or 0
	srcBuf           []uint16
	scrBuf           []byte
	args             [6]dnnlExecArg
	nargs            int
	f32              uintptr // memory object for the float32 input
	cvtArgs          [2]dnnlExecArg

	// During Forward: the slices whose addresses were passed to oneDNN.
	inp             []float32      // a float32 input
	keepIn, keepOut unsafe.Pointer // the other operands
	keepBias        unsafe.Pointer
	keepRes         unsafe.Pointer
}

// NewBF16Matmul rounds w, a weight matrix [n, k] in row-major order (n
// outputs, k inputs), to bfloat16 (to nearest, ties to even) and stores it;
// w is not retained. It returns an error if BF16Supported does, if the
// dimensions do not match w, or if oneDNN fails to create the primitive.
func NewBF16Matmul(w []float32, n, k int) (*PackedMatmul, error) {
	return newPackedMatmul("NewBF16Matmul", unsafe.Pointer(unsafe.SliceData(w)), len(w), dnnlF32, n, k, dnnlBF16)
}

// NewF32Matmul is NewBF16Matmul in float32: W is stored once in the
// layout oneDNN's float32 matmul prefers (blocked for its brgemm kernels)
// instead of being packed again by every product, as dnnl_sgemm does.
// Forward computes in float32. It needs only oneDNN.
func NewF32Matmul(w []float32, n, k int) (*PackedMatmul, error) {
	return newPackedMatmul("NewF32Matmul", unsafe.Pointer(unsafe.SliceData(w)), len(w), dnnlF32, n, k, dnnlF32)
}

// NewS8Matmul stores int8 weights w [n, k] (row-major, n outputs) for
// oneDNN's int8 matmul, in the layout it prefers: ForwardU8 then computes
// int32 products of uint8 inputs with them (VNNI where the processor has
// it). Scales and zero points are the caller's business.
func NewS8Matmul(w []int8, n, k int) (*PackedMatmul, error) {
	return newPackedMatmul("NewS8Matmul", unsafe.Pointer(unsafe.SliceData(w)), len(w), dnnlS8, n, k, dnnlS8)
}

// checkLinearDims checks a weight matrix's dimensions against its length.
func checkLinearDims(fn string, lw, n, k int) error {
	if n <= 0 || k <= 0 {
		return fmt.Errorf("blas: %s: bad dimensions n=%d, k=%d", fn, n, k)
	}
	if lw != n*k {
		return fmt.Errorf("blas: %s: len(w) = %d, want n·k = %d·%d = %d", fn, lw, n, k, n*k)
	}
	return nil
}

// srcDT and dstDT are the data types of a layer's input and output.
func (l *PackedMatmul) srcDT() uintptr {
	if l.dt == dnnlS8 {
		return dnnlU8
	}
	return l.dt
}

func (l *PackedMatmul) dstDT() uintptr {
	if l.dt == dnnlS8 {
		return dnnlS32
	}
	return dnnlF32
}

// newPackedMatmul checks the dimensions of w (lw elements of type wdt),
// loads oneDNN, and stores w for matmuls with weights of type dt; fn names
// the caller in errors.
func newPackedMatmul(fn string, w unsafe.Pointer, lw int, wdt uintptr, n, k int, dt uintptr) (*PackedMatmul, error) {
	if err := checkLinearDims(fn, lw, n, k); err != nil {
		return nil, err
	}
	if dt == dnnlBF16 {
		if err := BF16Supported(); err != nil {
			return nil, err
		}
	}
	d, err := loadDNNLMatmul()
	if err != nil {
		return nil, err
	}
	l := &PackedMatmul{n: n, k: k, dt: dt, d: d, res: &matmulResources{d: d}}
	runtime.AddCleanup(l, func(r *matmulResources) { r.destroy() }, l.res)
	// Create the primitive for one row now, which stores the weights, so
	// that errors surface here rather than in Forward.
	l.mu.Lock()
	l.init, l.initDT = w, wdt
	_, err = l.newPlan(planKey{m: 1})
	l.init = nil
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return l, nil
}

// N returns the number of outputs, the rows of W.
func (l *PackedMatmul) N() int { return l.n }

// K returns the number of inputs, the columns of W.
func (l *PackedMatmul) K() int { return l.k }

// Forward computes out = beta·out + inp·Wᵀ for m rows: inp [m, k] float32
// (converted to bfloat16, round to nearest even, inside), out [m, n] float32
// (accumulated in float32). Both are row-major and contiguous. It is safe
// to call from several goroutines at once with different out/inp.
//
// Any finite beta works; each distinct value gets its own primitive.
// Forward panics if a slice is too short for m, if beta is NaN, or if
// oneDNN fails, which after construction indicates a bug.
func (l *PackedMatmul) Forward(out, inp []float32, m int, beta float32) {
	if beta != beta {
		panic("blas: PackedMatmul.Forward: beta is NaN")
	}
	a := MatmulArgs{In: inp, Out: out}
	if err := l.checkArgs(m, &a); err != nil {
		panic("blas: PackedMatmul.Forward: " + err.Error())
	}
	l.run(m, &a, beta)
}

// Run computes a.Out (or a.Out16) = a.Act(in·Wᵀ + a.Bias) + a.Res for m
// rows in one oneDNN matmul, the bias, the activation and the residual
// fused into its kernel as post-ops (see MatmulArgs), so that the result
// is written once. On a bfloat16 layer the input may be given in bfloat16
// (In16) and the result stored in bfloat16 (Out16), so that activations
// can stay bfloat16 from one product to the next. It is safe to call from
// several goroutines at once with different outputs.
//
// Run panics if the operands are not as MatmulArgs says (one input, one
// output, lengths for m rows, bfloat16 operands only on a bfloat16 layer,
// an Eltwise it does not know) or if oneDNN fails, which after
// construction indicates a bug. An int8 layer has ForwardU8 instead.
func (l *PackedMatmul) Run(m int, a *MatmulArgs) {
	if err := l.checkArgs(m, a); err != nil {
		panic("blas: PackedMatmul.Run: " + err.Error())
	}
	l.run(m, a, 0)
}

// run is Forward and Run on checked operands: out = Act(in·Wᵀ + Bias) +
// Res + beta·out, in chunks of rows that have a primitive (rowsFor).
func (l *PackedMatmul) run(m int, a *MatmulArgs, beta float32) {
	if m == 0 {
		return
	}
	ep := epilogue{in16: a.In16 != nil, out16: a.Out16 != nil, bias: a.Bias != nil, res: a.Res != nil, act: a.Act}
	if beta == 0 {
		beta = 0 // -0 → 0, one primitive for both
	}
	if beta == 0 && a.Res != nil && a.Out != nil && &a.Res[0] == &a.Out[0] {
		// In place: oneDNN's sum post-op adds what dst holds.
		ep.res, beta = false, 1
	}
	d := l.d
	for done := 0; done < m; {
		r := l.rowsFor(m-done, planKey{beta: beta, ep: ep})
		p, e := l.context(planKey{m: r, beta: beta, ep: ep})
		// The operands go to oneDNN as uintptrs through e.sys (a fresh
		// variadic argument list for SyscallN would be allocated on every
		// call). Storing them in e, which is on the heap, moves them to the
		// heap too if the caller had them on its stack, which could move
		// during the calls.
		if ep.in16 {
			e.keepIn = unsafe.Pointer(&a.In16[done*l.k])
			e.setHandle(d, e.src, e.keepIn)
		} else {
			e.inp = a.In[done*l.k:]
			if p.convert {
				l.convertInput(p, e)
			} else {
				e.setHandle(d, e.src, unsafe.Pointer(&e.inp[0]))
			}
		}
		if ep.out16 {
			e.keepOut = unsafe.Pointer(&a.Out16[done*l.n])
		} else {
			e.keepOut = unsafe.Pointer(&a.Out[done*l.n])
		}
		e.setHandle(d, e.dst, e.keepOut)
		if ep.bias {
			e.keepBias = unsafe.Pointer(&a.Bias[0])
			e.setHandle(d, e.bias, e.keepBias)
		}
		if ep.res {
			e.keepRes = unsafe.Pointer(&a.Res[done*l.n])
			e.setHandle(d, e.res, e.keepRes)
		}
		e.execute(d, p.prim, e.args[:e.nargs], p.what, true, r, l.n, l.k)
		e.sys = [4]uintptr{}
		e.inp = nil
		e.keepIn, e.keepOut, e.keepBias, e.keepRes = nil, nil, nil, nil
		p.put(e)
		done += r
	}
	// l owns the primitives (its cleanup destroys them): keep it alive
	// until they have run.
	runtime.KeepAlive(l)
}

// checkArgs checks Run's operands for m rows.
func (l *PackedMatmul) checkArgs(m int, a *MatmulArgs) error {
	k, n := l.k, l.n
	switch {
	case l.dt == dnnlS8:
		return errors.New("an int8 layer: use ForwardU8")
	case m < 0:
		return fmt.Errorf("negative m = %d", m)
	case (a.In == nil) == (a.In16 == nil):
		return errors.New("want exactly one of In and In16")
	case (a.Out == nil) == (a.Out16 == nil):
		return errors.New("want exactly one of Out and Out16")
	case (a.In16 != nil || a.Out16 != nil) && l.dt != dnnlBF16:
		return fmt.Errorf("bfloat16 operands on a %s layer", dtName(l.dt))
	case a.In != nil && len(a.In) < m*k, a.In16 != nil && len(a.In16) < m*k:
		return fmt.Errorf("input of %d elements < m·k = %d·%d", max(len(a.In), len(a.In16)), m, k)
	case a.Out != nil && len(a.Out) < m*n, a.Out16 != nil && len(a.Out16) < m*n:
		return fmt.Errorf("output of %d elements < m·n = %d·%d", max(len(a.Out), len(a.Out16)), m, n)
	case a.Bias != nil && len(a.Bias) < n:
		return fmt.Errorf("bias of %d elements < n = %d", len(a.Bias), n)
	case a.Res != nil && len(a.Res) < m*n:
		return fmt.Errorf("residual of %d elements < m·n = %d·%d", len(a.Res), m, n)
	case a.Act < 0 || int(a.Act) >= len(dnnlEltwiseAlg):
		return fmt.Errorf("unknown %v", a.Act)
	}
	return nil
}

// maxExactPlans bounds the row counts a PackedMatmul makes a primitive of
// their own for: each costs 0.3–0.7 ms and its buffers for the layer's
// life, and a server sees every row count its requests add up to (a
// training job or a benchmark sees a few). Past the bound, a row count
// without a primitive runs in chunks of the chunkRows sizes, largest first
// (at most a few calls more; each streams the weights once more).
const maxExactPlans = 32

var chunkRows = [...]int{1024, 256, 64, 16, 4, 1}

// rowsFor returns how many of m remaining rows the next call with the
// primitive key (its m aside) does: all of them when they have or may still
// get a primitive of their own, else the largest chunk size that fits.
func (l *PackedMatmul) rowsFor(m int, key planKey) int {
	key.m = m
	if _, ok := l.plans.Load(key); ok || l.nplans.Load() < maxExactPlans {
		return m
	}
	for _, c := range chunkRows {
		if c <= m {
			return c
		}
	}
	return m
}

// context returns the primitive for key and an execution context of it;
// it panics where oneDNN fails, which after construction is a bug.
func (l *PackedMatmul) context(key planKey) (*matmulPlan, *matmulExec) {
	p, err := l.plan(key)
	if err != nil {
		panic(err.Error())
	}
	e, err := p.get(l.d, l.k)
	if err != nil {
		panic(err.Error())
	}
	return p, e
}

// convertInput rounds the float32 input of e to bfloat16 in e's source
// buffer.
func (l *PackedMatmul) convertInput(p *matmulPlan, e *matmulExec) {
	d := l.d
	// Round the input to bfloat16 with oneDNN's reorder (vectorised; a Go
	// loop takes 10% of the product's time at k=3072). The other handles
	// (the weights, the bfloat16 input, the scratchpad) were set in get.
	e.setHandle(d, e.f32, unsafe.Pointer(&e.inp[0]))
	e.execute(d, p.cvt, e.cvtArgs[:], "reorder f32 to bf16", false, p.m, 0, l.k) // the matmul's wait covers it
}

// ForwardU8 computes out = inp·Wᵀ in int32 for m rows of uint8 input, on a
// layer made by NewS8Matmul: inp [m, k], out [m, n], row-major and
// contiguous. It is safe to call from several goroutines at once with
// different out/inp, and panics as Forward does.
func (l *PackedMatmul) ForwardU8(out []int32, inp []uint8, m int) {
	if l.dt != dnnlS8 {
		panic("blas: ForwardU8 on a layer that is not int8")
	}
	if m < 0 || len(inp) < m*l.k || len(out) < m*l.n {
		panic(fmt.Sprintf("blas: ForwardU8: m = %d, len(inp) = %d, len(out) = %d for k = %d, n = %d", m, len(inp), len(out), l.k, l.n))
	}
	for done := 0; done < m; {
		r := l.rowsFor(m-done, planKey{})
		l.forwardU8(out[done*l.n:], inp[done*l.k:], r)
		done += r
	}
}

// forwardU8 is ForwardU8 for m > 0 rows with one primitive.
func (l *PackedMatmul) forwardU8(out []int32, inp []uint8, m int) {
	p, e := l.context(planKey{m: m})
	d := l.d
	e.keepIn, e.keepOut = unsafe.Pointer(&inp[0]), unsafe.Pointer(&out[0])
	e.setHandle(d, e.src, e.keepIn)
	e.setHandle(d, e.dst, e.keepOut)
	e.execute(d, p.prim, e.args[:e.nargs], "int8 matmul", true, m, l.n, l.k)
	e.sys = [4]uintptr{}
	e.keepIn, e.keepOut = nil, nil
	p.put(e)
	runtime.KeepAlive(l)
}

// dnnlStream is a oneDNN stream with the argument array of the calls made
// on it: the arguments of purego.SyscallN go through sys, as a variadic
// list would be allocated on every call. It belongs to one execution
// context (matmulExec, gemmExec), which is on the heap.
type dnnlStream struct {
	stream uintptr
	sys    [4]uintptr
}

// release destroys the memory objects mems (0s skipped) and the stream.
func (e *dnnlStream) release(d *dnnlMatmul, mems ...uintptr) {
	for _, m := range mems {
		if m != 0 {
			d.call(d.memDestroy, m)
		}
	}
	if e.stream != 0 {
		d.call(d.streamDestroy, e.stream)
	}
}

// ctxPool is a free list of a primitive's execution contexts, one per
// concurrent call, and every context made (for their destruction).
type ctxPool[T any] struct {
	mu   sync.Mutex
	free []T
	all  []T
}

// take returns a free context, if there is one.
func (c *ctxPool[T]) take() (e T, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.free); n > 0 {
		e, c.free = c.free[n-1], c.free[:n-1]
		return e, true
	}
	return e, false
}

// add records a new context; put returns one to the free list.
func (c *ctxPool[T]) add(e T) {
	c.mu.Lock()
	c.all = append(c.all, e)
	c.mu.Unlock()
}

func (c *ctxPool[T]) put(e T) {
	c.mu.Lock()
	c.free = append(c.free, e)
	c.mu.Unlock()
}

// setHandle points the memory object mem at ptr.
func (e *dnnlStream) setHandle(d *dnnlMatmul, mem uintptr, ptr unsafe.Pointer) {
	e.sys = [4]uintptr{mem, uintptr(ptr)}
	if r, _, _ := purego.SyscallN(d.memSetHandle, e.sys[:2]...); int32(r) != dnnlSuccess {
		panic(dnnlError("dnnl_memory_set_data_handle", int32(r)).Error())
	}
}

// execute runs prim with args on the stream and, with wait, waits for it;
// a failure names what ran and its sizes.
func (e *dnnlStream) execute(d *dnnlMatmul, prim uintptr, args []dnnlExecArg, what string, wait bool, m, n, k int) {
	e.sys = [4]uintptr{prim, e.stream, uintptr(len(args)), uintptr(unsafe.Pointer(&args[0]))}
	if r, _, _ := purego.SyscallN(d.primExecute, e.sys[:4]...); int32(r) != dnnlSuccess {
		panic(fmt.Sprintf("%v (%s m=%d, n=%d, k=%d)", dnnlError("dnnl_primitive_execute", int32(r)), what, m, n, k))
	}
	if !wait {
		return
	}
	e.sys = [4]uintptr{e.stream}
	if r, _, _ := purego.SyscallN(d.streamWait, e.sys[:1]...); int32(r) != dnnlSuccess {
		panic(dnnlError("dnnl_stream_wait", int32(r)).Error())
	}
}

// plan returns the primitive for key, creating it if needed; a beta of
// -0 must have been made 0.
func (l *PackedMatmul) plan(key planKey) (*matmulPlan, error) {
	if p, ok := l.plans.Load(key); ok {
		return p.(*matmulPlan), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.plans.Load(key); ok {
		return p.(*matmulPlan), nil
	}
	return l.newPlan(key)
}

// dtName names a weight data type of PackedMatmul for error messages.
func dtName(dt uintptr) string {
	switch dt {
	case dnnlBF16:
		return "bf16"
	case dnnlF32:
		return "f32"
	case dnnlS8:
		return "s8"
	}
	return fmt.Sprintf("data type %d", dt)
}

// newPlan creates the matmul primitive for key: src [m, k] · wei [k, n] →
// dst [m, n] in the layer's data types (bf16 · bf16 → f32 or bf16,
// f32 · f32 → f32, u8 · s8 → s32), with the bias and post-ops key asks
// for, and reorders the weights into the layout it asks for if no earlier
// primitive did. l.mu is held.
func (l *PackedMatmul) newPlan(key planKey) (p *matmulPlan, err error) {
	d := l.d
	m, beta, ep := key.m, key.beta, key.ep
	p = &matmulPlan{m: m, ep: ep, convert: l.dt == dnnlBF16 && !ep.in16, what: "matmul" + ep.String()}
	dstDT := l.dstDT()
	if ep.out16 {
		dstDT = dnnlBF16
	}
	var weiMD, anyMD dnnlMemDesc
	src := [2]int64{int64(m), int64(l.k)}
	wei := [2]int64{int64(l.k), int64(l.n)}
	dst := [2]int64{int64(m), int64(l.n)}
	bias := [2]int64{1, int64(l.n)}
	for _, md := range []struct {
		md   *dnnlMemDesc
		dims *[2]int64
		dt   uintptr
		tag  uintptr
	}{
		{&p.srcMD, &src, l.srcDT(), dnnlTagAB},
		{&p.f32MD, &src, dnnlF32, dnnlTagAB},
		{&anyMD, &wei, l.dt, dnnlFormatAny},
		{&p.dstMD, &dst, dstDT, dnnlTagAB},
		{&p.biasMD, &bias, dnnlF32, dnnlTagAB},
		{&p.resMD, &dst, dnnlF32, dnnlTagAB},
	} {
		if st := d.call(d.memDescByTag, uintptr(unsafe.Pointer(md.md)), 2, uintptr(unsafe.Pointer(md.dims)), md.dt, md.tag); st != dnnlSuccess {
			return nil, dnnlError("dnnl_memory_desc_init_by_tag", st)
		}
	}
	var op dnnlMatmulDesc
	var biasMD uintptr
	if ep.bias {
		biasMD = uintptr(unsafe.Pointer(&p.biasMD))
	}
	if st := d.call(d.matmulDescInit, uintptr(unsafe.Pointer(&op)), uintptr(unsafe.Pointer(&p.srcMD)), uintptr(unsafe.Pointer(&anyMD)), biasMD, uintptr(unsafe.Pointer(&p.dstMD))); st != dnnlSuccess {
		return nil, dnnlError("dnnl_matmul_desc_init", st)
	}
	attr, resIdx, err := d.matmulAttr(beta, ep, &p.resMD)
	p.resArg = int32((resIdx+1)*dnnlArgPostOpBase | dnnlArgSrc1)
	if err != nil {
		return nil, err
	}
	defer d.call(d.attrDestroy, attr)
	defer func() {
		if err != nil {
			p.destroy(d)
		}
	}()
	if st := d.call(d.pdCreate, uintptr(unsafe.Pointer(&p.pd)), uintptr(unsafe.Pointer(&op)), attr, d.engine, 0); st != dnnlSuccess {
		return nil, fmt.Errorf("%w (matmul, %s weights, m=%d, n=%d, k=%d%s)", dnnlError("dnnl_primitive_desc_create", st), dtName(l.dt), m, l.n, l.k, ep)
	}
	if err := copyMD(&weiMD, d, p.pd, dnnlQueryWeightsMD); err != nil {
		return nil, err
	}
	if err := copyMD(&p.scrMD, d, p.pd, dnnlQueryScratchMD); err == nil {
		p.scrSize = int(d.call64(d.memDescGetSize, uintptr(unsafe.Pointer(&p.scrMD))))
	}
	if st := d.call(d.primCreate, uintptr(unsafe.Pointer(&p.prim)), p.pd); st != dnnlSuccess {
		return nil, dnnlError("dnnl_primitive_create", st)
	}
	if p.w, err = l.weights(&weiMD); err != nil {
		return nil, err
	}
	if p.convert {
		if st := d.call(d.reorderPDCreate, uintptr(unsafe.Pointer(&p.cvtPD)), uintptr(unsafe.Pointer(&p.f32MD)), d.engine, uintptr(unsafe.Pointer(&p.srcMD)), d.engine, 0); st != dnnlSuccess {
			return nil, dnnlError("dnnl_reorder_primitive_desc_create (f32 to bf16)", st)
		}
		if st := d.call(d.primCreate, uintptr(unsafe.Pointer(&p.cvt)), p.cvtPD); st != dnnlSuccess {
			return nil, dnnlError("dnnl_primitive_create (f32 to bf16)", st)
		}
	}
	// One context now, so that errors in creating it surface here.
	e, err := p.get(d, l.k)
	if err != nil {
		return nil, err
	}
	p.put(e)
	l.res.mu.Lock()
	l.res.plans = append(l.res.plans, p)
	l.res.mu.Unlock()
	l.plans.Store(key, p)
	l.nplans.Add(1)
	return p, nil
}

// call64 runs a oneDNN function returning size_t, like call.
//
//go:uintptrescapes
func (d *dnnlMatmul) call64(fn uintptr, args ...uintptr) uint64 {
	r, _, _ := purego.SyscallN(fn, args...)
	return uint64(r)
}

// matmulAttr returns the attributes of a matmul primitive: a scratchpad
// the caller passes (the library's own is not safe for concurrent
// executions; each execution context brings its own) and the post-ops, in
// this order: ep's eltwise, ep's residual (a binary add of resMD, at the
// post-op index resIdx) and, when beta ≠ 0, a sum scaled by beta. The
// caller destroys it (attrDestroy) once the primitive descriptor is made.
func (d *dnnlMatmul) matmulAttr(beta float32, ep epilogue, resMD *dnnlMemDesc) (attr uintptr, resIdx int, err error) {
	if st := d.call(d.attrCreate, uintptr(unsafe.Pointer(&attr))); st != dnnlSuccess {
		return 0, 0, dnnlError("dnnl_primitive_attr_create", st)
	}
	defer func() {
		if err != nil {
			d.call(d.attrDestroy, attr)
		}
	}()
	if st := d.call(d.attrSetScratchpad, attr, dnnlScratchpadUser); st != dnnlSuccess {
		return 0, 0, dnnlError("dnnl_primitive_attr_set_scratchpad_mode", st)
	}
	if beta == 0 && ep.act == EltwiseNone && !ep.res {
		return attr, 0, nil
	}
	var po uintptr
	if st := d.call(d.postOpsCreate, uintptr(unsafe.Pointer(&po))); st != dnnlSuccess {
		return 0, 0, dnnlError("dnnl_post_ops_create", st)
	}
	defer d.call(d.postOpsDestroy, po) // the attributes keep their own copy
	n := 0
	if ep.act != EltwiseNone {
		alpha := float32(0)
		if ep.act == EltwiseSwish {
			alpha = 1 // x·σ(alpha·x)
		}
		if st := d.postOpsAppendEltwise(po, 1, dnnlEltwiseAlg[ep.act], alpha, 0); st != dnnlSuccess {
			return 0, 0, dnnlError("dnnl_post_ops_append_eltwise ("+ep.act.String()+")", st)
		}
		n++
	}
	if ep.res {
		if st := d.call(d.postOpsAppendBinary, po, dnnlBinaryAdd, uintptr(unsafe.Pointer(resMD))); st != dnnlSuccess {
			return 0, 0, dnnlError("dnnl_post_ops_append_binary (add)", st)
		}
		resIdx = n
		n++
	}
	if beta != 0 {
		if st := d.postOpsAppendSum(po, beta); st != dnnlSuccess {
			return 0, 0, dnnlError("dnnl_post_ops_append_sum", st)
		}
	}
	if st := d.call(d.attrSetPostOps, attr, po); st != dnnlSuccess {
		return 0, 0, dnnlError("dnnl_primitive_attr_set_post_ops", st)
	}
	return attr, resIdx, nil
}

// String describes an epilogue for error messages: "" when there is none,
// else ", " and its parts.
func (ep epilogue) String() string {
	s := ""
	for _, x := range []struct {
		on   bool
		what string
	}{{ep.in16, "bf16 input"}, {ep.out16, "bf16 output"}, {ep.bias, "bias"}, {ep.act != EltwiseNone, ep.act.String()}, {ep.res, "residual"}} {
		if x.on {
			s += ", " + x.what
		}
	}
	return s
}

// copyMD copies the memory descriptor that pd reports for what into md.
func copyMD(md *dnnlMemDesc, d *dnnlMatmul, pd uintptr, what uintptr) error {
	r, _, _ := purego.SyscallN(d.pdQueryMD, pd, what, 0)
	if r == 0 {
		return fmt.Errorf("blas: oneDNN dnnl_primitive_desc_query_md(%d) returned nothing", what)
	}
	// r points into the primitive descriptor, which outlives this call.
	// (Copying it with copy(unsafe.Slice(…), unsafe.Slice(…)) crashes the
	// Go 1.26 compiler, "disjointTypes: one of arguments is not a pointer".)
	type cMemDesc [696 / 8]uint64 // sizeof(dnnl_memory_desc_t) in oneDNN 2.6
	c := (*cMemDesc)(*(*unsafe.Pointer)(unsafe.Pointer(&r)))
	*(*cMemDesc)(unsafe.Pointer(md)) = *c
	return nil
}

// Bytes returns the bytes of W held, in every layout a primitive has
// asked for so far (one per layout: plans for different row counts may
// choose different blockings).
func (l *PackedMatmul) Bytes() int64 {
	l.res.mu.Lock()
	defer l.res.mu.Unlock()
	var n int64
	for _, w := range l.res.weights {
		n += int64(len(w.buf))
	}
	return n
}

// weights returns W in the layout md, converting it the first time: from
// l.init, W in float32 during NewBF16Matmul, or else from the bfloat16
// copy made then. l.mu is held.
func (l *PackedMatmul) weights(md *dnnlMemDesc) (*packedWeights, error) {
	d := l.d
	l.res.mu.Lock()
	have := l.res.weights
	l.res.mu.Unlock()
	for _, w := range have {
		if d.call(d.memDescEqual, uintptr(unsafe.Pointer(&w.md)), uintptr(unsafe.Pointer(md))) != 0 {
			return w, nil
		}
	}
	w := &packedWeights{md: *md}
	w.buf = alignedBytes(int(d.call64(d.memDescGetSize, uintptr(unsafe.Pointer(md)))))
	var err error
	if l.init != nil {
		// W [n, k] row-major is Wᵀ [k, n] in layout ba.
		var f32MD dnnlMemDesc
		dims := [2]int64{int64(l.k), int64(l.n)}
		if st := d.call(d.memDescByTag, uintptr(unsafe.Pointer(&f32MD)), 2, uintptr(unsafe.Pointer(&dims)), l.initDT, dnnlTagBA); st != dnnlSuccess {
			return nil, dnnlError("dnnl_memory_desc_init_by_tag", st)
		}
		err = d.reorder(&f32MD, l.init, &w.md, unsafe.Pointer(&w.buf[0]))
	} else if len(have) > 0 {
		err = d.reorder(&have[0].md, unsafe.Pointer(&have[0].buf[0]), &w.md, unsafe.Pointer(&w.buf[0]))
	} else {
		err = errors.New("blas: PackedMatmul has no weights (NewBF16Matmul failed?)")
	}
	if err != nil {
		return nil, err
	}
	l.res.mu.Lock()
	l.res.weights = append(l.res.weights, w)
	l.res.mu.Unlock()
	return w, nil
}

// reorder copies the data at from (layout fromMD) to to (layout toMD) with
// a oneDNN reorder primitive.
func (d *dnnlMatmul) reorder(fromMD *dnnlMemDesc, from unsafe.Pointer, toMD *dnnlMemDesc, to unsafe.Pointer) error {
	var pd, prim, stream, src, dst uintptr
	if st := d.call(d.reorderPDCreate, uintptr(unsafe.Pointer(&pd)), uintptr(unsafe.Pointer(fromMD)), d.engine, uintptr(unsafe.Pointer(toMD)), d.engine, 0); st != dnnlSuccess {
		return dnnlError("dnnl_reorder_primitive_desc_create", st)
	}
	defer d.call(d.pdDestroy, pd)
	if st := d.call(d.primCreate, uintptr(unsafe.Pointer(&prim)), pd); st != dnnlSuccess {
		return dnnlError("dnnl_primitive_create (reorder)", st)
	}
	defer d.call(d.primDestroy, prim)
	if st := d.call(d.streamCreate, uintptr(unsafe.Pointer(&stream)), d.engine, dnnlStreamDefault); st != dnnlSuccess {
		return dnnlError("dnnl_stream_create", st)
	}
	defer d.call(d.streamDestroy, stream)
	if st := d.call(d.memCreate, uintptr(unsafe.Pointer(&src)), uintptr(unsafe.Pointer(fromMD)), d.engine, uintptr(from)); st != dnnlSuccess {
		return dnnlError("dnnl_memory_create", st)
	}
	defer d.call(d.memDestroy, src)
	if st := d.call(d.memCreate, uintptr(unsafe.Pointer(&dst)), uintptr(unsafe.Pointer(toMD)), d.engine, uintptr(to)); st != dnnlSuccess {
		return dnnlError("dnnl_memory_create", st)
	}
	defer d.call(d.memDestroy, dst)
	args := [2]dnnlExecArg{{arg: dnnlArgSrc, mem: src}, {arg: dnnlArgDst, mem: dst}}
	if st := d.call(d.primExecute, prim, stream, 2, uintptr(unsafe.Pointer(&args[0]))); st != dnnlSuccess {
		return dnnlError("dnnl_primitive_execute (reorder)", st)
	}
	if st := d.call(d.streamWait, stream); st != dnnlSuccess {
		return dnnlError("dnnl_stream_wait", st)
	}
	runtime.KeepAlive(from)
	runtime.KeepAlive(to)
	return nil
}

// alignedBytes returns n zero bytes starting on a 64-byte boundary.
func alignedBytes(n int) []byte {
	b := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 63)
	return b[off : off+n : off+n]
}

// get takes an execution context from the free list or makes one.
func (p *matmulPlan) get(d *dnnlMatmul, k int) (*matmulExec, error) {
	if e, ok := p.ctxs.take(); ok {
		return e, nil
	}
	e := &matmulExec{}
	var srcBuf unsafe.Pointer // set by Forward to the input, unless converted
	if p.convert {
		e.srcBuf = unsafe.Slice((*uint16)(unsafe.Pointer(&alignedBytes(2 * p.m * k)[0])), p.m*k)
		srcBuf = unsafe.Pointer(&e.srcBuf[0])
	}
	if p.scrSize > 0 {
		e.scrBuf = alignedBytes(p.scrSize)
	}
	if st := d.call(d.streamCreate, uintptr(unsafe.Pointer(&e.stream)), d.engine, dnnlStreamDefault); st != dnnlSuccess {
		return nil, dnnlError("dnnl_stream_create", st)
	}
	for _, m := range []struct {
		mem *uintptr
		md  *dnnlMemDesc
		arg int32
		buf unsafe.Pointer
	}{
		{&e.src, &p.srcMD, dnnlArgSrc, srcBuf},
		{&e.wei, &p.w.md, dnnlArgWeights, unsafe.Pointer(&p.w.buf[0])},
		{&e.dst, &p.dstMD, dnnlArgDst, nil}, // set by Forward
		{&e.s, &p.scrMD, dnnlArgScratchpad, ptr(e.scrBuf)},
		{&e.bias, &p.biasMD, dnnlArgBias, nil}, // set by Run
		{&e.res, &p.resMD, p.resArg, nil},      // set by Run
	} {
		if m.arg == dnnlArgScratchpad && p.scrSize == 0 || m.mem == &e.bias && !p.ep.bias || m.mem == &e.res && !p.ep.res {
			continue
		}
		// The buffers belong to e and p, which keep them alive; Go's heap
		// does not move.
		if st := d.call(d.memCreate, uintptr(unsafe.Pointer(m.mem)), uintptr(unsafe.Pointer(m.md)), d.engine, uintptr(m.buf)); st != dnnlSuccess {
			e.destroy(d)
			return nil, dnnlError("dnnl_memory_create", st)
		}
		e.args[e.nargs] = dnnlExecArg{arg: m.arg, mem: *m.mem}
		e.nargs++
	}
	if p.convert {
		if st := d.call(d.memCreate, uintptr(unsafe.Pointer(&e.f32)), uintptr(unsafe.Pointer(&p.f32MD)), d.engine, 0); st != dnnlSuccess {
			e.destroy(d)
			return nil, dnnlError("dnnl_memory_create", st)
		}
		e.cvtArgs = [2]dnnlExecArg{{arg: dnnlArgSrc, mem: e.f32}, {arg: dnnlArgDst, mem: e.src}}
	}
	p.ctxs.add(e)
	return e, nil
}

// put returns an execution context to the free list.
func (p *matmulPlan) put(e *matmulExec) { p.ctxs.put(e) }

func (e *matmulExec) destroy(d *dnnlMatmul) {
	e.release(d, e.src, e.wei, e.dst, e.s, e.f32, e.bias, e.res)
}

// destroy frees the C objects of p.
func (p *matmulPlan) destroy(d *dnnlMatmul) {
	for _, e := range p.ctxs.all {
		e.destroy(d)
	}
	for _, h := range []uintptr{p.prim, p.cvt} {
		if h != 0 {
			d.call(d.primDestroy, h)
		}
	}
	if p.cvtPD != 0 {
		d.call(d.pdDestroy, p.cvtPD)
	}
	if p.pd != 0 {
		d.call(d.pdDestroy, p.pd)
	}
}

// destroy frees the C objects; it runs once no Forward can be running.
func (r *matmulResources) destroy() {
	for _, p := range r.plans {
		p.destroy(r.d)
	}
}

// Impl returns the name of the implementation oneDNN chose for m > 0 rows
// (beta 0), e.g. "brg:avx512_core_amx" or "brg:avx512_core_vnni"; a name
// starting with "ref" is oneDNN's reference code, correct but slow. It
// makes the primitive for m rows if there is none yet.
func (l *PackedMatmul) Impl(m int) string { return l.impl(m, 0) }

// impl returns the name of the implementation oneDNN chose for m rows and
// beta, e.g. "brg:avx512_core_bf16", for tests and benchmarks.
func (l *PackedMatmul) impl(m int, beta float32) string {
	if beta == 0 {
		beta = 0
	}
	p, err := l.plan(planKey{m: m, beta: beta})
	if err != nil {
		return err.Error()
	}
	var s *byte
	d := l.d
	if d.call(d.pdQuery, p.pd, dnnlQueryImplInfo, 0, uintptr(unsafe.Pointer(&s))) != dnnlSuccess || s == nil {
		return "?"
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(s), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(s, n))
}
