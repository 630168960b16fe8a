package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/finetune"
	"github.com/roformer-go/roformer/tasks"
)

func init() {
	register(&command{name: "finetune", summary: "fine-tune a pretrained RoFormer for classification, regression or token tagging on a built-in task or JSONL/CSV/TSV files", run: cmdFinetune})
}

// dataFlags are the flags that say how to read data files; finetune, eval
// and predict share them.
type dataFlags struct {
	format, text, pair, label, labelSep, problem string
	noHeader                                     bool
	maxLineBytes                                 int
}

func (d *dataFlags) register(fs *flag.FlagSet, withProblem bool) {
	def := func(train, model string) string {
		if withProblem {
			return train
		}
		return model
	}
	fs.StringVar(&d.format, "format", "", "input format: jsonl, csv or tsv (default: from the file extension)")
	fs.StringVar(&d.text, "text-column", "", "column (JSON key) of the text; for token tagging, of the words "+
		def("(default text, or tokens)", "(default: as the model was fine-tuned, else text or tokens)"))
	fs.StringVar(&d.pair, "pair-column", "", "column of the second text of a pair "+
		def("(default: single texts)", "(default: as the model was fine-tuned; text_pair for the built-in pair task)"))
	fs.StringVar(&d.label, "label-column", "", "column of the label; for token tagging, of the tags "+
		def("(default label, or tags)", "(default: as the model was fine-tuned, else label or tags)"))
	fs.StringVar(&d.labelSep, "label-sep", ",", "separator of the labels of a multi-label CSV/TSV cell")
	fs.BoolVar(&d.noHeader, "no-header", false, "CSV/TSV files have no header row; name columns by 0-based index (GLUE's CoLA layout)")
	maxLineBytesFlag(fs, &d.maxLineBytes)
	if withProblem {
		fs.StringVar(&d.problem, "problem", "single-label", "single-label, multi-label, regression or token (token classification)")
	}
}

// maxLineBytesFlag registers --max-line-bytes, the one flag of every verb
// that reads a data file a line at a time.
func maxLineBytesFlag(fs *flag.FlagSet, v *int) {
	fs.IntVar(v, "max-line-bytes", labelled.DefaultMaxLineBytes, "longest line of an input file in bytes, its end of line not counted; a longer line is refused, naming the file and the line, as soon as the limit is passed")
}

// set reports whether any column flag was given.
func (d *dataFlags) set(fs *flag.FlagSet) []string {
	var names []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "format", "text-column", "pair-column", "label-column", "label-sep", "no-header", "problem":
			names = append(names, "--"+f.Name)
		}
	})
	return names
}

// readOptions builds the reader settings; base supplies columns recorded
// earlier (finetune.json) that flags override.
func (d *dataFlags) readOptions(p labelled.Problem, base labelled.Columns) (labelled.ReadOptions, error) {
	ro := labelled.ReadOptions{Problem: p, Columns: base, NoHeader: d.noHeader, LabelSep: d.labelSep, MaxLineBytes: d.maxLineBytes}
	if d.format != "" {
		f, err := labelled.ParseFormat(d.format)
		if err != nil {
			return ro, usageError{err}
		}
		ro.Format = f
	}
	if d.text != "" {
		ro.Columns.Text = d.text
	}
	if d.pair != "" {
		ro.Columns.Pair = d.pair
	}
	if d.label != "" {
		ro.Columns.Label = d.label
	}
	return ro, nil
}

// defaultCacheDir is where built-in tasks are fetched: $XDG_CACHE_HOME
// (or ~/.cache)/roformer/tasks.
func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "roformer", "tasks")
	}
	return filepath.Join(".cache", "roformer", "tasks")
}

// loadTask prints the task's source and licence, fetches it on first use
// and builds its splits.
func loadTask(ctx context.Context, name, cache string, stderr io.Writer, quiet bool) (*tasks.Task, *tasks.Splits, error) {
	t, err := tasks.Get(name)
	if err != nil {
		return nil, nil, usageError{err}
	}
	log := stderr
	if quiet {
		log = io.Discard
	}
	fmt.Fprintln(log, t.About())
	sp, err := tasks.Load(ctx, t, cache, log)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(log, "  %d train, %d dev, %d test examples (cache %s)\n", len(sp.Train.Examples), len(sp.Dev.Examples), len(sp.Test.Examples), cache)
	return t, sp, nil
}

