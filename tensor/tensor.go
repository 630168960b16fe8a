package tensor

import (
	"fmt"
	"math"
)

// Tensor is a dense row-major float32 array. Data has exactly Numel(Shape)
// elements; the last dimension varies fastest.
type Tensor struct {
	Shape []int
	Data  []float32
}

// New returns a zero tensor of the given shape.
func New(shape ...int) *Tensor {
	return &Tensor{Shape: append([]int(nil), shape...), Data: make([]float32, Numel(shape))}
}

// FromData wraps data as a tensor of the given shape. It returns an error when
// the number of elements does not match the shape.
func FromData(data []float32, shape ...int) (*Tensor, error) {
	if n := Numel(shape); n != len(data) {
		return nil, fmt.Errorf("tensor: shape %v needs %d elements, got %d", shape, n, len(data))
	}
	return &Tensor{Shape: append([]int(nil), shape...), Data: data}, nil
}

// Numel is the product of the dimensions of shape (1 for a scalar shape).
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Numel returns the number of elements of t.
func (t *Tensor) Numel() int { return Numel(t.Shape) }

// SameShape reports whether a and b have the same dimensions.
func SameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Param is a trainable tensor: its values, its gradient (same length) and the
// Hugging Face state-dict name it is stored under.
type Param struct {
	Name  string
	Shape []int
	Data  []float32
	Grad  []float32
}

// NewParam allocates a zero parameter and its zero gradient.
func NewParam(name string, shape ...int) *Param {
	n := Numel(shape)
	return &Param{Name: name, Shape: append([]int(nil), shape...), Data: make([]float32, n), Grad: make([]float32, n)}
}

// ZeroGrad sets every gradient element to zero.
func (p *Param) ZeroGrad() { clear(p.Grad) }

// MaxAbsDiff returns max_i |a[i]-b[i]| and the index where it occurs. It
// returns +Inf when the lengths differ or a NaN is met.
func MaxAbsDiff(a, b []float32) (float64, int) {
	if len(a) != len(b) {
		return math.Inf(1), -1
	}
	worst, at := 0.0, -1
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if math.IsNaN(d) {
			return math.Inf(1), i
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

// MaxAbs returns max_i |a[i]|.
func MaxAbs(a []float32) float64 {
	m := 0.0
	for _, v := range a {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}
