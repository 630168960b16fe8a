package optim

import (
	"math"
	"testing"
)

// TestInverseSqrt: the schedule is Vaswani et al.'s formula
// d^−½·min(step^−½, step·warmup^−³ᐟ²) scaled to peak at PeakLR, checked at
// every step of a run; it ramps linearly from 0, peaks at step = warmup,
// halves at 4·warmup, ignores Total and parses from its name.
func TestInverseSqrt(t *testing.T) {
	const d, warmup, peak = 512, 40, 5e-4
	s := Schedule{Kind: InverseSqrt, PeakLR: peak, Warmup: warmup, Total: 7}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	top := math.Pow(d, -0.5) * math.Pow(warmup, -0.5) // the formula's value at step = warmup
	for step := 1; step <= 1000; step++ {
		vaswani := math.Pow(d, -0.5) * math.Min(math.Pow(float64(step), -0.5), float64(step)*math.Pow(warmup, -1.5))
		if got, want := s.LR(step), peak*vaswani/top; math.Abs(got-want) > 1e-15 {
			t.Fatalf("LR(%d) = %.17g, want %.17g", step, got, want)
		}
	}
	for _, c := range []struct {
		step int
		want float64
	}{{0, 0}, {10, peak / 4}, {warmup, peak}, {4 * warmup, peak / 2}, {100 * warmup, peak / 10}} {
		if got := s.LR(c.step); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("LR(%d) = %.17g, want %.17g", c.step, got, c.want)
		}
	}
	if f := InverseSqrtFactor(16, 0); f != 0.25 {
		t.Errorf("without warm-up, factor at step 16 = %v, want 1/√16", f)
	}
	if f := InverseSqrtFactor(0, 0); f != 1 {
		t.Errorf("without warm-up, factor at step 0 = %v, want 1", f)
	}
	if k, err := ParseSchedule("inverse_sqrt"); err != nil || k != InverseSqrt {
		t.Errorf("ParseSchedule(inverse_sqrt) = %q, %v", k, err)
	}
}