type finetuneOptions struct {
	model, tokenizer, task, cache string
	train, eval, test, out        string
	labels, metric, positive      string
	baseline                      string
	data                          dataFlags
	opts                          finetune.Options
	newHead, quiet                bool
	threads                       int
	set                           map[string]bool // the flags given on the command line
	baselineEpochs                int
	group                         distributed.Comm // the MPI job's ranks, or this process alone
	embed                         contrastFlags    // --objective: contrastive fine-tuning of a sentence encoder
	span                          spanFlags        // --task qa, --task multiple-choice (cmd_finetune_qa.go)
}

func cmdFinetune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("finetune", "--model DIR (--task NAME | --train FILE [--eval FILE] [--test FILE]) --out DIR [flags]", stderr)
	var o finetuneOptions
	o.opts = finetune.DefaultOptions()
	p := &o.opts
	fs.StringVar(&o.model, "model", "", "pretrained model folder (config.json, weights, vocabulary), or one fine-tuned before to continue")
	fs.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer folder (default: the model folder, or its tokenizer/ subfolder)")
	fs.StringVar(&o.task, "task", "", "built-in task: "+strings.Join(tasks.Names(), ", ")+" (fetched on first use); or "+strings.Join(spanTasks, ", ")+" on --train files (SQuAD JSON/JSONL; {question, choices, label} JSONL)")
	fs.StringVar(&o.cache, "cache", defaultCacheDir(), "folder the built-in tasks are fetched into")
	fs.StringVar(&o.train, "train", "", "training data (JSONL, CSV or TSV)")
	fs.StringVar(&o.eval, "eval", "", "evaluation data, scored after each epoch to keep the best checkpoint (default: none, the last epoch is kept)")
	fs.StringVar(&o.test, "test", "", "test data, scored once at the end with the kept checkpoint")
	fs.StringVar(&o.out, "out", "", "output folder (must not exist or be empty); written only when the run succeeds (required)")
	o.data.register(fs, true)
	fs.StringVar(&o.labels, "labels", "", "comma-separated label set in id order (default: the model's, else the labels of the training data, sorted)")
	fs.StringVar(&o.metric, "metric", "", "metric that picks the best epoch: accuracy, f1, macro_f1, mcc (single-label); micro_f1, macro_f1, subset_accuracy (multi-label); pearson, spearman, neg_mse (regression); accuracy, macro_f1 (token)")
	fs.StringVar(&o.positive, "positive", "", "positive label of binary F1 (default: the second label)")
	fs.IntVar(&p.MaxLength, "max-length", p.MaxLength, "tokens per input, [CLS] and [SEP] included (a built-in task sets its own unless this is given)")
	fs.IntVar(&p.BatchSize, "batch", p.BatchSize, "training batch size, per rank under MPI (a built-in task sets its own unless this is given)")
	fs.IntVar(&p.Accum, "accum", 1, "micro-batches of --batch inputs per optimizer step (gradients averaged)")
	fs.IntVar(&p.EvalBatchSize, "eval-batch", p.EvalBatchSize, "evaluation batch size")
	fs.IntVar(&p.Epochs, "epochs", p.Epochs, "training epochs (a built-in task sets its own unless this is given)")
	fs.Float64Var(&p.LR, "lr", p.LR, "peak learning rate (a built-in task sets its own unless this is given)")
	fs.StringVar(&p.Schedule, "schedule", p.Schedule, "learning-rate schedule after warm-up: linear, cosine or constant")
	fs.Float64Var(&p.WarmupRatio, "warmup-ratio", p.WarmupRatio, "warm-up as a share of all steps")
	fs.IntVar(&p.WarmupSteps, "warmup-steps", 0, "warm-up steps (wins over --warmup-ratio when > 0)")
	fs.Float64Var(&p.WeightDecay, "weight-decay", p.WeightDecay, "AdamW decoupled weight decay (not on biases and LayerNorm)")
	fs.Float64Var(&p.Clip, "clip", p.Clip, "clip the global gradient norm to this (0: off)")
	fs.Uint64Var(&p.Seed, "seed", p.Seed, "seed of the head initialisation, data order and dropout")
	fs.IntVar(&p.Patience, "patience", 0, "stop after this many epochs without a better evaluation (0: off; a built-in task may set its own unless this is given)")
	fs.StringVar(&p.Truncation, "truncation", p.Truncation, "longest_first, only_first, only_second, or none (over-long inputs are then an error)")
	fs.IntVar(&p.LogEvery, "log-every", p.LogEvery, "steps between progress lines")
	fs.StringVar(&p.Precision, "precision", "fp32", "number format of the products in training: fp32, or bf16 (mixed precision: the linear layers' products and softmax attention's (relative-position and UniLM-masked attention from 1,024 tokens) in bfloat16; float32 accumulation, weights and optimizer; needs AVX512_BF16 or AMX)")
	fs.BoolVar(&o.newHead, "new-head", false, "start a new head even if --model was fine-tuned with one")
	fs.StringVar(&o.baseline, "baseline", "", "instead of the model, train a baseline on the same data: bow (bag-of-words logistic regression)")
	fs.IntVar(&o.baselineEpochs, "baseline-epochs", 20, "epochs of the baseline")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	o.embed.register(fs)
	o.span.register(fs)
	th := threadsFlag(fs)
	distributed := distributedFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if err := o.embed.check(o.set); err != nil {
		return err
	}
	if err := o.span.check(o.task, o.train, o.set); err != nil {
		return err
	}
	switch {
	case o.out == "":
		return usagef("--out is required")
	case o.task == "" && o.train == "":
		return usagef("give --task NAME or --train FILE")
	case o.task != "" && !isSpanTask(o.task) && (o.train != "" || o.eval != "" || o.test != ""):
		return usagef("--task brings its own splits; do not combine it with --train, --eval or --test")
	case o.task != "" && !isSpanTask(o.task) && len(o.data.set(fs)) > 0:
		return usagef("--task fixes the columns and the problem; %s only apply to --train files", strings.Join(o.data.set(fs), ", "))
	case o.baseline == "" && o.model == "":
		return usagef("--model is required (or --baseline bow)")
	case o.baseline != "" && o.baseline != "bow":
		return usagef("--baseline %q: the only baseline is bow", o.baseline)
	}
	g, err := joinGroup(*distributed, th, flagSet(fs, "threads"))
	if err != nil {
		return err
	}
	o.group, o.threads = g, *th
	if o.baseline != "" && g.Size() > 1 {
		return leaveGroup(g, "finetune", usagef("--baseline runs in one process, not under mpirun"), stderr)
	}
	if err := setupCompute(o.threads, stderr, o.quiet || o.baseline != "" || g.Rank() != 0); err != nil {
		return leaveGroup(g, "finetune", err, stderr)
	}
	return leaveGroup(g, "finetune", runFinetune(ctx, o, stdout, stderr), stderr)
}

