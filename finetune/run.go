package finetune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// RunFile is the name of the run description in a fine-tuned model folder.
const RunFile = "finetune.json"

// Files a run writes besides the model (config.json, model.safetensors)
// and the tokenizer (vocab.txt, tokenizer_config.json,
// special_tokens_map.json, tokenizer.json).
const (
	MetricsFile = "metrics.jsonl"
	ResultsFile = "eval_results.json"
)

// RunInfo is finetune.json: what a fine-tuned folder was made from and how,
// so that eval and predict read inputs the same way.
type RunInfo struct {
	Format    string           `json:"format"` // "roformer-finetune"
	Version   int              `json:"version"`
	BaseModel string           `json:"base_model"`
	Continued bool             `json:"continued"` // the head came from BaseModel
	Tokenizer string           `json:"tokenizer"` // the folder the tokenizer was read from
	Spec      labelled.Spec    `json:"spec"`
	Columns   labelled.Columns `json:"columns"`
	Options   Options          `json:"options"`
	Data      map[string]any   `json:"data,omitempty"` // task or files, sizes
	Result    *Result          `json:"result"`
	Test      *Report          `json:"test,omitempty"`
	Created   string           `json:"created"`
}

// ReadRunInfo reads dir/finetune.json; a folder without one gives
// os.ErrNotExist (wrapped).
func ReadRunInfo(dir string) (*RunInfo, error) {
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	var ri RunInfo
	if err := json.Unmarshal(b, &ri); err != nil {
		return nil, fmt.Errorf("finetune: %s: %w", filepath.Join(dir, RunFile), err)
	}
	if ri.Format != "roformer-finetune" {
		return nil, fmt.Errorf("finetune: %s: format %q is not roformer-finetune", filepath.Join(dir, RunFile), ri.Format)
	}
	return &ri, nil
}

// RunOptions describe a whole fine-tuning job.
type RunOptions struct {
	Model     string // folder of the pretrained (or fine-tuned) model
	Tokenizer string // tokenizer folder; empty: see LoadTokenizer
	// Spec: the problem, pairs, metric and positive class. Empty Labels are
	// taken from the model when it is continued, else from the training data.
	Spec       labelled.Spec
	LabelsFrom string // where Spec.Labels came from, for errors ("--labels", "task spam")
	Columns    labelled.Columns
	Train      *labelled.Dataset
	Eval       *labelled.Dataset // picks the best epoch; nil keeps the last
	Test       *labelled.Dataset // evaluated once at the end with the kept parameters; may be nil
	Options    Options
	NewHead    bool
	Out        string
	Data       map[string]any // recorded in finetune.json
	Progress   io.Writer
	// Group, when it has more than one rank, makes this process one rank of
	// a data-parallel run (Job.Group): every rank calls Run with the same
	// options, rank 0 alone prints, evaluates and writes Out. Nil: alone.
	Group distributed.Comm
}

// RunResult is the outcome of Run.
type RunResult struct {
	Info *RunInfo
	Out  string
}

// CheckOut verifies that dir can receive a run's output: it must not exist
// or be an empty folder.
func CheckOut(dir string) error {
	if dir == "" {
		return errors.New("finetune: no output folder")
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finetune: output folder: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("finetune: %s %w; choose another output folder or remove it", dir, errOutExists)
	}
	return nil
}

// Run fine-tunes and publishes the result in ro.Out. Everything is checked
// (data, labels, model) before training starts; the output is assembled in
// a hidden folder beside ro.Out and renamed into place only when complete,
// so a failed or interrupted run leaves nothing under ro.Out.
func Run(ctx context.Context, ro RunOptions) (*RunResult, error) {
	g := ro.Group
	if g == nil {
		g = distributed.Local()
	}
	lead := g.Rank() == 0
	if !lead {
		ro.Progress = nil
	}
	r, err := prepareRun(ro, lead)
	if err := distributed.Agree(g, err); err != nil {
		if r != nil && r.staged != nil {
			r.staged.Discard()
		}
		return nil, err
	}
	if r.staged != nil {
		defer r.staged.Discard() // unless published
	}
	return r.run(ctx, ro, g)
}

// preparedRun is a run checked and loaded, ready to train.
type preparedRun struct {
	spec      labelled.Spec
	m         *roformer.Model
	tok       *tokenizer.Tokenizer
	tokFrom   string
	continued bool
	staged    *atomicfile.Stage // rank 0's output folder in the making
}

