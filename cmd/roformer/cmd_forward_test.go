package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tensor"
)

// runCLI runs one invocation in-process and returns the exit code and output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

type jsonTensor struct {
	Shape []int     `json:"shape"`
	Data  []float32 `json:"data"`
}

// The forward verb reproduces the fixture outputs through the whole CLI path
// (JSON in, model folder, JSON out).
func TestForwardCLIFixture(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "hf-roformer", "cases", "s03_embproj_h64_leftpad")
	var fx struct {
		InputIDs      [][]int `json:"input_ids"`
		AttentionMask [][]int `json:"attention_mask"`
		TokenTypeIDs  [][]int `json:"token_type_ids"`
		Outputs       map[string]map[string]json.RawMessage
	}
	data, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"input_ids": fx.InputIDs, "attention_mask": fx.AttentionMask, "token_type_ids": fx.TokenTypeIDs})
	inPath := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(inPath, in, 0o644)
	for _, c := range []struct{ head, class, key string }{
		{"base", "RoFormerModel", "last_hidden_state"},
		{"masked-lm", "RoFormerForMaskedLM", "logits"},
		{"causal-lm", "RoFormerForCausalLM", "logits"},
		{"sequence-classification", "RoFormerForSequenceClassification", "logits"},
	} {
		t.Run(c.head, func(t *testing.T) {
			outPath := filepath.Join(t.TempDir(), "out.json")
			code, _, stderr := runCLI(t, "forward", "--model", dir, "--head", c.head, "--input", inPath, "--output", outPath, "--quiet")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got map[string]jsonTensor
			raw, _ := os.ReadFile(outPath)
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			var want jsonTensor
			json.Unmarshal(fx.Outputs[c.class][c.key], &want)
			g := got[c.key]
			if !tensor.SameShape(g.Shape, want.Shape) {
				t.Fatalf("shape %v, want %v", g.Shape, want.Shape)
			}
			testutil.AssertClose(t, c.key, g.Data, want.Data, 1e-4, 0)
		})
	}
}

func writeJSON(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad input: a clear message, exit code 1 (2 for usage), never a panic.
func TestForwardCLIBadInput(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "hf-roformer", "cases", "s01_tiny_h32_l1")
	tmp := t.TempDir()
	good := writeJSON(t, tmp, "good.json", `{"input_ids": [[2, 5, 3]]}`)
	// A copy of the model folder with a truncated safetensors file.
	broken := filepath.Join(tmp, "broken")
	os.Mkdir(broken, 0o755)
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(broken, "config.json"), cfg, 0o644)
	st, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	os.WriteFile(filepath.Join(broken, "model.safetensors"), st[:len(st)/2], 0o644)
	// A folder whose config does not validate.
	badcfg := filepath.Join(tmp, "badcfg")
	os.Mkdir(badcfg, 0o755)
	os.WriteFile(filepath.Join(badcfg, "config.json"), []byte(`{"hidden_size": 30, "num_attention_heads": 4}`), 0o644)
	cases := []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{"ragged", []string{"--input", writeJSON(t, tmp, "ragged.json", `{"input_ids": [[2, 5, 3], [2, 3]]}`)}, 1, []string{"ragged", "input_ids[1]"}},
		{"empty", []string{"--input", writeJSON(t, tmp, "empty.json", `{"input_ids": []}`)}, 1, []string{"empty"}},
		{"no ids", []string{"--input", writeJSON(t, tmp, "none.json", `{}`)}, 1, []string{"input_ids missing"}},
		{"not json", []string{"--input", writeJSON(t, tmp, "bad.json", `{"input_ids": [[1,2`)}, 1, []string{"bad.json"}},
		{"string id", []string{"--input", writeJSON(t, tmp, "str.json", `{"input_ids": [["a"]]}`)}, 1, []string{"input_ids[0][0] is a string"}},
		{"id outside vocab", []string{"--input", writeJSON(t, tmp, "big.json", `{"input_ids": [[2, 57, 3]]}`)}, 1, []string{"input_ids[0][1] = 57", "[0, 57)"}},
		{"negative id", []string{"--input", writeJSON(t, tmp, "neg.json", `{"input_ids": [[-1]]}`)}, 1, []string{"input_ids[0][0] = -1"}},
		{"mask shape", []string{"--input", writeJSON(t, tmp, "mask.json", `{"input_ids": [[2, 5]], "attention_mask": [[1, 1, 1]]}`)}, 1, []string{"attention_mask has shape [1 3]"}},
		{"mask value", []string{"--input", writeJSON(t, tmp, "mask2.json", `{"input_ids": [[2, 5]], "attention_mask": [[1, 7]]}`)}, 1, []string{"attention_mask[0][1] = 7"}},
		{"type outside", []string{"--input", writeJSON(t, tmp, "tt.json", `{"input_ids": [[2, 5]], "token_type_ids": [[0, 2]]}`)}, 1, []string{"token_type_ids[0][1] = 2"}},
		{"missing input file", []string{"--input", filepath.Join(tmp, "nope.json")}, 1, []string{"nope.json"}},
		{"head weights absent", []string{"--input", good, "--head", "question-answering"}, 1, []string{"qa_outputs.weight", "no weights for this head"}},
		{"unknown head", []string{"--input", good, "--head", "pooler"}, 2, []string{"unknown head", "masked-lm"}},
		{"truncated checkpoint", []string{"--input", good, "--model", broken}, 1, []string{"model.safetensors"}},
		{"bad config", []string{"--input", good, "--model", badcfg}, 1, []string{"hidden_size 30 is not divisible by num_attention_heads 4"}},
		{"no model folder", []string{"--input", good, "--model", filepath.Join(tmp, "absent")}, 1, []string{"config.json"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"forward", "--model", dir, "--quiet"}, c.args...)
			code, _, stderr := runCLI(t, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, stderr)
			}
			if strings.Contains(stderr, "internal error") {
				t.Fatalf("panicked: %s", stderr)
			}
			for _, w := range c.wants {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestEnvAndUsage(t *testing.T) {
	code, out, _ := runCLI(t, "env")
	if code != 0 || !strings.Contains(out, "blas") || !strings.Contains(out, "threads") {
		t.Fatalf("env: exit %d, output %q", code, out)
	}
	if code, _, _ := runCLI(t, "frobnicate"); code != 2 {
		t.Errorf("unknown verb: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "forward", "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "forward"); code != 2 {
		t.Errorf("missing --model: exit %d, want 2", code)
	}
}

func TestInspect(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "hf-roformer", "cases", "s06_seq70_no_embed_positions")
	code, out, stderr := runCLI(t, "inspect", "--model", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"hidden 64", "masked-lm                ready", "question-answering       no head weights", "roformer.embeddings.word_embeddings.weight"} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect output lacks %q:\n%s", w, out)
		}
	}
}

