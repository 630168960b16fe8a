package tokenizer

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Truncation is a truncation strategy (HF's TruncationStrategy).
type Truncation int

const (
	// TruncateAuto is HF's default: longest_first when MaxLength is set and
	// no padding is asked for (HF then warns), otherwise no truncation.
	TruncateAuto Truncation = iota
	// TruncateNone never truncates (do_not_truncate).
	TruncateNone
	// TruncateLongestFirst removes tokens one at a time from the end of the
	// longer sequence (the second on a tie) until the pair fits.
	TruncateLongestFirst
	// TruncateOnlyFirst removes tokens from the end of the first sequence.
	TruncateOnlyFirst
	// TruncateOnlySecond removes tokens from the end of the second sequence.
	TruncateOnlySecond
)

// String returns HF's name of the strategy.
func (tr Truncation) String() string {
	switch tr {
	case TruncateAuto:
		return "auto"
	case TruncateNone:
		return "do_not_truncate"
	case TruncateLongestFirst:
		return "longest_first"
	case TruncateOnlyFirst:
		return "only_first"
	case TruncateOnlySecond:
		return "only_second"
	}
	return fmt.Sprintf("Truncation(%d)", int(tr))
}

// ParseTruncation accepts "longest_first", "only_first", "only_second",
// "do_not_truncate" (or "none") and "auto" (or "").
func ParseTruncation(s string) (Truncation, error) {
	switch s {
	case "", "auto":
		return TruncateAuto, nil
	case "none", "do_not_truncate", "false":
		return TruncateNone, nil
	case "longest_first", "true":
		return TruncateLongestFirst, nil
	case "only_first":
		return TruncateOnlyFirst, nil
	case "only_second":
		return TruncateOnlySecond, nil
	}
	return 0, fmt.Errorf("%w: truncation %q (want longest_first, only_first, only_second or do_not_truncate)", ErrUnsupported, s)
}

// Padding is a padding strategy (HF's PaddingStrategy).
type Padding int

const (
	PadNone      Padding = iota // no padding (do_not_pad)
	PadLongest                  // pad a batch to its longest sequence
	PadMaxLength                // pad to MaxLength (or ModelMaxLength)
)

// String returns HF's name of the strategy.
func (p Padding) String() string {
	switch p {
	case PadNone:
		return "do_not_pad"
	case PadLongest:
		return "longest"
	case PadMaxLength:
		return "max_length"
	}
	return fmt.Sprintf("Padding(%d)", int(p))
}

// ParsePadding accepts "longest", "max_length" and "do_not_pad" (or "none", "").
func ParsePadding(s string) (Padding, error) {
	switch s {
	case "", "none", "do_not_pad", "false":
		return PadNone, nil
	case "longest", "true":
		return PadLongest, nil
	case "max_length":
		return PadMaxLength, nil
	}
	return 0, fmt.Errorf("%w: padding %q (want longest, max_length or do_not_pad)", ErrUnsupported, s)
}

// EncodeOptions are the arguments of HF's tokenizer(text, text_pair, ...).
// The zero value adds [CLS]/[SEP] and neither truncates nor pads.
type EncodeOptions struct {
	// MaxLength bounds the length with special tokens (0: ModelMaxLength
	// where truncation or max_length padding needs a length).
	MaxLength       int
	Truncation      Truncation
	Padding         Padding
	PadToMultipleOf int  // round the padded length up to a multiple (0: off)
	PadLeft         bool // put padding first (padding_side="left")
	// NoSpecialTokens leaves out [CLS] and [SEP] (add_special_tokens=False).
	NoSpecialTokens bool
	// Limit, when > 0, refuses with a *LengthError an encoding of more than
	// Limit positions before padding (after truncation, when it is asked
	// for). The tokens past the limit are counted, not kept, so the error
	// gives the input's length in memory bounded by the limit. Not HF's: HF
	// returns the sequence, with a warning.
	Limit int
}

// LengthError is the error of an encoding longer than EncodeOptions.Limit.
type LengthError struct {
	Tokens int // positions of the whole encoding, special tokens included
	Limit  int
}

func (e *LengthError) Error() string {
	return fmt.Sprintf("tokenizer: the input has %d tokens; the limit is %d", e.Tokens, e.Limit)
}

// ErrTruncation is wrapped when a sequence cannot be truncated to the
// requested length. HF logs an error and returns the sequence too long in
// this case; this package reports it instead.
var ErrTruncation = errors.New("tokenizer: cannot truncate")

// Int32s converts ids (an Encoding's IDs, TypeIDs or AttentionMask, or
// a window of them) to the model's int32 ids, the one conversion every
// caller that feeds a model uses. Token ids are below the vocabulary
// size, which model configs bound far below 2³¹.
func Int32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// Encoding is a model input: one row of input_ids and its companions.
type Encoding struct {
	IDs           []int // input_ids
	TypeIDs       []int // token_type_ids: 0 for [CLS] A [SEP], 1 for B [SEP]; 0 on padding
	AttentionMask []int // 1 for real tokens, 0 for padding
	// SpecialTokensMask is 1 for added [CLS], [SEP] and padding, 0 for text
	// tokens (special tokens written in the text count as text).
	SpecialTokensMask []int
	Tokens            []string // the token of each id
	// Offsets are byte offsets [start, end) into the UTF-8 text the token
	// came from (the first or the second text, see SequenceIDs): the
	// smallest range of original characters that the token was made from.
	// Added special tokens and padding have [0, 0].
	Offsets [][2]int
	// SequenceIDs is 0 for tokens of the first text, 1 for the second, −1
	// for added special tokens and padding.
	SequenceIDs []int
	// Truncated reports that truncation removed tokens.
	Truncated bool
}

// Len returns the number of positions.
func (e *Encoding) Len() int { return len(e.IDs) }

// Input is one element of a batch: a text or a pair of texts.
type Input struct {
	Text     string
	TextPair *string // nil: a single sequence
}

// PairInput returns the Input for the pair (a, b).
func PairInput(a, b string) Input { return Input{Text: a, TextPair: &b} }

// Encode encodes one text: [CLS] tokens [SEP], truncated and padded as
// opts say (HF's tokenizer(text)).
func (t *Tokenizer) Encode(text string, opts EncodeOptions) (*Encoding, error) {
	return t.encodeOne(Input{Text: text}, opts, true)
}

// EncodePair encodes a pair: [CLS] a [SEP] b [SEP] with token_type_ids 0
// up to the first [SEP] and 1 after it (HF's tokenizer(a, b)).
func (t *Tokenizer) EncodePair(a, b string, opts EncodeOptions) (*Encoding, error) {
	return t.encodeOne(PairInput(a, b), opts, true)
}

// encodeOne encodes in. With truncation to a length, or a Limit, it
// tokenizes only as far as the result needs (tokenizeN): a sequence keeps
// no more than the length less the special tokens (truncation outcomes
// depend on a sequence's length only up to that: TestTruncationCap), past
// a Limit the tokens are counted, not kept. The work and memory are then
// bounded by the length asked for, whatever the text's length.
func (t *Tokenizer) encodeOne(in Input, opts EncodeOptions, pad bool) (*Encoding, error) {
	maxLen, trunc, err := t.resolve(opts)
	if err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, fmt.Errorf("tokenizer: limit %d is negative", opts.Limit)
	}
	nSpecial := 0
	if !opts.NoSpecialTokens {
		nSpecial = 2
		if in.TextPair != nil {
			nSpecial = 3
		}
	}
	keep, count := -1, false
	switch {
	case trunc != TruncateNone && maxLen > 0:
		keep = max(maxLen-nSpecial, 0) + 1
	case opts.Limit > 0:
		keep, count = opts.Limit+1, true
	}
	sc := getScratch()
	defer putScratch(sc)
	la, doneA := t.tokenizeN(in.Text, sc, &sc.out, keep, count)
	var b *seq
	lb, doneB := 0, true
	if in.TextPair != nil {
		lb, doneB = t.tokenizeN(*in.TextPair, sc, &sc.out2, keep, count)
		b = &sc.out2
	}
	if count && la+lb+nSpecial > opts.Limit {
		return nil, &LengthError{Tokens: la + lb + nSpecial, Limit: opts.Limit}
	}
	enc, err := t.build(&sc.out, b, la, lb, opts, maxLen, trunc)
	if errors.Is(err, ErrTruncation) && !(doneA && doneB) {
		// The error gives the sequences' lengths: count them.
		la, _ = t.tokenizeN(in.Text, sc, &sc.out, 0, true)
		if b != nil {
			lb, _ = t.tokenizeN(*in.TextPair, sc, b, 0, true)
		}
		_, err = t.build(&sc.out, b, la, lb, opts, maxLen, trunc)
	}
	if err != nil {
		return nil, err
	}
	if opts.Limit > 0 && enc.Len() > opts.Limit {
		return nil, &LengthError{Tokens: enc.Len(), Limit: opts.Limit}
	}
	if pad {
		if err := t.pad(enc, opts, maxLen, enc.Len()); err != nil {
			return nil, err
		}
	}
	return enc, nil
}

