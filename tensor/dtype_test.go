package tensor

import (
	"math"
	"testing"
)

func TestF16RoundTrip(t *testing.T) {
	// Every binary16 value converts to float32 and back unchanged.
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		back := F32ToF16(f)
		if math.IsNaN(float64(f)) {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestF16Values(t *testing.T) {
	cases := []struct {
		h uint16
		f float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.960464477539063e-08}, {0x3555, 0.33325195},
	}
	for _, c := range cases {
		if got := F16ToF32(c.h); got != c.f {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", c.h, got, c.f)
		}
	}
	// Rounding: halfway between 1 and 1+2^-10 rounds to even (1).
	if got := F32ToF16(1 + 1.0/2048); got != 0x3c00 {
		t.Errorf("tie rounding gave %#04x", got)
	}
	if got := F32ToF16(1e6); got != 0x7c00 {
		t.Errorf("overflow gave %#04x, want +Inf", got)
	}
}

func TestBF16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := F32ToBF16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
	if got := F32ToBF16(1.00390625); got != 0x3f80 { // tie to even
		t.Errorf("tie rounding gave %#04x", got)
	}
}
