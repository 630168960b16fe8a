package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/roformer-go/roformer/finetune"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

// finetune's question-answering and multiple-choice tasks (--task qa,
// --task multiple-choice): their own data formats and flags, then
// finetune.RunTask.

// spanTasks are the --task names that take --train files of their own format.
var spanTasks = []string{"qa", "multiple-choice"}

func isSpanTask(task string) bool { return task == "qa" || task == "multiple-choice" }

// spanFlags are the flags only --task qa reads.
type spanFlags struct {
	docStride, maxQuestionLen, maxAnswerLen int
}

func (s *spanFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&s.docStride, "doc-stride", 0, "with --task qa: context tokens consecutive windows share (0: max-length/2, at most 128)")
	fs.IntVar(&s.maxQuestionLen, "max-question-len", 0, "with --task qa: question tokens kept (0: 64)")
	fs.IntVar(&s.maxAnswerLen, "max-answer-len", 0, "with --task qa: longest answer in tokens when evaluating (0: 30)")
}

// spanOnly are the flags of --task qa alone; spanRefused those that
// neither span task reads.
var (
	spanOnly    = []string{"doc-stride", "max-question-len", "max-answer-len"}
	spanRefused = []string{"test", "labels", "metric", "positive", "baseline", "baseline-epochs", "format", "text-column", "pair-column",
		"label-column", "label-sep", "no-header", "problem"}
)

// check refuses the flags that do not go with the task.
func (s *spanFlags) check(task, train string, set map[string]bool) error {
	if task != "qa" {
		for _, name := range spanOnly {
			if set[name] {
				return usagef("--%s is a flag of --task qa", name)
			}
		}
	}
	if !isSpanTask(task) {
		return nil
	}
	var bad []string
	for _, name := range spanRefused {
		if set[name] {
			bad = append(bad, "--"+name)
		}
	}
	sort.Strings(bad)
	switch {
	case len(bad) > 0:
		return usagef("--task %s reads --train (and --eval) files of its own format; %s do not apply", task, strings.Join(bad, ", "))
	case train == "":
		return usagef("--task %s needs --train FILE", task)
	}
	return nil
}

// runFinetuneSpan reads the question-answering or multiple-choice files and
// runs finetune.RunTask.
func runFinetuneSpan(ctx context.Context, o finetuneOptions, stdout, progress io.Writer) error {
	if o.group.Size() > 1 {
		return usagef("--task %s runs in one process, not under mpirun", o.task)
	}
	ro := finetune.TaskRunOptions{Model: o.model, Tokenizer: o.tokenizer, NewHead: o.newHead, TrainFile: o.train, EvalFile: o.eval,
		Options: o.opts, Out: o.out, Progress: progress,
		QA: finetune.QAOptions{DocStride: o.span.docStride, MaxQuestionLen: o.span.maxQuestionLen, MaxAnswerLen: o.span.maxAnswerLen}}
	data := map[string]any{"task": o.task, "train": o.train}
	var err error
	if o.task == "qa" {
		if ro.QATrain, err = finetune.ReadQA(o.train, o.data.maxLineBytes); err == nil && o.eval != "" {
			ro.QAEval, err = finetune.ReadQA(o.eval, o.data.maxLineBytes)
		}
		data["train_questions"], data["eval_questions"] = len(ro.QATrain), len(ro.QAEval)
	} else {
		if ro.ChoiceTrain, err = finetune.ReadChoices(o.train, o.data.maxLineBytes); err == nil && o.eval != "" {
			ro.ChoiceEval, err = finetune.ReadChoices(o.eval, o.data.maxLineBytes)
		}
		data["train_questions"], data["eval_questions"] = len(ro.ChoiceTrain), len(ro.ChoiceEval)
	}
	if err != nil {
		return err
	}
	if o.eval != "" {
		data["eval"] = o.eval
	}
	ro.Data = data
	start := time.Now()
	info, err := finetune.RunTask(ctx, ro)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: nothing was written to %s", errInterrupted, o.out)
		}
		return err
	}
	r := info.Result
	fmt.Fprintf(stdout, "\nfine-tuned %d steps (%d epochs, %d training inputs) in %s\n", r.Steps, len(r.Epochs), r.Features, time.Since(start).Round(time.Second))
	if r.Best != nil {
		if o.task == "qa" {
			fmt.Fprintf(stdout, "best epoch %d: exact match %.2f, F1 %.2f (SQuAD, %%) on %s\n", r.BestEpoch, 100*r.Best["exact_match"], 100*r.Best["f1"], o.eval)
		} else {
			fmt.Fprintf(stdout, "best epoch %d: accuracy %.4f, loss %.4f on %s\n", r.BestEpoch, r.Best["accuracy"], r.Best["loss"], o.eval)
		}
	}
	fmt.Fprintf(stdout, "model  %s (%s)\n", o.out, info.Task.HFClass())
	if o.task == "qa" {
		fmt.Fprintf(stdout, "try:   roformer serve --model %s  (POST /v1/question-answering {\"question\", \"context\"})\n", o.out)
	}
	return nil
}

