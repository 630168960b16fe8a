package server

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// embedInput is one input of an embedding route: a text, or (isIDs) the
// token ids a client tokenized it to, taken as they are ([CLS] and [SEP]
// as the client put them, token types 0), as TEI takes them.
type embedInput struct {
	text  string
	ids   []int32
	isIDs bool
}

// inputs reads TEI's "inputs" of the embedding routes: a string, an
// array of strings, an array of token ids (one input) or an array of
// arrays of token ids. Each id must be in [0, vocabulary); the arrays'
// lengths are checked by prepareRows. The body's bound (MaxBodyBytes)
// bounds what decoding allocates.
func (s *Server) inputs(raw json.RawMessage, field string) ([]embedInput, *apiError) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "%q is missing", field)
	}
	if strs, e := texts(raw, field); e == nil {
		in := make([]embedInput, len(strs))
		for i, t := range strs {
			in[i].text = t
		}
		return in, nil
	}
	var lists [][]int64
	var one []int64
	if err := json.Unmarshal(raw, &one); err == nil {
		lists = [][]int64{one}
	} else if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "%q: want a string, an array of strings, an array of token ids or an array of arrays of token ids", field)
	}
	V := int64(s.model.Config.VocabSize)
	in := make([]embedInput, len(lists))
	for i, l := range lists {
		ids := make([]int32, len(l))
		for j, id := range l {
			if id < 0 || id >= V {
				return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "input %d, token %d: id %d is not in [0, %d) (the vocabulary)", i, j, id, V)
			}
			ids[j] = int32(id)
		}
		in[i] = embedInput{ids: ids, isIDs: true}
	}
	return in, nil
}