func runFinetune(ctx context.Context, o finetuneOptions, stdout, stderr io.Writer) error {
	if err := resolveModel(&o.model); err != nil {
		return err
	}
	if o.group == nil {
		o.group = distributed.Local()
	}
	stdout, progress := rankOutputs(o.group, o.quiet, stdout, stderr)
	if o.group.Size() > 1 {
		fmt.Fprintf(progress, "roformer: %v\n", o.group)
	}
	if err := distributed.Agree(o.group, finetune.CheckOut(o.out)); err != nil {
		return err
	}
	if o.embed.objective != "" {
		return runFinetuneEmbed(ctx, o, stdout, progress)
	}
	if isSpanTask(o.task) {
		return runFinetuneSpan(ctx, o, stdout, progress)
	}
	d, err := finetuneData(ctx, &o, progress)
	if err := distributed.Agree(o.group, err); err != nil {
		return err
	}
	if o.baseline != "" {
		return runBaseline(ctx, o, d.spec, d.train, d.eval, d.test, stdout, progress)
	}
	start := time.Now()
	res, err := finetune.Run(ctx, finetune.RunOptions{
		Model: o.model, Tokenizer: o.tokenizer, Spec: d.spec, LabelsFrom: d.labelsFrom, Columns: d.columns,
		Train: d.train, Eval: d.eval, Test: d.test, Options: o.opts, NewHead: o.newHead, Out: o.out, Data: d.data, Progress: progress,
		Group: o.group,
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: nothing was written to %s", errInterrupted, o.out)
		}
		return err
	}
	if res.Info != nil {
		printFinetuneResult(stdout, o.out, res.Info, start)
	}
	return nil
}

