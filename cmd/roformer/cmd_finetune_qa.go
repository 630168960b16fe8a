package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/roformer-go/roformer/finetune"
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
