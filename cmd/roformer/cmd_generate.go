package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

func init() {
	register(&command{name: "generate", summary: "continue token ids or a text with a causal-LM (or RoFormer-Sim UniLM) model: greedy, sampling or beam search", run: cmdGenerate})
	register(&command{name: "similar", summary: "RoFormer-Sim: sample sentences like a text and rank them by pooler cosine", run: cmdSimilar})
}

type generateOptions struct {
	model, input, text, output string
	strategy, earlyStopping    string
	maxNew, numBeams, topK     int
	eos                        int
	temperature, topP          float64
	repetition, lengthPenalty  float64
	seed                       uint64
	unilm, quiet               bool
}

// genFlags registers the decoding flags shared by generate and similar.
func genFlags(fs *flag.FlagSet, o *generateOptions, maxNew int, topP float64) {
	fs.IntVar(&o.maxNew, "max-new-tokens", maxNew, "tokens to add to each prompt")
	fs.Float64Var(&o.temperature, "temperature", 1, "sampling: divide the logits by T (> 0)")
	fs.IntVar(&o.topK, "top-k", 0, "sampling: keep the K best ids (0: all)")
	fs.Float64Var(&o.topP, "top-p", topP, "sampling: keep the smallest set of best ids with probability ≥ P, in (0, 1]")
	fs.Float64Var(&o.repetition, "repetition-penalty", 1, "HF's repetition_penalty (> 0; 1: off)")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the sampling draws (the same seed gives the same output)")
}

// checkGenFlags validates the shared flags (usage errors, exit 2).
func checkGenFlags(o *generateOptions) error {
	if o.maxNew < 1 {
		return usagef("--max-new-tokens %d must be at least 1", o.maxNew)
	}
	if !(o.temperature > 0) {
		return usagef("--temperature %g must be positive", o.temperature)
	}
	if o.topK < 0 {
		return usagef("--top-k %d must be ≥ 0", o.topK)
	}
	if !(o.topP > 0 && o.topP <= 1) {
		return usagef("--top-p %g is outside (0, 1]", o.topP)
	}
	if !(o.repetition > 0) {
		return usagef("--repetition-penalty %g must be positive", o.repetition)
	}
	return nil
}

func cmdGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, early, th, err := parseGenerate(args, stderr)
	if err != nil {
		return err
	}
	if err := setupCompute(th, stderr, o.quiet); err != nil {
		return err
	}
	m, err := openGenerator(&o.model, o.text != "", stderr, o.quiet)
	var tokErr *pipeline.TokenizerError
	if errors.As(err, &tokErr) {
		return fmt.Errorf("--text needs the folder's tokenizer: %w", tokErr.Err)
	}
	if err != nil {
		return err
	}
	var prompts [][]int32
	if o.text != "" {
		// HF's text-generation pipeline adds no special tokens; RoFormer-Sim
		// encodes [CLS] text [SEP] and continues after it.
		enc, err := m.Tokenizer.Encode(o.text, tokenizer.EncodeOptions{NoSpecialTokens: !o.unilm})
		if err != nil {
			return err
		}
		prompts = [][]int32{tokenizer.Int32s(enc.IDs)}
	} else if prompts, err = readPrompts(o.input); err != nil {
		return err
	}
	gen, err := o.generate(ctx, m.Model, prompts, early)
	if err != nil {
		return err
	}
	return writeGenerated(o, m.Tokenizer, prompts, gen, stdout)
}

