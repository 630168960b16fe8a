package blas

import "os"

// coreType returns the OpenBLAS kernel set (its OPENBLAS_CORETYPE name) to
// ask for on a processor, or "" to let OpenBLAS choose.
//
// OpenBLAS 0.3.21 (Debian 12) takes AMD Zen 4 (family 19h with AVX-512) for an
// Intel Cooperlake and runs its AVX-512 kernels, which Zen 4 executes as two
// 256-bit halves; its Zen (AVX2) kernels are faster there. Measured on a
// 2-core Zen 4 guest with `roformer bench` (2 alternating runs each, tokens/s):
// base 8×128 inference 936–942 against 898–899, base 1×512 850–864 against
// 793–807, small 16×128 training 2071–2178 against 1960–2006.
func coreType(vendor string, family int, avx512 bool) string {
	if vendor == "AuthenticAMD" && family == 0x19 && avx512 {
		return "Zen"
	}
	return ""
}

// chooseCoreType sets OPENBLAS_CORETYPE for the library about to be loaded
// (OpenBLAS reads it once, when it is loaded) unless the user has set it.
// It reports the value it set, or "".
func chooseCoreType() string {
	if _, set := os.LookupEnv("OPENBLAS_CORETYPE"); set {
		return ""
	}
	ct := coreType(hostCPU())
	if ct != "" {
		os.Setenv("OPENBLAS_CORETYPE", ct)
	}
	return ct
}
