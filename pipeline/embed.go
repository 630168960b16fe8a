package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/sentence"
	"github.com/roformer-go/roformer/tokenizer"
)

// Pooling names how one vector per input is read from the encoder's output.
// The zero value, PoolDefault, is the folder's pooling for a
// sentence-transformers folder, else what TEI's POST /embed does: the
// model's pooler when it has one (RoFormer-Sim), the mean otherwise. The
// other names are sentence-transformers' pooling modes (several joined by
// "+" are concatenated in its order, "cls+mean") and "pooler".
type Pooling string

// The poolings.
const (
	PoolDefault      Pooling = ""                     // the folder's; else PoolPooler when the model has a pooler, else PoolMean
	PoolMean         Pooling = "mean"                 // the mean of the last hidden state over the attention mask ([CLS] and [SEP] included)
	PoolCLS          Pooling = "cls"                  // the last hidden state at the first position ([CLS])
	PoolMax          Pooling = "max"                  // the maximum over the attention mask, value by value
	PoolMeanSqrtLen  Pooling = "mean_sqrt_len_tokens" // the sum over the attention mask divided by the square root of its size
	PoolWeightedMean Pooling = "weightedmean"         // the mean weighted by position (1, 2, …)
	PoolLastToken    Pooling = "lasttoken"            // the last position of the attention mask ([SEP])
	PoolPooler       Pooling = "pooler"               // the model's pooler on the first position (Output.PoolerOutput; RoFormer-Sim)
)

// ParsePooling returns the pooling named s: "pooler", a
// sentence-transformers mode ("mean", "cls", "max", "mean_sqrt_len_tokens",
// "weightedmean", "lasttoken") or several joined by "+", or "" for
// PoolDefault. Another name is an error that lists the valid ones.
func ParsePooling(s string) (Pooling, error) {
	switch p := Pooling(s); p {
	case PoolDefault, PoolPooler:
		return p, nil
	}
	if _, err := sentence.ParseModes(s, 1); err != nil {
		return "", fmt.Errorf("pipeline: pooling %q: want \"pooler\" or %s, or several of those joined by \"+\"", s, strings.Join(sentence.ModeNames(), ", "))
	}
	return Pooling(s), nil
}

// Resolve returns the pooling p means for m: PoolDefault becomes PoolPooler
// when m has a pooler and PoolMean otherwise (a sentence-transformers
// folder's pooling is EmbedOptions.WithDefaults' to apply). PoolPooler on a
// model without a pooler is an error.
func (p Pooling) Resolve(m *roformer.Model) (Pooling, error) {
	hasPooler := m.Encoder.Pooler != nil
	switch {
	case p == PoolDefault && hasPooler:
		return PoolPooler, nil
	case p == PoolDefault:
		return PoolMean, nil
	case p == PoolPooler && !hasPooler:
		return "", errors.New("pipeline: pooling \"pooler\": the model has no pooler (no roformer.pooler.dense tensors); use \"mean\" or \"cls\"")
	}
	return ParsePooling(string(p))
}

// Pool returns row i's vector of a forward pass over B rows of T positions
// (out.LastHiddenState [B, T, H]; mask [T], row i's attention mask), pooled
// as p says (p resolved, see Pooling.Resolve): sentence.Pooling.Pool's
// formulas, or the pooler's output. Mean pooling, for one, sums in float64
// over the positions in order and divides by their number, so the padding
// of a row changes nothing:
//
//	v[j] = Σ_{t: mask[t]=1} h[i, t, j] / |{t: mask[t]=1}|
func Pool(out *roformer.Output, mask []int32, i int, p Pooling) ([]float32, error) {
	v, err := newVectorizer(p, out.LastHiddenState.Shape[2], nil)
	if err != nil {
		return nil, err
	}
	return v.Vector(out, mask, i, 0)
}

// Normalize scales v to unit Euclidean length, v / max(‖v‖₂, 1e-12), with
// the norm summed in float64 (a zero vector stays zero): the Normalize
// module, sentence.Normalize.
func Normalize(v []float32) { sentence.Normalize(v) }

