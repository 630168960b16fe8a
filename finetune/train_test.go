package finetune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/model/roformer"
)

func loadTiny(t *testing.T, dir string, spec *labelled.Spec, seed uint64) (*roformer.Model, *Job) {
	t.Helper()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	m, continued, err := LoadModel(dir, spec, ModelOptions{Seed: seed})
	mustf(t, err, "LoadModel")
	if continued {
		t.Fatal("a pretrained folder was continued")
	}
	tok, _, err := LoadTokenizer(dir, "")
	mustf(t, err, "LoadTokenizer")
	return m, &Job{Model: m, Tokenizer: tok, Spec: *spec, Options: fastOptions()}
}

// The tiny model learns the synthetic rule, the kept parameters are those
// of the best epoch, and the same seed gives the same run.
func TestTrainLearns(t *testing.T) {
	dir := tinyModel(t)
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"negative", "positive"}}
	var runs []*Result
	for range 2 {
		_, j := loadTiny(t, dir, &spec, 3)
		j.Train, j.Eval = synth(1, 256, "train"), synth(2, 64, "dev")
		var metrics bytes.Buffer
		j.Metrics = &metrics
		res, err := Train(context.Background(), *j)
		mustf(t, err, "Train")
		if res.Best == nil || res.Best.Metrics["accuracy"] < 0.9 {
			t.Fatalf("dev accuracy after training: %+v", res.Best)
		}
		// The model now holds the best epoch's parameters.
		rep, _, err := Evaluate(context.Background(), j.Model, j.Tokenizer, spec, j.Eval, j.Options.EvalOptions())
		mustf(t, err, "Evaluate")
		if rep.Main() != res.Best.Main() || math.Abs(rep.Loss-res.Best.Loss) > 1e-9 {
			t.Errorf("after Train the model scores %v (loss %v), the best epoch %d scored %v (loss %v)", rep.Main(), rep.Loss, res.BestEpoch, res.Best.Main(), res.Best.Loss)
		}
		lines := strings.Split(strings.TrimSpace(metrics.String()), "\n")
		if len(lines) != j.Options.Epochs {
			t.Errorf("metrics.jsonl has %d lines, want one per epoch (%d)", len(lines), j.Options.Epochs)
		}
		var rec MetricsRecord
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec.Eval == nil || rec.Epoch != 1 {
			t.Errorf("first metrics record %q: %v", lines[0], err)
		}
		runs = append(runs, res)
	}
	for e := range runs[0].Epochs {
		a, b := runs[0].Epochs[e], runs[1].Epochs[e]
		if a.TrainLoss != b.TrainLoss || a.Eval.Loss != b.Eval.Loss {
			t.Errorf("epoch %d differs between two runs with one seed: loss %v/%v, eval %v/%v", e+1, a.TrainLoss, b.TrainLoss, a.Eval.Loss, b.Eval.Loss)
		}
	}
}

// With a learning rate too small to change the metric, patience 1 stops
// training after the second epoch.
func TestEarlyStopping(t *testing.T) {
	dir := tinyModel(t)
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"negative", "positive"}}
	_, j := loadTiny(t, dir, &spec, 3)
	j.Train, j.Eval = synth(1, 64, "train"), synth(2, 32, "dev")
	j.Options.LR, j.Options.Epochs, j.Options.Patience = 1e-12, 5, 1
	res, err := Train(context.Background(), *j)
	mustf(t, err, "Train")
	if !res.EarlyStopped || len(res.Epochs) != 2 || res.BestEpoch != 1 {
		t.Errorf("early stopped %v after %d epochs, best epoch %d; want stopped after 2, best 1", res.EarlyStopped, len(res.Epochs), res.BestEpoch)
	}
}

func TestTrainCancelled(t *testing.T) {
	dir := tinyModel(t)
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"negative", "positive"}}
	_, j := loadTiny(t, dir, &spec, 3)
	j.Train = synth(1, 64, "train")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Train(ctx, *j); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// Each problem trains through its head and loss and evaluates with its
