package checkpoint_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/checkpoint"
)

// ExampleWritePyTorch writes a Dense module's pytorch_model.bin, as
// sentence-transformers reads it, and reads it back.
func ExampleWritePyTorch() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pytorch_model.bin")

	entries := []*checkpoint.Entry{
		{Name: "linear.weight", DType: "F32", Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}},
		{Name: "linear.bias", DType: "F32", Shape: []int{2}, Data: []float32{0.5, -0.5}},
	}
	if err := checkpoint.WritePyTorch(path, entries); err != nil {
		log.Fatal(err)
	}

	f, err := checkpoint.ReadPyTorch(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Format)
	for _, name := range f.Names {
		e := f.Tensors[name]
		fmt.Println(name, e.DType, e.Shape, e.Data)
	}
	// Output:
	// pytorch
	// linear.bias F32 [2] [0.5 -0.5]
	// linear.weight F32 [2 3] [1 2 3 4 5 6]
}
