package blas

import "fmt"

// Int8Backend computes 8-bit integer products with 32-bit accumulation.
type Int8Backend interface {
	Name() string
	// GemmU8S8S32 computes C = op(A)·op(B) in int32, row-major, for u8 A
	// (op(A) m×k) and s8 B (op(B) k×n), with no offsets; C is overwritten.
	GemmU8S8S32(transA, transB bool, m, n, k int, a []uint8, lda int, b []int8, ldb int, c []int32, ldc int)
}

// Int8 returns oneDNN's int8 GEMM (dnnl_gemm_u8s8s32: VNNI where the
// processor has it, AVX-512 or AVX2 otherwise, never AMX; it packs B on
// every call), or an error saying what is missing. kernels.Int8Linear
// prefers the matmul primitive with packed weights (NewS8Matmul) and uses
// this where oneDNN has only its reference matmul. There is no slow fallback on purpose: quantized inference exists
// to be fast, and a silent pure-Go int8 path would not be.
func Int8() (Int8Backend, error) {
	d, err := loadOneDNN()
	if err != nil {
		return nil, fmt.Errorf("int8 products need oneDNN (apt-get install libdnnl2): %w", err)
	}
	return d, nil
}

// Int8WeightMax is the largest weight magnitude for which a u8·s8 product
// through Int8's backend is exact on this CPU: 127 with VNNI, 63 without,
// where x86 computes u8·s8 pairs with vpmaddubsw, whose 16-bit sums
// saturate when 2·255·|w| > 32767 (PyTorch's reduce_range does the same).
func Int8WeightMax() int {
	if c := CPU(); c.AVX512VNNI || c.AVXVNNI || c.Vendor == "" {
		return 127
	}
	return 63
}

// GoInt8 is the plain reference of the int8 product, for tests.
type GoInt8 struct{}

func (GoInt8) Name() string { return "go int8 reference" }

func (GoInt8) GemmU8S8S32(transA, transB bool, m, n, k int, a []uint8, lda int, b []int8, ldb int, c []int32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s int32
			for p := 0; p < k; p++ {
				ai, bi := i*lda+p, p*ldb+j
				if transA {
					ai = p*lda + i
				}
				if transB {
					bi = j*ldb + p
				}
				x, y := a[ai], b[bi]
				s += int32(x) * int32(y)
			}
			c[i*ldc+j] = s
		}
	}
}
