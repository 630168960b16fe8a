// Package blas is the matrix-product seam of the project: every GEMM goes
// through Sgemm, which calls the backend chosen for this machine: oneDNN's
// dnnl_sgemm, OpenBLAS's sgemm_ (with one of its kernel sets), go-asm (our
// own SGEMM: Go blocking and packing around AVX-512 or AVX2+FMA
// microkernels in Go assembly, needing no library; see asm.go), or gonum's
// pure-Go SGEMM, the portable last resort (not amd64, or built with the
// purego tag). The int8 products of quantized inference go through
// oneDNN's matmul primitive with the weights packed once (NewS8Matmul:
// AMX-INT8 where the processor has it), or dnnl_gemm_u8s8s32 (Int8) where
// oneDNN has only its reference matmul.
//
// Why run-time loading (github.com/ebitengine/purego) rather than cgo: the
// binary builds with CGO_ENABLED=0 and without any library's headers, starts
// on a machine that lacks the libraries (and then says so and runs the
// slower Go path), and picks them up without a rebuild when they are
// installed (Debian: libdnnl2, libopenblas0-pthread). A call costs one
// foreign call: about 0.2–0.3 µs and no allocation (OpenBLAS's Fortran
// sgemm_ takes every argument by pointer, through purego's SyscallN;
// oneDNN's functions take float arguments by value, which SyscallN cannot
// pass, so on amd64 they go through a small trampoline of our own,
// ccall_amd64.s, called with runtime.cgocall as purego does; purego's
// RegisterFunc, used elsewhere, costs about 1.5 µs and a dozen
// allocations a call).
//
// Choice by measurement. A table of processors always lags new ones
// (OpenBLAS 0.3.21 runs AVX2 kernels on AMD Zen 5 and Cooperlake's on Zen 4),
// so the first use on a machine times every candidate on the products of a
// BERT-base layer, one thread each, for about 0.35 s (0.7 s when OpenBLAS's
// kernel sets are measured too; oneDNN's kernels are compiled on first use
// and need two rounds of warm-up): oneDNN, OpenBLAS
// with its own kernel choice and, when OpenBLAS is in contention, the other
// kernel sets the processor's instruction sets can run (SkylakeX, Haswell,
// Zen; loaded from a private copy of the library, since OpenBLAS fixes its
// kernels when it is loaded), and go-asm (about 0.1 s). The first candidate in that order is kept
// unless another is more than 5% faster; go-asm comes after the libraries,
// so without them it is the choice. The verdict is cached in
// CacheDir()/blas-choice.json under a key made of the processor (brand,
// family, model, stepping, vector extensions) and the libraries' versions,
// file sizes and dates, so a new processor or library measures again; a
// corrupt cache file is ignored and rewritten. ROFORMER_BLAS=go|go-asm|
// go-asm:avx512|go-asm:avx2|openblas|openblas:KERNELSET|onednn|PATH
// overrides the choice; Probe measures again.
//
// Threads: each library is kept single-threaded (OpenBLAS through
// openblas_set_num_threads, oneDNN's OpenMP through OMP_NUM_THREADS=1 unless
// set), and so is go-asm; parallelism comes from the callers (kernels split rows or heads
// across goroutines, each calling the library). Measured on the 2-core
// target machines this beats one caller with multi-threaded BLAS on
// head-sized products, and it gives one knob (the number of Go workers) with
// no oversubscription.
package blas
