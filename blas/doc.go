// Package blas is the matrix-product seam of the project: every GEMM goes
// through Sgemm, which calls OpenBLAS's sgemm_ when the shared library
// can be loaded at run time, and a pure-Go fallback (gonum's native BLAS)
// otherwise.
//
// Why run-time loading (github.com/ebitengine/purego) rather than cgo: the
// binary builds with CGO_ENABLED=0 and without OpenBLAS headers, starts on a
// machine that lacks the library (and then says so and runs the slower Go
// path), and picks OpenBLAS up without a rebuild when it is installed. An
// sgemm_ call costs one foreign call (well under a microsecond), which is
// negligible against the products a transformer layer makes.
//
// Threads: OpenBLAS is kept single-threaded; parallelism comes from the
// callers (kernels split rows or heads across goroutines, each calling
// single-threaded BLAS). Measured on the 2-core target machines this beats one
// caller with multi-threaded BLAS on head-sized products, and it gives one
// knob (the number of Go workers) with no oversubscription.
//
// The library is looked up as libopenblas.so.0, libopenblas.so (Linux),
// libopenblas.dylib (macOS). Callers choose a path with Open or force the Go
// path with UseGo (the CLI maps its ROFORMER_BLAS variable onto them).
//
// Kernel set: OpenBLAS picks its kernels for the processor when it is loaded.
// Where its choice is measurably slow (AMD Zen 4, which OpenBLAS 0.3.21 runs
// with Intel Cooperlake's AVX-512 kernels), the package sets
// OPENBLAS_CORETYPE before loading; a value the user has set is left alone
// (set it to a kernel set's name, e.g. Cooperlake, to choose another).
// The name Name reports ends with the kernel set in use.
package blas
