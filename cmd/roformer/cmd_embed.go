package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/roformer-go/roformer/embed"
	roformer "github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

func init() {
	register(&command{name: "embed", summary: "embed a JSONL file: one vector per line, batched, resumable, sharded over the ranks of mpirun", run: cmdEmbed})
}

type embedOptions struct {
	model, input, output string
	precision            string
	pooling              string
	threads              int
	run                  embed.Options
}

// embedFlags registers the flags of embed on fs.
func embedFlags(fs *flag.FlagSet, o *embedOptions) {
	fs.StringVar(&o.model, "model", "", "model folder or Hugging Face model id (required)")
	fs.StringVar(&o.input, "input", "", `input JSONL: a {"text": …} object per line (optional "text_pair", "id") or a JSON string (required)`)
	fs.StringVar(&o.output, "output", "", "output JSONL, one {\"index\", \"id\", \"embedding\"} per input line, in order; written when every line is done (required)")
	fs.StringVar(&o.pooling, "pooling", "", `"mean", "cls" or "pooler" (default: the model's pooler when it has one, as RoFormer-Sim, else mean; as the server's POST /embed)`)
	fs.BoolVar(&o.run.Normalize, "normalize", true, "scale each vector to unit length (as POST /embed; --normalize=false for the raw vectors)")
	fs.IntVar(&o.run.MaxLength, "max-length", 0, "tokens per input with [CLS] and [SEP] (default: the config's max_position_embeddings); a longer input is an error without --truncate")
	fs.BoolVar(&o.run.Truncate, "truncate", false, "cut inputs longer than --max-length (HF's longest_first, keeping the start)")
	fs.IntVar(&o.run.MaxBatch, "batch", pipeline.DefaultMaxBatch, "inputs per forward pass")
	fs.IntVar(&o.run.MaxBatchTokens, "batch-tokens", pipeline.DefaultMaxBatchTokens, "padded tokens (inputs × the longest) per forward pass; a longer input runs alone")
	fs.IntVar(&o.run.Window, "window", 0, "lines sorted by length together and written as one part, the unit of resuming and of sharding (default: 1024, or fewer to make at least 64 parts, but at least 64)")
	fs.StringVar(&o.run.WorkDir, "work", "", "folder of the finished parts, for resuming (default: OUT.jsonl.parts)")
	precisionFlag(fs, &o.precision)
}

func cmdEmbed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("embed", "--model DIR --input IN.jsonl --output OUT.jsonl", stderr)
	var o embedOptions
	embedFlags(fs, &o)
	th := threadsFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o.threads = *th
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.model == "" || o.input == "" || o.output == "":
		return usagef("--model, --input and --output are required")
	case o.input == "-" || o.output == "-":
		return usagef("--input and --output must be files (a run is resumed from them)")
	case o.run.MaxBatch < 1 || o.run.MaxBatchTokens < 1 || o.run.Window < 0:
		return usagef("--batch %d and --batch-tokens %d must be at least 1, --window %d at least 0", o.run.MaxBatch, o.run.MaxBatchTokens, o.run.Window)
	case o.run.MaxLength < 0:
		return usagef("--max-length %d must not be negative", o.run.MaxLength)
	}
	var err error
	if o.run.Pooling, err = pipeline.ParsePooling(o.pooling); err != nil {
		return usagef("--pooling: %v", err)
	}
	if err := setupCompute(o.threads, stderr, true); err != nil {
		return err
	}
	return runEmbed(ctx, o, stderr)
}

// runEmbed loads the model and embeds the input; it prints where it stands
// (at most every 10 s) and what it did to stderr.
func runEmbed(ctx context.Context, o embedOptions, stderr io.Writer) error {
	prec, err := roformer.ParsePrecision(o.precision)
	if err != nil {
		return usagef("--precision: %v", err)
	}
	if err := resolveModel(&o.model); err != nil {
		return err
	}
	cfg, err := roformer.LoadConfig(filepath.Join(o.model, "config.json"))
	if err != nil {
		return err
	}
	l, err := roformer.Load(o.model, roformer.HeadForConfig(&cfg), roformer.LoadOptions{Precision: prec})
	if err != nil {
		return err
	}
	tok, _, err := tokenizer.LoadModelDir(o.model)
	if err != nil {
		return err
	}
	last := time.Now()
	o.run.Progress = func(p embed.Progress) {
		if p.Rank == 0 && (time.Since(last) >= 10*time.Second || p.Done == p.Parts) {
			last = time.Now()
			fmt.Fprintf(stderr, "embed: %d of %d parts done; %d lines, %.0f lines/s\n", p.Done, p.Parts, p.Lines, float64(p.Lines)/p.Elapsed.Seconds())
		}
	}
	st, err := embed.Run(ctx, l.Model, tok, o.input, o.output, o.run)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: the finished parts are kept; run the same command again to continue", errInterrupted)
	}
	if err != nil {
		return err
	}
	sec := st.Embedding.Seconds()
	fmt.Fprintf(stderr, "embed: %d lines, %d tokens (%d padded) in %.2f s: %.1f lines/s, %.0f tokens/s", st.Embedded.Rows,
		st.Embedded.Tokens, st.Embedded.PaddedTokens, sec, float64(st.Embedded.Rows)/sec, float64(st.Embedded.Tokens)/sec)
	if st.Resumed > 0 {
		fmt.Fprintf(stderr, "; %d of %d parts were done before", st.Resumed, st.Parts)
	}
	fmt.Fprintf(stderr, "; wrote %d lines to %s\n", st.Lines, o.output)
	return nil
}
