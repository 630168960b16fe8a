package finetune

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

// toyChoices returns n questions of filler words holding one of the
// choices' words; the right choice is that word. Every other question has a
// context, so both encodings (ChoicePair) are trained.
func toyChoices(seed uint64, n int) []ChoiceExample {
	r := rand.New(rand.NewPCG(seed, 5))
	filler := []string{"the", "movie", "was", "a", "film", "plot", "and", "it", "very", "quite", "story", "acting", "seen"}
	keys := []string{"paris", "john", "mary"}
	var out []ChoiceExample
	for i := range n {
		w := make([]string, 2+r.IntN(5))
		for j := range w {
			w[j] = filler[r.IntN(len(filler))]
		}
		label := r.IntN(3)
		w[r.IntN(len(w))] = keys[label]
		ex := ChoiceExample{Line: i + 1, Question: strings.Join(w, " "), Choices: keys, Label: label}
		if i%2 == 1 {
			ex.Context, ex.Question = ex.Question, "it was"
		}
		out = append(out, ex)
	}
	return out
}

func TestReadChoices(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mc.jsonl")
	mustf(t, os.WriteFile(p, []byte(`{"question": "q", "choices": ["a", "b"], "label": 1}`+"\n\n"+`{"context": "c", "question": "q2", "choices": ["x", "y"], "label": 0}`+"\n"), 0o644), "write")
	exs, err := ReadChoices(p, 0)
	mustf(t, err, "read")
	if len(exs) != 2 || exs[1].Line != 3 || exs[1].Context != "c" || exs[0].Label != 1 {
		t.Fatalf("%+v", exs)
	}
	if a, b := ChoicePair(&exs[1], 1); a != "c" || b != "q2 y" {
		t.Errorf("ChoicePair with a context: %q, %q", a, b)
	}
	if a, b := ChoicePair(&exs[0], 0); a != "q" || b != "a" {
		t.Errorf("ChoicePair without a context: %q, %q", a, b)
	}
	for body, want := range map[string]string{
		`{"question": "q", "choices": ["a", "b"], "label": 2}`:                                                                      `mc.jsonl:1: "label" 2 is outside [0, 2)`,
		`{"question": "q", "choices": ["a"], "label": 0}`:                                                                           `"choices" has 1 strings`,
		`{"question": "q", "choices": ["a", "b"], "label": 0}` + "\n" + `{"question": "q", "choices": ["a", "b", "c"], "label": 0}`: `mc.jsonl:2: "choices" has 3 strings; line 1 has 2`,
		`{"choices": ["a", "b"], "label": 0}`:                                                                                       `no "question"`,
	} {
		mustf(t, os.WriteFile(p, []byte(body+"\n"), 0o644), "write")
		if _, err := ReadChoices(p, 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

// A tiny run on the toy set: the loss falls, held-out accuracy rises from
// chance, and the saved folder scores the same after pipeline.Open.
func TestRunTaskChoices(t *testing.T) {
	ctx := context.Background()
	dir := twoLayerModel(t)
	o := fastOptions()
	o.MaxLength, o.Epochs, o.BatchSize, o.LR, o.LogEvery = 32, 16, 16, 3e-3, 0
	train, dev := toyChoices(1, 256), toyChoices(2, 48)
	m0, _, err := loadTaskModel(dir, roformer.HeadMultipleChoice, false, o.Seed)
	mustf(t, err, "load")
	_, pm0 := tinyBuilt(t)
	before, err := EvaluateChoices(ctx, m0, pm0.Tokenizer, dev, o, "dev")
	mustf(t, err, "evaluate untrained")
	out := filepath.Join(t.TempDir(), "mc")
	var log bytes.Buffer
	info, err := RunTask(ctx, TaskRunOptions{Model: dir, ChoiceTrain: train, ChoiceEval: dev, TrainFile: "toy", EvalFile: "dev", Options: o, Out: out, Progress: &log})
	mustf(t, err, "run\n%s", log.String())
	r := info.Result
	first, last := r.Epochs[0].TrainLoss, r.Epochs[len(r.Epochs)-1].TrainLoss
	t.Logf("untrained %v; train loss %.3f → %.3f; best epoch %d: %v", before, first, last, r.BestEpoch, r.Best)
	if !(last < first*0.5) {
		t.Errorf("train loss %.3f → %.3f: did not halve\n%s", first, last, log.String())
	}
	if r.Best["accuracy"] < 0.9 || before["accuracy"] > 0.6 {
		t.Errorf("held-out accuracy %.3f before, %.3f after; want ≤ 0.6 → ≥ 0.9\n%s", before["accuracy"], r.Best["accuracy"], log.String())
	}
	pm, err := pipeline.Open(out, pipeline.OpenOptions{})
	mustf(t, err, "reopen")
	if pm.Model.Head != roformer.HeadMultipleChoice || info.NumChoices != 3 {
		t.Fatalf("reopened with %s, %d choices recorded", pm.Model.Head, info.NumChoices)
	}
	rep, err := EvaluateChoices(ctx, pm.Model, pm.Tokenizer, dev, o, "dev")
	mustf(t, err, "evaluate")
	if rep["accuracy"] != r.Best["accuracy"] {
		t.Errorf("reopened folder: %v, at training %v", rep, r.Best)
	}
}

// twoLayerModel is tinyModel with two layers: the choice token must first
// find its word in the question (layer 1) before the summary position reads
// the match (layer 2), which one layer cannot do.
func twoLayerModel(t *testing.T) string {
	t.Helper()
	tok := testmodel.Tokenizer(t, testWords)
	cfg := testmodel.Config(len(testWords))
	cfg.NumHiddenLayers, cfg.MaxPositionEmbeddings = 2, 64
	m, err := roformer.New(cfg, roformer.HeadMaskedLM)
	mustf(t, err, "model")
	m.Init(7)
	dir := filepath.Join(t.TempDir(), "pretrained")
	testmodel.Save(t, dir, m, tok)
	return dir
}
