package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/roformer-go/roformer/internal/lines"
	"github.com/roformer-go/roformer/tokenizer"
)

func init() {
	register(&command{name: "tokenize", summary: "tokenize texts as Hugging Face's RoFormerTokenizer/BertTokenizer do; one JSON line per text", run: cmdTokenize})
}

type tokenizeOptions struct {
	model, input, output string
	class                string // "" : as the folder says
	maxLength            int
	truncation, padding  string
	noSpecialTokens      bool
	texts                []string
	stdin                io.Reader // JSON lines when neither input nor texts are given
	batchLines           int       // lines encoded together (parallel); 0: 1024
	maxLineBytes         int       // longest line of the input (0: the default)
}

func cmdTokenize(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", "--model DIR [--input IN.jsonl] [--output OUT.jsonl] [--max-length N] [TEXT...]", stderr)
	var o tokenizeOptions
	fs.StringVar(&o.model, "model", "", "model or tokenizer folder: vocab.txt or tokenizer.json, optional tokenizer_config.json, special_tokens_map.json, config.json (required)")
	fs.StringVar(&o.input, "input", "", `JSON lines {"text": ...} or {"text": ..., "text_pair": ...}; - for stdin (default: the TEXT arguments, else stdin)`)
	fs.StringVar(&o.output, "output", "", "write the JSON lines here instead of stdout")
	fs.StringVar(&o.class, "class", "", "override the tokenizer class: roformer or bert (default: from tokenizer_config.json, else roformer)")
	fs.IntVar(&o.maxLength, "max-length", 0, "truncate to this many tokens, special tokens included (0: no limit)")
	fs.StringVar(&o.truncation, "truncation", "auto", "longest_first, only_first, only_second or do_not_truncate (auto: longest_first when --max-length is set and there is no padding)")
	fs.StringVar(&o.padding, "padding", "do_not_pad", "do_not_pad, longest (over all inputs) or max_length")
	fs.BoolVar(&o.noSpecialTokens, "no-special-tokens", false, "leave out [CLS] and [SEP]")
	maxLineBytesFlag(fs, &o.maxLineBytes)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.model == "" {
		return usagef("--model is required")
	}
	o.texts = fs.Args()
	if o.input != "" && len(o.texts) > 0 {
		return usagef("give either --input or TEXT arguments, not both")
	}
	if o.maxLength < 0 {
		return usagef("--max-length %d must not be negative", o.maxLength)
	}
	if _, err := tokenizer.ParseTruncation(o.truncation); err != nil {
		return usageError{err}
	}
	if _, err := tokenizer.ParsePadding(o.padding); err != nil {
		return usageError{err}
	}
	if o.class != "" {
		if _, err := tokenizer.ParseKind(o.class); err != nil {
			return usageError{err}
		}
	}
	o.stdin = os.Stdin
	if o.output != "" {
		if o.input != "" && o.input != "-" {
			if err := lines.CheckOutput(o.output, o.input); err != nil {
				return err
			}
		}
		return writeFileVia(o.output, func(w io.Writer) error { return runTokenize(ctx, o, w) })
	}
	return runTokenize(ctx, o, stdout)
}

// tokenizeInputLine is one line of IN.jsonl.
type tokenizeInputLine struct {
	Text     *string `json:"text"`
	TextPair *string `json:"text_pair"`
}

