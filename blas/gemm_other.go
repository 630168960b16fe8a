//go:build !amd64 || purego

package blas

// Off amd64, or with the purego tag, there are no assembly microkernels:
// go-asm is not a candidate and gonum's SGEMM is the fallback. The
// blocking and packing still run, with the pure-Go microkernel, in tests.

func asmKernels() []microkernel { return nil }

const asmPackOK = false

func packT4x8AVX(dst *float32, dstStride int, src *float32, lds int, n8 int) {
	panic("blas: packT4x8AVX without assembly")
}

func packCopy32AVX(dst, src *float32, ld, kc int) { panic("blas: packCopy32AVX without assembly") }
func packCopy12AVX(dst, src *float32, ld, kc int) { panic("blas: packCopy12AVX without assembly") }
func packCopy24AVX(dst, src *float32, ld, kc int) { panic("blas: packCopy24AVX without assembly") }
func packCopy4AVX(dst, src *float32, ld, kc int)  { panic("blas: packCopy4AVX without assembly") }