// parseGenerate parses and checks generate's flags (usage errors, exit 2);
// it returns them with --early-stopping parsed and --threads.
func parseGenerate(args []string, stderr io.Writer) (o *generateOptions, early generate.EarlyStopping, threads int, err error) {
	fs := newFlags("generate", "--model DIR (--input IN.json | --text \"...\") --max-new-tokens N [--strategy greedy|sample|beam] [--unilm] [--output OUT.json]", stderr)
	o = &generateOptions{}
	fs.StringVar(&o.model, "model", "", "model folder: config.json and weights with an LM head (causal-LM, or masked-LM used causally) (required)")
	fs.StringVar(&o.input, "input", "", `JSON file {"input_ids": [[...], ...]}: one prompt per row, rows may differ in length (left-padded); - for stdin`)
	fs.StringVar(&o.text, "text", "", "a text to continue, through the folder's tokenizer (instead of --input); prints the decoded continuation")
	fs.StringVar(&o.output, "output", "", `write {"sequences": [[prompt + new ids], ...]} here (default: stdout, unless --text)`)
	fs.StringVar(&o.strategy, "strategy", "greedy", "greedy, sample or beam")
	fs.BoolVar(&o.unilm, "unilm", false, "RoFormer-Sim's UniLM decoding: the prompt bidirectional (type 0), new tokens type 1")
	fs.IntVar(&o.numBeams, "num-beams", 1, "beam search: beams per prompt (≥ 1)")
	fs.Float64Var(&o.lengthPenalty, "length-penalty", 1, "beam search: a hypothesis scores sum(log p) / length^P")
	fs.StringVar(&o.earlyStopping, "early-stopping", "false", "beam search: false (HF's heuristic), true or never")
	fs.IntVar(&o.eos, "eos", -1, "end a row at this id (-1: no EOS)")
	fs.BoolVar(&o.quiet, "quiet", false, "do not print the BLAS line on stderr")
	genFlags(fs, o, 0, 1)
	th := threadsFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, 0, 0, err
	}
	switch {
	case o.model == "":
		err = usagef("--model is required")
	case (o.input == "") == (o.text == ""):
		err = usagef("give exactly one of --input and --text")
	case fs.NArg() > 0:
		err = usagef("unexpected arguments %q", fs.Args())
	default:
		err = checkGenFlags(o)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	switch o.strategy {
	case generate.Greedy, generate.Sample, generate.Beam:
	default:
		return nil, 0, 0, usagef("--strategy %q is not greedy, sample or beam", o.strategy)
	}
	switch {
	case o.numBeams < 1:
		err = usagef("--num-beams %d must be at least 1", o.numBeams)
	case o.numBeams > 1 && o.strategy != generate.Beam:
		err = usagef("--num-beams %d needs --strategy beam", o.numBeams)
	case o.eos < -1:
		err = usagef("--eos %d must be an id or -1", o.eos)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	early, err = parseEarlyStopping(o.earlyStopping)
	if err != nil {
		return nil, 0, 0, err
	}
	return o, early, *th, nil
}

// writeGenerated writes the sequences as JSON to --output, and to stdout
// unless --output is given or --text is: then stdout gets each row's
// decoded continuation.
func writeGenerated(o *generateOptions, tok *tokenizer.Tokenizer, prompts [][]int32, gen *generate.Result, stdout io.Writer) error {
	write := func(w io.Writer) error {
		b, err := json.Marshal(map[string]any{"sequences": gen.Sequences})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if o.output != "" {
		if err := writeFileVia(o.output, write); err != nil {
			return err
		}
	}
	if tok != nil {
		for r, seq := range gen.Sequences {
			fmt.Fprintln(stdout, tok.Decode(continuation(seq[len(prompts[r]):], o.eos), true))
		}
		return nil
	}
	if o.output == "" {
		return write(stdout)
	}
	return nil
}

// generate decodes the prompts (left-padded when ragged) with m's Decoder
// as the flags say.
func (o *generateOptions) generate(ctx context.Context, m *roformer.Model, prompts [][]int32, early generate.EarlyStopping) (*generate.Result, error) {
	mode := roformer.DecodeCausal
	if o.unilm {
		mode = roformer.DecodeUniLM
	}
	gen := generate.Options{
		MaxNewTokens: o.maxNew, EOS: o.eos, Strategy: o.strategy,
		Temperature: o.temperature, TopK: o.topK, TopP: o.topP, Seed: o.seed,
		NumBeams: o.numBeams, LengthPenalty: o.lengthPenalty, EarlyStopping: early,
		RepetitionPenalty: o.repetition,
	}
	// The cost is computed before anything is allocated (as the server
	// does), so that a large --num-beams or --max-new-tokens is an error
	// with the numbers, not an out-of-memory death.
	longest := 1
	for _, p := range prompts {
		longest = max(longest, len(p))
	}
	cost, err := m.GenerateCost(len(prompts), longest, gen)
	if err != nil {
		return nil, err
	}
	if cost.Bytes > maxGenerateBytes {
		return nil, usagef("%d prompts of up to %d tokens, %d new tokens, %d beams would take about %d MiB (the key/value cache and the scores); the limit is %d MiB: lower --num-beams or --max-new-tokens, or give fewer prompts",
			len(prompts), longest, o.maxNew, o.numBeams, cost.Bytes>>20, maxGenerateBytes>>20)
	}
	dec, err := m.NewDecoder(roformer.DecoderOptions{Mode: mode, Pad: true})
	if err != nil {
		return nil, err
	}
	return generate.Generate(ctx, dec, prompts, gen)
}

// maxGenerateBytes bounds the memory of one `roformer generate` run as
// roformer.Model.GenerateCost estimates it.
const maxGenerateBytes = 16 << 30

func parseEarlyStopping(s string) (generate.EarlyStopping, error) {
	switch s {
	case "false":
		return generate.EarlyStopHeuristic, nil
	case "true":
		return generate.EarlyStopOnBeams, nil
	case "never":
		return generate.EarlyStopNever, nil
	}
	return 0, usagef("--early-stopping %q is not false, true or never", s)
}

// openGenerator resolves the --model value and opens the folder with an LM
// head: the one its config's architectures name when that is causal-LM or
// masked-LM (a masked-LM model then decodes causally all the same),
// causal-LM otherwise; the folder's tokenizer too when withTokenizer.
func openGenerator(model *string, withTokenizer bool, stderr io.Writer, quiet bool) (*pipeline.Model, error) {
	lmHead := func(cfg *roformer.Config) roformer.Head {
		switch head := roformer.HeadForConfig(cfg); head {
		case roformer.HeadMaskedLM:
			if !quiet {
				fmt.Fprintf(stderr, "roformer: %s is a masked-LM model; generating with its MLM head\n", *model)
			}
			return head
		case roformer.HeadCausalLM:
			return head
		}
		return roformer.HeadCausalLM
	}
	return openModel(model, "", pipeline.OpenOptions{HeadFor: lmHead, NoTokenizer: !withTokenizer})
}

// readPrompts reads IN.json's input_ids: rows of ids, lengths may differ.
func readPrompts(path string) ([][]int32, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(bufio.NewReader(os.Stdin))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	var in struct {
		InputIDs *[][]int32 `json:"input_ids"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("%s: %w (want {\"input_ids\": [[ids...], ...]})", path, err)
	}
	if in.InputIDs == nil || len(*in.InputIDs) == 0 {
		return nil, fmt.Errorf("%s: input_ids is missing or has no rows", path)
	}
	return *in.InputIDs, nil
}

// continuation returns the new ids up to (without) the EOS, as ints.
func continuation(ids []int32, eos int) []int {
	var out []int
	for _, id := range ids {
		if eos >= 0 && int(id) == eos {
			break
		}
		out = append(out, int(id))
	}
	return out
}

func cmdSimilar(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("similar", "--model SIMDIR --text \"...\" [-n 20] [-k 5]", stderr)
	var o generateOptions
	var n, k int
	var asJSON bool
	fs.StringVar(&o.model, "model", "", "RoFormer-Sim folder: causal-LM weights with a pooler, and its tokenizer (required)")
	fs.StringVar(&o.text, "text", "", "the sentence to find similar ones for (required)")
	fs.IntVar(&n, "n", 20, "candidates to sample")
	fs.IntVar(&k, "k", 5, "candidates to print, the most similar first")
	fs.BoolVar(&asJSON, "json", false, `print [{"text": ..., "score": ...}, ...] instead of lines`)
	genFlags(fs, &o, 32, 0.95)
	th := threadsFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.model == "" || o.text == "" {
		return usagef("--model and --text are required")
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if n < 1 || k < 1 {
		return usagef("-n %d and -k %d must be at least 1", n, k)
	}
	if err := checkGenFlags(&o); err != nil {
		return err
	}
	if err := setupCompute(*th, stderr, true); err != nil {
		return err
	}
	gen, err := openGenerator(&o.model, false, stderr, true)
	if err != nil {
		return err
	}
	if gen.Encoder.Pooler == nil {
		return fmt.Errorf("%s has no pooler (roformer.pooler.dense): similar needs a RoFormer-Sim checkpoint", o.model)
	}
	tok, err := tokenizer.Load(o.model)
	if err != nil {
		return fmt.Errorf("similar needs the folder's tokenizer: %w", err)
	}
	res, err := similar(ctx, gen.Loaded, tok, o, n)
	if err != nil {
		return err
	}
	res = res[:min(k, len(res))]
	if asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	for _, r := range res {
		fmt.Fprintf(stdout, "%.4f\t%s\n", r.Score, r.Text)
	}
	return nil
}

type similarResult struct {
	Text  string  `json:"text"`
	Score float64 `json:"score"`
}

// similar is RoFormer-Sim's recipe: sample n continuations of [CLS] text
// [SEP] in UniLM mode (each ends at [SEP]), drop repeats and the text
// itself, encode the text and every candidate (type 0: bidirectionally,
// under the UniLM rule) and rank the
// candidates by the cosine of their pooler_output to the text's.
func similar(ctx context.Context, gen *roformer.Loaded, tok *tokenizer.Tokenizer, o generateOptions, n int) ([]similarResult, error) {
	enc, err := tok.Encode(o.text, tokenizer.EncodeOptions{})
	if err != nil {
		return nil, err
	}
	prompt := tokenizer.Int32s(enc.IDs)
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = prompt
	}
	sep := tok.SepID()
	o.unilm, o.strategy, o.eos, o.numBeams = true, generate.Sample, sep, 1
	g, err := o.generate(ctx, gen.Model, prompts, generate.EarlyStopHeuristic)
	if err != nil {
		return nil, err
	}
	self := tok.Decode(enc.IDs, true)
	texts := []string{o.text}
	seen := map[string]bool{self: true}
	for _, seq := range g.Sequences {
		t := strings.TrimSpace(tok.Decode(continuation(seq[len(prompt):], sep), true))
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		texts = append(texts, t)
	}
	if len(texts) == 1 {
		return nil, nil
	}
	// The encoder of the same model, with the pooler, under the rule of
	// every encoder pass of a Sim model (roformer.Model.EncoderMask: UniLM,
	// so type-0 text is seen in both directions).
	inputs := make([]tokenizer.Input, len(texts))
	for i, t := range texts {
		inputs[i] = tokenizer.Input{Text: t}
	}
	encs, err := tok.EncodeBatch(inputs, tokenizer.EncodeOptions{Padding: tokenizer.PadLongest})
	if err != nil {
		return nil, err
	}
	B, T := len(encs), encs[0].Len()
	b := &roformer.Batch{B: B, T: T}
	for _, e := range encs {
		b.InputIDs = append(b.InputIDs, tokenizer.Int32s(e.IDs)...)
		b.TokenTypeIDs = append(b.TokenTypeIDs, tokenizer.Int32s(e.TypeIDs)...)
		b.AttentionMask = append(b.AttentionMask, tokenizer.Int32s(e.AttentionMask)...)
	}
	out, err := gen.Forward(ctx, b, nil, roformer.Options{SkipHead: true})
	if err != nil {
		return nil, err
	}
	z := out.PoolerOutput.Data
	H := len(z) / B
	res := make([]similarResult, 0, B-1)
	for i := 1; i < B; i++ {
		res = append(res, similarResult{texts[i], kernels.Cosine(z[:H], z[i*H:i*H+H])})
	}
	sort.SliceStable(res, func(a, b int) bool { return res[a].Score > res[b].Score })
	return res, nil
}
