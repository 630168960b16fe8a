//go:build windows

package blas

import "errors"

var errBF16Windows = errors.New("blas: bfloat16 products need oneDNN, which is not loadable on windows")

// BF16Supported reports whether this processor and library can run the
// bfloat16 products; on Windows they never can, since oneDNN is not loaded.
func BF16Supported() error { return errBF16Windows }

// PackedLinear is a linear layer's weight W [n, k] (PyTorch nn.Linear layout:
// n outputs, k inputs), stored once in bfloat16 for oneDNN's matmul. On
// Windows none can be made.
type PackedLinear struct {
	n, k int
}

// NewBF16Linear always fails on Windows; see BF16Supported.
func NewBF16Linear(w []float32, n, k int) (*PackedLinear, error) { return nil, errBF16Windows }

// N returns the number of outputs, the rows of W.
func (l *PackedLinear) N() int { return l.n }

// K returns the number of inputs, the columns of W.
func (l *PackedLinear) K() int { return l.k }

// Forward computes out = beta·out + inp·Wᵀ for m rows; it is never reached
// on Windows, where NewBF16Linear fails.
func (l *PackedLinear) Forward(out, inp []float32, m int, beta float32) {
	panic(errBF16Windows.Error())
}

// impl names oneDNN's implementation; see the other platforms.
func (l *PackedLinear) impl(m int, beta float32) string { return "none" }

// NewF32Linear always fails on Windows; see BF16Supported.
func NewF32Linear(w []float32, n, k int) (*PackedLinear, error) { return nil, errBF16Windows }

// NewS8Linear always fails on Windows; see BF16Supported.
func NewS8Linear(w []int8, n, k int) (*PackedLinear, error) { return nil, errBF16Windows }

// ForwardU8 is never reached on Windows, where NewS8Linear fails.
func (l *PackedLinear) ForwardU8(out []int32, inp []uint8, m int) { panic(errBF16Windows.Error()) }