// Truncate cuts an encoding to n tokens, its added special tokens ([CLS],
// [SEP]) kept: the text's first tokens stay (right truncation, HF's), or
// its last ones (left). For one text it gives what the tokenizer's
// TruncateLongestFirst gives.
func Truncate(enc *tokenizer.Encoding, n int, left bool) (ids, types []int32) {
	special := enc.SpecialTokensMask
	lead, trail := 0, 0
	for lead < len(special) && special[lead] == 1 {
		lead++
	}
	for trail < len(special)-lead && special[len(special)-1-trail] == 1 {
		trail++
	}
	keep := max(n-lead-trail, 0)
	from, to := lead, lead+keep
	if left {
		from, to = len(enc.IDs)-trail-keep, len(enc.IDs)-trail
	}
	pick := func(xs []int) []int32 {
		out := make([]int32, 0, lead+keep+trail)
		for _, x := range xs[:lead] {
			out = append(out, int32(x))
		}
		for _, x := range xs[from:to] {
			out = append(out, int32(x))
		}
		for _, x := range xs[len(xs)-trail:] {
			out = append(out, int32(x))
		}
		return out
	}
	return pick(enc.IDs), pick(enc.TypeIDs)
}

// EmbedInput is one input of Embed: a text, or a pair of texts (encoded
// together, [CLS] a [SEP] b [SEP], the second with token type 1).
type EmbedInput struct {
	Text     string
	TextPair *string
}

// EmbedOptions says how Embed encodes, batches and pools. The zero value of
// a field means its default.
type EmbedOptions struct {
	// Sentence is the folder's sentence-transformers configuration
	// (Model.Sentence; nil for a plain folder). When set, its pooling,
	// Dense and Normalize modules make the vectors, its max_seq_length is
	// the default MaxLength, its do_lower_case lowercases the texts and
	// its default prompt goes before them, as sentence-transformers'
	// encode does; the fields below override it where they are set.
	Sentence *sentence.Folder
	// Pooling (default: the folder's; else the model's pooler when it has
	// one, else the mean, as TEI's POST /embed). Another pooling than the
	// folder's keeps the folder's Dense and Normalize modules, which must
	// then take its vector.
	Pooling Pooling
	// Normalize scales each vector to unit length at the end
	// (sentence-transformers' normalize_embeddings; a folder's Normalize
	// module runs either way).
	Normalize bool
	// PromptName names one of the folder's prompts to put before each
	// text (default: the folder's default_prompt_name, if any). Prompt,
	// when not nil, is the text itself instead ("" for none); giving both
	// is an error.
	PromptName string
	Prompt     *string
	// MaxLength bounds the tokens of an input, [CLS] and [SEP] included
	// (default: the folder's max_seq_length, else the config's
	// max_position_embeddings).
	MaxLength int
	// Truncate cuts longer inputs to MaxLength (HF's longest_first,
	// keeping the start of the text); without it they are an error.
	// (sentence-transformers always truncates.)
	Truncate bool
	// MaxBatch bounds the rows of one forward pass (default 32).
	MaxBatch int
	// MaxBatchTokens bounds the padded tokens of one forward pass (rows ×
	// the longest row; default 16384); a longer input runs alone.
	MaxBatchTokens int

	// Set by WithDefaults.
	vectors    *Vectorizer
	promptText string
	prompt     *promptMemo // the prompt's tokens counted once (PromptSkip)
}

// promptMemo holds what PromptSkip found of a prompt, once; copies of the
// options share it.
type promptMemo struct {
	once sync.Once
	skip int
	err  error
}

// The defaults of EmbedOptions.MaxBatch and EmbedOptions.MaxBatchTokens
// (those of the server's batching).
const (
	DefaultMaxBatch       = 32
	DefaultMaxBatchTokens = 16384
)