// resolve applies HF's rules for the effective length and truncation.
func (t *Tokenizer) resolve(opts EncodeOptions) (maxLen int, trunc Truncation, err error) {
	if opts.MaxLength < 0 {
		return 0, 0, fmt.Errorf("tokenizer: max_length %d is negative", opts.MaxLength)
	}
	if opts.PadToMultipleOf < 0 {
		return 0, 0, fmt.Errorf("tokenizer: pad_to_multiple_of %d is negative", opts.PadToMultipleOf)
	}
	if opts.Truncation < TruncateAuto || opts.Truncation > TruncateOnlySecond {
		return 0, 0, fmt.Errorf("%w: truncation %v", ErrUnsupported, opts.Truncation)
	}
	if opts.Padding < PadNone || opts.Padding > PadMaxLength {
		return 0, 0, fmt.Errorf("%w: padding %v", ErrUnsupported, opts.Padding)
	}
	maxLen, trunc = opts.MaxLength, opts.Truncation
	if trunc == TruncateAuto {
		trunc = TruncateNone
		if maxLen > 0 && opts.Padding == PadNone {
			trunc = TruncateLongestFirst
		}
	}
	if maxLen == 0 && (trunc != TruncateNone || opts.Padding == PadMaxLength) {
		maxLen = t.cfg.ModelMaxLength
	}
	if opts.Padding == PadMaxLength && maxLen == 0 {
		return 0, 0, fmt.Errorf("tokenizer: max_length padding needs MaxLength or a model_max_length")
	}
	return maxLen, trunc, nil
}

