package blas

// cacheSizes returns the per-core level-1 data cache and level-2 cache in
// bytes from CPUID's deterministic cache parameters (leaf 4 on Intel,
// 0x8000001D on AMD: ways × partitions × line size × sets), 0 for a size
// it cannot read.
func cacheSizes() (l1d, l2 int) {
	leaf := uint32(4)
	if max, _, _, _ := cpuid(0, 0); max < 4 {
		leaf = 0
	}
	if _, b, _, _ := cpuid(0, 0); b == 0x68747541 { // "Auth"enticAMD
		leaf = 0
		if max, _, _, _ := cpuid(0x80000000, 0); max >= 0x8000001d {
			if _, _, c, _ := cpuid(0x80000001, 0); c&(1<<22) != 0 { // TopologyExtensions
				leaf = 0x8000001d
			}
		}
	}
	if leaf == 0 {
		return 0, 0
	}
	for sub := uint32(0); sub < 16; sub++ {
		a, b, c, _ := cpuid(leaf, sub)
		typ, level := a&0x1f, (a>>5)&7
		if typ == 0 {
			break
		}
		size := int((b>>22)+1) * int((b>>12)&0x3ff+1) * int(b&0xfff+1) * int(c+1)
		switch {
		case level == 1 && typ == 1:
			l1d = size
		case level == 2 && typ == 3:
			l2 = size
		}
	}
	return l1d, l2
}
