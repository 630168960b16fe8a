package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

func init() {
	register(&command{name: "fill-mask", summary: "predict the [MASK] tokens of a text with a masked-LM model", run: cmdFillMask})
}

type fillMaskOptions struct {
	model     string
	topK      int
	json      bool
	threads   int
	precision string
}

func cmdFillMask(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fill-mask", "--model DIR [--top-k K] \"text with [MASK]\" ...", stderr)
	var o fillMaskOptions
	fs.StringVar(&o.model, "model", "", "model folder with config.json, weights and vocab.txt (required)")
	fs.IntVar(&o.topK, "top-k", 5, "candidates per mask")
	fs.BoolVar(&o.json, "json", false, "print one JSON array per text (HF fill-mask pipeline fields)")
	computeFlags(fs, &o.precision, &o.threads)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.model == "" {
		return usagef("--model is required")
	}
	if fs.NArg() == 0 {
		return usagef("give at least one text containing [MASK]")
	}
	if o.topK < 1 {
		return usagef("--top-k %d must be at least 1", o.topK)
	}
	if err := setupCompute(o.threads, stderr, true); err != nil {
		return err
	}
	return runFillMask(ctx, o, fs.Args(), stdout)
}

func runFillMask(ctx context.Context, o fillMaskOptions, texts []string, w io.Writer) error {
	m, err := openModel(&o.model, o.precision, pipeline.OpenOptions{Head: roformer.HeadMaskedLM})
	if err != nil {
		return err
	}
	for _, text := range texts {
		preds, err := pipeline.FillMask(ctx, m.Model, m.Tokenizer, text, o.topK)
		if err != nil {
			return err
		}
		if o.json {
			b, _ := json.Marshal(preds)
			fmt.Fprintf(w, "%s\n", b)
			continue
		}
		fmt.Fprintln(w, text)
		for k, ps := range preds {
			if len(preds) > 1 {
				fmt.Fprintf(w, "  mask %d:\n", k+1)
			}
			for _, p := range ps {
				fmt.Fprintf(w, "  %6.4f  %-15s %s\n", p.Score, p.Token, strings.TrimSpace(p.Sequence))
			}
		}
	}
	return nil
}