// metrics; the saved config says what HF needs to compute the same loss.
func TestProblems(t *testing.T) {
	dir := tinyModel(t)
	base := synth(5, 48, "train")
	multi, reg, tags := &labelled.Dataset{File: "m"}, &labelled.Dataset{File: "r"}, &labelled.Dataset{File: "t"}
	for i, ex := range base.Examples {
		m := ex
		m.Labels = []string{"x"}
		if ex.Label == "positive" {
			m.Labels = append(m.Labels, "y")
		}
		multi.Examples = append(multi.Examples, m)
		r := ex
		r.Value = float64(len(ex.Text)) / 10
		reg.Examples = append(reg.Examples, r)
		w := strings.Fields(ex.Text)
		tg := make([]string, len(w))
		for k, word := range w {
			tg[k] = "O"
			if word == "good" || word == "bad" {
				tg[k] = "KEY"
			}
		}
		tags.Examples = append(tags.Examples, labelled.Example{Line: i + 1, Text: ex.Text, Words: w, Tags: tg, HasLabel: true})
	}
	for _, tc := range []struct {
		name        string
		spec        labelled.Spec
		data        *labelled.Dataset
		head        roformer.Head
		problemType string
		metric      string
	}{
		{"multi_label", labelled.Spec{Problem: labelled.MultiLabel, Labels: []string{"x", "y"}}, multi, roformer.HeadSequenceCls, "multi_label_classification", "micro_f1"},
		{"regression", labelled.Spec{Problem: labelled.Regression, Labels: []string{"score"}}, reg, roformer.HeadSequenceCls, "regression", "pearson"},
		{"token", labelled.Spec{Problem: labelled.TokenTags, Labels: []string{"KEY", "O"}}, tags, roformer.HeadTokenCls, "", "accuracy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, j := loadTiny(t, dir, &tc.spec, 1)
			if m.Head != tc.head || m.Config.ProblemType != tc.problemType || m.Config.NumLabels != tc.spec.NumOutputs() {
				t.Fatalf("model head %s, problem_type %q, %d labels", m.Head, m.Config.ProblemType, m.Config.NumLabels)
			}
			j.Train, j.Eval = tc.data, tc.data
			j.Options.Epochs = 3
			res, err := Train(context.Background(), *j)
			mustf(t, err, "Train")
			for _, e := range res.Epochs {
				if math.IsNaN(e.TrainLoss) || math.IsNaN(e.Eval.Loss) {
					t.Errorf("epoch %d: loss %v, eval loss %v", e.Epoch, e.TrainLoss, e.Eval.Loss)
				}
			}
			if _, ok := res.Best.Metrics[tc.metric]; !ok {
				t.Errorf("metrics %v lack %s", res.Best.Metrics, tc.metric)
			}
			first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
			if !(last < first) {
				t.Errorf("training loss did not fall: %v → %v", first, last)
			}
			preds, err := Predict(context.Background(), m, j.Tokenizer, tc.spec, tc.data, j.Options.EvalOptions())
			mustf(t, err, "Predict")
			b, _ := json.Marshal(preds[0])
			want := map[labelled.Problem]string{labelled.MultiLabel: `"labels":`, labelled.Regression: `"value":`, labelled.TokenTags: `"tags":`}[tc.spec.Problem]
			if !strings.Contains(string(b), want) {
				t.Errorf("prediction %s lacks %s", b, want)
			}
			if tc.spec.Problem == labelled.TokenTags && len(preds[0].Tags) != len(tc.data.Examples[0].Words) {
				t.Errorf("%d tags for %d words", len(preds[0].Tags), len(tc.data.Examples[0].Words))
			}
		})
	}
}

// Words map to their first sub-token; later sub-tokens and special tokens
// are ignored (−100), truncated words get no token.
func TestAlignWords(t *testing.T) {
	dir := tinyModel(t)
	spec := labelled.Spec{Problem: labelled.TokenTags, Labels: []string{"B", "O"}}
	_, j := loadTiny(t, dir, &spec, 1)
	ds := &labelled.Dataset{File: "t", Examples: []labelled.Example{{Line: 1, Text: "johns went to paris", Words: []string{"johns", "went", "to", "paris"}, Tags: []string{"B", "O", "O", "B"}, HasLabel: true}}}
	feats, n, err := encodeAll(j.Tokenizer, &spec, ds, encodeOptions{maxLen: 5})
	mustf(t, err, "encodeAll")
	f := feats[0]
	// [CLS] john ##s went to | paris cut: max length 5 → [CLS] john ##s went [SEP]
	if got, want := f.wordTok, []int{1, 3, -1, -1}; !slices.Equal(got, want) {
		t.Errorf("wordTok %v, want %v", got, want)
	}
	if got, want := f.tags, []int32{-100, 0, -100, 1, -100}; !slices.Equal(got, want) {
		t.Errorf("tags %v, want %v", got, want)
	}
	if n != 1 || !f.truncated {
		t.Errorf("truncated count %d (flag %v), want 1", n, f.truncated)
	}
	if _, _, err := encodeAll(j.Tokenizer, &spec, ds, encodeOptions{maxLen: 5, truncation: 1 /* none */}); err == nil || !strings.Contains(err.Error(), "t:1: the input has 7 tokens, more than the maximum length 5") {
		t.Errorf("no truncation: %v", err)
	}
}

