package kernels

import "testing"

// String names the layer's precision: fp32 for NewPackedLinear, bf16 for
// NewBF16Linear (each where oneDNN and the CPU allow it).
func TestPackedLinearString(t *testing.T) {
	ran := 0
	for _, c := range []struct {
		name string
		make func([]float32, int, int) (*PackedLinear, error)
		want string
	}{
		{"NewPackedLinear", NewPackedLinear, "fp32 linear [3, 2]"},
		{"NewBF16Linear", NewBF16Linear, "bf16 linear [3, 2]"},
	} {
		l, err := c.make(make([]float32, 6), 3, 2)
		if err != nil {
			t.Logf("%s: %v", c.name, err)
			continue
		}
		ran++
		if got := l.String(); got != c.want {
			t.Errorf("%s: String() = %q, want %q", c.name, got, c.want)
		}
	}
	if ran == 0 {
		t.Skip("neither packed layer is available here (oneDNN missing)")
	}
}
