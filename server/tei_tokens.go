package server

import (
	"encoding/json"
	"net/http"

	"github.com/roformer-go/roformer/pipeline"
)

// POST /embed_all (every token's vector) and POST /embed_sparse (SPLADE
// from the masked-LM head), as text-embeddings-inference answers them.
// Both go through the batcher as /embed does.

// TEIEmbedAllRequest is the body of POST /embed_all and POST
// /embed_sparse.
type TEIEmbedAllRequest struct {
	Inputs              json.RawMessage `json:"inputs"`                         // a string, an array of strings, token ids or an array of token-id arrays
	Truncate            *bool           `json:"truncate,omitempty"`             // default: --auto-truncate's (false: too long is a 413)
	TruncationDirection string          `json:"truncation_direction,omitempty"` // "Right" (default) or "Left"
	PromptName          *string         `json:"prompt_name,omitempty"`          // one of a sentence-transformers folder's prompts (default: the server's)
}

// TEISparseValue is one non-zero entry of a sparse vector.
type TEISparseValue struct {
	Index int     `json:"index"`
	Value float32 `json:"value"`
}

// tokenRows reads the request of /embed_all or /embed_sparse and prepares
// its rows, pooled by pool.
func (s *Server) tokenRows(w http.ResponseWriter, r *http.Request, pool pooling) ([]embedRow, *apiError) {
	var req TEIEmbedAllRequest
	if e := s.decodeCompat(w, r, &req); e != nil {
		return nil, e
	}
	in, e := s.inputs(req.Inputs, "inputs")
	if e != nil {
		return nil, e
	}
	o := embedOptions{truncate: s.truncates(req.Truncate)}
	if o.left, e = truncationDirection(req.TruncationDirection); e != nil {
		return nil, e
	}
	eo, e := s.vectorOptions(pipeline.PoolDefault, req.PromptName)
	if e != nil {
		return nil, e
	}
	rows, tokens, e := s.prepareRows(r, in, o, "inputs", pool, &eo)
	if e != nil {
		return nil, e
	}
	if V := s.model.Config.VocabSize; pool == poolSparse && len(rows) > s.opts.MaxEmbedAllValues/V {
		return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", "inputs",
			"%d inputs × vocabulary %d = %d values at most; the limit of one answer is %d (send fewer inputs)", len(rows), V, len(rows)*V, s.opts.MaxEmbedAllValues)
	}
	if pool == poolTokens {
		H := s.model.Config.HiddenSize // tokens ≤ MaxInputs × MaxLength: no overflow in the division
		if tokens > s.opts.MaxEmbedAllValues/H {
			return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", "inputs",
				"%d tokens × hidden size %d = %d values; the limit of one answer is %d (send fewer or shorter inputs)", tokens, H, tokens*H, s.opts.MaxEmbedAllValues)
		}
	}
	if e := s.runRows(r, rows); e != nil {
		return nil, e
	}
	return rows, nil
}

// teiEmbedAll answers POST /embed_all: for each input, the last hidden
// state of each of its tokens ([CLS] and [SEP] included), not normalized.
func (s *Server) teiEmbedAll(w http.ResponseWriter, r *http.Request) {
	answer(w, writeTEIError, func() *apiError {
		rows, e := s.tokenRows(w, r, poolTokens)
		if e != nil {
			return e
		}
		H := s.model.Config.HiddenSize
		res := make([][][]float32, len(rows))
		for i, row := range rows {
			res[i] = make([][]float32, len(row.vec)/H)
			for t := range res[i] {
				res[i][t] = row.vec[t*H : (t+1)*H]
			}
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	})
}

// teiEmbedSparse answers POST /embed_sparse: for each input, its SPLADE
// vector (pipeline.SparsePool) as its non-zero entries, by index.
func (s *Server) teiEmbedSparse(w http.ResponseWriter, r *http.Request) {
	answer(w, writeTEIError, func() *apiError {
		rows, e := s.tokenRows(w, r, poolSparse)
		if e != nil {
			return e
		}
		res := make([][]TEISparseValue, len(rows))
		for i, row := range rows {
			res[i] = []TEISparseValue{}
			for v, x := range row.vec {
				if x != 0 {
					res[i] = append(res[i], TEISparseValue{Index: v, Value: x})
				}
			}
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	})
}

// tokenVectors copies row i's hidden states at the positions its mask
// keeps, one after the other.
func tokenVectors(hs []float32, mask []int32, i, T, H int) []float32 {
	n := 0
	for _, m := range mask {
		if m != 0 {
			n++
		}
	}
	v := make([]float32, 0, n*H)
	for t, m := range mask {
		if m != 0 {
			v = append(v, hs[(i*T+t)*H:(i*T+t+1)*H]...)
		}
	}
	return v
}
