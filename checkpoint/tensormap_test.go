package checkpoint

import (
	"path/filepath"
	"slices"
	"testing"
)

// TensorMap gives every tensor of the file under its name, sharing the
// entry's shape and values.
func TestTensorMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	entries := []*Entry{
		{Name: "a", DType: "F32", Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}},
		{Name: "b.weight", DType: "F32", Shape: []int{1}, Data: []float32{-1}},
	}
	if err := WriteSafetensors(path, entries, nil); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	m := f.TensorMap()
	if len(m) != len(entries) {
		t.Fatalf("%d tensors, want %d", len(m), len(entries))
	}
	for _, e := range entries {
		got, ok := m[e.Name]
		if !ok || !slices.Equal(got.Shape, e.Shape) || !slices.Equal(got.Data, e.Data) {
			t.Fatalf("%s: got %+v, want shape %v data %v", e.Name, got, e.Shape, e.Data)
		}
		if &got.Data[0] != &f.Tensors[e.Name].Data[0] {
			t.Errorf("%s: the values were copied, want them shared", e.Name)
		}
	}
}