// build truncates a and b, of la and lb tokens, and adds the special
// tokens. a and b may hold fewer tokens than they have, but no fewer than
// the truncation keeps.
func (t *Tokenizer) build(a, b *seq, la, lb int, opts EncodeOptions, maxLen int, trunc Truncation) (*Encoding, error) {
	la0, lb0 := la, lb
	nSpecial := 0
	if !opts.NoSpecialTokens {
		nSpecial = 2
		if b != nil {
			nSpecial = 3
		}
	}
	if total := la + lb + nSpecial; trunc != TruncateNone && maxLen > 0 && total > maxLen {
		remove := total - maxLen
		switch {
		case trunc == TruncateOnlyFirst || trunc == TruncateLongestFirst && b == nil:
			if la <= remove {
				return nil, fmt.Errorf("%w: %s: %d tokens (%d special) exceed max_length %d and the first sequence has only %d", ErrTruncation, trunc, total, nSpecial, maxLen, la)
			}
			la -= remove
		case trunc == TruncateOnlySecond && b == nil:
			return nil, fmt.Errorf("%w: only_second: %d tokens (%d special) exceed max_length %d and there is no second sequence", ErrTruncation, total, nSpecial, maxLen)
		case trunc == TruncateOnlySecond:
			if lb <= remove {
				return nil, fmt.Errorf("%w: %s: %d tokens (%d special) exceed max_length %d and the second sequence has only %d", ErrTruncation, trunc, total, nSpecial, maxLen, lb)
			}
			lb -= remove
		default: // longest_first on a pair: one token at a time from the longer (the second on ties)
			first := min(abs(la-lb), remove)
			second := remove - first
			var ra, rb int
			if la > lb {
				ra, rb = first+second/2, second-second/2
			} else {
				ra, rb = second/2, first+second-second/2
			}
			la, lb = max(la-ra, 0), max(lb-rb, 0)
			if la+lb+nSpecial > maxLen {
				return nil, fmt.Errorf("%w: max_length %d leaves no room for the %d special tokens", ErrTruncation, maxLen, nSpecial)
			}
		}
	}
	n := la + lb + nSpecial
	if la > len(a.ids) || b != nil && lb > len(b.ids) {
		panic(fmt.Sprintf("tokenizer: build of %d and %d tokens from %d and %d held", la, lb, len(a.ids), b.len()))
	}
	ints := make([]int, 5*n) // one allocation for the five int rows
	enc := &Encoding{
		IDs: ints[0:0:n], TypeIDs: ints[n : n : 2*n], AttentionMask: ints[2*n : 2*n : 3*n],
		SpecialTokensMask: ints[3*n : 3*n : 4*n], SequenceIDs: ints[4*n : 4*n : 5*n],
		Tokens: make([]string, 0, n), Offsets: make([][2]int, 0, n),
		Truncated: la < la0 || lb < lb0,
	}
	special := func(id int, tok string, typ int) {
		enc.IDs = append(enc.IDs, id)
		enc.TypeIDs = append(enc.TypeIDs, typ)
		enc.AttentionMask = append(enc.AttentionMask, 1)
		enc.SpecialTokensMask = append(enc.SpecialTokensMask, 1)
		enc.Tokens = append(enc.Tokens, tok)
		enc.Offsets = append(enc.Offsets, [2]int{})
		enc.SequenceIDs = append(enc.SequenceIDs, -1)
	}
	text := func(s *seq, k, typ int) {
		enc.IDs = append(enc.IDs, s.ids[:k]...)
		enc.Tokens = append(enc.Tokens, s.toks[:k]...)
		enc.Offsets = append(enc.Offsets, s.offs[:k]...)
		for range k {
			enc.TypeIDs = append(enc.TypeIDs, typ)
			enc.AttentionMask = append(enc.AttentionMask, 1)
			enc.SpecialTokensMask = append(enc.SpecialTokensMask, 0)
			enc.SequenceIDs = append(enc.SequenceIDs, typ)
		}
	}
	if !opts.NoSpecialTokens {
		special(t.clsID, t.cfg.ClsToken, 0)
	}
	text(a, la, 0)
	if !opts.NoSpecialTokens {
		special(t.sepID, t.cfg.SepToken, 0)
	}
	if b != nil {
		text(b, lb, 1)
		if !opts.NoSpecialTokens {
			special(t.sepID, t.cfg.SepToken, 1)
		}
	}
	return enc, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// pad pads enc to the length that opts ask for; longest is the longest
// length in the batch (for PadLongest).
func (t *Tokenizer) pad(enc *Encoding, opts EncodeOptions, maxLen, longest int) error {
	target := 0
	switch opts.Padding {
	case PadNone:
		return nil
	case PadLongest:
		target = longest
	case PadMaxLength:
		target = maxLen
	}
	if m := opts.PadToMultipleOf; m > 0 && target%m != 0 {
		target += m - target%m
	}
	k := target - enc.Len()
	if k <= 0 {
		return nil
	}
	grow := func(s []int, v int) []int {
		out := make([]int, 0, target)
		if opts.PadLeft {
			for range k {
				out = append(out, v)
			}
			return append(out, s...)
		}
		out = append(out, s...)
		for range k {
			out = append(out, v)
		}
		return out
	}
	enc.IDs = grow(enc.IDs, t.padID)
	enc.TypeIDs = grow(enc.TypeIDs, 0)
	enc.AttentionMask = grow(enc.AttentionMask, 0)
	enc.SpecialTokensMask = grow(enc.SpecialTokensMask, 1)
	enc.SequenceIDs = grow(enc.SequenceIDs, -1)
	toks := make([]string, 0, target)
	offs := make([][2]int, 0, target)
	if !opts.PadLeft {
		toks, offs = append(toks, enc.Tokens...), append(offs, enc.Offsets...)
	}
	for range k {
		toks = append(toks, t.cfg.PadToken)
		offs = append(offs, [2]int{})
	}
	if opts.PadLeft {
		toks, offs = append(toks, enc.Tokens...), append(offs, enc.Offsets...)
	}
	enc.Tokens, enc.Offsets = toks, offs
	return nil
}

// BatchError reports the first input of a batch that failed to encode.
type BatchError struct {
	Index int // 0-based position in the batch
	Err   error
}

// Error says which input failed and why.
func (e *BatchError) Error() string {
	return fmt.Sprintf("tokenizer: batch input %d: %v", e.Index, e.Err)
}

// Unwrap returns the input's error.
func (e *BatchError) Unwrap() error { return e.Err }

// EncodeBatch encodes inputs in parallel (one worker per CPU) and pads them
// together: PadLongest pads to the longest encoding of the batch (HF's
// tokenizer(texts, padding=True)). The result keeps the order of inputs; on
// error it returns a *BatchError for the first failing input.
func (t *Tokenizer) EncodeBatch(inputs []Input, opts EncodeOptions) ([]*Encoding, error) {
	maxLen, _, err := t.resolve(opts)
	if err != nil {
		return nil, err
	}
	out := make([]*Encoding, len(inputs))
	errs := make([]error, len(inputs))
	// Inputs are handed out chunk at a time through an atomic counter, so the
	// workers share nothing else; one chunk's worth runs on the caller.
	const chunk = 16
	work := func(next *atomic.Int64) {
		for {
			lo := int(next.Add(chunk)) - chunk
			if lo >= len(inputs) {
				return
			}
			for i := lo; i < min(lo+chunk, len(inputs)); i++ {
				out[i], errs[i] = t.encodeOne(inputs[i], opts, false)
			}
		}
	}
	var next atomic.Int64
	workers := min(runtime.GOMAXPROCS(0), (len(inputs)+chunk-1)/chunk)
	if workers <= 1 {
		work(&next)
	} else {
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work(&next)
			}()
		}
		wg.Wait()
	}
	longest := 0
	for i, e := range errs {
		if e != nil {
			return nil, &BatchError{Index: i, Err: e}
		}
		longest = max(longest, out[i].Len())
	}
	for _, enc := range out {
		if err := t.pad(enc, opts, maxLen, longest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *seq) len() int {
	if s == nil {
		return 0
	}
	return len(s.ids)
}
