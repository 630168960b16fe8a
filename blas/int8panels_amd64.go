//go:build amd64 && !purego

package blas

import "golang.org/x/sys/cpu"

//go:generate go run gen_int8.go

//go:noescape
func i8k1x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k2x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k3x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k4x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k5x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k6x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k7x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k8x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k9x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k10x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k11x32(kg int, a *uint8, b *int8, c *int32, ldc int)

//go:noescape
func i8k12x32(kg int, a *uint8, b *int8, c *int32, ldc int)

type int8Kernel func(kg int, a *uint8, b *int8, c *int32, ldc int)

// int8Kernels are Int8Panels' kernels by rows (index R-1), nil without
// AVX-512F and AVX512_VNNI, and where the CPU has AMX-INT8 tiles, which
// oneDNN's matmul runs on (their rate is several times VNNI's on the
// products of many rows).
var int8Kernels = func() []int8Kernel {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512VNNI || cpu.X86.HasAMXInt8 {
		return nil
	}
	return []int8Kernel{i8k1x32, i8k2x32, i8k3x32, i8k4x32, i8k5x32, i8k6x32, i8k7x32, i8k8x32, i8k9x32, i8k10x32, i8k11x32, i8k12x32}
}()
