package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"github.com/roformer-go/roformer/kernels"
	"math"
	"net/http"
	"slices"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// The rest of TEI's routes (text-embeddings-inference, router/src/http):
// POST /predict and /rerank for sequence-classification models, /similarity
// for every model, /tokenize and /decode. The forward passes of /predict,
// /rerank and /similarity go through the batching queue (batch.go) with the
// embedding requests: a classification row asks the scheduler for the
// head's logits instead of a pooled vector, and a batch that holds one runs
// the model with its head (its last hidden state serves the embedding rows
// of the same batch). Errors are TEI's {"error", "error_type"} with TEI's
// statuses: 413 for validation (too many inputs, too long without
// "truncate"), 400 for an empty batch, 422 for a body that does not parse
// or a tokenizer error, 424 for a forward pass that fails, 429 when the
// queue is full. A route the loaded model cannot serve is not served (404,
// where TEI answers 424 for /predict or /rerank on an embedding model), so
// that GET /info lists exactly the routes that exist.

// classifier says whether the model has a sequence-classification head
// (/predict answers), reranker whether it has one label (/rerank answers).
func (s *Server) classifier() bool { return s.model.Head == roformer.HeadSequenceCls }
func (s *Server) reranker() bool   { return s.classifier() && s.model.Config.NumLabels == 1 }

// teiModelType is TEI's model_type of GET /info: {"classifier": {id2label,
// label2id}} for a sequence-classification model ("reranker" with one
// label), {"embedding": {"pooling": …}} otherwise.
func (s *Server) teiModelType(pooling string) map[string]any {
	if !s.classifier() {
		return map[string]any{"embedding": map[string]string{"pooling": pooling}}
	}
	id2label, label2id := map[string]string{}, map[string]int{}
	for i, l := range s.model.Config.Labels() {
		id2label[fmt.Sprint(i)], label2id[l] = l, i
	}
	kind := "classifier"
	if s.reranker() {
		kind = "reranker"
	}
	return map[string]any{kind: map[string]any{"id2label": id2label, "label2id": label2id}}
}

// truncationDirection reads TEI's truncation_direction: "Right" (default,
// the text's first tokens stay) or "Left" (its last ones).
func truncationDirection(s string) (left bool, e *apiError) {
	switch s {
	case "", "Right", "right":
		return false, nil
	case "Left", "left":
		return true, nil
	}
	return false, errorf(http.StatusUnprocessableEntity, "Validation", "truncation_direction", `truncation_direction %q: want "Right" or "Left"`, s)
}

// fit cuts an encoding (a text or a pair, with its special tokens) to n
// tokens as HF's longest_first does, one token at a time from the longer
// text (the second on a tie), at its end (right) or its start (left); the
// added special tokens stay. It fails when only they would be left.
func fit(enc *tokenizer.Encoding, n int, left bool) (ids, types []int32, ok bool) {
	var pos [2][]int // the positions of each text's tokens
	for i, q := range enc.SequenceIDs {
		if q == 0 || q == 1 {
			pos[q] = append(pos[q], i)
		}
	}
	var cut [2]int
	for excess := len(enc.IDs) - n; excess > 0; excess-- {
		k := 1
		if len(pos[0])-cut[0] > len(pos[1])-cut[1] {
			k = 0
		}
		if len(pos[k]) == cut[k] {
			return nil, nil, false
		}
		cut[k]++
	}
	drop := make([]bool, len(enc.IDs))
	for k := range pos {
		gone := pos[k][len(pos[k])-cut[k]:]
		if left {
			gone = pos[k][:cut[k]]
		}
		for _, i := range gone {
			drop[i] = true
		}
	}
	for i, id := range enc.IDs {
		if !drop[i] {
			ids, types = append(ids, int32(id)), append(types, int32(enc.TypeIDs[i]))
		}
	}
	return ids, types, true
}

