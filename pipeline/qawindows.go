package pipeline

import "github.com/roformer-go/roformer/tokenizer"

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