// WithDefaults returns o with its defaults for m filled in, its pooling,
// prompt and modules resolved (see Vectorizer); it checks o against m.
func (o EmbedOptions) WithDefaults(m *roformer.Model) (EmbedOptions, error) {
	var err error
	st := o.Sentence
	var steps []sentence.Step
	if st != nil {
		if err := st.Check(m.Config.HiddenSize); err != nil {
			return o, err
		}
		steps = st.Steps
		if o.Pooling == PoolDefault {
			o.Pooling = Pooling(st.Pooling.Modes())
		}
		if o.MaxLength == 0 && st.MaxSeqLength > 0 {
			// Clamped as Open clamps it: rotary positions run past the
			// table, but nothing was trained there and the cost of a row
			// grows with its square (a folder saying 1,048,576 let one
			// request hold the forward pass for long).
			o.MaxLength = st.MaxSeqLength
			if p := m.Config.MaxPositionEmbeddings; p > 0 {
				o.MaxLength = min(o.MaxLength, p)
			}
		}
	}
	if o.Pooling, err = o.Pooling.Resolve(m); err != nil {
		return o, err
	}
	if o.vectors, err = newVectorizer(o.Pooling, m.Config.HiddenSize, steps); err != nil {
		return o, err
	}
	if st != nil && !o.vectors.Pooler && o.vectors.Pooling.Modes() == st.Pooling.Modes() {
		// The folder's pooling, however the modes were spelled, keeps its
		// include_prompt; another pooling includes the prompt.
		o.vectors.Pooling.IncludePrompt = st.Pooling.IncludePrompt
	}
	switch {
	case o.Prompt != nil && o.PromptName != "":
		return o, fmt.Errorf("pipeline: a prompt (%q) and a prompt name (%q): give one", *o.Prompt, o.PromptName)
	case o.Prompt != nil:
		o.promptText = *o.Prompt
	case st != nil:
		if o.promptText, err = st.Prompt(o.PromptName); err != nil {
			return o, err
		}
	case o.PromptName != "":
		return o, fmt.Errorf("pipeline: prompt %q: the model folder has no prompts (no sentence-transformers configuration)", o.PromptName)
	}
	if o.MaxLength == 0 {
		o.MaxLength = m.Config.MaxPositionEmbeddings
	}
	o.prompt = &promptMemo{}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatchTokens == 0 {
		o.MaxBatchTokens = DefaultMaxBatchTokens
	}
	switch {
	case o.MaxLength < 3:
		return o, fmt.Errorf("pipeline: max length %d leaves no room for a token between [CLS] and [SEP]", o.MaxLength)
	case m.Config.PositionEmbeddingType == roformer.PosLearned && o.MaxLength > m.Config.MaxPositionEmbeddings:
		return o, fmt.Errorf("pipeline: max length %d is past the model's learned position table (max_position_embeddings %d)",
			o.MaxLength, m.Config.MaxPositionEmbeddings)
	case o.MaxBatch < 0 || o.MaxBatchTokens < 0:
		return o, fmt.Errorf("pipeline: max batch %d and max batch tokens %d must not be negative", o.MaxBatch, o.MaxBatchTokens)
	}
	return o, nil
}

// Vectorizer returns what makes the vectors of o (after WithDefaults; nil
// before).
func (o EmbedOptions) Vectorizer() *Vectorizer { return o.vectors }

// PromptText returns the prompt o puts before each text (after
// WithDefaults): "" for none.
func (o EmbedOptions) PromptText() string { return o.promptText }

// Text returns the text the model encodes for text t, as
// sentence-transformers' encode prepares it: the prompt before it, then
// surrounding white space trimmed and, when the folder says
// do_lower_case, lowercased as Python's str.lower (sentence.Lower).
func (o EmbedOptions) Text(t string) string {
	return o.PairText(o.promptText + t)
}

// PairText returns a pair's second text as the model encodes it: trimmed
// and lowercased as Text, without a prompt (sentence-transformers puts
// prompts before single texts only).
func (o EmbedOptions) PairText(t string) string {
	t = strings.TrimSpace(t)
	if o.Sentence != nil && o.Sentence.DoLowerCase {
		t = sentence.Lower(t)
	}
	return t
}

// ErrPromptPair is the error for a text pair with a prompt:
// sentence-transformers puts prompts before single texts only.
var ErrPromptPair = errors.New("pipeline: a prompt and a text pair: prompts go before single texts only (sentence-transformers refuses pairs with a prompt)")

// EmbedRow is one encoded input: its token ids and token types.
type EmbedRow struct {
	IDs, TypeIDs []int32
	Truncated    bool // the input was longer than MaxLength and was cut
	// Skip is the leading positions the pooling leaves out: with a prompt
	// and a folder whose pooling does not include it, [CLS] and the
	// prompt's tokens (the prompt's token count alone, [CLS] included, as
	// sentence-transformers counts them: its tokens with [CLS] and [SEP]
	// less one), else 0.
	Skip int
}