// classifyRows tokenizes texts (pairs where TextPair is set) into rows of
// the classification head, truncated when asked to.
func (s *Server) classifyRows(in []Input, truncate, left bool, field string) ([]embedRow, *apiError) {
	rows := make([]embedRow, len(in))
	opts := tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone}
	if !truncate {
		opts.Limit = s.opts.MaxLength // counted past it, not kept
	}
	for i, x := range in {
		enc, err := s.encode(x, opts)
		if n, ok := tooLong(err); ok {
			return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", field,
				"input %d has %d tokens; the limit is %d (max_input_length); ask for truncation with \"truncate\": true", i, n, s.opts.MaxLength)
		}
		if err != nil {
			return nil, errorf(http.StatusUnprocessableEntity, "Tokenizer", field, "input %d: %v", i, err)
		}
		ids, types := tokenizer.Int32s(enc.IDs), tokenizer.Int32s(enc.TypeIDs)
		if n := len(ids); n > s.opts.MaxLength {
			if !truncate {
				return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", field,
					"input %d has %d tokens; the limit is %d (max_input_length); ask for truncation with \"truncate\": true", i, n, s.opts.MaxLength)
			}
			var ok bool
			if ids, types, ok = fit(enc, s.opts.MaxLength, left); !ok {
				return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", field, "input %d cannot be truncated to %d tokens", i, s.opts.MaxLength)
			}
		}
		rows[i] = embedRow{ids: ids, types: types, pool: poolLogits}
	}
	return rows, nil
}

// runRows runs the rows of a request through the batcher and maps its
// failure to TEI's errors.
func (s *Server) runRows(r *http.Request, rows []embedRow) *apiError {
	err := s.submit(r.Context(), rows)
	if err == nil {
		return nil
	}
	if embedStatus(r.Context(), err) == http.StatusServiceUnavailable {
		return errorf(http.StatusServiceUnavailable, "Unhealthy", "", "%v", err)
	}
	s.opts.Log.Printf("server: %s %s: %v", r.Method, r.URL.Path, err)
	return errorf(http.StatusFailedDependency, "Backend", "", "%v", err)
}

// scores turns a row's logits into TEI's scores: as they are with raw, else
// a softmax over the labels for single-label classification and a sigmoid
// of each for multi-label classification and regression (HF's
// text-classification pipeline: the config's problem_type, else sigmoid for
// one label and softmax for more).
func (s *Server) scores(logits []float32, raw bool) ([]float64, *apiError) {
	out := make([]float64, len(logits))
	for i, x := range logits {
		out[i] = float64(x)
		if math.IsNaN(out[i]) {
			return nil, errorf(http.StatusFailedDependency, "Backend", "", "score is NaN")
		}
	}
	if raw {
		return out, nil
	}
	cfg := &s.model.Config
	sigmoid := cfg.ProblemType == "multi_label_classification" || cfg.ProblemType == "regression" ||
		(cfg.ProblemType == "" && cfg.NumLabels == 1)
	if sigmoid {
		for i, x := range out {
			out[i] = 1 / (1 + math.Exp(-x))
		}
		return out, nil
	}
	return kernels.Softmax64(logits), nil
}

// predictInputs reads /predict's "inputs" as TEI does: a string; an array
// of one or two strings (a text, a pair); or a batch, an array of such
// arrays. It says whether it was a batch.
func predictInputs(raw json.RawMessage) ([]Input, bool, *apiError) {
	bad := func(format string, args ...any) ([]Input, bool, *apiError) {
		return nil, false, errorf(http.StatusUnprocessableEntity, "Validation", "inputs", "\"inputs\": "+format+
			`; want a string, a pair of strings ["a", "b"], or a batch [["a"], ["a", "b"], …]`, args...)
	}
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return bad("missing")
	}
	seq := func(xs []string) (Input, bool) {
		switch len(xs) {
		case 1:
			return Input{Text: xs[0]}, true
		case 2:
			return Input{Text: xs[0], TextPair: &xs[1]}, true
		}
		return Input{}, false
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []Input{{Text: one}}, false, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		if len(strs) == 0 {
			return nil, true, errorf(http.StatusBadRequest, "Empty", "inputs", "batch is empty")
		}
		in, ok := seq(strs)
		if !ok {
			return bad("an array of %d strings", len(strs))
		}
		return []Input{in}, false, nil
	}
	var batch [][]string
	if err := json.Unmarshal(raw, &batch); err != nil {
		return bad("%v", err)
	}
	out := make([]Input, len(batch))
	for i, xs := range batch {
		var ok bool
		if out[i], ok = seq(xs); !ok {
			return bad("batch element %d has %d strings", i, len(xs))
		}
	}
	return out, true, nil
}

// TEIPredictRequest is the body of POST /predict.
type TEIPredictRequest struct {
	Inputs              json.RawMessage `json:"inputs"`
	RawScores           bool            `json:"raw_scores,omitempty"`           // the logits, without softmax or sigmoid
	Truncate            *bool           `json:"truncate,omitempty"`             // default: --auto-truncate's (false: too long is a 413)
	TruncationDirection string          `json:"truncation_direction,omitempty"` // "Right" (default) or "Left"
}

// TEIPrediction is one label's score in /predict's answer.
type TEIPrediction struct {
	Score float64 `json:"score"`
	Label string  `json:"label"`
}

