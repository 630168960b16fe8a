package blas

import (
	"fmt"
	"strings"
	"sync"
)

// CPUInfo describes the processor, as far as the choice of matrix-product
// kernels cares.
type CPUInfo struct {
	Vendor   string // CPUID vendor, e.g. "AuthenticAMD"
	Brand    string // CPUID brand string, e.g. "AMD EPYC 9B14"
	Family   int    // display family (base + extended), e.g. 0x19 for AMD Zen 3/4
	Model    int    // display model
	Stepping int

	AVX2       bool // AVX2 and FMA
	AVX512F    bool
	AVX512VNNI bool // 8-bit dot products on 512-bit vectors
	AVXVNNI    bool // 8-bit dot products on 256-bit vectors
	AVX512BF16 bool // bfloat16 dot products
	AMXBF16    bool // Intel AMX tiles with bfloat16
}

// VectorWidth names the widest floating-point vector extension: "AVX-512",
// "AVX2" or "none".
func (c CPUInfo) VectorWidth() string {
	switch {
	case c.AVX512F:
		return "AVX-512"
	case c.AVX2:
		return "AVX2"
	}
	return "none"
}

// String is a one-line description for logs and result tables, e.g.
// "AMD EPYC (AuthenticAMD family 0x19 model 0x11), AVX-512 +vnni +bf16".
func (c CPUInfo) String() string {
	var b strings.Builder
	b.WriteString(c.Brand)
	if c.Vendor != "" {
		fmt.Fprintf(&b, " (%s family %#x model %#x)", c.Vendor, c.Family, c.Model)
	}
	b.WriteString(", " + c.VectorWidth())
	for _, f := range []struct {
		on   bool
		name string
	}{{c.AVX512VNNI, "avx512_vnni"}, {c.AVXVNNI, "avx_vnni"}, {c.AVX512BF16, "avx512_bf16"}, {c.AMXBF16, "amx_bf16"}} {
		if f.on {
			b.WriteString(" +" + f.name)
		}
	}
	return b.String()
}

var cpuOnce = sync.OnceValue(hostCPU)

// CPU returns the processor's description.
func CPU() CPUInfo { return cpuOnce() }