// spanEvalTask reports whether eval's arguments name --task qa or
// --task multiple-choice (read before the flags, as retrievalTask does).
func spanEvalTask(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--task" || a == "-task":
			return i+1 < len(args) && isSpanTask(args[i+1])
		case strings.HasPrefix(a, "--task=") || strings.HasPrefix(a, "-task="):
			return isSpanTask(a[strings.Index(a, "=")+1:])
		}
	}
	return false
}

// cmdEvalSpan is `roformer eval --task qa|multiple-choice --model DIR
// --eval FILE`: SQuAD's exact match and F1, or accuracy, of a folder that
// finetune --task wrote (its finetune_task.json gives the windows and the
// length; without one, the defaults).
func cmdEvalSpan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval", "--task qa|multiple-choice --model DIR --eval FILE [--json]", stderr)
	var model, task, file string
	var asJSON bool
	var maxLineBytes int
	fs.StringVar(&model, "model", "", "folder written by finetune --task qa or --task multiple-choice")
	fs.StringVar(&task, "task", "", "qa or multiple-choice")
	fs.StringVar(&file, "eval", "", "questions to score: SQuAD JSON/JSONL (qa) or {question, choices, label} JSONL (multiple-choice)")
	fs.BoolVar(&asJSON, "json", false, "print the metrics as JSON")
	maxLineBytesFlag(fs, &maxLineBytes)
	th := threadsFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case model == "" || file == "":
		return usagef("--task %s needs --model DIR and --eval FILE", task)
	}
	if err := resolveModel(&model); err != nil {
		return err
	}
	if err := setupCompute(*th, stderr, true); err != nil {
		return err
	}
	opts, qa := finetune.DefaultOptions(), finetune.QAOptions{}
	if b, err := os.ReadFile(filepath.Join(model, finetune.TaskRunFile)); err == nil {
		var info finetune.TaskRunInfo
		if err := json.Unmarshal(b, &info); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(model, finetune.TaskRunFile), err)
		}
		opts = info.Options
		if info.QA != nil {
			qa = *info.QA
		}
	}
	head := roformer.HeadQA
	if task == "multiple-choice" {
		head = roformer.HeadMultipleChoice
	}
	pm, err := pipeline.Open(model, pipeline.OpenOptions{Head: head})
	if err != nil {
		return err
	}
	var rep map[string]float64
	if task == "qa" {
		exs, err := finetune.ReadQA(file, maxLineBytes)
		if err != nil {
			return err
		}
		rep, err = finetune.EvaluateQA(ctx, pm.Model, pm.Tokenizer, exs, qa.Pipeline(opts.MaxLength))
		if err != nil {
			return err
		}
	} else {
		exs, err := finetune.ReadChoices(file, maxLineBytes)
		if err != nil {
			return err
		}
		if rep, err = finetune.EvaluateChoices(ctx, pm.Model, pm.Tokenizer, exs, opts, file); err != nil {
			return err
		}
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	if task == "qa" {
		fmt.Fprintf(stdout, "%s: %d questions: exact match %.2f, F1 %.2f (SQuAD, %%)\n", file, int(rep["examples"]), 100*rep["exact_match"], 100*rep["f1"])
	} else {
		fmt.Fprintf(stdout, "%s: %d questions: accuracy %.4f, loss %.4f\n", file, int(rep["examples"]), rep["accuracy"], rep["loss"])
	}
	return nil
}