// teiPredict answers POST /predict: per input, every label's score, best
// first; a list of such lists for a batch.
func (s *Server) teiPredict(w http.ResponseWriter, r *http.Request) {
	answer(w, writeTEIError, func() *apiError {
		var req TEIPredictRequest
		if e := s.decodeCompat(w, r, &req); e != nil {
			return e
		}
		in, batch, e := predictInputs(req.Inputs)
		if e != nil {
			return e
		}
		left, e := truncationDirection(req.TruncationDirection)
		if e != nil {
			return e
		}
		if len(in) > s.opts.MaxInputs {
			return s.tooManyInputs("inputs", len(in))
		}
		rows, e := s.classifyRows(in, s.truncates(req.Truncate), left, "inputs")
		if e != nil {
			return e
		}
		if e := s.runRows(r, rows); e != nil {
			return e
		}
		labels := s.model.Config.Labels()
		out := make([][]TEIPrediction, len(rows))
		for i, row := range rows {
			sc, e := s.scores(row.vec, req.RawScores)
			if e != nil {
				return e
			}
			out[i] = make([]TEIPrediction, len(sc))
			for k, x := range sc {
				out[i][k] = TEIPrediction{Score: x, Label: labels[k]}
			}
			slices.SortStableFunc(out[i], func(a, b TEIPrediction) int { return cmp.Compare(b.Score, a.Score) })
		}
		if batch {
			writeJSON(w, http.StatusOK, out)
		} else {
			writeJSON(w, http.StatusOK, out[0])
		}
		return nil
	})
}

// TEIRerankRequest is the body of POST /rerank.
type TEIRerankRequest struct {
	Query               *string  `json:"query"`
	Texts               []string `json:"texts"`
	ReturnText          bool     `json:"return_text,omitempty"`
	RawScores           bool     `json:"raw_scores,omitempty"` // the logit, without the sigmoid
	Truncate            *bool    `json:"truncate,omitempty"`
	TruncationDirection string   `json:"truncation_direction,omitempty"`
}

// TEIRank is one text's place in /rerank's answer.
type TEIRank struct {
	Index int     `json:"index"`
	Text  *string `json:"text,omitempty"` // with return_text
	Score float64 `json:"score"`
}

