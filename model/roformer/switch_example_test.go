package roformer_test

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/model/roformer"
)

// A causal Performer with RoPE as the paper's eq. (19): the rotation acts on
// the random features, the normaliser stays unrotated. The two switches are
// config.json keys.
func ExampleConfig_switches() {
	cfg, _ := roformer.ParseConfig([]byte(`{"vocab_size": 256, "hidden_size": 64, "num_attention_heads": 2,
		"num_hidden_layers": 1, "intermediate_size": 128, "pad_token_id": null,
		"position_embedding_type": "rotary", "attention_type": "performer", "feature_redraw_interval": 100}`), "config.json")
	m, err := roformer.New(cfg, roformer.HeadCausalLM)
	if err != nil {
		fmt.Println(err)
		return
	}
	m.Init(1)
	ids := []int32{72, 101, 108, 108, 111}
	s := m.NewState(1, len(ids), true)
	for step := 0; step < 3; step++ {
		m.RedrawFeaturesAt(step) // redraws every 100 steps
		r, err := m.ForwardBackward(context.Background(), s, &roformer.Batch{InputIDs: ids, B: 1, T: len(ids)}, &roformer.Labels{IDs: ids}, roformer.StepOptions{})
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = r.Loss // an optimizer step would follow
	}
	fmt.Println("attention:", m.Config.Attention(), "positions:", m.Config.PosEnc(), "features per head:", m.Config.NumFeatures())
	// Output:
	// attention: performer positions: rotary features per head: 112
}