// Run publishes a complete folder, refuses a used one, leaves nothing
// behind on failure, and continues a fine-tuned model.
func TestRun(t *testing.T) {
	dir := tinyModel(t)
	root := t.TempDir()
	out := filepath.Join(root, "ft")
	train, dev := synth(1, 128, "train"), synth(2, 32, "dev")
	ro := RunOptions{Model: dir, Spec: labelled.Spec{Problem: labelled.SingleLabel}, Train: train, Eval: dev, Test: dev, Options: fastOptions(), Out: out}
	ro.Options.Epochs = 2
	res, err := Run(context.Background(), ro)
	mustf(t, err, "Run")
	for _, f := range []string{"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", RunFile, MetricsFile, ResultsFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output lacks %s: %v", f, err)
		}
	}
	if st, err := os.Stat(out); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o755 {
		t.Errorf("output folder mode %v, want 0755 (not MkdirTemp's 0700)", st.Mode().Perm())
	}
	if got := strings.Join(res.Info.Spec.Labels, ","); got != "negative,positive" {
		t.Errorf("labels inferred as %s", got)
	}
	cfg, err := roformer.LoadConfig(filepath.Join(out, "config.json"))
	mustf(t, err, "config")
	if cfg.Labels()[1] != "positive" || cfg.ProblemType != "single_label_classification" || cfg.Architectures[0] != "RoFormerForSequenceClassification" {
		t.Errorf("config: labels %v, problem_type %q, architectures %v", cfg.Labels(), cfg.ProblemType, cfg.Architectures)
	}
	info, err := ReadRunInfo(out)
	mustf(t, err, "ReadRunInfo")
	if info.Test == nil || info.Result.Best == nil {
		t.Errorf("finetune.json lacks the test or best report")
	}
	noPartial := func() {
		t.Helper()
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".partial-") {
				t.Errorf("left behind %s", e.Name())
			}
		}
	}
	noPartial()

	t.Run("used_folder", func(t *testing.T) {
		if _, err := Run(context.Background(), ro); err == nil || !strings.Contains(err.Error(), "already exists and is not empty") {
			t.Errorf("second run into %s: %v", out, err)
		}
	})
	t.Run("bad_eval_label", func(t *testing.T) {
		bad := synth(3, 4, "dev.jsonl")
		bad.Examples[2].Label = "neutral"
		r2 := ro
		r2.Out, r2.Eval = filepath.Join(root, "bad"), bad
		_, err := Run(context.Background(), r2)
		if err == nil || !strings.Contains(err.Error(), `dev.jsonl:3: label "neutral" is not in the label set [negative, positive] (the labels found in train)`) {
			t.Errorf("got %v", err)
		}
		if _, err := os.Stat(r2.Out); !os.IsNotExist(err) {
			t.Errorf("%s exists after a failed run", r2.Out)
		}
		noPartial()
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r2 := ro
		r2.Out = filepath.Join(root, "interrupted")
		if _, err := Run(ctx, r2); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v", err)
		}
		if _, err := os.Stat(r2.Out); !os.IsNotExist(err) {
			t.Errorf("%s exists after an interrupted run", r2.Out)
		}
		noPartial()
	})
	t.Run("continue", func(t *testing.T) {
		r2 := ro
		r2.Model, r2.Out = out, filepath.Join(root, "more")
		r2.Options.Epochs = 1
		res2, err := Run(context.Background(), r2)
		mustf(t, err, "continue")
		if !res2.Info.Continued {
			t.Error("the fine-tuned head was not continued")
		}
		r2.Out = filepath.Join(root, "other")
		r2.Spec.Labels = []string{"positive", "negative"}
		if _, err := Run(context.Background(), r2); err == nil || !strings.Contains(err.Error(), "its labels are [negative, positive], the task's are [positive, negative]") {
			t.Errorf("continuing with other labels: %v", err)
		}
		r2.NewHead = true
		res3, err := Run(context.Background(), r2)
		mustf(t, err, "new head")
		if res3.Info.Continued {
			t.Error("--new-head continued the old head")
		}
	})
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"epochs", func(o *Options) { o.Epochs = 0 }, "epochs 0 must be at least 1"},
		{"lr", func(o *Options) { o.LR = -1 }, "learning rate -1 must be a positive number"},
		{"length", func(o *Options) { o.MaxLength = 2 }, "max length 2 must be at least 3"},
		{"schedule", func(o *Options) { o.Schedule = "step" }, `unknown schedule "step"`},
		{"truncation", func(o *Options) { o.Truncation = "middle" }, `truncation "middle"`},
		{"precision", func(o *Options) { o.Precision = "int8" }, `precision "int8": training runs in fp32 or bf16`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.edit(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