// prepareRun checks everything and loads the model and tokenizer; with
// lead, it also prepares the output folder.
func prepareRun(ro RunOptions, lead bool) (*preparedRun, error) {
	if err := ro.Options.Validate(); err != nil {
		return nil, err
	}
	if lead {
		if err := CheckOut(ro.Out); err != nil {
			return nil, err
		}
	}
	if ro.Train == nil {
		return nil, errors.New("finetune: no training data")
	}
	say := func(format string, a ...any) {
		if ro.Progress != nil {
			fmt.Fprintf(ro.Progress, format+"\n", a...)
		}
	}
	spec := ro.Spec
	from := ro.LabelsFrom
	has, cfg, err := HasHead(ro.Model, &spec)
	if err != nil {
		return nil, err
	}
	tok, tokFrom, err := LoadTokenizer(ro.Model, ro.Tokenizer)
	if err != nil {
		return nil, err
	}
	continuing := has && !ro.NewHead
	if len(spec.Labels) == 0 {
		switch {
		case spec.Problem == labelled.Regression:
			name := ro.Columns.Label
			if name == "" {
				name = "score"
			}
			spec.Labels = []string{name}
		case continuing:
			spec.Labels, from = cfg.Labels(), "the labels of "+ro.Model
		default:
			spec.Labels, from = labelled.InferLabels(ro.Train, spec.Problem), "the labels found in "+ro.Train.File
		}
	}
	if from == "" {
		from = "the given label set"
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	for _, ds := range []*labelled.Dataset{ro.Train, ro.Eval, ro.Test} {
		if ds != nil {
			if err := spec.Check(ds, from); err != nil {
				return nil, err
			}
		}
	}
	m, continued, err := LoadModel(ro.Model, &spec, ModelOptions{NewHead: ro.NewHead, Seed: ro.Options.Seed})
	if err != nil {
		return nil, err
	}
	how := "a new " + string(Head(&spec)) + " head (HF initialisation, seed " + fmt.Sprint(ro.Options.Seed) + ")"
	if continued {
		how = "its fine-tuned " + string(Head(&spec)) + " head, continued"
	}
	say("model: %s with %s; %d labels: %s", ro.Model, how, len(spec.Labels), labelled.QuoteLabels(spec.Labels))
	say("tokenizer: %s (%s, %d tokens)", tokFrom, tok.Kind(), tok.VocabSize())
	r := &preparedRun{spec: spec, m: m, tok: tok, tokFrom: tokFrom, continued: continued}
	if !lead {
		return r, nil
	}
	parent := filepath.Dir(filepath.Clean(ro.Out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	if r.staged, err = atomicfile.NewStage(ro.Out); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	return r, nil
}

// run trains, and on rank 0 tests and publishes.
func (r *preparedRun) run(ctx context.Context, ro RunOptions, g distributed.Comm) (*RunResult, error) {
	spec, m, tok, tokFrom, continued := r.spec, r.m, r.tok, r.tokFrom, r.continued
	say := func(format string, a ...any) {
		if ro.Progress != nil {
			fmt.Fprintf(ro.Progress, format+"\n", a...)
		}
	}
	var mbuf bytes.Buffer
	res, err := Train(ctx, Job{Model: m, Tokenizer: tok, Spec: spec, Train: ro.Train, Eval: ro.Eval, Options: ro.Options, Progress: ro.Progress, Metrics: &mbuf, Group: g})
	if err != nil {
		return nil, err
	}
	if g.Rank() != 0 {
		return &RunResult{Out: ro.Out}, nil
	}
	stage := r.staged.Dir
	info := &RunInfo{Format: "roformer-finetune", Version: 1, BaseModel: ro.Model, Continued: continued, Tokenizer: tokFrom,
		Spec: spec, Columns: ro.Columns, Options: ro.Options, Data: ro.Data, Result: res, Created: time.Now().UTC().Format(time.RFC3339)}
	if ro.Test != nil {
		rep, _, err := Evaluate(ctx, m, tok, spec, ro.Test, ro.Options.EvalOptions())
		if err != nil {
			return nil, err
		}
		info.Test = rep
		say("test (%s, %d examples): %s %.4f | %s", ro.Test.File, rep.Examples, spec.Metric, rep.Metrics[spec.Metric], rep.OtherMetrics(" "))
	}
	if err := m.Save(stage); err != nil {
		return nil, err
	}
	if err := tok.Save(stage); err != nil {
		return nil, err
	}
	results := map[string]*Report{}
	if res.Best != nil {
		results["eval"] = res.Best
	}
	if info.Test != nil {
		results["test"] = info.Test
	}
	for _, f := range []struct {
		name string
		v    any
	}{{RunFile, info}, {ResultsFile, results}} {
		b, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("finetune: %s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(stage, f.name), append(b, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("finetune: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(stage, MetricsFile), mbuf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := publish(r.staged, ro.Out); err != nil {
		return nil, err
	}
	return &RunResult{Info: info, Out: ro.Out}, nil
}

// publish syncs the staged folder and renames it to out (an empty out
// folder is replaced; CheckOut refuses any other).
func publish(stage *atomicfile.Stage, out string) error {
	if err := CheckOut(out); err != nil {
		return err
	}
	if err := stage.Publish(); err != nil {
		return fmt.Errorf("finetune: %w", err)
	}
	return nil
}
