package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/term"

	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/pretrain"
	"github.com/roformer-go/roformer/train"
)

func init() {
	register(&command{name: "pretrain", summary: "pretrain a RoFormer with masked-LM on a corpus (default: the built-in English corpus)", run: cmdPretrain})
}

type pretrainOptions struct {
	opts    pretrain.Options
	resume  string
	steps   int
	threads int
	quiet   bool
	group   distributed.Comm // the MPI job's ranks, or this process alone
}

func cmdPretrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pretrain", "[--corpus FILE|DIR] [--size tiny|small|base [--arch v1|v2] | --config FILE.json] [--steps N] [--out DIR] | --resume DIR", stderr)
	def := pretrain.DefaultOptions("")
	var o pretrainOptions
	p := &o.opts
	*p = def
	fs.StringVar(&p.Corpus, "corpus", "", "text file or folder of .txt files (default: the built-in public-domain English corpus)")
	fs.StringVar(&p.Size, "size", def.Size, "model size: tiny, small or base")
	fs.StringVar(&p.ConfigFile, "config", "", "config.json of the model to train (replaces --size; vocab_size must match the vocabulary)")
	fs.StringVar(&p.Arch, "arch", "v1", "variant of the --size preset: v1 (HF's RoFormer) or v2 (RoFormer-V2: RMS norms without weights, no biases, relu)")
	fs.StringVar(&p.Vocab, "vocab", "", "folder with vocab.txt (or the file); default: train a WordPiece vocabulary on the corpus")
	fs.IntVar(&p.VocabSize, "vocab-size", def.VocabSize, "size of the vocabulary trained on the corpus")
	fs.IntVar(&o.steps, "steps", 0, fmt.Sprintf("optimizer steps (default %d; with --resume: extend the run to this many)", def.Train.Steps))
	fs.IntVar(&p.Train.BatchSize, "batch", def.Train.BatchSize, "sequences per micro-batch")
	fs.IntVar(&p.Train.Accum, "accum", 1, "micro-batches per optimizer step (gradients averaged)")
	fs.IntVar(&p.Train.SeqLen, "seq", def.Train.SeqLen, "tokens per sequence, [CLS] and [SEP] included")
	fs.Float64Var(&p.Train.LR, "lr", def.Train.LR, "peak learning rate")
	fs.IntVar(&p.Train.Warmup, "warmup", -1, "warm-up steps (default: 6% of the steps)")
	fs.StringVar(&p.Train.Schedule, "schedule", "linear", "learning-rate schedule after warm-up: constant, linear or cosine")
	fs.Float64Var(&p.Train.WeightDecay, "weight-decay", def.Train.WeightDecay, "AdamW decoupled weight decay (not on biases and LayerNorm)")
	fs.Float64Var(&p.Train.Clip, "clip", def.Train.Clip, "clip the global gradient norm to this (0: off)")
	fs.Float64Var(&p.Train.MaskProb, "mask-prob", 0.15, "fraction of tokens selected for masking (80% [MASK], 10% random, 10% kept)")
	fs.BoolVar(&p.Train.WholeWord, "whole-word", false, "mask whole words (all ## pieces together)")
	var seed uint64
	fs.Uint64Var(&seed, "seed", 1, "seed of the initialisation, data order, masks and dropout")
	fs.IntVar(&p.Train.SaveEvery, "save-every", def.Train.SaveEvery, "steps between checkpoints (0: only at the end)")
	fs.IntVar(&p.Train.EvalEvery, "eval-every", def.Train.EvalEvery, "steps between evaluations on the held-out split (0: only at the end)")
	fs.IntVar(&p.Train.EvalBatches, "eval-batches", def.Train.EvalBatches, "held-out batches per evaluation (0: all)")
	fs.IntVar(&p.Train.LogEvery, "log-every", def.Train.LogEvery, "steps between log lines (without a terminal)")
	fs.StringVar(&p.Train.OutDir, "out", "", "run folder, new or empty (a model folder or other files are refused; continue a run with --resume) (default: runs/pretrain-<date>-<time>)")
	fs.StringVar(&p.Objective, "objective", "mlm", "mlm (masked LM), causal (next token: a RoFormerForCausalLM for generate), unilm (seq2seq LM over --pairs or the corpus cut in two: generate --unilm) or sim (the RoFormer-Sim recipe on --pairs from --init: similar)")
	fs.StringVar(&p.Init, "init", "", "model folder to start from (causal, unilm; required for sim: a v1 or V2 masked-LM checkpoint)")
	fs.StringVar(&p.Pairs, "pairs", "", `unilm and sim: JSONL of {"anchor", "positive"} pairs (unilm: source, target), or "bible" for the Bible task's training pairs`)
	fs.StringVar(&p.CacheDir, "cache", defaultCacheDir(), "folder the built-in tasks are fetched into (--pairs bible)")
	fs.Float64Var(&p.SimScale, "sim-scale", pretrain.DefaultSimScale, "sim: the scale of the in-batch cosine similarities")
	fs.StringVar(&p.PoolerActivation, "pooler-activation", "", "sim: the activation of a pooler added to an --init folder without one (default: its config's pooler_activation, tanh; Su's scripts use linear)")
	fs.StringVar(&p.Train.Precision, "precision", "fp32", "number format of the products in training: fp32, or bf16 (mixed precision: the linear layers' products and softmax attention's (relative-position and UniLM-masked attention from 1,024 tokens) in bfloat16; float32 accumulation, weights and optimizer; needs AVX512_BF16 or AMX)")
	fs.StringVar(&o.resume, "resume", "", "continue the run in this folder from its latest checkpoint")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	th := threadsFlag(fs)
	distributed := distributedFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if p.Arch != "v1" && p.Arch != "v2" {
		return usagef("--arch %q: want v1 or v2", p.Arch)
	}
	if p.ConfigFile != "" && p.Arch != "v1" {
		return usagef("--arch applies to the --size presets; a --config file says norm_type and use_bias itself")
	}
	if p.Pairs != pretrain.BiblePairs {
		p.CacheDir = "" // only the Bible pairs are fetched
	}
	o.threads = *th
	p.Train.Seed = seed
	p.Train.Threads = o.threads
	if o.steps > 0 {
		p.Train.Steps = o.steps
	} else if o.steps < 0 {
		return usagef("--steps %d must be positive", o.steps)
	}
	if p.Train.Warmup < 0 {
		p.Train.Warmup = p.Train.Steps * 6 / 100
	}
	if o.resume != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name := range set {
			switch name {
			case "resume", "steps", "threads", "quiet", "distributed":
			default:
				return usagef("--resume takes only --steps, --threads, --distributed and --quiet: the run keeps the settings it started with (--%s given)", name)
			}
		}
	}
	g, err := joinGroup(*distributed, th, flagSet(fs, "threads"))
	if err != nil {
		return err
	}
	o.group, o.threads, p.Train.Threads = g, *th, *th
	if err := setupCompute(o.threads, stderr, o.quiet || g.Rank() != 0); err != nil {
		return leaveGroup(g, "pretrain", err, stderr)
	}
	return leaveGroup(g, "pretrain", runPretrain(ctx, o, stdout, stderr), stderr)
}

