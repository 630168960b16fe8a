package blas

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestCoreType(t *testing.T) {
	for _, c := range []struct {
		vendor string
		family int
		avx512 bool
		want   string
	}{
		{"AuthenticAMD", 0x19, true, "Zen"}, // Zen 4: OpenBLAS 0.3.21 would pick Cooperlake
		{"AuthenticAMD", 0x19, false, ""},   // Zen 3: OpenBLAS picks Zen itself
		{"AuthenticAMD", 0x1a, true, ""},    // Zen 5: full-width AVX-512, not measured
		{"GenuineIntel", 6, true, ""},
		{"", 0, false, ""},
	} {
		if got := coreType(c.vendor, c.family, c.avx512); got != c.want {
			t.Errorf("coreType(%q, %#x, %v) = %q, want %q", c.vendor, c.family, c.avx512, got, c.want)
		}
	}
}

func TestHostCPU(t *testing.T) {
	vendor, family, _ := hostCPU()
	if runtime.GOARCH != "amd64" {
		if vendor != "" || family != 0 {
			t.Errorf("hostCPU off amd64 = %q, %d", vendor, family)
		}
		return
	}
	if len(vendor) != 12 || family < 3 {
		t.Errorf("hostCPU() = %q, family %d: not a CPUID answer", vendor, family)
	}
	t.Logf("vendor %s, family %#x", vendor, family)
}

// TestCoreTypeChosen checks that the kernel set asked for is the one
// OpenBLAS reports using (it names it at the end of its configuration).
func TestCoreTypeChosen(t *testing.T) {
	if err := Init(); err != nil {
		t.Skip("OpenBLAS not loaded:", err)
	}
	want := coreType(hostCPU())
	if v := os.Getenv("OPENBLAS_CORETYPE"); v != "" && v != want {
		t.Skip("OPENBLAS_CORETYPE is set to", v)
	}
	if want == "" {
		t.Skip("OpenBLAS chooses its own kernels on this CPU")
	}
	if name := Name(); !strings.Contains(name, " "+want+" ") && !strings.HasSuffix(name, " "+want) {
		t.Errorf("OpenBLAS reports %q, want kernel set %s", name, want)
	}
}