// finetuneInputs are the data and task description of a fine-tuning run.
type finetuneInputs struct {
	spec              labelled.Spec
	train, eval, test *labelled.Dataset
	columns           labelled.Columns
	labelsFrom        string         // where the label names came from
	data              map[string]any // recorded in the run's info
}

// finetuneData reads the built-in task or the data files, and applies the
// flags that override the task's description (labels, metric, positive
// class) and the task's settings (max length, epochs, learning rate, batch,
// patience: the task's unless the flag was given). Where each setting came
// from is recorded as data["settings"].
func finetuneData(ctx context.Context, o *finetuneOptions, stderr io.Writer) (*finetuneInputs, error) {
	var spec labelled.Spec
	var train, eval, test *labelled.Dataset
	var columns labelled.Columns
	labelsFrom := ""
	data := map[string]any{}
	if o.task != "" {
		t, sp, err := loadTask(ctx, o.task, o.cache, stderr, o.quiet)
		if err != nil {
			return nil, err
		}
		spec, train, eval, test = t.Spec, sp.Train, sp.Dev, sp.Test
		// Recorded for eval and predict on files: JSONL with text (and text_pair).
		columns = labelled.Columns{Text: "text", Label: "label"}
		if spec.Pair {
			columns.Pair = "text_pair"
		}
		spec.Labels = append([]string(nil), spec.Labels...)
		labelsFrom = "task " + t.Name
		fromTask := applySettings(&o.opts, t.Settings, func(name string) bool { return o.set[name] })
		data["settings"] = settingSources(t.Name, fromTask, o.set)
		if !o.quiet {
			fmt.Fprintf(stderr, "  settings: %s\n", describeSettings(o.opts, t.Name, fromTask, o.set))
		}
		data["task"] = t.Name
		data["source"] = t.About()
	} else {
		prob, err := labelled.ParseProblem(o.data.problem)
		if err != nil {
			return nil, usageError{err}
		}
		spec.Problem = prob
		ro, err := o.data.readOptions(prob, labelled.DefaultColumns(prob))
		if err != nil {
			return nil, err
		}
		columns = ro.Columns
		spec.Pair = ro.Columns.Pair != ""
		if train, err = labelled.ReadFile(o.train, ro); err != nil {
			return nil, err
		}
		data["train"] = o.train
		if o.eval != "" {
			if eval, err = labelled.ReadFile(o.eval, ro); err != nil {
				return nil, err
			}
			data["eval"] = o.eval
		}
		if o.test != "" {
			if test, err = labelled.ReadFile(o.test, ro); err != nil {
				return nil, err
			}
			data["test"] = o.test
		}
	}
	if o.labels != "" {
		spec.Labels = nil
		for _, l := range strings.Split(o.labels, ",") {
			spec.Labels = append(spec.Labels, strings.TrimSpace(l))
		}
		labelsFrom = "--labels"
	}
	if o.metric != "" {
		spec.Metric = o.metric
	}
	if o.positive != "" {
		spec.Positive = o.positive
	}
	for name, ds := range map[string]*labelled.Dataset{"train": train, "eval": eval, "test": test} {
		if ds != nil {
			data[name+"_examples"] = len(ds.Examples)
		}
	}
	return &finetuneInputs{spec: spec, train: train, eval: eval, test: test, columns: columns, labelsFrom: labelsFrom, data: data}, nil
}

// applySettings writes a task's non-zero settings into o, except those
// whose flag name (tasks.SettingNames) keep reports as set by the user; it
// returns the names it wrote. keep may be nil.
func applySettings(o *finetune.Options, s tasks.Settings, keep func(name string) bool) []string {
	var wrote []string
	set := func(name string, ok bool, assign func()) {
		if ok && (keep == nil || !keep(name)) {
			assign()
			wrote = append(wrote, name)
		}
	}
	set("max-length", s.MaxLength > 0, func() { o.MaxLength = s.MaxLength })
	set("epochs", s.Epochs > 0, func() { o.Epochs = s.Epochs })
	set("lr", s.LR > 0, func() { o.LR = s.LR })
	set("batch", s.BatchSize > 0, func() { o.BatchSize = s.BatchSize })
	set("patience", s.Patience > 0, func() { o.Patience = s.Patience })
	return wrote
}

// settingSources says where each of a task's settings came from: "task
// NAME", "flag" or "default".
func settingSources(task string, fromTask []string, set map[string]bool) map[string]string {
	out := map[string]string{}
	for _, name := range tasks.SettingNames {
		switch {
		case set[name]:
			out[name] = "flag"
		case slices.Contains(fromTask, name):
			out[name] = "task " + task
		default:
			out[name] = "default"
		}
	}
	return out
}

