package sentence

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/checkpoint"
)

// Save writes a Dense module's weights as pytorch_model.bin (what
// sentence-transformers 2.x reads), and removes a model.safetensors left by
// an earlier save, which would otherwise shadow them.
func TestSaveDensePyTorch(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "2_Dense", "model.safetensors")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	old := []*checkpoint.Entry{{Name: "linear.weight", Shape: []int{2, 2}, Data: []float32{9, 9, 9, 9}}}
	if err := checkpoint.WriteSafetensors(stale, old, nil); err != nil {
		t.Fatal(err)
	}
	f := &Folder{
		Pooling: Pooling{Dim: 2, Mean: true},
		Steps:   []Step{{Dense: &Dense{In: 2, Out: 2, Activation: DefaultActivation, Weight: []float32{1, 2, 3, 4}, Bias: []float32{0.5, -0.5}}}},
	}
	if err := f.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale %s still there (%v)", stale, err)
	}
	ck, err := checkpoint.ReadPyTorch(filepath.Join(dir, "2_Dense", "pytorch_model.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ck.Names, []string{"linear.bias", "linear.weight"}) || !slices.Equal(ck.Tensors["linear.weight"].Shape, []int{2, 2}) {
		t.Fatalf("pytorch_model.bin holds %v", ck.Names)
	}
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Steps[0].Dense; !slices.Equal(d.Weight, []float32{1, 2, 3, 4}) || !slices.Equal(d.Bias, []float32{0.5, -0.5}) {
		t.Fatalf("read back weight %v bias %v", d.Weight, d.Bias)
	}
}
