//go:build amd64 && !purego

package blas

import "golang.org/x/sys/cpu"

//go:generate go run gen_gemm.go

//go:noescape
func kern12x32AVX512(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kern8x32AVX512(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kern4x32AVX512(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kern4x24AVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func packT4x8AVX(dst *float32, dstStride int, src *float32, lds int, n8 int)

//go:noescape
func packCopy32AVX(dst, src *float32, ld, kc int)

//go:noescape
func packCopy12AVX(dst, src *float32, ld, kc int)

//go:noescape
func packCopy24AVX(dst, src *float32, ld, kc int)

//go:noescape
func packCopy4AVX(dst, src *float32, ld, kc int)

// asmKernels lists the microkernels this processor can run, fastest first:
// 12×32 on AVX-512 (24 zmm accumulators; 8- and 4-row kernels for the last
// tile of a block), 4×24 on AVX2 and FMA (12 ymm).
// The operating system's support for the vector state is part of
// x/sys/cpu's flags. Shapes measured in BenchmarkGoAsmKernels.
func asmKernels() []microkernel {
	var ks []microkernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, microkernel{isa: "avx512", mr: 12, nr: 32, fn: kern12x32AVX512,
			edges: []edgeKernel{{4, kern4x32AVX512}, {8, kern8x32AVX512}}})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, microkernel{isa: "avx2", mr: 4, nr: 24, fn: kern4x24AVX2})
	}
	return ks
}

// asmPackOK says whether packT4x8AVX can run (AVX).
var asmPackOK = cpu.X86.HasAVX
