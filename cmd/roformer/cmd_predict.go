package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/finetune"
	"github.com/roformer-go/roformer/internal/lines"
)

func init() {
	register(&command{name: "predict", summary: "label texts with a fine-tuned model: one JSON line of labels and scores per input line", run: cmdPredict})
}

type predictOptions struct {
	fineTunedFlags
	input, output string
}

func cmdPredict(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("predict", "--model DIR --input IN.jsonl [--output OUT.jsonl]", stderr)
	var o predictOptions
	o.fineTunedFlags.register(fs)
	fs.StringVar(&o.input, "input", "", "inputs: JSONL (or CSV/TSV) with the text column(s) the model was trained on; - for JSONL on stdin (required)")
	fs.StringVar(&o.output, "output", "", "write the predictions here (atomically) instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.model == "" || o.input == "":
		return usagef("--model and --input are required")
	case o.batch < 1:
		return usagef("--batch %d must be at least 1", o.batch)
	}
	if err := setupCompute(o.threads, stderr, true); err != nil {
		return err
	}
	if o.output != "" {
		if o.input != "-" {
			if err := lines.CheckOutput(o.output, o.input); err != nil {
				return err
			}
		}
		return writeFileVia(o.output, func(w io.Writer) error { return runPredict(ctx, o, w) })
	}
	return runPredict(ctx, o, stdout)
}

// predictChunk is the number of inputs predicted and written at a time.
const predictChunk = 1024

func runPredict(ctx context.Context, o predictOptions, w io.Writer) error {
	ft, err := o.open()
	if err != nil {
		return err
	}
	ro, err := o.data.readOptions(ft.spec.Problem, ft.columns)
	if err != nil {
		return err
	}
	ro.Unlabelled = true
	ft.spec.Pair = ro.Columns.Pair != ""
	var ds *labelled.Dataset
	if o.input == "-" {
		ro.Format = labelled.JSONL
		ds, err = labelled.Read(os.Stdin, "stdin", ro)
	} else {
		if ro.Format == "" && filepath.Ext(o.input) == "" {
			ro.Format = labelled.JSONL
		}
		ds, err = labelled.ReadFile(o.input, ro)
	}
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for lo := 0; lo < len(ds.Examples); lo += predictChunk {
		part := &labelled.Dataset{File: ds.File, Examples: ds.Examples[lo:min(lo+predictChunk, len(ds.Examples))]}
		var preds []finetune.Prediction
		if ft.baseline != nil {
			if err := ft.spec.Check(unlabelled(part), "the baseline's labels"); err != nil {
				return err
			}
			preds = ft.baseline.Predict(part)
		} else if preds, err = finetune.Predict(ctx, ft.model, ft.tok, ft.spec, part, ft.opts); err != nil {
			return err
		}
		for _, p := range preds {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing predictions: %w", err)
	}
	return nil
}

// unlabelled returns ds with its labels ignored (for the pair check).
func unlabelled(ds *labelled.Dataset) *labelled.Dataset {
	out := &labelled.Dataset{File: ds.File, Examples: make([]labelled.Example, len(ds.Examples))}
	for i, ex := range ds.Examples {
		ex.HasLabel = false
		out.Examples[i] = ex
	}
	return out
}
