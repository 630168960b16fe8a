package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/finetune"
	"github.com/roformer-go/roformer/internal/testmodel"
)

var qaWords = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "the", "movie", "was", "a", "film", "plot",
	"and", "it", "very", "john", "mary", "lives", "in", "paris", "new", "york"}

// qaRows writes n SQuAD JSONL rows: "lives in" → the city after "<name> lives in".
func qaRows(t *testing.T, dir, name string, seed uint64, n int) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 9))
	var b strings.Builder
	for range n {
		w := make([]string, r.IntN(5))
		for j := range w {
			w[j] = qaWords[5+r.IntN(11)]
		}
		head := strings.Join(append(w, qaWords[16+r.IntN(2)], "lives", "in"), " ") + " "
		city := []string{"paris", "new york"}[r.IntN(2)]
		row := map[string]any{"question": "lives in", "context": head + city + " and it was good",
			"answers": map[string]any{"text": []string{city}, "answer_start": []int{len(head)}}}
		line, _ := json.Marshal(row)
		b.Write(append(line, '\n'))
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFinetuneQACLI(t *testing.T) {
	model := testmodel.Tiny{Words: qaWords, Seed: 7, MaxPositions: 64}.Folder(t)
	dir := t.TempDir()
	train, dev := qaRows(t, dir, "train.jsonl", 1, 128), qaRows(t, dir, "dev.jsonl", 2, 24)
	out := filepath.Join(dir, "qa")
	code, stdout, stderr := runCLI(t, "finetune", "--model", model, "--task", "qa", "--train", train, "--eval", dev, "--out", out,
		"--epochs", "4", "--lr", "5e-3", "--warmup-ratio", "0", "--max-length", "32", "--batch", "16", "--quiet", "--threads", "1")
	if code != 0 {
		t.Fatalf("finetune exit %d: %s", code, stderr)
	}
	for _, want := range []string{"exact match 100.00, F1 100.00", "RoFormerForQuestionAnswering"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("finetune output lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, finetune.TaskRunFile))
	if err != nil {
		t.Fatal(err)
	}
	var info finetune.TaskRunInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Task != "question-answering" || info.Data["train_questions"] != 128.0 {
		t.Fatalf("%s: %v %+v", finetune.TaskRunFile, err, info)
	}
	// eval on the dev file reproduces the kept epoch's scores.
	code, stdout, stderr = runCLI(t, "eval", "--task", "qa", "--model", out, "--eval", dev, "--json", "--threads", "1")
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	var rep map[string]float64
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, stdout)
	}
	if rep["f1"] != info.Result.Best["f1"] || rep["exact_match"] != info.Result.Best["exact_match"] || rep["examples"] != 24 {
		t.Errorf("eval gives %v; fine-tuning recorded %v", rep, info.Result.Best)
	}
}

func TestFinetuneSpanFlags(t *testing.T) {
	model := testmodel.Tiny{Words: qaWords, Seed: 7}.Folder(t)
	out := filepath.Join(t.TempDir(), "o")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--task", "qa", "--train", "x.jsonl", "--labels", "a,b"}, "--labels do not apply"},
		{[]string{"--task", "multiple-choice"}, "--task multiple-choice needs --train FILE"},
		{[]string{"--task", "multiple-choice", "--train", "x.jsonl", "--doc-stride", "8"}, "--doc-stride is a flag of --task qa"},
	} {
		code, _, stderr := runCLI(t, append([]string{"finetune", "--model", model, "--out", out}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, stderr, c.want)
		}
	}
}

// --task multiple-choice end to end: the run writes the folder and eval
// scores its dev file as the kept epoch did.
func TestFinetuneChoicesCLI(t *testing.T) {
	model := testmodel.Tiny{Words: qaWords, Seed: 7, MaxPositions: 64}.Folder(t)
	dir := t.TempDir()
	var b strings.Builder
	r := rand.New(rand.NewPCG(3, 9))
	for i := range 40 {
		row := map[string]any{"question": "john lives in", "choices": []string{"paris", "new york"}, "label": r.IntN(2)}
		if i%2 == 0 {
			row["context"] = "it was good"
		}
		line, _ := json.Marshal(row)
		b.Write(append(line, '\n'))
	}
	data := filepath.Join(dir, "mc.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "mc")
	code, stdout, stderr := runCLI(t, "finetune", "--model", model, "--task", "multiple-choice", "--train", data, "--eval", data, "--out", out,
		"--epochs", "2", "--max-length", "16", "--batch", "8", "--quiet", "--threads", "1")
	if code != 0 || !strings.Contains(stdout, "RoFormerForMultipleChoice") {
		t.Fatalf("finetune exit %d: %s\n%s", code, stderr, stdout)
	}
	code, stdout, stderr = runCLI(t, "eval", "--task", "multiple-choice", "--model", out, "--eval", data, "--json", "--threads", "1")
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	var rep map[string]float64
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, stdout)
	}
	bs, err := os.ReadFile(filepath.Join(out, finetune.TaskRunFile))
	if err != nil {
		t.Fatal(err)
	}
	var info finetune.TaskRunInfo
	if err := json.Unmarshal(bs, &info); err != nil || info.NumChoices != 2 {
		t.Fatalf("%s: %v %+v", finetune.TaskRunFile, err, info)
	}
	if rep["accuracy"] != info.Result.Best["accuracy"] || rep["examples"] != 40 {
		t.Errorf("eval gives %v; fine-tuning recorded %v", rep, info.Result.Best)
	}
}
