package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pretrain --objective causal, then generate on its folder: a non-empty,
// deterministic greedy continuation.
func TestPretrainCausalThenGenerate(t *testing.T) {
	corpus := smallCorpus(t)
	dir := filepath.Join(t.TempDir(), "causal")
	code, out, stderr := runCLI(t, "pretrain", "--objective", "causal", "--corpus", corpus, "--size", "tiny", "--steps", "8", "--batch", "4", "--seq", "32",
		"--vocab-size", "400", "--seed", "3", "--threads", "2", "--out", dir, "--quiet")
	if code != 0 {
		t.Fatalf("pretrain: exit %d: %s", code, stderr)
	}
	for _, w := range []string{"trained 8 steps", "held-out LM loss", "RoFormerForCausalLM", "roformer generate --model"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	gen := func() string {
		code, out, stderr := runCLI(t, "generate", "--model", dir, "--text", "the light of the", "--max-new-tokens", "6", "--quiet")
		if code != 0 {
			t.Fatalf("generate: exit %d: %s", code, stderr)
		}
		return out
	}
	a, b := gen(), gen()
	if strings.TrimSpace(a) == "" || a != b {
		t.Errorf("greedy generation: %q then %q, want the same non-empty text", a, b)
	}
	t.Logf("generated %q", strings.TrimSpace(a))
}

// pretrain --objective sim from a masked-LM run on a JSONL of pairs; the
// folder then works with similar and generate --unilm.
func TestPretrainSimThenSimilar(t *testing.T) {
	corpus := smallCorpus(t)
	root := t.TempDir()
	mlm := filepath.Join(root, "mlm")
	code, _, stderr := runCLI(t, "pretrain", "--corpus", corpus, "--size", "tiny", "--steps", "2", "--batch", "2", "--seq", "32",
		"--vocab-size", "400", "--seed", "3", "--threads", "2", "--out", mlm, "--quiet")
	if code != 0 {
		t.Fatalf("pretrain mlm: exit %d: %s", code, stderr)
	}
	var pairs bytes.Buffer
	words := strings.Fields("light colour ray prism glass red blue green white black sun eye")
	for i := range 40 {
		a, b, c := words[i%12], words[(i*5+1)%12], words[(i*7+2)%12]
		line, _ := json.Marshal(map[string]string{"anchor": fmt.Sprintf("%s %s %s", a, b, c), "positive": fmt.Sprintf("the %s and %s %s", c, a, b)})
		pairs.Write(append(line, '\n'))
	}
	pairsFile := filepath.Join(root, "pairs.jsonl")
	if err := os.WriteFile(pairsFile, pairs.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := filepath.Join(root, "sim")
	code, out, stderr := runCLI(t, "pretrain", "--objective", "sim", "--init", mlm, "--pairs", pairsFile, "--steps", "4", "--batch", "4", "--seq", "24",
		"--seed", "3", "--threads", "2", "--out", sim, "--quiet")
	if code != 0 {
		t.Fatalf("pretrain sim: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "roformer similar --model") {
		t.Errorf("output lacks the similar hint:\n%s", out)
	}
	code, out, stderr = runCLI(t, "similar", "--model", sim, "--text", "red light", "-n", "4", "--max-new-tokens", "6", "--seed", "1")
	if code != 0 {
		t.Fatalf("similar: exit %d: %s", code, stderr)
	}
	code, out, stderr = runCLI(t, "generate", "--model", sim, "--unilm", "--text", "red light", "--max-new-tokens", "4", "--quiet")
	if code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("generate --unilm: exit %d: %q %s", code, out, stderr)
	}
	// sim without --init or --pairs is refused before any work.
	if code, _, stderr = runCLI(t, "pretrain", "--objective", "sim", "--pairs", pairsFile, "--out", filepath.Join(root, "x"), "--quiet"); code == 0 || !strings.Contains(stderr, "--init") {
		t.Errorf("sim without --init: exit %d: %s", code, stderr)
	}
}
