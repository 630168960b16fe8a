package server

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
)

// POST /v1/rerank (and /v2/rerank, Cohere v2's path) in the shape that
// Jina's and Cohere's rerank APIs share, and that vLLM and llama.cpp serve:
// RAG frameworks call it. It scores as TEI's POST /rerank does (tei.go): each
// (query, document) pair through the cross-encoder, the sigmoid of its
// logit. Unlike TEI's route, a pair longer than the server's max length is
// truncated (HF's longest_first, the ends of the longer text first), as
// Cohere and Jina truncate documents. The request's "model" is not checked:
// the server has one model, and the answer names it (Options.Name), as TEI
// does for its OpenAI route. Errors are OpenAI's, as on the other /v1
// compatible routes.

// RerankRequest is the body of POST /v1/rerank.
type RerankRequest struct {
	Model     string        `json:"model,omitempty"` // any name: the answer names the served model
	Query     string        `json:"query"`
	Documents []RerankInput `json:"documents"` // strings, or objects with "text"
	// TopN keeps the best n results (default, or 0: all; more than the
	// documents: all).
	TopN *int `json:"top_n,omitempty"`
	// ReturnDocuments puts each document's text in its result (default
	// true, as Jina's; Cohere's default is false).
	ReturnDocuments *bool `json:"return_documents,omitempty"`
}

// RerankInput is one document of a rerank request: a string, or an object
// whose "text" is ranked (its other fields are ignored, as Cohere's v1
// does without rank_fields).
type RerankInput struct {
	Text string `json:"text"`
}

// UnmarshalJSON accepts "text" or {"text": "…", …}.
func (d *RerankInput) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return errors.New(`a document is null; want a string or {"text": …}`)
	}
	if json.Unmarshal(b, &d.Text) == nil {
		return nil
	}
	var obj struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return errors.New(`a document is neither a string nor an object {"text": …}`)
	}
	if obj.Text == nil {
		return errors.New(`a document object has no "text"`)
	}
	d.Text = *obj.Text
	return nil
}

func (RerankInput) openAPISchema(g *schemaGen) map[string]any {
	obj := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}}
	return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, obj}}
}

// RerankResponse is the answer of POST /v1/rerank: the results best first.
type RerankResponse struct {
	ID      string         `json:"id"`
	Model   string         `json:"model"`
	Results []RerankResult `json:"results"`
	Usage   RerankUsage    `json:"usage"`
}

// RerankResult is one document's place: its index in the request, its
// score, and with return_documents its text.
type RerankResult struct {
	Index          int             `json:"index"`
	RelevanceScore float64         `json:"relevance_score"`
	Document       *RerankDocument `json:"document,omitempty"`
}

// RerankDocument is a document's text in a result.
type RerankDocument struct {
	Text string `json:"text"`
}

// RerankUsage counts the tokens of every (query, document) pair, special
// tokens included, as the model saw them.
type RerankUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// rerank answers POST /v1/rerank and /v2/rerank.
func (s *Server) rerank(w http.ResponseWriter, r *http.Request) {
	answer(w, writeOpenAIError, func() *apiError {
		var req RerankRequest
		if e := s.decodeCompat(w, r, &req); e != nil {
			e.status = http.StatusBadRequest
			return e
		}
		n := len(req.Documents)
		switch {
		case req.Query == "":
			return errorf(http.StatusBadRequest, "Validation", "query", `"query" is missing or empty`)
		case n == 0:
			return errorf(http.StatusBadRequest, "Empty", "documents", `"documents" is missing or empty`)
		case n > s.opts.MaxInputs:
			e := s.tooManyInputs("documents", n)
			e.status = http.StatusBadRequest
			return e
		case req.TopN != nil && *req.TopN < 0:
			return errorf(http.StatusBadRequest, "Validation", "top_n", "top_n %d: want 0 (all) or more", *req.TopN)
		}
		texts := make([]string, n)
		for i, d := range req.Documents {
			texts[i] = d.Text
		}
		scores, tokens, e := s.rerankScores(r, req.Query, texts, true, false, false, "documents")
		if e != nil {
			switch {
			case e.status == http.StatusFailedDependency:
				e.status = http.StatusInternalServerError
			case e.status < 500 && e.status != http.StatusTooManyRequests:
				e.status = http.StatusBadRequest
			}
			return e
		}
		res := RerankResponse{ID: "rerank-" + randomHex(16), Model: s.opts.Name, Results: make([]RerankResult, n),
			Usage: RerankUsage{PromptTokens: tokens, TotalTokens: tokens}}
		withText := req.ReturnDocuments == nil || *req.ReturnDocuments
		for i, sc := range scores {
			res.Results[i] = RerankResult{Index: i, RelevanceScore: sc}
			if withText {
				res.Results[i].Document = &RerankDocument{Text: texts[i]}
			}
		}
		slices.SortStableFunc(res.Results, func(a, b RerankResult) int { return cmp.Compare(b.RelevanceScore, a.RelevanceScore) })
		if req.TopN != nil && *req.TopN > 0 && *req.TopN < n {
			res.Results = res.Results[:*req.TopN]
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	})
}

// randomHex is n random bytes in hex, for the id of an answer.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (Go 1.24)
	return hex.EncodeToString(b)
}
