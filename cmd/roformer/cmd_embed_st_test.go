package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `roformer embed` on sentence-transformers' own folders (every pooling
// mode, Dense, Normalize, prompts, max_seq_length, do_lower_case; see
// sentence/testdata/st) gives SentenceTransformer(folder).encode's vectors
// within 1e-4 with no flags but --prompt-name, and says what the folder
// does.
func TestEmbedSentenceTransformersFolders(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "sentence", "testdata", "st", "*", "expected.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	work := t.TempDir()
	worst := 0.0
	for _, f := range files {
		dir := filepath.Dir(f)
		name := filepath.Base(dir)
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			Texts []string `json:"texts"`
			Cases []struct {
				PromptName *string     `json:"prompt_name"`
				Vectors    [][]float64 `json:"vectors"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(raw, &fx); err != nil {
			t.Fatal(err)
		}
		in := filepath.Join(work, name+".in.jsonl")
		var b strings.Builder
		for _, s := range fx.Texts {
			fmt.Fprintf(&b, "%q\n", s)
		}
		if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		for k, c := range fx.Cases {
			out := filepath.Join(work, fmt.Sprintf("%s.%d.jsonl", name, k))
			args := []string{"--model", dir, "--input", in, "--output", out, "--threads", "1", "--batch", "3"}
			if c.PromptName != nil {
				args = append(args, "--prompt-name", *c.PromptName)
			}
			var stderr bytes.Buffer
			if err := cmdEmbed(context.Background(), args, io.Discard, &stderr); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "sentence-transformers folder: pooling ") || !strings.Contains(stderr.String(), "normalize false (as its encode), truncate true (as its encode)") {
				t.Errorf("%s: stderr does not say what the folder does:\n%s", name, stderr.String())
			}
			got := readEmbeddings(t, out)
			for i, want := range c.Vectors {
				d := 0.0
				for j := range want {
					d = max(d, math.Abs(float64(got[i][j])-want[j]))
				}
				worst = max(worst, d)
				if len(got[i]) != len(want) || d > 1e-4 {
					t.Errorf("%s case %d text %d: %d values, max difference %.3g", name, k, i, len(got[i]), d)
				}
			}
		}
	}
	t.Logf("largest difference from sentence-transformers: %.3g", worst)
}
