package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tasks"
)

// toyTasks are two small synthetic tasks in the shape of the built-in ones:
// single texts (the class word is among filler words) and pairs (the same
// text twice, or two random texts).
func toyTasks(t *testing.T) func(context.Context, string) (labelled.Spec, *tasks.Splits, error) {
	return func(_ context.Context, name string) (labelled.Spec, *tasks.Splits, error) {
		words := strings.Fields("light colour ray prism glass red blue green sun eye body motion white black water")
		r := rand.New(rand.NewPCG(3, uint64(len(name)))) // the same data at every call
		sentence := func(n int) string {
			w := make([]string, n)
			for i := range w {
				w[i] = words[r.IntN(len(words))]
			}
			return strings.Join(w, " ")
		}
		split := func(name string, make func() labelled.Example) *tasks.Splits {
			sp := &tasks.Splits{}
			for k, n := range []int{48, 16, 16} {
				ds := &labelled.Dataset{File: fmt.Sprintf("%s/%d", name, k)}
				for i := 0; i < n; i++ {
					ex := make()
					ex.Line, ex.HasLabel = i+1, true
					ds.Examples = append(ds.Examples, ex)
				}
				*[]**labelled.Dataset{&sp.Train, &sp.Dev, &sp.Test}[k] = ds
			}
			return sp
		}

		switch name {
		case "single":
			spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"no", "yes"}, Metric: "accuracy"}
			return spec, split(name, func() labelled.Example {
				if r.IntN(2) == 0 {
					return labelled.Example{Text: sentence(4) + " dark", Label: "no"}
				}
				return labelled.Example{Text: sentence(4) + " bright", Label: "yes"}
			}), nil
		case "pair":
			spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"other", "same"}, Pair: true, Metric: "f1", Positive: "same"}
			return spec, split(name, func() labelled.Example {
				a := sentence(5)
				b, label := sentence(5), "other"
				if r.IntN(2) == 0 {
					b, label = a, "same"
				}
				return labelled.Example{Text: a, TextPair: &b, Label: label}
			}), nil
		}
		return labelled.Spec{}, nil, fmt.Errorf("no task %q", name)
	}
}

func TestFinetuneCompareTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("pretrains and fine-tunes 6 tiny models")
	}
	corpus := filepath.Join(t.TempDir(), "opticks.txt")
	if err := os.WriteFile(corpus, opticks(t, 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	o := QuickFinetuneCompare(out)
	o.Model, o.Corpus, o.VocabSize, o.Seeds, o.Scratch = tinyModel(), corpus, 300, []uint64{1, 2}, true
	o.Tasks, o.load = []string{"single", "pair"}, toyTasks(t)
	o.Pretrain.Steps, o.Pretrain.BatchSize, o.Pretrain.SeqLen, o.Pretrain.Warmup = 4, 4, 32, 1
	o.Pretrain.EvalEvery, o.Pretrain.EvalBatches, o.Pretrain.LogEvery = 4, 1, 2
	o.Finetune.MaxLength, o.Finetune.BatchSize = 32, 16
	o.Epochs = map[string]int{"single": 2, "pair": 1}
	o.MaxTrain, o.MaxEval = 40, 0
	res, err := FinetuneCompare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, out, "results.json", "runs.csv", "pretrain.csv", "test.png", "test.svg", "summary.md")
	// (rotary, learned, rotary-scratch, bag-of-words) × 2 tasks × 2 seeds.
	if len(res.Runs) != 16 || len(res.Pretrain) != 4 || len(res.Summary) != 8 {
		t.Fatalf("%d runs, %d pretrainings, %d summaries; want 16, 4, 8", len(res.Runs), len(res.Pretrain), len(res.Summary))
	}
	if sz := res.TaskSizes["single"]; sz != [3]int{40, 16, 16} {
		t.Errorf("single task sizes %v, want 40 (MaxTrain), 16, 16", sz)
	}
	epochs := map[string]int{}
	for _, r := range res.Runs {
		if !(r.Test >= 0 && r.Test <= 1) || !(r.Dev >= 0 && r.Dev <= 1) {
			t.Errorf("%s %s seed %d: dev %v test %v", r.Model, r.Task, r.Seed, r.Dev, r.Test)
		}
		if r.Model != BagOfWords {
			epochs[r.Task] = r.Epochs
		}
	}
	if epochs["single"] != 2 || epochs["pair"] != 1 {
		t.Errorf("epochs per task %v, want single 2 and pair 1", epochs)
	}
	for _, p := range res.Pretrain {
		if !(p.EvalLoss > 0) || p.Encoding != roformer.PosRotary && p.Encoding != roformer.PosLearned {
			t.Errorf("pretraining %+v", p)
		}
	}
	// Paired comparisons: rotary against each other model, per task, none
	// pooled over tasks.
	if len(res.Paired) != 6 || res.Paired[1].Task != "pair" || res.Paired[1].Pairs != 2 || res.Paired[1].Test.Diff.N != 2 || res.Paired[0].A != "rotary" || res.Paired[0].B != "learned" {
		t.Errorf("paired comparisons %+v", res.Paired)
	}
	for _, p := range res.Paired {
		if p.Task == "all" {
			t.Errorf("a comparison pools the tasks: %+v", p)
		}
	}
	for _, r := range res.Runs {
		if r.PretrainSeed != r.Seed {
			t.Errorf("%s %s: pretraining seed %d, fine-tuning seed %d; want one seed for both", r.Model, r.Task, r.PretrainSeed, r.Seed)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	for _, want := range []string{"| rotary |", "| learned |", "| rotary-scratch |", "| bag-of-words |", "| rotary − learned | pair | 2 |", "no test pools tasks"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, raw)
		}
	}
	var back FinetuneCompareResult
	b, _ := os.ReadFile(filepath.Join(out, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != 16 {
		t.Fatalf("results.json does not read back: %v", err)
	}
	// The same run made as two halves by seed and merged gives the same
	// numbers.
	halves := []string{t.TempDir(), t.TempDir()}
	for i, seed := range o.Seeds {
		h := o
		h.Seeds, h.Out = []uint64{seed}, halves[i]
		if _, err := FinetuneCompare(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	st := res.TaskStats["pair"]
	if st.OverlapTestF1 == nil || *st.OverlapTestF1 != 1 || res.TaskStats["single"].OverlapTestF1 != nil || st.MedianTokens < 13 || st.MaxTokens < st.P90Tokens || st.TrainExamples != 40 {
		t.Errorf("task stats %+v; the toy pairs are identical or random, so overlap alone must give F1 1, and a pair of 5 + 5 words has at least 13 tokens", res.TaskStats)
	}
	mo := o
	mo.Out = t.TempDir()
	merged, err := MergeFinetuneCompare(context.Background(), mo, halves)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(merged.Paired) != fmt.Sprint(res.Paired) || fmt.Sprint(merged.Summary) != fmt.Sprint(res.Summary) || jsonOf(merged.TaskStats) != jsonOf(res.TaskStats) {
		t.Errorf("merged halves differ from the whole run:\n%v\n%v", merged.Paired, res.Paired)
	}
	if _, err := MergeFinetuneCompare(context.Background(), mo, []string{halves[0], halves[0]}); err == nil || !strings.Contains(err.Error(), "seed 1 is in both") {
		t.Errorf("merging a folder with itself: %v", err)
	}
	again, err := ResummarizeFinetuneCompare(out)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(again.Paired) != fmt.Sprint(res.Paired) {
		t.Errorf("resummarized paired tests differ:\n%v\n%v", again.Paired, res.Paired)
	}
}

func TestFirstN(t *testing.T) {
	ds := &labelled.Dataset{File: "x"}
	for i := 0; i < 100; i++ {
		ds.Examples = append(ds.Examples, labelled.Example{Line: i + 1})
	}
	a, b := firstN(ds, 10), firstN(ds, 10)
	if len(a.Examples) != 10 || fmt.Sprint(a.Examples) != fmt.Sprint(b.Examples) {
		t.Fatalf("firstN: %d examples, not reproducible", len(a.Examples))
	}
	late := 0
	for i, ex := range a.Examples {
		if i > 0 && ex.Line <= a.Examples[i-1].Line {
			t.Errorf("firstN changed the order: %v", a.Examples)
		}
		if ex.Line > 10 {
			late++
		}
	}
	if late == 0 {
		t.Errorf("firstN took the first 10; want a sample of the whole set")
	}
	if firstN(ds, 0) != ds || firstN(ds, 200) != ds {
		t.Errorf("firstN with n ≤ 0 or n ≥ len must return the set itself")
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mlmpeWork trains the mlm-pe runs (rotary and learned, seeds 1 and 2,
// tiny) that the pretrained form of finetune-compare starts from, into a
// work folder, and returns it.
func mlmpeWork(t *testing.T, corpus string) string {
	t.Helper()
	o := DefaultMLMPE(t.TempDir())
	o.Model, o.Corpus, o.VocabSize, o.Seeds, o.TargetLosses = tinyModel(), corpus, 300, []uint64{1, 2}, nil
	o.Encodings = []roformer.PositionEncoding{roformer.PosRotary, roformer.PosLearned}
	o.Work = t.TempDir()
	o.Train.Steps, o.Train.BatchSize, o.Train.SeqLen, o.Train.Warmup, o.Train.LR = 6, 4, 32, 1, 3e-3
	o.Train.EvalEvery, o.Train.EvalBatches, o.Train.LogEvery = 3, 2, 3
	if _, err := MLMPE(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	return o.Work
}

// TestFinetuneComparePretrained fine-tunes mlm-pe's runs: the checkpoints
// are recorded with their step and held-out loss (recomputed equal), two
// fine-tuning seeds per pretraining seed are averaged within it before the
// paired tests, and missing runs, another vocabulary or corpus, and inputs
// longer than the learned table fail naming the file.
func TestFinetuneComparePretrained(t *testing.T) {
	if testing.Short() {
		t.Skip("pretrains 4 tiny models and fine-tunes them 16 times")
	}
	dir := t.TempDir()
	corpus := filepath.Join(dir, "opticks.txt")
	if err := os.WriteFile(corpus, opticks(t, 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	work := mlmpeWork(t, corpus)
	base := QuickFinetuneCompare(t.TempDir())
	base.UsePretrained(work)
	base.Corpus, base.VocabSize, base.Seeds, base.FinetuneSeeds = corpus, 300, []uint64{1, 2}, []uint64{7, 8}
	base.Tasks, base.load = []string{"single", "pair"}, toyTasks(t)
	base.Finetune.MaxLength, base.Finetune.BatchSize = 32, 16
	base.Epochs = map[string]int{"single": 1, "pair": 1}
	base.MaxTrain, base.MaxEval = 32, 0

	o := base
	res, err := FinetuneCompare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pretrain) != 4 {
		t.Fatalf("%d pretrained runs recorded, want 4", len(res.Pretrain))
	}
	for _, p := range res.Pretrain {
		c := p.Checkpoint
		want := filepath.Join(work, fmt.Sprintf("%s-seed%d", p.Encoding, p.Seed), "model.safetensors")
		if c == nil || c.Path != want || c.Step != 6 || c.Steps != 6 || !(math.Abs(float64(c.RecomputedLoss-c.EvalLoss)) < 1e-4) || c.EvalLoss != p.EvalLoss {
			t.Errorf("checkpoint %+v of %s seed %d; want %s at step 6, the recorded loss recomputed", c, p.Encoding, p.Seed, want)
		}
	}
	if res.Options.Model.HiddenSize != 16 || res.Options.Pretrain.Steps != 6 || res.Options.Pretrain.SeqLen != 32 {
		t.Errorf("recorded model %+v, pretraining %+v: want the runs'", res.Options.Model, res.Options.Pretrain)
	}
	// (rotary, learned, bag-of-words) × 2 pretraining seeds × 2 fine-tuning
	// seeds × 2 tasks.
	if len(res.Runs) != 24 {
		t.Fatalf("%d runs, want 24", len(res.Runs))
	}
	mean := map[string]float64{} // model/task/pretraining seed → mean test
	for _, r := range res.Runs {
		mean[fmt.Sprintf("%s/%s/%d", r.Model, r.Task, r.PretrainSeed)] += float64(r.Test) / 2
		if r.Model != BagOfWords && r.Seed != 7 && r.Seed != 8 {
			t.Errorf("run %+v: want fine-tuning seed 7 or 8", r)
		}
	}
	for _, p := range res.Paired {
		a1, a2 := mean[fmt.Sprintf("%s/%s/1", p.A, p.Task)], mean[fmt.Sprintf("%s/%s/2", p.A, p.Task)]
		b1, b2 := mean[fmt.Sprintf("%s/%s/1", p.B, p.Task)], mean[fmt.Sprintf("%s/%s/2", p.B, p.Task)]
		if p.Pairs != 2 || math.Abs(float64(p.Test.Diff.Mean)-((a1-b1)+(a2-b2))/2) > 1e-9 {
			t.Errorf("%s − %s on %s: %d pairs, mean difference %v; want 2 pairs of per-pretraining means, %v", p.A, p.B, p.Task, p.Pairs, p.Test.Diff.Mean, ((a1-b1)+(a2-b2))/2)
		}
	}
	for _, s := range res.Summary {
		if s.Test.N != 2 {
			t.Errorf("summary %+v: want the spread over 2 pretraining seeds", s)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(o.Out, "summary.md"))
	for _, want := range []string{"not independent observations", "over the 2 pretraining seeds", "| rotary | 1 | " + filepath.Join(work, "rotary-seed1", "model.safetensors") + " | 6 of 6 |", "fine-tuned from the finished mlm-pe runs"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, raw)
		}
	}

	for _, tc := range []struct {
		name string
		edit func(*FinetuneCompareOptions)
		want string
	}{
		{"missing run", func(o *FinetuneCompareOptions) { o.Seeds = []uint64{1, 3} }, filepath.Join(work, "rotary-seed3", "config.json") + " is missing"},
		{"other vocabulary", func(o *FinetuneCompareOptions) { o.VocabSize = 250 }, filepath.Join(work, "rotary-seed1", "config.json")},
		{"other corpus", func(o *FinetuneCompareOptions) {
			other := filepath.Join(t.TempDir(), "other.txt")
			b := opticks(t, 80000)[40000:]
			if err := os.WriteFile(other, b, 0o644); err != nil {
				t.Fatal(err)
			}
			o.Corpus = other
		}, "rotary-seed1"},
		{"longer than the table", func(o *FinetuneCompareOptions) { o.Finetune.MaxLength = 64 }, filepath.Join(work, "learned-seed1", "config.json")},
	} {
		o := base
		o.Out = t.TempDir()
		tc.edit(&o)
		_, err := FinetuneCompare(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}
