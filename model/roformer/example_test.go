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
