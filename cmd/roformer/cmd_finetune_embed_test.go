package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/finetune"
)

// ftPairs writes n {"anchor", "positive"} rows over ftWords.
func ftPairs(t *testing.T, dir string, n int) string {
	t.Helper()
	r := rand.New(rand.NewPCG(9, 1))
	var b strings.Builder
	for range n {
		w := []string{ftWords[5+r.IntN(15)], ftWords[5+r.IntN(15)], ftWords[5+r.IntN(15)]}
		fmt.Fprintf(&b, `{"anchor": %q, "positive": %q}`+"\n", strings.Join(w, " "), w[2]+" "+w[0]+" "+w[1])
	}
	p := filepath.Join(dir, "pairs.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// finetune --objective mnrl and matryoshka write sentence-transformers
// folders that embed reads; flags that do not apply are refused.
func TestFinetuneObjective(t *testing.T) {
	model, dir := ftModel(t), t.TempDir()
	train := ftPairs(t, dir, 16)
	for _, obj := range []string{"mnrl", "matryoshka"} {
		out := filepath.Join(dir, obj)
		args := []string{"finetune", "--model", model, "--objective", obj, "--train", train, "--dev", train, "--out", out, "--epochs", "1", "--batch", "8", "--max-length", "16", "--quiet"}
		if obj == "matryoshka" {
			args = append(args, "--matryoshka-dims", "16,8", "--symmetric", "--mini-batch-size", "3")
		}
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", obj, code, stderr)
		}
		if !strings.Contains(stdout, "sentence-transformers folder: mean pooling") {
			t.Errorf("%s: output:\n%s", obj, stdout)
		}
		var info finetune.EmbedRunInfo
		b, err := os.ReadFile(filepath.Join(out, finetune.EmbedRunFile))
		if err != nil || json.Unmarshal(b, &info) != nil || info.Result.Steps != 2 {
			t.Fatalf("%s: %s: %v %+v", obj, finetune.EmbedRunFile, err, info.Result)
		}
		if obj == "matryoshka" && (fmt.Sprint(info.Objective.Dims) != "[16 8]" || !info.Objective.Symmetric || info.Options.MiniBatchSize != 3) {
			t.Errorf("matryoshka objective %+v", info.Objective)
		}
		in, vecs := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, obj+".vecs.jsonl")
		if err := os.WriteFile(in, []byte(`{"text": "good movie"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := runCLI(t, "embed", "--model", out, "--input", in, "--output", vecs); code != 0 {
			t.Fatalf("embed --model %s: exit %d: %s", out, code, stderr)
		}
		f, err := os.Open(vecs)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var row struct{ Embedding []float32 }
		if !sc.Scan() || json.Unmarshal(sc.Bytes(), &row) != nil || len(row.Embedding) != 16 {
			t.Errorf("embed output: %q", sc.Text())
		}
		f.Close()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--objective", "triplet"}, `--objective "triplet"`},
		{[]string{"--objective", "mnrl", "--eval", train}, "--eval do not apply"},
		{[]string{"--objective", "cosent", "--symmetric"}, "--symmetric is MNRL's"},
		{[]string{"--objective", "mnrl", "--matryoshka-dims", "8"}, "--matryoshka-dims goes with --objective matryoshka"},
		{[]string{"--scale", "5"}, "--scale is a flag of contrastive fine-tuning"},
		{[]string{"--mini-batch-size", "4"}, "--mini-batch-size is a flag of contrastive fine-tuning"},
		{[]string{"--objective", "mnrl", "--mini-batch-size", "-1"}, "mini-batch size -1 must be at least 0"},
		{[]string{"--objective", "cosent"}, "holds pairs"},
		{[]string{"--objective", "matryoshka", "--matryoshka-dims", "64"}, "must be a whole number in [1, 16]"},
	} {
		args := append([]string{"finetune", "--model", model, "--train", train, "--out", filepath.Join(dir, "refused"), "--quiet"}, c.args...)
		code, _, stderr := runCLI(t, args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
