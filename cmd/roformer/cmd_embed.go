package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/roformer-go/roformer/batchembed"
	"github.com/roformer-go/roformer/distributed"
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
	run                  batchembed.Options
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
	fs.IntVar(&o.run.Window, "window", 0, "lines sorted by length together and written as one part, the unit of resuming and of sharding (default: 1024, or fewer to make at least 16 parts, but at least 256)")
	fs.StringVar(&o.run.WorkDir, "work", "", "folder of the finished parts, for resuming (default: OUT.jsonl.parts)")
	computeFlags(fs, &o.precision, &o.threads)
}

func cmdEmbed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("embed", "--model DIR --input IN.jsonl --output OUT.jsonl", stderr)
	var o embedOptions
	embedFlags(fs, &o)
	distributed := fs.Bool("distributed", false, "run as one rank of an MPI job (Open MPI, loaded at run time; automatic under Open MPI's mpirun): each rank embeds its share of the parts, rank 0 writes the output")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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
	g, err := joinGroup(*distributed, &o.threads, flagSet(fs, "threads"))
	if err != nil {
		return err
	}
	if err := setupCompute(o.threads, stderr, true); err != nil {
		return leaveEmbed(g, err)
	}
	return leaveEmbed(g, runEmbed(ctx, o, g, stderr))
}

// leaveEmbed ends embed's part in an MPI job. runEmbed returns on every
// rank together (the ranks agree after loading, and batchembed.Run returns on
// all at once), so every rank leaves with MPI_Finalize; a rank other than 0
// keeps quiet about a failure that is not its own (rank 0 names the rank
// that failed and, when the failure was in embedding, what it said).
func leaveEmbed(g distributed.Comm, err error) error {
	if g.Size() == 1 {
		return err
	}
	if cerr := g.Close(); err == nil {
		return cerr
	}
	if g.Rank() != 0 && (errors.Is(err, distributed.ErrOtherRank) || errors.Is(err, batchembed.ErrOtherRank) || errors.Is(err, errInterrupted)) {
		return quietError{err}
	}
	if g.Rank() != 0 {
		return fmt.Errorf("rank %d of %d: %w", g.Rank(), g.Size(), err)
	}
	return err
}

// runEmbed loads the model and embeds the input, as rank g.Rank() of g;
// rank 0 prints where it stands (at most every 10 s) and what the ranks did
// to stderr.
func runEmbed(ctx context.Context, o embedOptions, g distributed.Comm, stderr io.Writer) error {
	m, tok, err := loadEmbedModel(o)
	if err = distributed.Agree(g, err); err != nil {
		return err
	}
	o.run.Group = g
	last := time.Now()
	o.run.Progress = func(p batchembed.Progress) {
		if p.Rank == 0 && time.Since(last) >= 10*time.Second && p.Done < p.Parts {
			last = time.Now()
			whose := ""
			if p.Ranks > 1 {
				whose = " of rank 0's"
			}
			fmt.Fprintf(stderr, "embed: %d%s %d parts done; %d lines, %.0f lines/s\n", p.Done, whose, p.Parts, p.Lines, float64(p.Lines)/p.Elapsed.Seconds())
		}
	}
	st, err := batchembed.Run(ctx, m, tok, o.input, o.output, o.run)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: the finished parts are kept; run the same command again to continue", errInterrupted)
	}
	if err != nil || g.Rank() != 0 {
		return err
	}
	sec := st.Embedding.Seconds()
	fmt.Fprintf(stderr, "embed: %d lines, %d tokens (%d padded) in %.2f s: %.1f lines/s, %.0f tokens/s", st.Embedded.Rows,
		st.Embedded.Tokens, st.Embedded.PaddedTokens, sec, float64(st.Embedded.Rows)/sec, float64(st.Embedded.Tokens)/sec)
	if st.Ranks > 1 {
		fmt.Fprintf(stderr, " on %d ranks", st.Ranks)
	}
	if st.Truncated > 0 {
		fmt.Fprintf(stderr, "; %d inputs truncated", st.Truncated)
	}
	if st.Resumed > 0 {
		fmt.Fprintf(stderr, "; %d of %d parts were done before", st.Resumed, st.Parts)
	}
	fmt.Fprintf(stderr, "; wrote %d lines to %s\n", st.Lines, o.output)
	return nil
}

// loadEmbedModel opens the model folder (or Hugging Face id) of o with the
// head its config names, and its tokenizer.
func loadEmbedModel(o embedOptions) (*roformer.Model, *tokenizer.Tokenizer, error) {
	m, err := openModel(&o.model, o.precision, pipeline.OpenOptions{})
	if err != nil {
		return nil, nil, err
	}
	return m.Model, m.Tokenizer, nil
}
