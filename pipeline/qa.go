package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/roformer-go/roformer/kernels"
	"slices"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// ErrInput is wrapped by the errors of QuestionAnswering that come from its
// arguments (an empty question, options out of range, a question too long
// for the windows) rather than from the model.
var ErrInput = errors.New("pipeline: invalid input")

// QAAnswer is one answer of QuestionAnswering, with HF's fields: Start and
// End are character (Unicode code point) offsets into the context, as
// Python's string indices, and Answer is context[Start:End].
type QAAnswer struct {
	Score  float64 `json:"score"`
	Start  int     `json:"start"`
	End    int     `json:"end"`
	Answer string  `json:"answer"`
}

// QuestionAnsweringOptions are the question-answering pipeline's options;
// the zero value is HF's defaults.
type QuestionAnsweringOptions struct {
	TopK         int // the number of answers (0: 1)
	MaxAnswerLen int // the longest answer in tokens (0: 15)
	// MaxSeqLen is the length of a window with its special tokens (0: the
	// tokenizer's model_max_length, at most 384).
	MaxSeqLen int
	// DocStride is the number of context tokens that consecutive windows
	// share (0: MaxSeqLen/2, at most 128; −1: none, HF's doc_stride=0).
	DocStride int
	// MaxQuestionLen is the most question tokens kept (0: 64).
	MaxQuestionLen int
	// HandleImpossibleAnswer adds the answer "" with the [CLS] score (the
	// smallest over the windows) to the candidates.
	HandleImpossibleAnswer bool
}

// QuestionAnswering runs the extractive question-answering model (the QA
// head's start and end logits) on a question and a context (text) and answers the
// best spans of the context as HF's QuestionAnsweringPipeline does (HF
// 4.30.2, with a fast WordPiece tokenizer):
//
//   - question and context are encoded as a pair, [CLS] q [SEP] c [SEP] with
//     token types 0 then 1; a context too long for MaxSeqLen is split into
//     windows of the same question and consecutive parts of the context
//     that overlap by DocStride tokens (the tokenizer's overflow with
//     stride, truncation only_second), each window its own forward pass;
//   - in each window the start and end logits of the positions other than
//     the context's and [CLS] are set to −10000 and each is turned into
//     probabilities by a softmax; [CLS]'s start·end is the window's null
//     score, then its probabilities are set to 0;
//   - a span (s, e) of context tokens scores start[s]·end[e], with s ≤ e and
//     e − s + 1 ≤ MaxAnswerLen; each window gives its TopK best spans, all
//     windows' spans together (the same span may come from two windows)
//     with, under HandleImpossibleAnswer, the answer "" scored the smallest
//     null score, are sorted by score and the first TopK answered;
//   - a span's characters are those of the words of its first and last
//     tokens (HF's align_to_words): a word is a token and the "##" pieces
//     after it within the window.
//
// The question is cut to MaxQuestionLen tokens, as HF does with a slow
// tokenizer (with a fast one HF keeps it whole). It is an error when the
// question leaves no room for DocStride + 1 context tokens in a window.
func QuestionAnswering(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, question, text string, opts QuestionAnsweringOptions) ([]QAAnswer, error) {
	if m.Head != roformer.HeadQA {
		return nil, fmt.Errorf("pipeline: question answering needs the question-answering head, the model has %s", m.Head)
	}
	o, err := opts.resolve(tok)
	if err != nil {
		return nil, err
	}
	if question == "" {
		return nil, fmt.Errorf("%w: question cannot be empty", ErrInput)
	}
	if text == "" {
		return nil, fmt.Errorf("%w: context cannot be empty", ErrInput)
	}
	c, windows, err := qaWindows(tok, question, text, o)
	if err != nil {
		return nil, err
	}
	chars := charIndex(text)
	minNull := 1e6
	var answers []QAAnswer
	for _, w := range windows {
		T := len(w.ids)
		out, err := m.Forward(ctx, &roformer.Batch{InputIDs: tokenizer.Int32s(w.ids), TokenTypeIDs: tokenizer.Int32s(w.types), B: 1, T: T}, nil, roformer.Options{})
		if err != nil {
			return nil, err
		}
		if out.StartLogits == nil || out.EndLogits == nil || len(out.StartLogits.Data) != T || len(out.EndLogits.Data) != T {
			return nil, fmt.Errorf("pipeline: the model gives no start and end logits for %d tokens", T)
		}
		ps, pe, null := qaProbs(out.StartLogits.Data, out.EndLogits.Data, w.context(tok.ClsID()))
		minNull = min(minNull, null)
		for _, sp := range bestSpans(ps, pe, w.ctx0, w.ctx0+w.hi-w.lo, o.MaxAnswerLen, o.TopK) {
			// Context tokens of the window: c[w.lo:w.hi] at positions ctx0….
			a, b := w.lo+sp.s-w.ctx0, w.lo+sp.e-w.ctx0
			for a > w.lo && tok.IsContinuation(c.IDs[a]) {
				a--
			}
			for b+1 < w.hi && tok.IsContinuation(c.IDs[b+1]) {
				b++
			}
			from, to := c.Offsets[a][0], c.Offsets[b][1]
			answers = append(answers, QAAnswer{Score: sp.score, Start: chars[from], End: chars[to], Answer: text[from:to]})
		}
	}
	if o.HandleImpossibleAnswer {
		answers = append(answers, QAAnswer{Score: minNull})
	}
	slices.SortStableFunc(answers, func(x, y QAAnswer) int { return cmp.Compare(y.Score, x.Score) })
	return answers[:min(len(answers), o.TopK)], nil
}