// runTokenize writes one JSON line per input: input_ids, token_type_ids,
// attention_mask, tokens and offsets (byte offsets into the input text the
// token came from; [0, 0] for added special tokens and padding).
func runTokenize(ctx context.Context, o tokenizeOptions, w io.Writer) error {
	if err := resolveModel(&o.model); err != nil {
		return err
	}
	tok, opts, err := tokenizeSetup(o)
	if err != nil {
		return err
	}
	batchLines := o.batchLines
	if batchLines <= 0 {
		batchLines = 1024
	}
	if opts.Padding == tokenizer.PadLongest {
		batchLines = int(^uint(0) >> 1) // one batch: pad to the longest of all inputs
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	flush := func(inputs []tokenizer.Input, first int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		encs, err := tok.EncodeBatch(inputs, opts)
		if be := (*tokenizer.BatchError)(nil); errors.As(err, &be) {
			return fmt.Errorf("input %d: %w", first+be.Index+1, be.Err)
		}
		if err != nil {
			return err
		}
		for _, e := range encs {
			line = appendEncodingJSON(line[:0], e)
			if _, err := bw.Write(line); err != nil {
				return err
			}
		}
		return nil
	}

	if len(o.texts) > 0 {
		inputs := make([]tokenizer.Input, len(o.texts))
		for i, s := range o.texts {
			inputs[i] = tokenizer.Input{Text: s}
		}
		if err := flush(inputs, 0); err != nil {
			return err
		}
		return bw.Flush()
	}
	var r io.Reader = o.stdin
	name := "stdin"
	if o.input != "" && o.input != "-" {
		f, err := os.Open(o.input)
		if err != nil {
			return err
		}
		defer f.Close()
		r, name = f, o.input
	}
	if r == nil {
		return usagef("no input: give TEXT arguments, --input or JSON lines on stdin")
	}
	if err := readInputLines(r, name, o.maxLineBytes, batchLines, flush); err != nil {
		return err
	}
	return bw.Flush()
}

// tokenizeSetup loads the model folder's tokenizer (as another class with
// --class) and reads the encoding flags.
func tokenizeSetup(o tokenizeOptions) (*tokenizer.Tokenizer, tokenizer.EncodeOptions, error) {
	var opts tokenizer.EncodeOptions
	tok, err := tokenizer.Load(o.model)
	if err != nil {
		return nil, opts, err
	}
	if o.class != "" {
		kind, err := tokenizer.ParseKind(o.class)
		if err != nil {
			return nil, opts, err
		}
		if kind != tok.Kind() {
			cfg := tok.Config()
			cfg.Kind = kind
			if tok, err = tokenizer.New(tok.Vocab(), cfg); err != nil {
				return nil, opts, err
			}
		}
	}
	trunc, err := tokenizer.ParseTruncation(o.truncation)
	if err != nil {
		return nil, opts, err
	}
	pad, err := tokenizer.ParsePadding(o.padding)
	if err != nil {
		return nil, opts, err
	}
	return tok, tokenizer.EncodeOptions{MaxLength: o.maxLength, Truncation: trunc, Padding: pad, NoSpecialTokens: o.noSpecialTokens}, nil
}

// readInputLines reads JSON lines ({"text": …, "text_pair": …}; blank
// lines skipped) from r, each at most maxLineBytes and valid UTF-8
// (internal/lines), and hands them to flush in batches of batchLines, with
// the index of each batch's first input.
func readInputLines(r io.Reader, name string, maxLineBytes, batchLines int, flush func(inputs []tokenizer.Input, first int) error) error {
	var inputs []tokenizer.Input
	first := 0
	err := lines.Each(r, name, maxLineBytes, func(line int, raw []byte) error {
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		var in tokenizeInputLine
		if err := json.Unmarshal(raw, &in); err != nil {
			return fmt.Errorf("%s line %d: %w", name, line, err)
		}
		if in.Text == nil {
			return fmt.Errorf(`%s line %d: no "text" field`, name, line)
		}
		inputs = append(inputs, tokenizer.Input{Text: *in.Text, TextPair: in.TextPair})
		if len(inputs) < batchLines {
			return nil
		}
		err := flush(inputs, first)
		first += len(inputs)
		inputs = inputs[:0]
		return err
	})
	if err != nil {
		return err
	}
	if len(inputs) > 0 {
		return flush(inputs, first)
	}
	return nil
}

// appendEncodingJSON writes one output line without reflection.
func appendEncodingJSON(b []byte, e *tokenizer.Encoding) []byte {
	ints := func(b []byte, key string, v []int) []byte {
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":[`...)
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(x), 10)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	b = ints(b, "input_ids", e.IDs)
	b = append(b, ',')
	b = ints(b, "token_type_ids", e.TypeIDs)
	b = append(b, ',')
	b = ints(b, "attention_mask", e.AttentionMask)
	b = append(b, `,"tokens":[`...)
	for i, t := range e.Tokens {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, t)
	}
	b = append(b, `],"offsets":[`...)
	for i, o := range e.Offsets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(o[0]), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(o[1]), 10)
		b = append(b, ']')
	}
	return append(b, "]}\n"...)
}

// appendJSONString quotes s as a JSON string (UTF-8 kept, control
// characters and invalid bytes escaped).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else if r == 0x2028 || r == 0x2029 {
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
