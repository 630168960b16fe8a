//go:build !amd64 && !windows

package blas

import "unsafe"

// Off amd64 the calls go through purego's RegisterFunc.

func (d *oneDNN) sgemmRaw(transA, transB byte, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, beta float32, c unsafe.Pointer, ldc int64) int32 {
	return d.sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func (d *oneDNN) gemmU8S8S32Raw(transA, transB, offsetC byte, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, ao uint8, b unsafe.Pointer, ldb int64, bo int8, beta float32, c unsafe.Pointer, ldc int64, co unsafe.Pointer) int32 {
	return d.gemmU8S8S32(transA, transB, offsetC, m, n, k, alpha, a, lda, ao, b, ldb, bo, beta, c, ldc, co)
}
