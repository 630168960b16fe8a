//go:build !amd64

package blas

// cacheSizes is unknown off x86-64: the block sizes take their defaults.
func cacheSizes() (l1d, l2 int) { return 0, 0 }
