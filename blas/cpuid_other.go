//go:build !amd64

package blas

// hostCPU identifies the processor; off x86-64 there is no core type to
// choose, so it reports nothing.
func hostCPU() (vendor string, family int, avx512 bool) { return "", 0, false }
