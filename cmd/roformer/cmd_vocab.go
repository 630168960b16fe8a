package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/tokenizer"
)

func init() {
	register(&command{name: "vocab", summary: "train a WordPiece or Chinese character+word vocabulary on a corpus and write a tokenizer folder", run: cmdVocab})
}

type vocabOptions struct {
	corpus, out, kind, class string
	size, minFrequency       int
	modelMaxLength           int
	cased                    bool
}

func cmdVocab(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("vocab", "--corpus FILE|DIR --size N --out DIR [--kind wordpiece|chinese-word]", stderr)
	var o vocabOptions
	fs.StringVar(&o.corpus, "corpus", "", "a UTF-8 text file, or a folder whose .txt files are read recursively; one text per line (required)")
	fs.IntVar(&o.size, "size", 0, "vocabulary size, special tokens included (required)")
	fs.StringVar(&o.out, "out", "", "folder to write vocab.txt, tokenizer_config.json, special_tokens_map.json and tokenizer.json to (required)")
	fs.StringVar(&o.kind, "kind", "wordpiece", "wordpiece (HF WordPieceTrainer: BPE merges with ## continuations) or chinese-word (characters + frequent jieba words, as RoFormer's vocabulary)")
	fs.StringVar(&o.class, "class", "", "tokenizer class to record: roformer or bert (default: bert for wordpiece, roformer for chinese-word)")
	fs.IntVar(&o.minFrequency, "min-frequency", 0, "wordpiece: do not merge pairs seen fewer times; chinese-word: drop words seen fewer times (0: the defaults 0 and 2)")
	fs.IntVar(&o.modelMaxLength, "model-max-length", 0, "model_max_length to record (0: no limit)")
	fs.BoolVar(&o.cased, "cased", false, "wordpiece: keep case and accents (default lower-cases and strips accents)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.corpus == "" || o.out == "" || o.size == 0 {
		return usagef("--corpus, --size and --out are required")
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if o.size < len(tokenizer.DefaultSpecialTokens)+1 {
		return usagef("--size %d is too small: the %d special tokens alone take that much", o.size, len(tokenizer.DefaultSpecialTokens))
	}
	if o.minFrequency < 0 || o.modelMaxLength < 0 {
		return usagef("--min-frequency and --model-max-length must not be negative")
	}
	switch o.kind {
	case "wordpiece", "chinese-word":
	default:
		return usagef("--kind %q: want wordpiece or chinese-word", o.kind)
	}
	if o.class != "" {
		if _, err := tokenizer.ParseKind(o.class); err != nil {
			return usageError{err}
		}
	}
	return runVocab(ctx, o, stderr)
}

// runVocab trains the vocabulary and writes the tokenizer folder; it reports
// what it did on log.
func runVocab(ctx context.Context, o vocabOptions, log io.Writer) error {
	start := time.Now()
	docs, err := data.ReadCorpus(o.corpus)
	if err != nil {
		return err
	}
	var nLines, nBytes int
	lines := func(yield func(string) bool) {
		for _, d := range docs {
			for line := range strings.Lines(d.Text) {
				if ctx.Err() != nil {
					return
				}
				nLines++
				nBytes += len(line)
				if !yield(line) {
					return
				}
			}
		}
	}
	var texts iter.Seq[string] = lines
	var v *tokenizer.Vocab
	kind := tokenizer.Bert
	cfg := tokenizer.DefaultConfig(kind)
	switch o.kind {
	case "wordpiece":
		opts := tokenizer.DefaultTrainOptions()
		opts.VocabSize = o.size
		opts.MinFrequency = o.minFrequency
		opts.Lowercase = !o.cased
		v, err = tokenizer.TrainWordPiece(texts, opts)
		cfg.DoLowerCase = !o.cased
	case "chinese-word":
		kind = tokenizer.RoFormer
		v, err = tokenizer.TrainChineseWords(texts, tokenizer.ChineseVocabOptions{VocabSize: o.size, MinWordFrequency: o.minFrequency})
	}
	if err != nil {
		return fmt.Errorf("vocab: %s: %w", o.corpus, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.class != "" {
		if kind, err = tokenizer.ParseKind(o.class); err != nil {
			return err
		}
	}
	cfg.Kind = kind
	cfg.ModelMaxLength = o.modelMaxLength
	tok, err := tokenizer.New(v, cfg)
	if err != nil {
		return err
	}
	if err := tok.Save(o.out); err != nil {
		return err
	}
	fmt.Fprintf(log, "roformer vocab: %d tokens (%s, %s) from %d lines (%.1f MB) of %d files, written to %s in %.1fs\n",
		v.Size(), o.kind, kind, nLines, float64(nBytes)/1e6, len(docs), o.out, time.Since(start).Seconds())
	return nil
}
