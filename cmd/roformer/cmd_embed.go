package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/roformer-go/roformer/batchembed"
	"github.com/roformer-go/roformer/distributed"
	roformer "github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/sentence"
	"github.com/roformer-go/roformer/tokenizer"
)

func init() {
	register(&command{name: "embed", summary: "embed a JSONL file: one vector per line, batched, resumable, sharded over the ranks of mpirun", run: cmdEmbed})
}

type embedOptions struct {
	model, input, output string
	precision            string
	pooling, promptName  string
	prompt               *string
	threads              int
	run                  batchembed.Options
	// normalizeSet and truncateSet say that --normalize and --truncate were
	// given (a sentence-transformers folder has its own defaults).
	normalizeSet, truncateSet bool
}

// embedFlags registers the flags of embed on fs.
func embedFlags(fs *flag.FlagSet, o *embedOptions) {
	fs.StringVar(&o.model, "model", "", "model folder or Hugging Face model id (required)")
	fs.StringVar(&o.input, "input", "", `input JSONL: a {"text": …} object per line (optional "text_pair", "id") or a JSON string (required)`)
	fs.StringVar(&o.output, "output", "", "output JSONL, one {\"index\", \"id\", \"embedding\"} per input line, in order; written when every line is done (required)")
	fs.StringVar(&o.pooling, "pooling", "", `"pooler", a sentence-transformers mode ("mean", "cls", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken") or several joined by "+" (default: a sentence-transformers folder's own; else the model's pooler when it has one, as RoFormer-Sim, else mean; as the server's POST /embed)`)
	fs.BoolVar(&o.run.Normalize, "normalize", true, "scale each vector to unit length (as POST /embed; --normalize=false for the raw vectors; a sentence-transformers folder's default is false, as its encode, and its own Normalize module runs either way)")
	fs.IntVar(&o.run.MaxLength, "max-length", 0, "tokens per input with [CLS] and [SEP] (default: a sentence-transformers folder's max_seq_length, else the config's max_position_embeddings); a longer input is an error without --truncate")
	fs.BoolVar(&o.run.Truncate, "truncate", false, "cut inputs longer than --max-length (HF's longest_first, keeping the start; a sentence-transformers folder's default is true, as its encode)")
	fs.StringVar(&o.promptName, "prompt-name", "", "one of a sentence-transformers folder's prompts to put before each text (default: its default_prompt_name)")
	fs.Func("prompt", `the text to put before each text instead of a named prompt ("" for none)`, func(s string) error { o.prompt = &s; return nil })
	fs.IntVar(&o.run.MaxBatch, "batch", pipeline.DefaultMaxBatch, "inputs per forward pass")
	fs.IntVar(&o.run.MaxBatchTokens, "batch-tokens", pipeline.DefaultMaxBatchTokens, "padded tokens (inputs × the longest) per forward pass; a longer input runs alone")
	fs.IntVar(&o.run.Window, "window", 0, "lines sorted by length together and written as one part, the unit of resuming and of sharding (default: 1024, or fewer to make at least 16 parts, but at least 256)")
	fs.StringVar(&o.run.WorkDir, "work", "", "folder of the finished parts, for resuming (default: OUT.jsonl.parts)")
	maxLineBytesFlag(fs, &o.run.MaxLineBytes)
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
	if o.prompt != nil && o.promptName != "" {
		return usagef("--prompt and --prompt-name: give one")
	}
	o.run.PromptName, o.run.Prompt = o.promptName, o.prompt
	o.normalizeSet, o.truncateSet = flagSet(fs, "normalize"), flagSet(fs, "truncate")
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
	m, tok, err := loadEmbedModel(&o)
	if err = distributed.Agree(g, err); err != nil {
		return err
	}
	if st := o.run.Sentence; st != nil && g.Rank() == 0 {
		fmt.Fprintf(stderr, "embed: %s\n", describeSentence(st, o))
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
	fmt.Fprintf(stderr, "embed: %d lines, %d tokens (%d padded) in %.2f s", st.Embedded.Rows, st.Embedded.Tokens, st.Embedded.PaddedTokens, sec)
	if st.Embedded.Rows > 0 && sec > 0 { // rates only when there is something to rate
		fmt.Fprintf(stderr, ": %.1f lines/s, %.0f tokens/s", float64(st.Embedded.Rows)/sec, float64(st.Embedded.Tokens)/sec)
	}
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
// head its config names, and its tokenizer. For a sentence-transformers
// folder it sets o.run.Sentence, and the defaults of its encode where the
// flags did not say: no normalization at the end, truncation to
// max_seq_length.
func loadEmbedModel(o *embedOptions) (*roformer.Model, *tokenizer.Tokenizer, error) {
	m, err := openModel(&o.model, o.precision, pipeline.OpenOptions{})
	if err != nil {
		return nil, nil, err
	}
	if m.Sentence != nil {
		o.run.Sentence = m.Sentence
		if !o.normalizeSet {
			o.run.Normalize = false
		}
		if !o.truncateSet {
			o.run.Truncate = true
		}
	}
	return m.Model, m.Tokenizer, nil
}

// describeSentence says what a sentence-transformers folder makes of the
// vectors, and which flags changed it.
func describeSentence(st *sentence.Folder, o embedOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sentence-transformers folder: pooling %s", st)
	if o.run.Pooling != pipeline.PoolDefault {
		fmt.Fprintf(&b, "; --pooling %s instead", o.run.Pooling)
	}
	if o.run.MaxLength > 0 {
		fmt.Fprintf(&b, "; --max-length %d", o.run.MaxLength)
	}
	switch {
	case o.prompt != nil:
		fmt.Fprintf(&b, "; prompt %q (--prompt)", *o.prompt)
	case o.promptName != "":
		fmt.Fprintf(&b, "; prompt %q (--prompt-name)", o.promptName)
	case st.DefaultPromptName != "":
		fmt.Fprintf(&b, "; prompt %q (its default_prompt_name)", st.DefaultPromptName)
	}
	fmt.Fprintf(&b, "; normalize %v%s, truncate %v%s", o.run.Normalize, setBy(o.normalizeSet, "--normalize", "as its encode"),
		o.run.Truncate, setBy(o.truncateSet, "--truncate", "as its encode"))
	return b.String()
}

func setBy(set bool, flag, def string) string {
	if set {
		return " (" + flag + ")"
	}
	return " (" + def + ")"
}
