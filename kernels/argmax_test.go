package kernels

import (
	"math"
	"testing"
)

// TestArgmax: the first of equal maxima (numpy's rule), both widths, and
// 0 for an empty row.
func TestArgmax(t *testing.T) {
	if got := Argmax([]float32{1, 3, 2, 3}); got != 1 {
		t.Errorf("ties: %d, want 1", got)
	}
	if got := Argmax([]float64{-5, -1, -1e300}); got != 1 {
		t.Errorf("float64: %d, want 1", got)
	}
	if got := Argmax([]float32{float32(math.Inf(-1)), 0}); got != 1 {
		t.Errorf("-Inf first: %d, want 1", got)
	}
	if got := Argmax([]float32{}); got != 0 {
		t.Errorf("empty: %d, want 0", got)
	}
}
