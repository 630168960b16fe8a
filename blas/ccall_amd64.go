//go:build !windows

package blas

import (
	"math"
	"sync"
	"unsafe"
)

// cCall is the argument block of one foreign call through ccallTramp
// (ccall_amd64.s): purego's SyscallN cannot pass float arguments, and its
// RegisterFunc, which can, allocates about a dozen objects and spends about
// a microsecond per call, which counts against head-sized products. The
// layout is read by the assembly: do not reorder.
type cCall struct {
	fn     uintptr
	ints   [16]uintptr // integer-class arguments in order
	f0, f1 uint64      // the first two float arguments (float32 bits in the low half)
	ret    uintptr
	// keep holds the pointers passed as integers, so that the objects
	// they point to escape to the heap (where they do not move) and stay
	// alive until the call returns.
	keep [4]unsafe.Pointer
}

//go:linkname runtime_cgocall runtime.cgocall
func runtime_cgocall(fn, arg unsafe.Pointer) int32

func ccallTrampPC() uintptr

var (
	ccallTramp = ccallTrampPC()
	ccallPool  = sync.Pool{New: func() any { return new(cCall) }}
)

func f32bits(f float32) uint64 { return uint64(math.Float32bits(f)) }

// call makes the call and returns the C function's int32 result.
func (c *cCall) call() int32 {
	runtime_cgocall(*(*unsafe.Pointer)(unsafe.Pointer(&ccallTramp)), unsafe.Pointer(c))
	return int32(c.ret)
}

// sgemmRaw calls dnnl_sgemm through ccallTramp.
func (d *oneDNN) sgemmRaw(transA, transB byte, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, beta float32, c unsafe.Pointer, ldc int64) int32 {
	cc := ccallPool.Get().(*cCall)
	cc.fn = d.sgemmSym
	cc.ints = [16]uintptr{uintptr(transA), uintptr(transB), uintptr(m), uintptr(n), uintptr(k),
		uintptr(a), uintptr(lda), uintptr(b), uintptr(ldb), uintptr(c), uintptr(ldc)}
	cc.f0, cc.f1 = f32bits(alpha), f32bits(beta)
	cc.keep = [4]unsafe.Pointer{a, b, c}
	st := cc.call()
	cc.keep = [4]unsafe.Pointer{}
	ccallPool.Put(cc)
	return st
}

// gemmU8S8S32Raw calls dnnl_gemm_u8s8s32 through ccallTramp.
func (d *oneDNN) gemmU8S8S32Raw(transA, transB, offsetC byte, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, ao uint8, b unsafe.Pointer, ldb int64, bo int8, beta float32, c unsafe.Pointer, ldc int64, co unsafe.Pointer) int32 {
	cc := ccallPool.Get().(*cCall)
	cc.fn = d.gemmU8Sym
	cc.ints = [16]uintptr{uintptr(transA), uintptr(transB), uintptr(offsetC), uintptr(m), uintptr(n), uintptr(k),
		uintptr(a), uintptr(lda), uintptr(ao), uintptr(b), uintptr(ldb), uintptr(uint8(bo)), uintptr(c), uintptr(ldc), uintptr(co)}
	cc.f0, cc.f1 = f32bits(alpha), f32bits(beta)
	cc.keep = [4]unsafe.Pointer{a, b, c, co}
	st := cc.call()
	cc.keep = [4]unsafe.Pointer{}
	ccallPool.Put(cc)
	return st
}
