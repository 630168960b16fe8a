//go:build !amd64 || purego

package blas

type int8Kernel func(kg int, a *uint8, b *int8, c *int32, ldc int)

// int8Kernels is empty off amd64: Int8Panels is not offered.
var int8Kernels []int8Kernel