// teiRerank answers POST /rerank: each (query, text) pair through the
// cross-encoder, the texts best first.
func (s *Server) teiRerank(w http.ResponseWriter, r *http.Request) {
	answer(w, writeTEIError, func() *apiError {
		var req TEIRerankRequest
		if e := s.decodeCompat(w, r, &req); e != nil {
			return e
		}
		switch {
		case req.Query == nil:
			return errorf(http.StatusUnprocessableEntity, "Validation", "query", `"query" is missing`)
		case len(req.Texts) == 0:
			return errorf(http.StatusBadRequest, "Empty", "texts", "`texts` cannot be empty")
		case len(req.Texts) > s.opts.MaxInputs:
			return s.tooManyInputs("texts", len(req.Texts))
		}
		left, e := truncationDirection(req.TruncationDirection)
		if e != nil {
			return e
		}
		scores, _, e := s.rerankScores(r, *req.Query, req.Texts, s.truncates(req.Truncate), left, req.RawScores, "texts")
		if e != nil {
			return e
		}
		out := make([]TEIRank, len(scores))
		for i, sc := range scores {
			out[i] = TEIRank{Index: i, Score: sc}
			if req.ReturnText {
				out[i].Text = &req.Texts[i]
			}
		}
		slices.SortStableFunc(out, func(a, b TEIRank) int { return cmp.Compare(b.Score, a.Score) })
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// rerankScores runs each (query, text) pair through the cross-encoder (the
// rows of one request, batched with the others) and returns the score of
// each text, in order, as scores makes it (the sigmoid of the logit, or the
// logit with raw), and the tokens of all the pairs.
func (s *Server) rerankScores(r *http.Request, query string, texts []string, truncate, left, raw bool, field string) ([]float64, int, *apiError) {
	in := make([]Input, len(texts))
	for i := range texts {
		in[i] = Input{Text: query, TextPair: &texts[i]}
	}
	rows, e := s.classifyRows(in, truncate, left, field)
	if e != nil {
		return nil, 0, e
	}
	if e := s.runRows(r, rows); e != nil {
		return nil, 0, e
	}
	out, tokens := make([]float64, len(rows)), 0
	for i, row := range rows {
		sc, e := s.scores(row.vec, raw)
		if e != nil {
			return nil, 0, e
		}
		out[i] = sc[0]
		tokens += len(row.ids)
	}
	return out, tokens, nil
}

// TEISimilarityRequest is the body of POST /similarity.
type TEISimilarityRequest struct {
	Inputs struct {
		SourceSentence *string  `json:"source_sentence"`
		Sentences      []string `json:"sentences"`
	} `json:"inputs"`
	Truncate            *bool   `json:"truncate,omitempty"`
	TruncationDirection string  `json:"truncation_direction,omitempty"`
	PromptName          *string `json:"prompt_name,omitempty"` // one of a sentence-transformers folder's prompts (default: the server's)
	// Parameters may hold prompt_name too (as TEI's parameters object).
	Parameters struct {
		PromptName *string `json:"prompt_name,omitempty"`
	} `json:"parameters"`
}

// teiSimilarity answers POST /similarity: the similarity of the source
// sentence's vector with each sentence's, the vectors made as /embed
// makes them: the cosine, or the folder's similarity_fn_name for a
// sentence-transformers folder (dot, or the negative euclidean or
// manhattan distance, as sentence-transformers' similarity).
func (s *Server) teiSimilarity(w http.ResponseWriter, r *http.Request) {
	answer(w, writeTEIError, func() *apiError {
		var req TEISimilarityRequest
		if e := s.decodeCompat(w, r, &req); e != nil {
			return e
		}
		switch {
		case req.Inputs.SourceSentence == nil:
			return errorf(http.StatusUnprocessableEntity, "Validation", "inputs", `"inputs.source_sentence" is missing`)
		case len(req.Inputs.Sentences) == 0:
			return errorf(http.StatusBadRequest, "Empty", "inputs", "`inputs.sentences` cannot be empty")
		case len(req.Inputs.Sentences)+1 > s.opts.MaxInputs:
			return errorf(http.StatusRequestEntityTooLarge, "Validation", "inputs", "batch size %d (the source sentence and the sentences) > maximum allowed batch size %d",
				len(req.Inputs.Sentences)+1, s.opts.MaxInputs)
		}
		left, e := truncationDirection(req.TruncationDirection)
		if e != nil {
			return e
		}
		texts := append([]string{*req.Inputs.SourceSentence}, req.Inputs.Sentences...)
		prompt := req.PromptName
		if prompt == nil {
			prompt = req.Parameters.PromptName
		}
		vecs, _, e := s.embedTexts(r, texts, embedOptions{truncate: s.truncates(req.Truncate), left: left, promptName: prompt}, "inputs")
		if e != nil {
			return e
		}
		out := make([]float64, len(vecs)-1)
		for i, v := range vecs[1:] {
			out[i] = s.similarity(vecs[0], v)
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// TEITokenizeRequest is the body of POST /tokenize.
type TEITokenizeRequest struct {
	Inputs           json.RawMessage `json:"inputs"`                       // a string or an array of strings
	AddSpecialTokens *bool           `json:"add_special_tokens,omitempty"` // default true
	PromptName       *string         `json:"prompt_name,omitempty"`        // one of a sentence-transformers folder's prompts, put before each input (default: the server's, as /embed)
}

// TEIToken is one token of /tokenize's answer. Start and Stop are byte
// offsets into the prompt followed by the input, as TEI gives them (Text is
// (prompt + input)[start:stop]); null for the added special tokens, whose
// Text is the token.
type TEIToken struct {
	ID      int    `json:"id"`
	Text    string `json:"text"`
	Special bool   `json:"special"`
	Start   *int   `json:"start"`
	Stop    *int   `json:"stop"`
}

// teiTokenize answers POST /tokenize with a list of tokens per input. As
// TEI's, it tokenizes the prompt (prompt_name, else the server's default, as
// /embed resolves it; an unknown name is a 422) followed by the input, as
// sent otherwise (not trimmed or lowercased), and the prompt's tokens are in
// the answer.
func (s *Server) teiTokenize(w http.ResponseWriter, r *http.Request) {
	var req TEITokenizeRequest
	if e := s.decodeCompat(w, r, &req); e != nil {
		writeTEIError(w, e)
		return
	}
	in, e := texts(req.Inputs, "inputs")
	switch {
	case e != nil:
	case len(in) == 0:
		e = errorf(http.StatusBadRequest, "Empty", "inputs", "`inputs` cannot be empty")
	case len(in) > s.opts.MaxInputs:
		e = s.tooManyInputs("inputs", len(in))
	}
	if e != nil {
		writeTEIError(w, e)
		return
	}
	eo, e := s.vectorOptions(pipeline.PoolDefault, req.PromptName)
	if e != nil {
		writeTEIError(w, e)
		return
	}
	prompt := eo.PromptText()
	opts := tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone, NoSpecialTokens: req.AddSpecialTokens != nil && !*req.AddSpecialTokens}
	out := make([][]TEIToken, len(in))
	tokens := 0
	for i, text := range in {
		text = prompt + text
		opts.Limit = max(s.maxAnswerTokens()-tokens, 1) // the tokens past it counted, not kept
		enc, err := s.tok.Encode(text, opts)
		if n, ok := tooLong(err); ok {
			enc, err = &tokenizer.Encoding{IDs: make([]int, n)}, nil
		}
		if err != nil {
			writeTEIError(w, errorf(http.StatusUnprocessableEntity, "Tokenizer", "inputs", "input %d: %v", i, err))
			return
		}
		if tokens += len(enc.IDs); tokens > s.maxAnswerTokens() {
			writeTEIError(w, errorf(http.StatusRequestEntityTooLarge, "Validation", "inputs", "%d tokens in the first %d inputs; the limit is %d a request (max_client_batch_size %d × max_input_length %d)",
				tokens, i+1, s.maxAnswerTokens(), s.opts.MaxInputs, s.opts.MaxLength))
			return
		}
		out[i] = make([]TEIToken, len(enc.IDs))
		for k, id := range enc.IDs {
			t := TEIToken{ID: id, Text: enc.Tokens[k], Special: true}
			if enc.SpecialTokensMask[k] == 0 {
				start, stop := enc.Offsets[k][0], enc.Offsets[k][1]
				t = TEIToken{ID: id, Text: text[start:stop], Start: &start, Stop: &stop}
			}
			out[i][k] = t
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// TEIDecodeRequest is the body of POST /decode.
type TEIDecodeRequest struct {
	IDs               json.RawMessage `json:"ids"`                           // [id, …] or [[id, …], …]
	SkipSpecialTokens *bool           `json:"skip_special_tokens,omitempty"` // default true
}

// teiDecode answers POST /decode with one string per list of ids.
func (s *Server) teiDecode(w http.ResponseWriter, r *http.Request) {
	fail := func(e *apiError) { writeTEIError(w, e) }
	var req TEIDecodeRequest
	if e := s.decodeCompat(w, r, &req); e != nil {
		fail(e)
		return
	}
	if len(req.IDs) == 0 || bytes.Equal(bytes.TrimSpace(req.IDs), []byte("null")) {
		fail(errorf(http.StatusUnprocessableEntity, "Validation", "ids", `"ids" is missing`))
		return
	}
	var batch [][]int
	var one []int // [] is one empty list, as TEI reads it
	if json.Unmarshal(req.IDs, &one) == nil {
		batch = [][]int{one}
	} else if err := json.Unmarshal(req.IDs, &batch); err != nil {
		fail(errorf(http.StatusUnprocessableEntity, "Validation", "ids", `"ids": want a list of token ids or a list of such lists`))
		return
	}
	if len(batch) > s.opts.MaxInputs {
		fail(s.tooManyInputs("ids", len(batch)))
		return
	}
	// The ids of all the lists, like the tokens of a /tokenize answer: at
	// most MaxInputs × MaxLength, so that the decoded text is bounded too.
	ids := 0
	for _, l := range batch {
		ids += len(l)
	}
	if ids > s.maxAnswerTokens() {
		fail(errorf(http.StatusRequestEntityTooLarge, "Validation", "ids", "%d ids in all, more than the %d a request may decode (--max-inputs %d × --max-length %d)",
			ids, s.maxAnswerTokens(), s.opts.MaxInputs, s.opts.MaxLength))
		return
	}
	skip := req.SkipSpecialTokens == nil || *req.SkipSpecialTokens
	out := make([]string, len(batch))
	for i, ids := range batch {
		for _, id := range ids {
			if id < 0 || id >= s.tok.VocabSize() {
				fail(errorf(http.StatusUnprocessableEntity, "Tokenizer", "ids", "list %d: id %d is outside the vocabulary [0, %d)", i, id, s.tok.VocabSize()))
				return
			}
		}
		out[i] = s.tok.Decode(ids, skip)
	}
	writeJSON(w, http.StatusOK, out)
}

// wantsLogits says whether a row of the batch asks for the head's logits;
// otherwise the batch runs the encoder alone (sparse rows run the head
// themselves, in chunks: runBatch's poolSparse).
func wantsLogits(batch []pendingRow) bool {
	for _, p := range batch {
		if p.j.rows[p.i].pool == poolLogits {
			return true
		}
	}
	return false
}
