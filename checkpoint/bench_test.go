package checkpoint

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkReadSafetensors reads a file of n tensors of size floats each.
func BenchmarkReadSafetensors(b *testing.B) {
	for _, c := range []struct{ n, size int }{{4, 1 << 20}, {200, 1 << 14}} {
		for _, dtype := range []string{"F32", "F16"} {
			b.Run(fmt.Sprintf("%dx%d_%s", c.n, c.size, dtype), func(b *testing.B) {
				entries := make([]*Entry, c.n)
				for i := range entries {
					data := make([]float32, c.size)
					for j := range data {
						data[j] = float32(j%1000) * 0.001
					}
					entries[i] = &Entry{Name: fmt.Sprintf("t%03d", i), DType: dtype, Shape: []int{c.size}, Data: data}
				}
				path := filepath.Join(b.TempDir(), "b.safetensors")
				if err := WriteSafetensors(path, entries, nil); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(c.n * c.size * dtypeSizes[dtype]))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := ReadSafetensors(path); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkParsePyTorch parses an in-memory torch archive of n F32 tensors.
func BenchmarkParsePyTorch(b *testing.B) {
	const n, size = 4, 1 << 20
	var ts []ptTensor
	storages := map[string][]byte{}
	vals := make([]float32, size)
	raw := f32Bytes(vals...)
	for i := range n {
		key := fmt.Sprint(i)
		ts = append(ts, ptTensor{name: "t" + key, key: key, storage: "FloatStorage", numel: size, shape: []int{size}})
		storages[key] = raw
	}
	data := torchZip(b, "archive", statePickle(ts), storages)
	b.SetBytes(int64(n * size * 4))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePyTorch(data, "b.bin"); err != nil {
			b.Fatal(err)
		}
	}
}