func runPretrain(ctx context.Context, o pretrainOptions, stdout, stderr io.Writer) error {
	if o.group == nil {
		o.group = distributed.Local()
	}
	stdout, progress := rankOutputs(o.group, o.quiet, stdout, stderr)
	if o.group.Size() > 1 && o.group.Rank() == 0 {
		fmt.Fprintf(progress, "roformer: %v\n", o.group)
	}
	terminal := false
	if f, ok := progress.(*os.File); ok {
		terminal = term.IsTerminal(int(f.Fd()))
	}
	start := time.Now()
	var job *pretrain.Job
	var res *pretrain.Result
	var err error
	var dir string
	if o.resume != "" {
		dir = o.resume
		job, res, err = pretrain.Resume(ctx, dir, o.steps, o.threads, o.group, progress, terminal)
	} else {
		if o.opts.Train.OutDir == "" {
			o.opts.Train.OutDir = filepath.Join("runs", "pretrain-"+time.Now().Format("20060102-150405"))
			// the ranks' clocks may turn a second apart: rank 0 names it
			if o.opts.Train.OutDir, err = bcastString(o.group, o.opts.Train.OutDir); err != nil {
				return err
			}
		}
		dir = o.opts.Train.OutDir
		o.opts.Group = o.group
		job, res, err = pretrain.Start(ctx, o.opts, progress, terminal)
	}
	if err != nil {
		if errors.Is(err, pretrain.ErrInterrupted) && res != nil {
			return fmt.Errorf("%w: checkpoint saved at step %d in %s; continue with: roformer pretrain --resume %s", errInterrupted, res.Step, res.Checkpoint, dir)
		}
		if errors.Is(err, train.ErrNonFinite) {
			return fmt.Errorf("%w\nthe last good checkpoint is untouched; try a lower --lr or --clip 1, then --resume %s", err, dir)
		}
		return err
	}
	fmt.Fprintf(stdout, "\ntrained %d steps in %s\n", res.Step, time.Since(start).Round(time.Second))
	if job != nil && job.Options.Objective != "" && job.Options.Objective != pretrain.ObjectiveMLM {
		return printLMRun(stdout, job.Options.Objective, dir, res)
	}
	fmt.Fprintf(stdout, "final training loss %.4f; held-out MLM loss %.4f, accuracy %.2f%%, perplexity %.2f\n",
		res.Loss, res.EvalLoss, 100*res.EvalAccuracy, res.EvalPerplexity)
	loads := "loads in HF's RoFormerForMaskedLM"
	if job != nil && job.Model.Config.RMSNorm() {
		loads = "RoFormer-V2: loads in JunnYu/RoFormer_pytorch's RoFormerForMaskedLM; HF's own RoFormer ignores norm_type"
	}
	fmt.Fprintf(stdout, "model    %s (config.json, model.safetensors, vocab.txt: %s)\n", dir, loads)
	fmt.Fprintf(stdout, "metrics  %s\n", filepath.Join(dir, "metrics.jsonl"))
	fmt.Fprintf(stdout, "plot     %s\n", filepath.Join(dir, "loss.png"))
	if !math.IsNaN(res.EvalLoss) {
		fmt.Fprintln(stdout, "\nfill-mask with the trained model:")
		for _, s := range []string{"the president of the united [MASK]", "call me [MASK].", "the whale [MASK] the ship.", "we must [MASK] our economy."} {
			preds, err := pipeline.FillMask(ctx, job.Model, job.Tokenizer, s, 5)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "  %-40s", s)
			for _, p := range preds[0] {
				fmt.Fprintf(stdout, " %s (%.2f)", p.Token, p.Score)
			}
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "\ntry: roformer fill-mask --model %s \"your text with [MASK]\"\n", dir)
	}
	return nil
}

// printLMRun reports a causal, unilm or sim run and how to use its model.
func printLMRun(stdout io.Writer, objective, dir string, res *pretrain.Result) error {
	fmt.Fprintf(stdout, "final training loss %.4f; held-out LM loss %.4f, next-token accuracy %.2f%%, perplexity %.2f\n",
		res.Loss, res.EvalLoss, 100*res.EvalAccuracy, res.EvalPerplexity)
	fmt.Fprintf(stdout, "model    %s (config.json: RoFormerForCausalLM, is_decoder true; model.safetensors, vocab.txt)\n", dir)
	fmt.Fprintf(stdout, "metrics  %s\n", filepath.Join(dir, "metrics.jsonl"))
	switch objective {
	case pretrain.ObjectiveCausal:
		fmt.Fprintf(stdout, "\ntry: roformer generate --model %s --text \"the whale\" --max-new-tokens 20\n", dir)
	case pretrain.ObjectiveUniLM:
		fmt.Fprintf(stdout, "\ntry: roformer generate --model %s --unilm --text \"the whale\" --max-new-tokens 20\n", dir)
	default:
		fmt.Fprintf(stdout, "\ntry: roformer similar --model %s --text \"your sentence\"\n", dir)
	}
	return nil
}
