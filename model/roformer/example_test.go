package roformer_test

import (
	"context"
	"fmt"
	"os"

	"github.com/roformer-go/roformer/model/roformer"
)

// Build a small masked-LM RoFormer from a preset, save it as a Hugging Face
// folder, load it back and run it.
func Example() {
	cfg, _ := roformer.Preset("tiny", 1000)
	m, _ := roformer.New(cfg, roformer.HeadMaskedLM)
	m.Init(1) // HF's initialisation: N(0, 0.02²) weights, zero biases

	dir, _ := os.MkdirTemp("", "roformer-example")
	defer os.RemoveAll(dir)
	if err := m.Save(dir); err != nil { // config.json + model.safetensors
		fmt.Println(err)
		return
	}
	loaded, err := roformer.Load(dir, roformer.HeadMaskedLM, roformer.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := []int32{2, 17, 4, 99, 3} // [CLS] … [MASK] … [SEP]
	out, err := loaded.Forward(context.Background(), &roformer.Batch{InputIDs: ids, B: 1, T: len(ids)}, nil, roformer.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("weights:", loaded.Format)
	fmt.Println("logits shape:", out.Logits.Shape)
	fmt.Printf("parameters: %.2fM\n", float64(loaded.NumParams())/1e6)
	// Output:
	// weights: safetensors
	// logits shape: [1 5 1000]
	// parameters: 3.48M
}

// Inputs longer than max_position_embeddings work: the rotary angles are
// computed for any position.
func ExampleModel_Forward_longInput() {
	cfg, _ := roformer.Preset("tiny", 100)
	cfg.NumHiddenLayers, cfg.MaxPositionEmbeddings = 1, 16
	m, _ := roformer.New(cfg, roformer.HeadBase)
	m.Init(1)
	ids := make([]int32, 100) // 100 tokens, table of 16
	for i := range ids {
		ids[i] = int32(i)
	}
	out, err := m.Forward(context.Background(), &roformer.Batch{InputIDs: ids, B: 1, T: 100}, nil, roformer.Options{})
	fmt.Println(out.LastHiddenState.Shape, err)
	// Output: [1 100 256] <nil>
}

// Run a model's linear layers in int8 (dynamic quantization, done once
// here): the top prediction stays that of float32. Where the machine cannot
// run a precision (int8 needs oneDNN, bf16 a processor with bfloat16
// products), SetPrecision says so and the model stays in float32.
func ExampleModel_SetPrecision() {
	cfg, _ := roformer.Preset("tiny", 1000)
	m, _ := roformer.New(cfg, roformer.HeadMaskedLM)
	m.Init(1)
	ids := []int32{2, 17, 4, 99, 3}
	b := &roformer.Batch{InputIDs: ids, B: 1, T: len(ids)}
	ref, _ := m.Forward(context.Background(), b, nil, roformer.Options{})

	if err := m.SetPrecision(roformer.PrecisionInt8); err != nil {
		fmt.Fprintln(os.Stderr, "int8 unavailable here, running float32:", err)
	}
	out, _ := m.Forward(context.Background(), b, nil, roformer.Options{})
	same := true
	for t := 0; t < len(ids); t++ {
		same = same && argmaxRow(out.Logits.Data, t, 1000) == argmaxRow(ref.Logits.Data, t, 1000)
	}
	fmt.Println("top-1 as float32:", same)
	// Output: top-1 as float32: true
}

func argmaxRow(x []float32, row, n int) int {
	best := 0
	for i, v := range x[row*n : row*n+n] {
		if v > x[row*n+best] {
			best = i
		}
	}
	return best
}
