package experiment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/seq2seq"
	"github.com/roformer-go/roformer/tasks"
)

// toyParallel is a word-for-word "translation": numbers spelled in
// English and in Spanish, in random short sequences.
func toyParallel(n int) *tasks.Parallel {
	en := []string{"one", "two", "three", "four", "five", "six", "seven", "eight"}
	es := []string{"uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho"}
	mk := func(k, off int) []tasks.Pair {
		var ps []tasks.Pair
		for i := 0; i < k; i++ {
			var a, b []string
			for j := 0; j < 2+(i+off)%4; j++ {
				w := (i*7 + j*3 + off) % len(en)
				a, b = append(a, en[w]), append(b, es[w])
			}
			ps = append(ps, tasks.Pair{Ref: fmt.Sprintf("T.%d.%d", off, i), Src: strings.Join(a, " ") + ".", Tgt: strings.Join(b, " ") + "."})
		}
		return ps
	}
	return &tasks.Parallel{Train: mk(n, 0), Dev: mk(12, 1), Test: mk(16, 2)}
}

func tinyTranslate(out string) TranslateOptions {
	o := QuickTranslate(out)
	o.Pairs = toyParallel(200)
	o.Seeds = []uint64{1}
	o.Model.DModel, o.Model.FFN, o.Model.Heads, o.Model.EncoderLayers, o.Model.DecoderLayers = 16, 32, 2, 1, 1
	o.VocabSize, o.TrainPairs, o.TestSubset = 300, 0, 0
	o.Steps, o.Warmup, o.BatchTokens, o.EvalEvery, o.DevSubset = 12, 2, 300, 6, 8
	o.AverageLast, o.AverageEvery, o.Bootstrap = 3, 2, 20
	o.Decode = seq2seq.DecodeOptions{Beam: 2, Alpha: 0.6, MaxExtra: 5}
	return o
}

func TestTranslateTiny(t *testing.T) {
	out := t.TempDir()
	o := tinyTranslate(out)
	res, err := Translate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, out, "results.json", "curves.csv", "runs.csv", "bleu.png", "bleu.svg", "nll.png", "nll.svg", "summary.md")
	if len(res.Runs) != 2 || len(res.Paired) != 1 {
		t.Fatalf("%d runs and %d paired comparisons, want 2 and 1", len(res.Runs), len(res.Paired))
	}
	for _, r := range res.Runs {
		if len(r.Curve) != 2 || r.Curve[1].Step != 12 {
			t.Errorf("%s: curve %+v, want evaluations at steps 6 and 12", r.Position, r.Curve)
		}
		dir := runDir(res.Options, r.arm(), r.Position, r.Seed)
		mustExist(t, dir, "run.json", "dev-step6.txt", "dev-averaged.txt", "test-averaged.txt", "averaged/model.safetensors")
		hyps, err := readLines(dir, "test-averaged.txt")
		if err != nil || len(hyps) != 16 {
			t.Errorf("%s: %d test translations (%v), want 16", r.Position, len(hyps), err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if !strings.Contains(string(md), "Not WMT14") {
		t.Error("summary.md does not say that this is not WMT14")
	}
	// A second call reuses the complete run folders: same translations, no training.
	o.Progress = &strings.Builder{}
	if _, err := Translate(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if log := o.Progress.(*strings.Builder).String(); strings.Count(log, "reusing") != 2 {
		t.Errorf("second run did not reuse both runs:\n%s", log)
	}
	if _, err := ResummarizeTranslate(out); err != nil {
		t.Fatal(err)
	}
}

func TestTranslateOptionErrors(t *testing.T) {
	o := tinyTranslate(t.TempDir())
	o.Positions = []string{"learned"}
	if _, err := Translate(context.Background(), o); err == nil || !strings.Contains(err.Error(), `position "learned"`) {
		t.Errorf("got %v", err)
	}
	o = tinyTranslate(t.TempDir())
	o.MaxTokens = 1
	if _, err := Translate(context.Background(), o); err == nil || !strings.Contains(err.Error(), "within 1 tokens") {
		t.Errorf("got %v", err)
	}
}
