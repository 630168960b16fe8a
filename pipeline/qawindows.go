package pipeline

import (
	"fmt"

	"github.com/roformer-go/roformer/tokenizer"
)

// QAWindow is one window QuestionAnswering runs the model on:
// [CLS] question [SEP] context tokens Lo…Hi−1 [SEP], the context tokens
// from position ContextStart, token types 0 up to the first [SEP] and 1
// after it.
type QAWindow struct {
	IDs, TypeIDs []int
	ContextStart int
	Lo, Hi       int // the context tokens of the window: indices into the context's encoding
}

// QAWindows returns the context's encoding (without special tokens; its
// Offsets are byte offsets into text) and the windows QuestionAnswering
// makes of question and text with opts, so that training features
// (finetune's question answering) are cut exactly as inference cuts them.
func QAWindows(tok *tokenizer.Tokenizer, question, text string, opts QuestionAnsweringOptions) (*tokenizer.Encoding, []QAWindow, error) {
	o, err := opts.resolve(tok)
	if err != nil {
		return nil, nil, err
	}
	c, ws, err := qaWindows(tok, question, text, o)
	if err != nil {
		return nil, nil, err
	}
	out := make([]QAWindow, len(ws))
	for i, w := range ws {
		out[i] = QAWindow{IDs: w.ids, TypeIDs: w.types, ContextStart: w.ctx0, Lo: w.lo, Hi: w.hi}
	}
	return c, out, nil
}

// QAWindowCount returns the number of windows QAWindows makes of question
// and text with opts, counted from the tokens without making them (a
// doc_stride just under a window's room makes one window per context
// token), or the error QAWindows gives.
func QAWindowCount(tok *tokenizer.Tokenizer, question, text string, opts QuestionAnsweringOptions) (int, error) {
	o, err := opts.resolve(tok)
	if err != nil {
		return 0, err
	}
	qIDs, c, err := qaTokens(tok, question, text, o)
	if err != nil {
		return 0, err
	}
	n, _, err := qaWindowCount(len(c.IDs), len(qIDs), o)
	return n, err
}

// QADefaultMaxSeqLen returns the window length, special tokens included,
// that QuestionAnswering uses when MaxSeqLen is 0: 384, at most tok's
// model_max_length (one under 4 too, which QuestionAnswering refuses).
func QADefaultMaxSeqLen(tok *tokenizer.Tokenizer) int {
	o, _ := QuestionAnsweringOptions{}.resolve(tok)
	return o.MaxSeqLen
}

// qaTokens encodes the question, cut to o.MaxQuestionLen tokens, and the
// context, both without special tokens or truncation.
func qaTokens(tok *tokenizer.Tokenizer, question, text string, o QuestionAnsweringOptions) ([]int, *tokenizer.Encoding, error) {
	q, err := tok.Encode(question, tokenizer.EncodeOptions{NoSpecialTokens: true, Truncation: tokenizer.TruncateNone})
	if err != nil {
		return nil, nil, err
	}
	c, err := tok.Encode(text, tokenizer.EncodeOptions{NoSpecialTokens: true, Truncation: tokenizer.TruncateNone})
	if err != nil {
		return nil, nil, err
	}
	return q.IDs[:min(len(q.IDs), o.MaxQuestionLen)], c, nil
}

// qaWindowCount is the number of windows of n context tokens after a
// question of qlen tokens, and room, the context tokens a window holds
// (o.MaxSeqLen − qlen − 3): one window when the context fits, else one
// starting every room − o.DocStride tokens until one reaches the end. It
// is an error when the context does not fit and room is not more than
// the stride.
func qaWindowCount(n, qlen int, o QuestionAnsweringOptions) (count, room int, err error) {
	room = o.MaxSeqLen - qlen - 3
	switch {
	case n <= room:
		return 1, room, nil
	case room <= 0:
		return 0, room, fmt.Errorf("%w: a question of %d tokens leaves no room for the context in max_seq_len %d", ErrInput, qlen, o.MaxSeqLen)
	case o.DocStride >= room:
		return 0, room, fmt.Errorf("%w: doc_stride %d must be less than the %d context tokens a window holds (max_seq_len %d − %d question tokens − 3)", ErrInput, o.DocStride, room, o.MaxSeqLen, qlen)
	}
	// Window k starts at k·step; the last is the first with k·step + room ≥ n.
	step := room - o.DocStride
	return 1 + (n-room+step-1)/step, room, nil
}
