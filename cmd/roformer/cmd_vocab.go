package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/internal/lines"
	"github.com/roformer-go/roformer/tokenizer"
)

func init() {
	register(&command{name: "vocab", summary: "train a WordPiece or Chinese character+word vocabulary on a corpus and write a tokenizer folder", run: cmdVocab})
}

type vocabOptions struct {
	corpus, out, kind, class string
	size, minFrequency       int
	modelMaxLength           int
	maxLineBytes             int
	cased                    bool
}

func cmdVocab(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("vocab", "--corpus FILE|DIR --size N --out DIR [--kind wordpiece|chinese-word]", stderr)
	var o vocabOptions
	fs.StringVar(&o.corpus, "corpus", "", "a UTF-8 text file, or a folder whose .txt files are read recursively; one text per line (required)")
	fs.IntVar(&o.size, "size", 0, "vocabulary size, special tokens included (required)")
	fs.StringVar(&o.out, "out", "", "folder to write vocab.txt, tokenizer_config.json, special_tokens_map.json and tokenizer.json to: new, empty or holding only those (required)")
	fs.StringVar(&o.kind, "kind", "wordpiece", "wordpiece (HF WordPieceTrainer: BPE merges with ## continuations) or chinese-word (characters + frequent jieba words, as RoFormer's vocabulary)")
	fs.StringVar(&o.class, "class", "", "tokenizer class to record: roformer or bert (default: bert for wordpiece, roformer for chinese-word)")
	fs.IntVar(&o.minFrequency, "min-frequency", 0, "wordpiece: do not merge pairs seen fewer times; chinese-word: drop words seen fewer times (0: the defaults 0 and 2)")
	fs.IntVar(&o.modelMaxLength, "model-max-length", 0, "model_max_length to record (0: no limit)")
	fs.BoolVar(&o.cased, "cased", false, "wordpiece: keep case and accents (default lower-cases and strips accents)")
	maxLineBytesFlag(fs, &o.maxLineBytes)
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
	if err := checkVocabOut(o.out, o.corpus); err != nil {
		return err
	}
	start := time.Now()
	files, err := data.CorpusFiles(o.corpus)
	if err != nil {
		return err
	}
	c := &corpusLines{ctx: ctx, files: files, maxLineBytes: o.maxLineBytes}
	var texts iter.Seq[string] = c.all
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
	if c.err != nil { // the corpus, not the training, stopped it
		return c.err
	}
	if err != nil {
		return fmt.Errorf("vocab: %s: %w", o.corpus, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !c.text {
		return fmt.Errorf("%w: %s has no text", data.ErrEmptyCorpus, o.corpus)
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
		v.Size(), o.kind, kind, c.lines, float64(c.bytes)/1e6, len(files), o.out, time.Since(start).Seconds())
	return nil
}

// corpusLines streams the lines of a corpus's files, one file after
// another, through the toolkit's line reader: each line at most
// maxLineBytes and valid UTF-8, so the corpus is never held whole and a
// bad line stops the training as soon as it is read. err is what stopped
// it (nil at the end of the last file or when the consumer stopped).
type corpusLines struct {
	ctx          context.Context
	files        []string
	maxLineBytes int
	lines, bytes int  // read so far
	text         bool // a line that is not blank was read
	err          error
}

func (c *corpusLines) all(yield func(string) bool) {
	for _, path := range c.files {
		if !c.file(path, yield) {
			return
		}
	}
}

// file yields the lines of one file; false when the iteration is to stop.
func (c *corpusLines) file(path string, yield func(string) bool) bool {
	f, err := os.Open(path)
	if err != nil {
		c.err = fmt.Errorf("vocab: corpus: %w", err)
		return false
	}
	defer f.Close()
	lr := lines.NewReader(f, path, c.maxLineBytes)
	defer func() { c.bytes += int(lr.Offset()) }()
	for {
		b, err := lr.Next()
		if err == io.EOF {
			return true
		}
		if err == nil && bytes.IndexByte(b, 0) >= 0 {
			err = fmt.Errorf("%s:%d: a NUL byte: the file looks binary; the corpus must be UTF-8 text", path, lr.Line())
		}
		if err == nil {
			err = c.ctx.Err()
		}
		if err != nil {
			c.err = fmt.Errorf("vocab: %w", err)
			return false
		}
		c.lines++
		c.text = c.text || len(bytes.TrimSpace(b)) > 0
		if !yield(string(b)) {
			return false
		}
	}
}

// vocabOutFiles are the files vocab writes in --out (tokenizer.Save).
var vocabOutFiles = []string{tokenizer.VocabFile, tokenizer.ConfigFile, tokenizer.SpecialTokensFile, tokenizer.TokenizerJSONFile}

// checkVocabOut refuses an --out that vocab would overwrite something in:
// a folder holding anything but the files vocab writes (a model folder's
// config.json and weights, whose vocabulary must not change under them,
// or any other file), and one that is, or lies inside, the --corpus folder,
// or holds the --corpus file (the input). A missing or empty folder, or a
// tokenizer folder vocab wrote, is fine.
func checkVocabOut(out, corpus string) error {
	ents, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var other []string
	for _, e := range ents {
		if !slices.Contains(vocabOutFiles, e.Name()) {
			other = append(other, e.Name())
		}
	}
	if len(other) > 0 {
		return fmt.Errorf("--out %s holds %s, not only the tokenizer files vocab writes (%s): they are not overwritten; choose an empty or new folder",
			out, strings.Join(other[:min(len(other), 4)], ", "), strings.Join(vocabOutFiles, ", "))
	}
	cst, err := os.Stat(corpus)
	if err != nil {
		return nil // reading the corpus reports it
	}
	if cst.IsDir() {
		c, err1 := filepath.EvalSymlinks(corpus)
		o, err2 := filepath.EvalSymlinks(out)
		if rel, err := filepath.Rel(c, o); err1 == nil && err2 == nil && err == nil && filepath.IsLocal(rel) {
			return fmt.Errorf("--out %s is inside the --corpus folder %s: the vocabulary would be written into its input; choose a folder outside it", out, corpus)
		}
		return nil
	}
	for _, name := range vocabOutFiles {
		if st, err := os.Stat(filepath.Join(out, name)); err == nil && os.SameFile(st, cst) {
			return fmt.Errorf("--out %s: its %s is the --corpus file: it is not overwritten; choose another folder", out, name)
		}
	}
	return nil
}
