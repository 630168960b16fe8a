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
// (OpenBLAS reads it once, when it is loaded) unless the user has set it to
// a kernel set's name; an empty value counts as unset, as it does for
// OpenBLAS. The variable then stays in the process's environment, so child
// processes that load OpenBLAS get the same kernels.
//
// The rule does not look at OpenBLAS's version: it was measured on 0.3.21,
// and 0.3.29 (Debian 13) still maps Zen 4 to Cooperlake (its
// driver/others/dynamic.c). Should a later OpenBLAS get kernels of its own for
// Zen 4, coreType must learn the version.
func chooseCoreType() {
	if os.Getenv("OPENBLAS_CORETYPE") != "" {
		return
	}
	if ct := coreType(hostCPU()); ct != "" {
		os.Setenv("OPENBLAS_CORETYPE", ct)
	}
}
