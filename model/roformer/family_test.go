package roformer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// familyFixture is ../shared/fixtures/roformer-family/<case>/fixture.json
// (the RoFormer-V2 part).
type familyFixture struct {
	Inputs struct {
		InputIDs      [][]int32 `json:"input_ids"`
		AttentionMask [][]int32 `json:"attention_mask"`
		TokenTypeIDs  [][]int32 `json:"token_type_ids"`
	} `json:"inputs"`
	Heads map[string]struct {
		Folder  string `json:"folder"`
		Outputs map[string]struct {
			Shape []int     `json:"shape"`
			Data  []float32 `json:"data"`
		} `json:"outputs"`
	} `json:"heads"`
}

// RoFormer-V2 (norm_type rms_norm, use_bias false, the bare tied MLM
// decoder) against JunnYu/RoFormer_pytorch's outputs, every head, from both
// weight formats. Tolerance 1e-4 absolute, the fixture's (float32 products
// summed in another order).
func TestRoFormerV2Fixture(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "roformer-family", "v2_a")
	raw, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f familyFixture
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	B, T := len(f.Inputs.InputIDs), len(f.Inputs.InputIDs[0])
	b := &Batch{B: B, T: T}
	for r := 0; r < B; r++ {
		b.InputIDs = append(b.InputIDs, f.Inputs.InputIDs[r]...)
		b.AttentionMask = append(b.AttentionMask, f.Inputs.AttentionMask[r]...)
		b.TokenTypeIDs = append(b.TokenTypeIDs, f.Inputs.TokenTypeIDs[r]...)
	}
	if len(f.Heads) != 3 {
		t.Fatalf("fixture has %d heads, want 3", len(f.Heads))
	}
	for name, h := range f.Heads {
		if len(h.Outputs) == 0 {
			t.Fatalf("%s: no outputs in the fixture", name)
		}
		head, err := ParseHead(name)
		if err != nil {
			t.Fatal(err)
		}
		folder := h.Folder
		if folder == "" {
			folder = name
		}
		for _, weights := range []string{"model.safetensors", "pytorch_model.bin"} {
			t.Run(name+"/"+weights, func(t *testing.T) {
				l, err := Load(filepath.Join(dir, folder), head, LoadOptions{Weights: filepath.Join(dir, folder, weights)})
				if err != nil {
					t.Fatal(err)
				}
				if !l.Config.RMSNorm() || l.Config.Bias() {
					t.Fatalf("config not read as V2: norm_type %q, use_bias %v", l.Config.NormType, l.Config.Bias())
				}
				out, err := l.Forward(context.Background(), b, nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for oname, want := range h.Outputs {
					got := out.Named(oname)
					if got == nil {
						t.Fatalf("no %s", oname)
					}
					testutil.AssertClose(t, name+" "+oname, got.Data, want.Data, 1e-4, 0)
				}
			})
		}
	}
}

// RoFormer-Sim's pooler: dense → linear activation on the first token,
// against the reference's pooler_output for a padded batch (1e-4).
func TestRoFormerSimPooler(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "roformer-family", "sim_a")
	raw, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Pooler struct {
			Inputs struct {
				InputIDs      [][]int32 `json:"input_ids"`
				AttentionMask [][]int32 `json:"attention_mask"`
				TokenTypeIDs  [][]int32 `json:"token_type_ids"`
			} `json:"inputs"`
			Outputs map[string]struct {
				Shape []int     `json:"shape"`
				Data  []float32 `json:"data"`
			} `json:"outputs"`
		} `json:"pooler"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	in := f.Pooler.Inputs
	b := &Batch{B: len(in.InputIDs), T: len(in.InputIDs[0])}
	for r := range in.InputIDs {
		b.InputIDs = append(b.InputIDs, in.InputIDs[r]...)
		b.AttentionMask = append(b.AttentionMask, in.AttentionMask[r]...)
		b.TokenTypeIDs = append(b.TokenTypeIDs, in.TokenTypeIDs[r]...)
	}
	want := f.Pooler.Outputs["pooler_output"]
	if len(want.Data) == 0 {
		t.Fatal("no pooler_output in the fixture")
	}
	// The reference encodes the pooler's batch bidirectionally (no causal
	// mask) with the causal-LM model's encoder.
	l, err := Load(filepath.Join(dir, "model"), HeadBase, LoadOptions{ConfigOverride: func(c *Config) { c.IsDecoder = false }})
	if err != nil {
		t.Fatal(err)
	}
	if l.Encoder.Pooler == nil {
		t.Fatal("the checkpoint's pooler was not loaded")
	}
	out, err := l.Forward(context.Background(), b, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.AssertClose(t, "pooler_output", out.PoolerOutput.Data, want.Data, 1e-4, 0)
}
