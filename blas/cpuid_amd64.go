package blas

import (
	"encoding/binary"
	"strings"

	"golang.org/x/sys/cpu"
)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// hostCPU identifies the processor from CPUID: vendor and brand strings,
// display family and model (base plus extended fields, as AMD and Intel
// define them), stepping, and the vector extensions that matter to the
// matrix products.
func hostCPU() CPUInfo {
	_, b, c, d := cpuid(0, 0)
	var v [12]byte
	binary.LittleEndian.PutUint32(v[0:], b)
	binary.LittleEndian.PutUint32(v[4:], d)
	binary.LittleEndian.PutUint32(v[8:], c)
	a, _, _, _ := cpuid(1, 0)
	family := int(a>>8) & 0xf
	model := int(a>>4) & 0xf
	if family == 0xf {
		family += int(a>>20) & 0xff
	}
	if family >= 0x6 {
		model += int(a>>16) & 0xf << 4
	}
	var brand []byte
	if max, _, _, _ := cpuid(0x80000000, 0); max >= 0x80000004 {
		for leaf := uint32(0x80000002); leaf <= 0x80000004; leaf++ {
			var r [16]byte
			a, b, c, d := cpuid(leaf, 0)
			binary.LittleEndian.PutUint32(r[0:], a)
			binary.LittleEndian.PutUint32(r[4:], b)
			binary.LittleEndian.PutUint32(r[8:], c)
			binary.LittleEndian.PutUint32(r[12:], d)
			brand = append(brand, r[:]...)
		}
	}
	return CPUInfo{
		Vendor: string(v[:]), Brand: strings.TrimSpace(strings.TrimRight(string(brand), "\x00")),
		Family: family, Model: model, Stepping: int(a & 0xf),
		AVX2: cpu.X86.HasAVX2 && cpu.X86.HasFMA, AVX512F: cpu.X86.HasAVX512F,
		AVX512VNNI: cpu.X86.HasAVX512VNNI, AVXVNNI: cpu.X86.HasAVXVNNI,
		AVX512BF16: cpu.X86.HasAVX512BF16, AMXBF16: cpu.X86.HasAMXBF16,
	}
}