// Sequence-classification labels are read as the model's problem type needs:
// whole numbers are regression targets for a one-label model, class ids for
// a single-label one.
func TestForwardCLISeqClsLabels(t *testing.T) {
	for _, c := range []struct {
		name      string
		numLabels int
		labels    string
		loss      func(logits []float32) float64
	}{
		{"regression_whole_numbers", 1, `[2, 3]`, func(z []float32) float64 {
			d0, d1 := float64(z[0])-2, float64(z[1])-3
			return (d0*d0 + d1*d1) / 2
		}},
		{"single_label_ids", 3, `[2, 0]`, func(z []float32) float64 {
			ce := func(row []float32, t int) float64 {
				s := 0.0
				for _, v := range row {
					s += math.Exp(float64(v))
				}
				return math.Log(s) - float64(row[t])
			}
			return (ce(z[0:3], 2) + ce(z[3:6], 0)) / 2
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := roformer.DefaultConfig()
			cfg.VocabSize, cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads = 20, 8, 8, 1, 2
			cfg.IntermediateSize, cfg.MaxPositionEmbeddings, cfg.NumLabels = 16, 16, c.numLabels
			m, err := roformer.New(cfg, roformer.HeadSequenceCls)
			if err != nil {
				t.Fatal(err)
			}
			m.Init(3)
			dir := t.TempDir()
			if err := m.Save(dir); err != nil {
				t.Fatal(err)
			}
			in := writeJSON(t, dir, "in.json", `{"input_ids": [[2, 5, 3], [2, 7, 3]], "labels": `+c.labels+`}`)
			outPath := filepath.Join(dir, "out.json")
			code, _, stderr := runCLI(t, "forward", "--model", dir, "--head", "sequence-classification", "--input", in, "--output", outPath, "--quiet")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got struct {
				Logits jsonTensor `json:"logits"`
				Loss   float64    `json:"loss"`
			}
			raw, _ := os.ReadFile(outPath)
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if want := c.loss(got.Logits.Data); math.Abs(got.Loss-want) > 1e-5 {
				t.Errorf("loss %v, want %v (logits %v)", got.Loss, want, got.Logits.Data)
			}
		})
	}
}
