package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

// QuestionAnsweringRequest is the body of POST /v1/question-answering (or
// one element of an array of them): HF's question-answering pipeline's
// arguments.
type QuestionAnsweringRequest struct {
	Question               string `json:"question"`
	Context                string `json:"context"`
	TopK                   int    `json:"top_k"`          // 0 or absent: 1
	MaxAnswerLen           int    `json:"max_answer_len"` // 0 or absent: 15
	HandleImpossibleAnswer bool   `json:"handle_impossible_answer"`
	// DocStride is the context tokens that consecutive windows share;
	// absent: max_seq_len/2, at most 128; 0: none.
	DocStride *int `json:"doc_stride"`
	// MaxSeqLen is a window's length with its special tokens; absent:
	// 384, at most the tokenizer's model_max_length and --max-length.
	MaxSeqLen      int `json:"max_seq_len"`
	MaxQuestionLen int `json:"max_question_len"` // 0 or absent: 64
}

// questionAnswerer says whether /v1/question-answering answers.
func (s *Server) questionAnswerer() bool { return s.model.Head == roformer.HeadQA }

func (s *Server) questionAnswering(w http.ResponseWriter, r *http.Request) {
	if e := s.serveQuestionAnswering(w, r); e != nil {
		writeTEIError(w, e)
	}
}

func (s *Server) serveQuestionAnswering(w http.ResponseWriter, r *http.Request) *apiError {
	var raw json.RawMessage
	if e := s.decodeCompat(w, r, &raw); e != nil {
		return e
	}
	reqs, list, e := decodeQuestions(raw)
	if e != nil {
		return e
	}
	if len(reqs) > s.opts.MaxInputs {
		return s.tooManyInputs("", len(reqs))
	}
	opts, e := s.qaOptions(reqs)
	if e != nil {
		return e
	}
	if e := s.checkQAWindows(reqs, opts); e != nil {
		return e
	}
	out := make([][]pipeline.QAAnswer, len(reqs))
	for i, q := range reqs {
		var inputErr error
		if e := s.exclusive(r, func(ctx context.Context) error {
			var err error
			out[i], err = pipeline.QuestionAnswering(ctx, s.model, s.tok, q.Question, q.Context, opts[i])
			if errors.Is(err, pipeline.ErrInput) {
				inputErr, err = err, nil
			}
			return err
		}); e != nil {
			return e
		}
		if inputErr != nil {
			return errorf(http.StatusUnprocessableEntity, "Validation", "", "input %d: %v", i, inputErr)
		}
	}
	answer := func(i int) any {
		if reqs[i].TopK > 1 {
			if out[i] == nil {
				return []pipeline.QAAnswer{}
			}
			return out[i]
		}
		if len(out[i]) == 0 { // a context without tokens
			return pipeline.QAAnswer{}
		}
		return out[i][0]
	}
	if !list {
		writeJSON(w, http.StatusOK, answer(0))
		return nil
	}
	all := make([]any, len(reqs))
	for i := range reqs {
		all[i] = answer(i)
	}
	writeJSON(w, http.StatusOK, all)
	return nil
}

// decodeQuestions reads one request or a list of them; list tells which.
func decodeQuestions(raw json.RawMessage) (reqs []QuestionAnsweringRequest, list bool, e *apiError) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		var one QuestionAnsweringRequest
		if err := json.Unmarshal(t, &one); err != nil {
			return nil, false, errorf(http.StatusUnprocessableEntity, "Validation", "", "%v", err)
		}
		return []QuestionAnsweringRequest{one}, false, nil
	}
	if err := json.Unmarshal(t, &reqs); err != nil {
		return nil, true, errorf(http.StatusUnprocessableEntity, "Validation", "", "%v", err)
	}
	if len(reqs) == 0 {
		return nil, true, errorf(http.StatusBadRequest, "Empty", "", "batch is empty")
	}
	return reqs, true, nil
}

// qaOptions checks each request's fields against the server's limits and
// turns them into the pipeline's options, with the defaults filled in.
func (s *Server) qaOptions(reqs []QuestionAnsweringRequest) ([]pipeline.QuestionAnsweringOptions, *apiError) {
	opts := make([]pipeline.QuestionAnsweringOptions, len(reqs))
	for i, q := range reqs {
		switch {
		case q.Question == "":
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", "question", "input %d: question cannot be empty", i)
		case q.Context == "":
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", "context", "input %d: context cannot be empty", i)
		case q.MaxSeqLen > s.opts.MaxLength:
			return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", "max_seq_len", "input %d: max_seq_len %d > the limit %d (max_input_length)", i, q.MaxSeqLen, s.opts.MaxLength)
		case q.MaxSeqLen < 0 || q.TopK < 0 || q.MaxAnswerLen < 0 || q.MaxQuestionLen < 0 || (q.DocStride != nil && *q.DocStride < 0):
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", "", "input %d: top_k, max_answer_len, max_seq_len, max_question_len and doc_stride must not be negative", i)
		case q.TopK > s.opts.MaxTopK:
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", "top_k", "input %d: top_k %d > the limit %d", i, q.TopK, s.opts.MaxTopK)
		}
		o := pipeline.QuestionAnsweringOptions{TopK: q.TopK, MaxAnswerLen: q.MaxAnswerLen, MaxSeqLen: q.MaxSeqLen,
			MaxQuestionLen: q.MaxQuestionLen, HandleImpossibleAnswer: q.HandleImpossibleAnswer}
		if o.MaxSeqLen == 0 {
			o.MaxSeqLen = min(pipeline.QADefaultMaxSeqLen(s.tok), s.opts.MaxLength)
		}
		if q.DocStride != nil {
			o.DocStride = *q.DocStride
			if o.DocStride == 0 {
				o.DocStride = -1 // HF's doc_stride=0
			}
		}
		opts[i] = o
	}
	return opts, nil
}

// checkQAWindows bounds the windows' tokens, all questions together, as the
// tokens of the largest request of the other routes (MaxInputs inputs of
// MaxLength): a doc_stride just under a window's room would make one window
// per context token.
func (s *Server) checkQAWindows(reqs []QuestionAnsweringRequest, opts []pipeline.QuestionAnsweringOptions) *apiError {
	tokens := 0
	for i, q := range reqs {
		n, err := pipeline.QAWindowCount(s.tok, q.Question, q.Context, opts[i])
		if errors.Is(err, pipeline.ErrInput) {
			return errorf(http.StatusUnprocessableEntity, "Validation", "", "input %d: %v", i, err)
		} else if err != nil {
			return errorf(http.StatusUnprocessableEntity, "Tokenizer", "", "input %d: %v", i, err)
		}
		if tokens += n * opts[i].MaxSeqLen; tokens > s.maxAnswerTokens() {
			return errorf(http.StatusRequestEntityTooLarge, "Validation", "doc_stride",
				"input %d: %d windows of up to %d tokens; with the inputs before it, %d tokens; the limit is %d tokens a request (max_client_batch_size %d × max_input_length %d): use a smaller doc_stride or a shorter context",
				i, n, opts[i].MaxSeqLen, tokens, s.maxAnswerTokens(), s.opts.MaxInputs, s.opts.MaxLength)
		}
	}
	return nil
}
