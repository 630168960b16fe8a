//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// hasAVX512DQ: dropMulAVX512 multiplies 64-bit lanes (VPMULLQ).
var hasAVX512DQ = cpu.X86.HasAVX512DQ

//go:noescape
func dropMulAVX512(dst, src *float32, n int, seed, off, thr uint64, keep float32)

//go:noescape
func dropMulAVX2(dst, src *float32, n int, seed, off, thr uint64, keep float32)
