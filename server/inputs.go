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
// array of strings, an array of token ids (one input) or an array whose
// items are strings or arrays of token ids, mixed as TEI takes them. Each
// id must be in [0, vocabulary); the arrays'
// lengths are checked by prepareRows. The body's bound (MaxBodyBytes)
// bounds what decoding allocates.
func (s *Server) inputs(raw json.RawMessage, field string) ([]embedInput, *apiError) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "%q is missing", field)
	}
	if strs, e := texts(raw, field); e == nil {
		if len(strs) > s.opts.MaxInputs { // before a row is made for each
			return nil, s.tooManyInputs(field, len(strs))
		}
		in := make([]embedInput, len(strs))
		for i, t := range strs {
			in[i].text = t
		}
		return in, nil
	}
	var one []int64
	if err := json.Unmarshal(raw, &one); err == nil {
		ids, e := s.tokenIDs(one, 0, field)
		if e != nil {
			return nil, e
		}
		return []embedInput{{ids: ids, isIDs: true}}, nil
	}
	// A batch whose inputs are texts or lists of ids, mixed as TEI takes them.
	var batch []json.RawMessage
	if err := json.Unmarshal(raw, &batch); err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "%q: want a string, an array of strings, an array of token ids or an array of arrays of token ids", field)
	}
	if len(batch) > s.opts.MaxInputs { // before each item is decoded
		return nil, s.tooManyInputs(field, len(batch))
	}
	in := make([]embedInput, len(batch))
	for i, x := range batch {
		if bytes.Equal(x, []byte("null")) {
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "input %d is null: want a string or an array of token ids", i)
		}
		if err := json.Unmarshal(x, &in[i].text); err == nil {
			continue
		}
		var l []int64
		if err := json.Unmarshal(x, &l); err != nil || l == nil {
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "input %d: want a string or an array of token ids", i)
		}
		ids, e := s.tokenIDs(l, i, field)
		if e != nil {
			return nil, e
		}
		in[i] = embedInput{ids: ids, isIDs: true}
	}
	return in, nil
}

// tokenIDs checks input i's ids against the vocabulary.
func (s *Server) tokenIDs(l []int64, i int, field string) ([]int32, *apiError) {
	V := int64(s.model.Config.VocabSize)
	ids := make([]int32, len(l))
	for j, id := range l {
		if id < 0 || id >= V {
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "input %d, token %d: id %d is not in [0, %d) (the vocabulary)", i, j, id, V)
		}
		ids[j] = int32(id)
	}
	return ids, nil
}
