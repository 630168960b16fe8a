package checkpoint_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/checkpoint"
)

// ExampleReadSafetensors writes a two-tensor file, one tensor stored as F16,
// and reads it back.
func ExampleReadSafetensors() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	entries := []*checkpoint.Entry{
		{Name: "dense.weight", DType: "F32", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}},
		{Name: "dense.bias", DType: "F16", Shape: []int{2}, Data: []float32{0.1, -0.5}},
	}
	if err := checkpoint.WriteSafetensors(path, entries, map[string]string{"format": "pt"}); err != nil {
		log.Fatal(err)
	}

	f, err := checkpoint.ReadSafetensors(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Format, f.Metadata["format"])
	for _, name := range f.Names {
		e := f.Tensors[name]
		fmt.Println(name, e.DType, e.Shape, e.Data)
	}
	// Output:
	// safetensors pt
	// dense.bias F16 [2] [0.099975586 -0.5]
	// dense.weight F32 [2 2] [1 2 3 4]
}

// ExampleReadDir reads whichever checkpoint a model folder holds: here a
// folder with only a safetensors file.
func ExampleReadDir() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	err = checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"),
		[]*checkpoint.Entry{{Name: "w", Shape: []int{3}, Data: []float32{1, 2, 3}}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	f, err := checkpoint.ReadDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(filepath.Base(f.Path), f.Names, f.Tensors["w"].Data)

	_, err = checkpoint.ReadDir(filepath.Join(dir, "missing"))
	fmt.Println(err != nil)
	// Output:
	// model.safetensors [w] [1 2 3]
	// true
}
