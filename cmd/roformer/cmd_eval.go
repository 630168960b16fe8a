package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/finetune"
	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

func init() {
	register(&command{name: "eval", summary: "score a fine-tuned model (or a baseline) on a built-in task's split or a labelled file", run: cmdEval})
}

type evalOptions struct {
	fineTunedFlags
	task, split, cache, file string
	json, quiet              bool
}

// fineTunedFlags are the flags of the verbs that run a fine-tuned model
// (eval and predict).
type fineTunedFlags struct {
	model            string
	data             dataFlags
	maxLength, batch int
	threads          int
	precision        string
}

// register registers the flags on fs.
func (f *fineTunedFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "fine-tuned model folder, or a folder written by finetune --baseline (required)")
	f.data.register(fs, false)
	fs.IntVar(&f.maxLength, "max-length", 0, "tokens per input (default: the length the model was fine-tuned with, else 128)")
	fs.IntVar(&f.batch, "batch", 64, "inputs per forward pass")
	computeFlags(fs, &f.precision, &f.threads)
}

// open resolves --model (resolveModel) and loads the folder (loadFineTuned).
func (f *fineTunedFlags) open() (*fineTuned, error) {
	if err := resolveModel(&f.model); err != nil {
		return nil, err
	}
	return loadFineTuned(f.model, f.maxLength, f.batch, f.precision)
}

func cmdEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if retrievalTask(args) {
		return cmdEvalRetrieval(ctx, args, stdout, stderr)
	}
	if spanEvalTask(args) {
		return cmdEvalSpan(ctx, args, stdout, stderr) // cmd_finetune_qa.go
	}
	fs := newFlags("eval", "--model DIR (--task NAME [--split test] | --eval FILE) [--json]; --task retrieval -h for retrieval", stderr)
	var o evalOptions
	o.fineTunedFlags.register(fs)
	fs.StringVar(&o.task, "task", "", "built-in task to score on")
	fs.StringVar(&o.split, "split", "test", "split of the task: train, dev or test")
	fs.StringVar(&o.cache, "cache", defaultCacheDir(), "folder the built-in tasks are fetched into")
	fs.StringVar(&o.file, "eval", "", "labelled data file (JSONL, CSV or TSV) to score on")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.model == "":
		return usagef("--model is required")
	case (o.task == "") == (o.file == ""):
		return usagef("give exactly one of --task NAME and --eval FILE")
	case o.task != "" && len(o.data.set(fs)) > 0:
		return usagef("--task fixes the columns; %s only apply to --eval files", strings.Join(o.data.set(fs), ", "))
	case o.batch < 1:
		return usagef("--batch %d must be at least 1", o.batch)
	}
	if err := setupCompute(o.threads, stderr, true); err != nil {
		return err
	}
	return runEval(ctx, o, stdout, stderr)
}

// fineTuned is a model folder ready to score or predict: the RoFormer with
// its tokenizer, or a baseline.
type fineTuned struct {
	spec     labelled.Spec
	columns  labelled.Columns
	opts     finetune.EvalOptions
	model    *roformer.Model
	tok      *tokenizer.Tokenizer
	baseline *finetune.Baseline
}