// resolve fills in the defaults and checks the options as HF does.
func (o QuestionAnsweringOptions) resolve(tok *tokenizer.Tokenizer) (QuestionAnsweringOptions, error) {
	if o.TopK == 0 {
		o.TopK = 1
	}
	if o.MaxAnswerLen == 0 {
		o.MaxAnswerLen = 15
	}
	if o.MaxQuestionLen == 0 {
		o.MaxQuestionLen = 64
	}
	if o.MaxSeqLen == 0 {
		o.MaxSeqLen = 384
		if n := tok.Config().ModelMaxLength; n > 0 {
			o.MaxSeqLen = min(n, 384)
		}
	}
	switch {
	case o.DocStride == 0:
		o.DocStride = min(o.MaxSeqLen/2, 128)
	case o.DocStride == -1:
		o.DocStride = 0
	}
	switch {
	case o.TopK < 1:
		return o, fmt.Errorf("%w: top_k %d should be >= 1", ErrInput, o.TopK)
	case o.MaxAnswerLen < 1:
		return o, fmt.Errorf("%w: max_answer_len %d should be >= 1", ErrInput, o.MaxAnswerLen)
	case o.MaxQuestionLen < 1:
		return o, fmt.Errorf("%w: max_question_len %d should be >= 1", ErrInput, o.MaxQuestionLen)
	case o.MaxSeqLen < 4:
		return o, fmt.Errorf("%w: max_seq_len %d leaves no room for a question and a context", ErrInput, o.MaxSeqLen)
	case o.DocStride < 0:
		return o, fmt.Errorf("%w: doc_stride %d is negative", ErrInput, o.DocStride)
	case o.DocStride > o.MaxSeqLen:
		return o, fmt.Errorf("%w: doc_stride (%d) is larger than max_seq_len (%d)", ErrInput, o.DocStride, o.MaxSeqLen)
	}
	return o, nil
}

// qaWindow is one window of the question and a part of the context:
// [CLS] q [SEP] c[lo:hi] [SEP], the context from position ctx0.
type qaWindow struct {
	ids, types []int
	ctx0       int
	lo, hi     int
}

// context says for each position whether it may be answered or be [CLS]:
// HF's p_mask is 1 off the context, then 0 wherever the id is [CLS]'s.
func (w *qaWindow) context(cls int) []bool {
	ok := make([]bool, len(w.ids))
	for i, id := range w.ids {
		ok[i] = (i >= w.ctx0 && i < w.ctx0+w.hi-w.lo) || id == cls
	}
	return ok
}

// qaWindows encodes the question (cut to MaxQuestionLen tokens) and the
// context and splits the context as HF's fast tokenizer's overflow does
// with truncation only_second, max_length MaxSeqLen and stride DocStride:
// parts of room = MaxSeqLen − len(q) − 3 tokens starting every room −
// stride tokens, the last one reaching the context's end.
func qaWindows(tok *tokenizer.Tokenizer, question, context string, o QuestionAnsweringOptions) (*tokenizer.Encoding, []qaWindow, error) {
	qIDs, c, err := qaTokens(tok, question, context, o)
	if err != nil {
		return nil, nil, err
	}
	n := len(c.IDs)
	count, room, err := qaWindowCount(n, len(qIDs), o)
	if err != nil {
		return nil, nil, err
	}
	windows := make([]qaWindow, count)
	for k := range windows {
		lo := k * (room - o.DocStride) // k = 0 alone when the context fits
		w := qaWindow{ctx0: len(qIDs) + 2, lo: lo, hi: min(lo+room, n)}
		w.ids = append(append(append(append([]int{tok.ClsID()}, qIDs...), tok.SepID()), c.IDs[w.lo:w.hi]...), tok.SepID())
		w.types = make([]int, len(w.ids))
		for i := w.ctx0; i < len(w.ids); i++ {
			w.types[i] = 1
		}
		windows[k] = w
	}
	return c, windows, nil
}

// qaProbs is HF's postprocess of one window: the logits off ok are set to
// −10000, each softmaxed; null is start[0]·end[0], then both set to 0.
func qaProbs(start, end []float32, ok []bool) (ps, pe []float64, null float64) {
	mask := func(z []float32) []float32 {
		out := slices.Clone(z)
		for i := range out {
			if !ok[i] {
				out[i] = -10000
			}
		}
		return out
	}
	ps, pe = kernels.Softmax64(mask(start)), kernels.Softmax64(mask(end))
	null = ps[0] * pe[0]
	ps[0], pe[0] = 0, 0
	return ps, pe, null
}

// span is a candidate answer: positions s ≤ e of a window.
type span struct {
	s, e  int
	score float64
}

// bestSpans is HF's decode_spans over the positions [from, to): the topK
// spans by start[s]·end[e] with s ≤ e < s + maxLen, best first (ties: the
// earlier start, then the earlier end).
func bestSpans(ps, pe []float64, from, to, maxLen, topK int) []span {
	var all []span
	for s := from; s < to; s++ {
		for e := s; e < to && e < s+maxLen; e++ {
			all = append(all, span{s, e, ps[s] * pe[e]})
		}
	}
	slices.SortStableFunc(all, func(x, y span) int { return cmp.Compare(y.score, x.score) })
	return all[:min(len(all), topK)]
}
