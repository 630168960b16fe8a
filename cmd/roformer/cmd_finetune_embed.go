package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/roformer-go/roformer/data/labelled"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/finetune"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/sentence"
)

// contrastFlags are finetune's flags of contrastive fine-tuning (--objective).
type contrastFlags struct {
	objective, dev, dims string
	scale                float64
	symmetric            bool
	miniBatch            int
}

func (e *contrastFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.objective, "objective", "", "contrastive fine-tuning of a sentence encoder: mnrl (MultipleNegativesRankingLoss on {anchor, positive[, negative]} rows), cosent (CoSENTLoss on {sentence1, sentence2, score}) or matryoshka (MatryoshkaLoss around the loss the rows call for); the output is a sentence-transformers folder")
	fs.StringVar(&e.dev, "dev", "", "with --objective: evaluation rows (JSONL); the epoch with the lowest loss on them is kept")
	fs.Float64Var(&e.scale, "scale", contrastive.DefaultScale, "with --objective: the scale (inverse temperature) of the cosine")
	fs.BoolVar(&e.symmetric, "symmetric", false, "with --objective mnrl or matryoshka: add the positive→anchor direction (MultipleNegativesSymmetricRankingLoss)")
	fs.IntVar(&e.miniBatch, "mini-batch-size", 0, "with --objective: gradient caching (as sentence-transformers' Cached losses): encode each batch this many rows at a time, holding one mini-batch's activations, for the same loss and gradient at one more forward pass per text; 0 or --batch and more: off")
	fs.StringVar(&e.dims, "matryoshka-dims", "", "with --objective matryoshka: comma-separated truncations (default: the hidden size, then each of 512, 256, 128, 64 below it)")
}

// contrastOnly are the flags that only contrastive fine-tuning reads;
// contrastRefused those it does not.
var (
	contrastOnly    = []string{"dev", "scale", "symmetric", "matryoshka-dims", "mini-batch-size"}
	contrastRefused = []string{"task", "eval", "test", "labels", "metric", "positive", "baseline", "baseline-epochs", "new-head", "patience",
		"format", "text-column", "pair-column", "label-column", "label-sep", "no-header", "problem", "tokenizer"}
)

// check refuses the flags that do not go with --objective, or with its absence.
func (e *contrastFlags) check(set map[string]bool) error {
	if e.objective == "" {
		for _, name := range contrastOnly {
			if set[name] {
				return usagef("--%s is a flag of contrastive fine-tuning; give --objective mnrl, cosent or matryoshka", name)
			}
		}
		return nil
	}
	switch e.objective {
	case "mnrl", "cosent", "matryoshka":
	default:
		return usagef("--objective %q: want mnrl, cosent or matryoshka", e.objective)
	}
	var bad []string
	for _, name := range contrastRefused {
		if set[name] {
			bad = append(bad, "--"+name)
		}
	}
	sort.Strings(bad)
	switch {
	case len(bad) > 0:
		return usagef("--objective %s reads --train (and --dev) JSONL rows in sentence-transformers' columns; %s do not apply", e.objective, strings.Join(bad, ", "))
	case set["matryoshka-dims"] && e.objective != "matryoshka":
		return usagef("--matryoshka-dims goes with --objective matryoshka")
	case e.symmetric && e.objective == "cosent":
		return usagef("--symmetric is MNRL's; --objective cosent has no direction")
	}
	return nil
}

// runFinetuneEmbed reads the rows and runs finetune.RunEmbed.
func runFinetuneEmbed(ctx context.Context, o finetuneOptions, stdout, progress io.Writer) error {
	e := &o.embed
	o.opts.MiniBatchSize = e.miniBatch
	tr, err := labelled.ReadPairs(o.train, o.data.maxLineBytes)
	var dev *labelled.PairSet
	if err == nil && e.dev != "" {
		dev, err = labelled.ReadPairs(e.dev, o.data.maxLineBytes)
	}
	var obj contrastive.Objective
	if err == nil {
		obj, err = embedObjective(o, tr)
	}
	if err := distributed.Agree(o.group, err); err != nil {
		return err
	}
	data := map[string]any{"train": o.train, "train_rows": len(tr.Rows), "columns": tr.Kind.String(), "hard_negatives": tr.Negatives}
	if dev != nil {
		data["dev"], data["dev_rows"] = e.dev, len(dev.Rows)
	}
	if o.group.Size() > 1 && obj.Kind == contrastive.KindMNRL {
		data["negatives"] = fmt.Sprintf("in-batch per rank: each of %d ranks ranks its own %d rows; not gathered", o.group.Size(), o.opts.BatchSize)
	}
	start := time.Now()
	out, info, err := finetune.RunEmbed(ctx, finetune.EmbedRunOptions{Model: o.model, Objective: obj, Train: tr, Eval: dev, Options: o.opts,
		Out: o.out, Data: data, Progress: progress, Group: o.group})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: nothing was written to %s", errInterrupted, o.out)
		}
		return err
	}
	if info == nil {
		return nil // not rank 0
	}
	r := info.Result
	fmt.Fprintf(stdout, "\nfine-tuned %d steps (%d epochs, %s loss) in %s\n", r.Steps, len(r.Epochs), e.objective, time.Since(start).Round(time.Second))
	if ep := r.Epochs[r.BestEpoch-1]; ep.EvalLoss != nil {
		fmt.Fprintf(stdout, "best epoch %d: dev loss %.4f\n", ep.Epoch, *ep.EvalLoss)
	}
	fmt.Fprintf(stdout, "model  %s (a sentence-transformers folder: %s pooling, cosine)\n", out, info.Pooling)
	fmt.Fprintf(stdout, "try:   roformer embed --model %s ...\n", out)
	return nil
}

// embedObjective builds the loss from the flags and the training rows:
// matryoshka wraps CoSENT for scored pairs, MNRL otherwise.
func embedObjective(o finetuneOptions, tr *labelled.PairSet) (contrastive.Objective, error) {
	e := &o.embed
	obj := contrastive.Objective{Kind: contrastive.KindMNRL, Scale: e.scale, Symmetric: e.symmetric}
	if e.objective == "cosent" || (e.objective == "matryoshka" && tr.Kind == labelled.ScoredPairs) {
		obj.Kind = contrastive.KindCoSENT
	}
	if obj.Kind == contrastive.KindCoSENT && e.symmetric {
		return obj, usagef("--symmetric is MNRL's; %s holds scored pairs (CoSENT)", tr.File)
	}
	if e.objective == "matryoshka" {
		dir := o.model
		if st, err := sentence.Load(dir); err == nil && st.TransformerPath != "" {
			dir = filepath.Join(dir, st.TransformerPath)
		}
		cfg, err := roformer.LoadConfig(filepath.Join(dir, "config.json"))
		if err != nil {
			return obj, err
		}
		if obj.Dims, err = contrastive.MatryoshkaDims(e.dims, cfg.HiddenSize); err != nil {
			return obj, usageError{err}
		}
	}
	return obj, nil
}