// loadFineTuned reads a folder written by finetune (or finetune --baseline,
// or a RoFormerFor{Sequence,Token}Classification saved by HF) and prepares
// the model's products in the given precision ("" or "fp32": float32).
func loadFineTuned(dir string, maxLength, batch int, precision string) (*fineTuned, error) {
	prec, err := parsePrecision(precision)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, finetune.BaselineFile)); err == nil {
		if prec != "" && prec != roformer.PrecisionFP32 {
			return nil, usagef("--precision %s: %s holds a bag-of-words baseline, not a RoFormer", prec, dir)
		}
		b, err := finetune.LoadBaseline(dir)
		if err != nil {
			return nil, err
		}
		return &fineTuned{spec: b.Spec, columns: labelled.DefaultColumns(b.Spec.Problem), baseline: b}, nil
	}
	ft := &fineTuned{opts: finetune.EvalOptions{MaxLength: 128, BatchSize: batch}}
	info, err := finetune.ReadRunInfo(dir)
	switch {
	case err == nil:
		ft.spec, ft.columns = info.Spec, info.Columns
		ft.opts = info.Options.EvalOptions()
		ft.opts.BatchSize = batch
	case errors.Is(err, fs.ErrNotExist):
		cfg, err := roformer.LoadConfig(filepath.Join(dir, "config.json"))
		if err != nil {
			return nil, err
		}
		head := roformer.HeadForConfig(&cfg)
		if head != roformer.HeadTokenCls {
			head = roformer.HeadSequenceCls
		}
		ft.spec = finetune.SpecFromConfig(&cfg, head)
		ft.columns = labelled.DefaultColumns(ft.spec.Problem)
	default:
		return nil, err
	}
	if maxLength > 0 {
		ft.opts.MaxLength = maxLength
	}
	if ft.columns.Text == "" {
		ft.columns = labelled.DefaultColumns(ft.spec.Problem)
	}
	if ft.spec.Pair && ft.columns.Pair == "" {
		ft.columns.Pair = "text_pair"
	}
	m, err := pipeline.Open(dir, pipeline.OpenOptions{Head: finetune.Head(&ft.spec), Precision: prec})
	if err != nil {
		if errors.Is(err, roformer.ErrHeadMissing) {
			return nil, fmt.Errorf("%w\n%s has no fine-tuned head: fine-tune it first with roformer finetune", err, dir)
		}
		return nil, err
	}
	ft.model, ft.tok = m.Model, m.Tokenizer
	return ft, nil
}

func (ft *fineTuned) evaluate(ctx context.Context, ds *labelled.Dataset) (*finetune.Report, error) {
	if ft.baseline != nil {
		if err := ft.spec.Check(ds, "the baseline's labels"); err != nil {
			return nil, err
		}
		return ft.baseline.Evaluate(ds), nil
	}
	rep, _, err := finetune.Evaluate(ctx, ft.model, ft.tok, ft.spec, ds, ft.opts)
	return rep, err
}

func runEval(ctx context.Context, o evalOptions, stdout, stderr io.Writer) error {
	ft, err := o.open()
	if err != nil {
		return err
	}
	var ds *labelled.Dataset
	if o.task != "" {
		t, sp, err := loadTask(ctx, o.task, o.cache, stderr, o.quiet)
		if err != nil {
			return err
		}
		if ds, err = sp.Split(o.split); err != nil {
			return usageError{err}
		}
		if t.Spec.Pair != ft.spec.Pair {
			return fmt.Errorf("task %s has pairs %v but %s was trained with pairs %v", t.Name, t.Spec.Pair, o.model, ft.spec.Pair)
		}
	} else {
		ro, err := o.data.readOptions(ft.spec.Problem, ft.columns)
		if err != nil {
			return err
		}
		ft.spec.Pair = ro.Columns.Pair != ""
		if ds, err = labelled.ReadFile(o.file, ro); err != nil {
			return err
		}
	}
	rep, err := ft.evaluate(ctx, ds)
	if err != nil {
		return err
	}
	if o.json {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(stdout, "%s: %d examples, loss %.4f\n", ds.File, rep.Examples, rep.Loss)
	fmt.Fprintf(stdout, "%s %.4f (%s)\n", rep.MainMetric, rep.Metrics[rep.MainMetric], rep.OtherMetrics(", "))
	if rep.Truncated > 0 {
		fmt.Fprintf(stdout, "%d inputs were cut to %d tokens\n", rep.Truncated, ft.opts.MaxLength)
	}
	if rep.Confusion != nil {
		fmt.Fprint(stdout, rep.Confusion)
	}
	return nil
}

// writeJSONFile writes v as indented JSON.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeFolderAtomic fills a staged folder beside dir and publishes it as
// dir (which must not exist or be empty) once fill succeeds; on failure
// nothing remains.
func writeFolderAtomic(dir string, fill func(string) error) error {
	if err := finetune.CheckOut(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return err
	}
	stage, err := atomicfile.NewStage(dir)
	if err != nil {
		return err
	}
	defer stage.Discard()
	if err := fill(stage.Dir); err != nil {
		return err
	}
	return stage.Publish()
}
