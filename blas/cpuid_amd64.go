package blas

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"
)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// hostCPU identifies the processor: vendor string, display family (base
// family plus extended family, as AMD and Intel define it) and whether it
// has AVX-512F.
func hostCPU() (vendor string, family int, avx512 bool) {
	_, b, c, d := cpuid(0, 0)
	var v [12]byte
	binary.LittleEndian.PutUint32(v[0:], b)
	binary.LittleEndian.PutUint32(v[4:], d)
	binary.LittleEndian.PutUint32(v[8:], c)
	a, _, _, _ := cpuid(1, 0)
	family = int(a>>8) & 0xf
	if family == 0xf {
		family += int(a>>20) & 0xff
	}
	return string(v[:]), family, cpu.X86.HasAVX512F
}