// TooLongError is EncodeEmbedInput's error for an input longer than the
// max length, without truncation.
type TooLongError struct{ Tokens, Limit int }

func (e *TooLongError) Error() string {
	return fmt.Sprintf("pipeline: the input has %d tokens; the limit is %d (max length); ask for truncation", e.Tokens, e.Limit)
}

// EncodeEmbedInput encodes in for Embed: its text as o.Text prepares it
// (a pair's second text as o.PairText does; a pair with a prompt is
// ErrPromptPair; a prompt that leaves no room for a token is an error),
// with HF's longest_first truncation to o.MaxLength when o.Truncate is
// set; a longer input without o.Truncate is a *TooLongError with its
// length. Either way the tokenizer reads the text only as far as the row
// needs (tokenizer.EncodeOptions.Limit), so the memory is bounded by
// o.MaxLength whatever the text's length. o must have its defaults
// (EmbedOptions.WithDefaults).
func EncodeEmbedInput(tok *tokenizer.Tokenizer, in EmbedInput, o EmbedOptions) (EmbedRow, error) {
	if in.TextPair != nil {
		if o.promptText != "" {
			return EmbedRow{}, ErrPromptPair
		}
		p := o.PairText(*in.TextPair)
		in.TextPair = &p
	}
	skip, err := PromptSkip(tok, o) // also refuses a prompt that leaves no room for the text
	if err != nil {
		return EmbedRow{}, err
	}
	in.Text = o.Text(in.Text)
	// The tokenizer reads no further than the row needs: the kept tokens
	// with truncation, a count past the limit without.
	opts := tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone, Limit: o.MaxLength}
	if o.Truncate {
		opts = tokenizer.EncodeOptions{MaxLength: o.MaxLength, Truncation: tokenizer.TruncateLongestFirst}
	}
	enc, err := encodeInput(tok, in, opts)
	if le := (*tokenizer.LengthError)(nil); errors.As(err, &le) {
		return EmbedRow{}, &TooLongError{Tokens: le.Tokens, Limit: o.MaxLength}
	}
	if err != nil {
		return EmbedRow{}, err
	}
	truncated := enc.Truncated
	return EmbedRow{IDs: tokenizer.Int32s(enc.IDs), TypeIDs: tokenizer.Int32s(enc.TypeIDs), Truncated: truncated, Skip: skip}, nil
}

// PromptSkip returns EmbedRow.Skip for o's prompt: 0 without a prompt or
// when the pooling includes it, else the tokens of the prompt encoded
// alone with [CLS] and [SEP] (lowercased as the texts) less one, as
// sentence-transformers counts them. A prompt that leaves no room for a
// token of the text within o.MaxLength is an error that says so, whatever
// the pooling. The prompt is tokenized once for o and its copies.
func PromptSkip(tok *tokenizer.Tokenizer, o EmbedOptions) (int, error) {
	if err := o.countPrompt(tok); err != nil {
		return 0, err
	}
	if o.promptText == "" || o.vectors == nil || o.vectors.Pooler || o.vectors.Pooling.IncludePrompt {
		return 0, nil
	}
	return o.prompt.skip, nil
}

// countPrompt tokenizes o's prompt into o.prompt, once.
func (o EmbedOptions) countPrompt(tok *tokenizer.Tokenizer) error {
	if o.promptText == "" || o.prompt == nil {
		return nil
	}
	m := o.prompt
	m.once.Do(func() {
		p := o.promptText
		if o.Sentence != nil && o.Sentence.DoLowerCase {
			p = sentence.Lower(p)
		}
		enc, err := tok.Encode(strings.TrimSpace(p), tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone})
		if err != nil {
			m.err = fmt.Errorf("pipeline: the prompt: %w", err)
			return
		}
		n := len(enc.IDs)
		m.skip = n - 1 // as sentence-transformers counts it
		if n >= o.MaxLength {
			short := o.promptText
			if len(short) > 60 {
				short = strings.ToValidUTF8(short[:60], "") + "…"
			}
			m.err = fmt.Errorf("pipeline: the prompt %q takes %d of the %d tokens of the max length with [CLS] and [SEP], leaving none for the text", short, n, o.MaxLength)
		}
	})
	return m.err
}

