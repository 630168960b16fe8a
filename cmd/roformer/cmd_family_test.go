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
	// The folder as it is (is_decoder true, a pooler): the UniLM rule of
	// Sim models makes the type-0 batch bidirectional, as the reference
	// encodes it.
	dir := filepath.Join(family, "sim_a", "model")
	got := forward(dir, "base", sim.Pooler.Inputs)
	testutil.AssertClose(t, "Sim pooler_output", got["pooler_output"].Data, sim.Pooler.Outputs["pooler_output"].Data, 1e-4, 0)
}