// describeSettings is the settings line printed before a task's run, e.g.
// "max-length 64, epochs 6, lr 0.0002, batch 32, patience 0 (task
// sentiment's, except --epochs)".
func describeSettings(o finetune.Options, task string, fromTask []string, set map[string]bool) string {
	vals := map[string]string{"max-length": fmt.Sprint(o.MaxLength), "epochs": fmt.Sprint(o.Epochs), "lr": fmt.Sprint(o.LR),
		"batch": fmt.Sprint(o.BatchSize), "patience": fmt.Sprint(o.Patience)}
	var parts, flags []string
	for _, name := range tasks.SettingNames {
		parts = append(parts, name+" "+vals[name])
		if set[name] {
			flags = append(flags, "--"+name)
		}
	}
	from := fmt.Sprintf("task %s's", task)
	if len(fromTask) == 0 {
		from = "defaults"
	}
	if len(flags) > 0 {
		from += ", except " + strings.Join(flags, ", ") + " as given"
	}
	return strings.Join(parts, ", ") + " (" + from + ")"
}

// printFinetuneResult prints the summary of a finished run.
func printFinetuneResult(stdout io.Writer, out string, info *finetune.RunInfo, start time.Time) {
	early := ""
	if info.Result.EarlyStopped {
		early = ", stopped early"
	}
	fmt.Fprintf(stdout, "\nfine-tuned %d steps (%d epochs%s) in %s\n", info.Result.Steps, len(info.Result.Epochs), early, time.Since(start).Round(time.Second))
	if b := info.Result.Best; b != nil {
		fmt.Fprintf(stdout, "best epoch %d: eval %s %.4f (%s)\n", info.Result.BestEpoch, b.MainMetric, b.Metrics[b.MainMetric], b.OtherMetrics(", "))
	}
	if t := info.Test; t != nil {
		fmt.Fprintf(stdout, "test: %s %.4f (%s) on %d examples\n", t.MainMetric, t.Metrics[t.MainMetric], t.OtherMetrics(", "), t.Examples)
		if t.Confusion != nil {
			fmt.Fprint(stdout, t.Confusion)
		}
	}
	fmt.Fprintf(stdout, "model  %s (loads in HF's %s)\n", out, finetune.Head(&info.Spec).HFClass())
	fmt.Fprintf(stdout, "try:   roformer eval --model %s ...   roformer predict --model %s --input IN.jsonl\n", out, out)
}

// runBaseline trains the bag-of-words baseline on the same splits and
// writes baseline.json and eval_results.json to the output folder.
func runBaseline(ctx context.Context, o finetuneOptions, spec labelled.Spec, train, eval, test *labelled.Dataset, stdout, progress io.Writer) error {
	if len(spec.Labels) == 0 {
		spec.Labels = labelled.InferLabels(train, spec.Problem)
	}
	start := time.Now()
	b, dev, err := finetune.TrainBaseline(ctx, spec, train, eval, finetune.BaselineOptions{Epochs: o.baselineEpochs, Seed: o.opts.Seed}, progress)
	if err != nil {
		return err
	}
	results := map[string]*finetune.Report{}
	if dev != nil {
		results["eval"] = dev
		fmt.Fprintf(stdout, "baseline (bag-of-words logistic regression, %d features): eval %s %.4f (%s)\n", len(b.Features), dev.MainMetric, dev.Main(), dev.OtherMetrics(", "))
	}
	if test != nil {
		if err := b.Spec.Check(test, "the label set"); err != nil {
			return err
		}
		t := b.Evaluate(test)
		results["test"] = t
		fmt.Fprintf(stdout, "test: %s %.4f (%s) on %d examples\n", t.MainMetric, t.Main(), t.OtherMetrics(", "), t.Examples)
		if t.Confusion != nil {
			fmt.Fprint(stdout, t.Confusion)
		}
	}
	if err := writeFolderAtomic(o.out, func(dir string) error {
		if err := b.Save(dir); err != nil {
			return err
		}
		return writeJSONFile(filepath.Join(dir, finetune.ResultsFile), results)
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "baseline %s (trained in %s)\n", o.out, time.Since(start).Round(time.Millisecond))
	return nil
}