func encodeInput(tok *tokenizer.Tokenizer, in EmbedInput, opts tokenizer.EncodeOptions) (*tokenizer.Encoding, error) {
	if in.TextPair != nil {
		return tok.EncodePair(in.Text, *in.TextPair, opts)
	}
	return tok.Encode(in.Text, opts)
}

// EmbedStats counts the work of Embed.
type EmbedStats struct {
	Rows, Batches int
	Tokens        int // tokens of the rows, [CLS] and [SEP] included
	PaddedTokens  int // rows × the longest row, summed over the batches
}

// Add adds the counts of t to s.
func (s *EmbedStats) Add(t EmbedStats) {
	s.Rows += t.Rows
	s.Batches += t.Batches
	s.Tokens += t.Tokens
	s.PaddedTokens += t.PaddedTokens
}

// Embed returns one vector per input, in the inputs' order, read from m's
// encoder (its head is not run) by o's Vectorizer (the pooling, then a
// sentence-transformers folder's Dense and Normalize modules; its length is
// Vectorizer.Dim) and normalized when o.Normalize is set.
//
// The inputs are sorted by length (ties in input order) and run in batches
// of neighbours in that order, each as many rows as fit o.MaxBatch and
// o.MaxBatchTokens padded tokens, so little of the work goes to padding.
// The batches depend only on the inputs and o, so the same inputs give the
// same bits on every run (with the same threads and matrix-product backend).
// A row's vector in a batch equals its vector alone within float32 rounding:
// padding is masked out, but the products split their work by the number
// of rows. ctx is checked between batches.
func Embed(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, inputs []EmbedInput, o EmbedOptions) ([][]float32, EmbedStats, error) {
	o, err := o.WithDefaults(m)
	if err != nil {
		return nil, EmbedStats{}, err
	}
	rows := make([]EmbedRow, len(inputs))
	for i, in := range inputs {
		if rows[i], err = EncodeEmbedInput(tok, in, o); err != nil {
			return nil, EmbedStats{}, fmt.Errorf("input %d: %w", i, err)
		}
	}
	return EmbedRows(ctx, m, int32(tok.PadID()), rows, o)
}

// EmbedRows is Embed on encoded rows; pad is the tokenizer's padding id.
// o must have its defaults (EmbedOptions.WithDefaults).
func EmbedRows(ctx context.Context, m *roformer.Model, pad int32, rows []EmbedRow, o EmbedOptions) ([][]float32, EmbedStats, error) {
	var st EmbedStats
	if o.vectors == nil {
		return nil, st, errors.New("pipeline: EmbedRows: the options have no defaults (EmbedOptions.WithDefaults)")
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(rows[a].IDs), len(rows[b].IDs)) })
	vecs := make([][]float32, len(rows))
	for lo := 0; lo < len(order); {
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		// Sorted by length, the last row of a batch is its longest.
		hi := lo + 1
		for hi < len(order) && hi-lo < o.MaxBatch && (hi-lo+1)*len(rows[order[hi]].IDs) <= o.MaxBatchTokens {
			hi++
		}
		batch := order[lo:hi]
		if err := embedBatch(ctx, m, pad, rows, batch, vecs, o, &st); err != nil {
			return nil, st, err
		}
		lo = hi
	}
	return vecs, st, nil
}

// embedBatch runs rows[batch] (sorted by length) in one forward pass and
// sets their vectors.
func embedBatch(ctx context.Context, m *roformer.Model, pad int32, rows []EmbedRow, batch []int, vecs [][]float32, o EmbedOptions, st *EmbedStats) error {
	B, T := len(batch), len(rows[batch[len(batch)-1]].IDs)
	b := roformer.PadBatch(B, T, pad, func(i int) ([]int32, []int32) {
		row := rows[batch[i]]
		return row.IDs, row.TypeIDs
	})
	for _, r := range batch {
		st.Tokens += len(rows[r].IDs)
	}
	out, err := m.Forward(ctx, b, nil, roformer.Options{SkipHead: true})
	if err != nil {
		return err
	}
	for i, r := range batch {
		v, err := o.vectors.Vector(out, b.AttentionMask[i*T:(i+1)*T], i, rows[r].Skip)
		if err != nil {
			return err
		}
		if o.Normalize {
			Normalize(v)
		}
		vecs[r] = v
	}
	st.Rows += B
	st.Batches++
	st.PaddedTokens += B * T
	return nil
}
