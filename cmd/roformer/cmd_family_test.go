package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// The RoFormer family fixtures through `roformer forward`: every RoFormer-V2
// head and RoFormer-Sim's pooler_output, within 1e-4 of the reference.
func TestForwardCLIFamily(t *testing.T) {
	family := testutil.Shared(t, "fixtures", "roformer-family")
	forward := func(model, head string, inputs any) map[string]jsonTensor {
		t.Helper()
		in := filepath.Join(t.TempDir(), "in.json")
		raw, _ := json.Marshal(inputs)
		if err := os.WriteFile(in, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "forward", "--model", model, "--head", head, "--input", in, "--threads", "2")
		if code != 0 {
			t.Fatalf("forward %s --head %s: exit %d: %s", model, head, code, stderr)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatal(err)
		}
		ts := map[string]jsonTensor{}
		for k, v := range out {
			var tt jsonTensor
			if json.Unmarshal(v, &tt) == nil && tt.Shape != nil {
				ts[k] = tt
			}
		}
		return ts
	}

	var v2 struct {
		Inputs map[string]any `json:"inputs"`
		Heads  map[string]struct {
			Outputs map[string]jsonTensor `json:"outputs"`
		} `json:"heads"`
	}
	testutil.ReadJSON(t, filepath.Join(family, "v2_a", "fixture.json"), &v2)
	for head, h := range v2.Heads {
		got := forward(filepath.Join(family, "v2_a", head), head, v2.Inputs)
		for name, want := range h.Outputs {
			g, ok := got[name]
			if !ok {
				t.Fatalf("V2 %s: no %s in the output", head, name)
			}
			testutil.AssertClose(t, "V2 "+head+" "+name, g.Data, want.Data, 1e-4, 0)
		}
	}

	var sim struct {
		Pooler struct {
			Inputs  map[string]any        `json:"inputs"`
			Outputs map[string]jsonTensor `json:"outputs"`
		} `json:"pooler"`
	}
	testutil.ReadJSON(t, filepath.Join(family, "sim_a", "fixture.json"), &sim)
	// The reference encodes the pooler's batch bidirectionally: a copy of
	// the folder with is_decoder false.
	dir := t.TempDir()
	src := filepath.Join(family, "sim_a", "model")
	for _, f := range []string{"model.safetensors", "config.json"} {
		raw, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			var cfg map[string]any
			json.Unmarshal(raw, &cfg)
			cfg["is_decoder"] = false
			raw, _ = json.Marshal(cfg)
		}
		if err := os.WriteFile(filepath.Join(dir, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := forward(dir, "base", sim.Pooler.Inputs)
	testutil.AssertClose(t, "Sim pooler_output", got["pooler_output"].Data, sim.Pooler.Outputs["pooler_output"].Data, 1e-4, 0)
}
