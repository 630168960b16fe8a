package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// The task heads' routes beside TEI's: POST /v1/token-classification and
// POST /v1/question-answering, answered as Hugging Face's pipelines answer
// (package pipeline). Token classification has a route of its own rather
// than TEI's /predict: /predict is sequence classification, whose body
// (pairs, raw_scores) and answer ([{score, label}] per input) TEI's clients
// rely on, while a token classifier answers entities with offsets. Their
// forward passes take the gate one request at a time, as fill-mask's;
// errors are TEI's {"error", "error_type"}; on a model without the head the
// routes do not exist (404).

// exclusive runs fn once no other forward pass runs (the gate of server.go's
// run and batch.go's scheduler). It fails with 503 when the client leaves
// while waiting, 500 when fn fails.
func (s *Server) exclusive(r *http.Request, fn func(context.Context) error) *apiError {
	ctx := r.Context()
	s.yieldCPU(stateOf(ctx))
	select {
	case s.gate <- struct{}{}:
	case <-ctx.Done():
		return errorf(http.StatusServiceUnavailable, "Unhealthy", "", "request cancelled while waiting: %v", ctx.Err())
	case <-s.quit:
		return errorf(http.StatusServiceUnavailable, "Unhealthy", "", "%v", errClosed)
	}
	err := func() error {
		defer func() { <-s.gate }() // released even if fn panics
		return fn(ctx)
	}()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return errorf(http.StatusServiceUnavailable, "Unhealthy", "", "request cancelled: %v", ctx.Err())
	}
	s.opts.Log.Printf("server: %s %s: %v", r.Method, r.URL.Path, err)
	return errorf(http.StatusInternalServerError, "Backend", "", "%v", err)
}

// TokenClassificationRequest is the body of POST /v1/token-classification.
type TokenClassificationRequest struct {
	Inputs json.RawMessage `json:"inputs"` // a text or an array of texts
	// AggregationStrategy is HF's aggregation_strategy: none (default),
	// simple, first, average or max.
	AggregationStrategy string `json:"aggregation_strategy"`
	// IgnoreLabels are left out of the answer; absent: ["O"].
	IgnoreLabels *[]string `json:"ignore_labels"`
}

// tokenClassifier says whether /v1/token-classification answers.
func (s *Server) tokenClassifier() bool { return s.model.Head == roformer.HeadTokenCls }

func (s *Server) tokenClassification(w http.ResponseWriter, r *http.Request) {
	if e := s.serveTokenClassification(w, r); e != nil {
		writeTEIError(w, e)
	}
}

func (s *Server) serveTokenClassification(w http.ResponseWriter, r *http.Request) *apiError {
	var req TokenClassificationRequest
	if e := s.decodeCompat(w, r, &req); e != nil {
		return e
	}
	in, e := texts(req.Inputs, "inputs")
	if e != nil {
		return e
	}
	if len(in) == 0 {
		return errorf(http.StatusBadRequest, "Empty", "inputs", "batch is empty")
	}
	if len(in) > s.opts.MaxInputs {
		return s.tooManyInputs("inputs", len(in))
	}
	agg, err := pipeline.ParseAggregation(req.AggregationStrategy)
	if err != nil {
		return errorf(http.StatusUnprocessableEntity, "Validation", "aggregation_strategy", "%v", err)
	}
	opts := pipeline.TokenClassificationOptions{Aggregation: agg}
	if req.IgnoreLabels != nil {
		opts.IgnoreLabels = append([]string{}, *req.IgnoreLabels...)
	}
	for i, x := range in {
		_, err := s.tok.Encode(x, tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone, Limit: s.opts.MaxLength})
		if n, ok := tooLong(err); ok {
			return errorf(http.StatusRequestEntityTooLarge, "Validation", "inputs", "input %d has %d tokens; the limit is %d (max_input_length)", i, n, s.opts.MaxLength)
		}
		if err != nil {
			return errorf(http.StatusUnprocessableEntity, "Tokenizer", "inputs", "input %d: %v", i, err)
		}
	}
	out := make([][]pipeline.Entity, len(in))
	for i, x := range in {
		if e := s.exclusive(r, func(ctx context.Context) error {
			var err error
			out[i], err = pipeline.TokenClassification(ctx, s.model, s.tok, x, opts)
			return err
		}); e != nil {
			return e
		}
		if out[i] == nil {
			out[i] = []pipeline.Entity{}
		}
	}
	if t := bytes.TrimSpace(req.Inputs); len(t) > 0 && t[0] != '[' {
		writeJSON(w, http.StatusOK, out[0])
		return nil
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
