//go:build windows

package blas

import "errors"

// The errors of the constructors on Windows, each naming its products.
var (
	errBF16Windows   = errors.New("blas: bfloat16 products need oneDNN, which is not loadable on windows")
	errF32Windows    = errors.New("blas: prepacked float32 products need oneDNN, which is not loadable on windows")
	errS8Windows     = errors.New("blas: int8 (u8·s8) products need oneDNN, which is not loadable on windows")
	errMatmulWindows = errors.New("blas: PackedMatmul used on windows, where none can be made (oneDNN is not loadable)")
)

// BF16Supported reports whether this processor and library can run the
// bfloat16 products; on Windows they never can, since oneDNN is not loaded.
func BF16Supported() error { return errBF16Windows }

// PackedMatmul is oneDNN's matmul with its weight W [n, k] stored once (in
// bfloat16, float32 or int8). On Windows none can be made.
type PackedMatmul struct {
	n, k int
}

// NewBF16Matmul always fails on Windows; see BF16Supported.
func NewBF16Matmul(w []float32, n, k int) (*PackedMatmul, error) { return nil, errBF16Windows }

// N returns the number of outputs, the rows of W.
func (l *PackedMatmul) N() int { return l.n }

// K returns the number of inputs, the columns of W.
func (l *PackedMatmul) K() int { return l.k }

// Forward computes out = beta·out + inp·Wᵀ for m rows; it is never reached
// on Windows, where NewBF16Matmul fails.
func (l *PackedMatmul) Forward(out, inp []float32, m int, beta float32) {
	panic(errMatmulWindows.Error())
}

// impl names oneDNN's implementation; see the other platforms.
func (l *PackedMatmul) impl(m int, beta float32) string { return "none" }

// Impl is never reached on Windows, where no PackedMatmul is made.
func (l *PackedMatmul) Impl(m int) string { return "none" }

// NewF32Matmul always fails on Windows, where oneDNN is not loaded.
func NewF32Matmul(w []float32, n, k int) (*PackedMatmul, error) { return nil, errF32Windows }

// NewS8Matmul always fails on Windows, where oneDNN is not loaded.
func NewS8Matmul(w []int8, n, k int) (*PackedMatmul, error) { return nil, errS8Windows }

// ForwardU8 is never reached on Windows, where NewS8Matmul fails.
func (l *PackedMatmul) ForwardU8(out []int32, inp []uint8, m int) { panic(errS8Windows.Error()) }

// SgemmBF16 is the bfloat16 product of the other platforms; on Windows,
// where BF16Supported always fails, it panics as it does there.
func SgemmBF16(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panic("blas: SgemmBF16: " + errBF16Windows.Error())
}

// gemmImpl names oneDNN's implementation; see the other platforms.
func gemmImpl(key gemmKey) string { return "none" }

// gemmKey is the other platforms' primitive key, for gemmImpl's tests.
type gemmKey struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
	beta           float32
	in16           bool
}

// GemmBF16 panics on Windows, as SgemmBF16 does.
func GemmBF16(transA, transB bool, m, n, k int, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	panic("blas: GemmBF16: " + errBF16Windows.Error())
}

// Run is never reached on Windows, where no PackedMatmul is made.
func (l *PackedMatmul) Run(m int, a *MatmulArgs) { panic(errMatmulWindows.Error()) }

// Bytes returns 0: there is no oneDNN here.
func (l *PackedMatmul) Bytes() int64 { return 0 }
