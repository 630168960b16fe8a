package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/roformer-go/roformer/model/roformer"
)

// POST / and POST /invocations answer the task of the loaded model, as TEI
// routes them by model kind and as the Hugging Face Inference API answers a
// model's task at the model's URL, so that a client given the server's root
// URL as its endpoint (@huggingface/inference's endpointUrl, huggingface_hub's
// InferenceClient, a SageMaker-style /invocations) works unchanged. The task
// comes from the body's shape first, then from the model:
//
//   - {"inputs": {"source_sentence": …, "sentences": […]}}: sentence
//     similarity, on every model (POST /similarity);
//   - {"inputs": {"question": …, "context": …}}, or a list of such objects,
//     with HF's "parameters" (top_k, doc_stride, max_answer_len, …):
//     question answering, on a question-answering model (POST
//     /v1/question-answering; its own body, {"question", "context"}, is
//     taken too);
//   - {"query": …, "texts": […]}: re-ranking, on a re-ranker (POST /rerank);
//   - otherwise by the model: a sentence-transformers folder and
//     RoFormer-Sim embed (feature extraction, POST /embed); a
//     sequence-classification model classifies (text classification, POST
//     /predict's scores, answered as HF's list of lists, one list per text,
//     even for one text); a token-classification model gives entities (POST
//     /v1/token-classification, HF's default aggregation_strategy "simple",
//     so that each entity has an entity_group); a question-answering model
//     answers questions (above); a masked-LM model fills masks (POST
//     /v1/fill-mask's candidates in HF's shape: [{score, token, token_str,
//     sequence}] for a text with one mask, a list of such lists for more
//     masks, a list per text for a list of texts); any other model (a base
//     encoder, a causal LM) embeds.
//
// For text classification "inputs" is a text, {"text", "text_pair"}, or a
// list of them (HF's batch); TEI's pair ["a", "b"] goes in a list, [["a",
// "b"]], as /predict takes it. HF's "parameters" are read where the route has
// them: fill-mask's top_k, text classification's top_k and function_to_apply
// ("none": the logits), token classification's aggregation_strategy and
// ignore_labels, question answering's options; the routes' own top-level
// fields (truncate, raw_scores, normalize, …) pass through. Limits, errors and
// answers are the native route's; a body that fits no task is a 422 that
// lists what the root takes for this model.

// The tasks of the root routes, as HF's pipeline tags name them.
const (
	taskFeatureExtraction   = "feature-extraction"
	taskSentenceSimilarity  = "sentence-similarity"
	taskTextClassification  = "text-classification"
	taskTokenClassification = "token-classification"
	taskQuestionAnswering   = "question-answering"
	taskFillMask            = "fill-mask"
	taskRerank              = "rerank"
)

// modelTask is the task the root answers for this model when the body's
// shape does not name one.
func (s *Server) modelTask() string {
	switch {
	case s.opts.Sentence != nil || s.model.IsSim():
		return taskFeatureExtraction
	case s.model.Head == roformer.HeadSequenceCls:
		return taskTextClassification
	case s.model.Head == roformer.HeadTokenCls:
		return taskTokenClassification
	case s.model.Head == roformer.HeadQA:
		return taskQuestionAnswering
	case s.model.Head == roformer.HeadMaskedLM:
		return taskFillMask
	}
	return taskFeatureExtraction
}

// rootBody is what the root reads of a body to choose its task.
type rootBody struct {
	Inputs     json.RawMessage `json:"inputs"`
	Parameters json.RawMessage `json:"parameters"`
	Query      json.RawMessage `json:"query"`
	Texts      json.RawMessage `json:"texts"`
	Question   json.RawMessage `json:"question"`
	Context    json.RawMessage `json:"context"`
}

// rootTask chooses the task for body (see the rule above).
func (s *Server) rootTask(body []byte) (string, rootBody, *apiError) {
	var b rootBody
	if err := json.Unmarshal(body, &b); err != nil {
		return "", b, errorf(http.StatusUnprocessableEntity, "Validation", "", "request body: %v", err)
	}
	present := func(raw json.RawMessage) bool {
		return len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
	}
	if !present(b.Inputs) {
		switch {
		case present(b.Query) && present(b.Texts) && s.reranker():
			return taskRerank, b, nil
		case present(b.Question) && present(b.Context) && s.questionAnswerer():
			return taskQuestionAnswering, b, nil
		}
		return "", b, s.fitsNoTask(`the body has no "inputs"`)
	}
	if keys, ok := objectKeys(b.Inputs); ok {
		switch {
		case keys["source_sentence"] && keys["sentences"]:
			return taskSentenceSimilarity, b, nil
		case keys["question"] && keys["context"]:
			if !s.questionAnswerer() {
				return "", b, s.fitsNoTask(`"inputs" is a question and a context, and this model is not a question-answering model (` + roformer.HeadQA.HFClass() + `)`)
			}
			return taskQuestionAnswering, b, nil
		case keys["text"] && s.modelTask() == taskTextClassification:
			return taskTextClassification, b, nil
		}
		return "", b, s.fitsNoTask(`"inputs" is an object with the keys ` + someKeys(keys, 8))
	}
	task := s.modelTask()
	if task == taskQuestionAnswering && !questionList(b.Inputs, s.opts.MaxInputs) {
		return "", b, s.fitsNoTask(`"inputs" is not {"question", "context"} or a list of them`)
	}
	return task, b, nil
}

// objectKeys returns the keys of raw when it is a JSON object.
func objectKeys(raw json.RawMessage) (map[string]bool, bool) {
	var obj map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &obj) != nil {
		return nil, false
	}
	keys := make(map[string]bool, len(obj))
	for k := range obj {
		keys[k] = true
	}
	return keys, true
}

// someKeys lists at most n of keys, sorted, and how many more there are,
// so that the error of an object with many keys does not echo them all.
func someKeys(keys map[string]bool, n int) string {
	all := slices.Sorted(maps.Keys(keys))
	if len(all) <= n {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:n], ", "), len(all)-n)
}

// questionList says whether raw is a list of {"question", "context"}
// objects. Of a list of more than limit items only the first is looked at:
// the list is the question answering's, to be refused for its length
// (hfQuestionAnswering) before its items are decoded.
func questionList(raw json.RawMessage, limit int) bool {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return false
	}
	if len(list) > limit {
		list = list[:1]
	}
	for _, x := range list {
		if k, ok := objectKeys(x); !ok || !k["question"] || !k["context"] {
			return false
		}
	}
	return true
}

// fitsNoTask is the 422 of a body that fits none of the root's tasks for
// this model: why, and what the root takes.
func (s *Server) fitsNoTask(why string) *apiError {
	task := s.modelTask()
	var own string
	switch task {
	case taskTextClassification:
		own = `{"inputs": a text, {"text", "text_pair"}, or a list of them}`
	case taskTokenClassification, taskFillMask, taskFeatureExtraction:
		own = `{"inputs": a text or a list of texts}`
	case taskQuestionAnswering:
		own = `{"inputs": {"question", "context"}} or a list of them`
	}
	msg := "POST /: " + why + `: for this model (` + s.model.Head.HFClass() + `) the root answers ` + task + ` as ` + own +
		`, and sentence similarity as {"inputs": {"source_sentence", "sentences"}}`
	if s.reranker() {
		msg += `, and re-ranking as {"query", "texts"}`
	}
	return errorf(http.StatusUnprocessableEntity, "Validation", "inputs", "%s", msg)
}

// root answers POST / and POST /invocations: it chooses the task, turns an
// HF-shaped body into the native route's body, runs that route's handler
// and, where the shapes differ, turns its answer into HF's.
func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	task, b, e := s.rootTask(bodyOf(r))
	if e != nil {
		s.bodyDone(stateOf(r.Context()))
		writeTEIError(w, e)
		return
	}
	switch task {
	case taskFeatureExtraction:
		s.teiEmbed(w, r)
	case taskSentenceSimilarity:
		s.teiSimilarity(w, r)
	case taskRerank:
		s.teiRerank(w, r)
	case taskTextClassification:
		s.hfTextClassification(w, r, b)
	case taskTokenClassification:
		s.unbatch(r)
		s.hfTokenClassification(w, r, b)
	case taskQuestionAnswering:
		s.unbatch(r)
		s.hfQuestionAnswering(w, r, b)
	case taskFillMask:
		s.unbatch(r)
		s.hfFillMask(w, r, b)
	}
}

// unbatch stops counting the request among the batched requests being
// prepared (the root is registered as batched, for the tasks whose rows go
// through the scheduler): its task's forward passes take the gate, and the
// scheduler need not wait for it.
func (s *Server) unbatch(r *http.Request) {
	if st := stateOf(r.Context()); st != nil && st.slot && st.batched && !st.handed {
		st.batched = false
		s.preparing.Add(-1)
	}
}

// rebody replaces the request's body, as handle read it, with the native
// route's body v.
func rebody(r *http.Request, v any) *apiError {
	b, err := json.Marshal(v)
	if err != nil {
		return errorf(http.StatusUnprocessableEntity, "Validation", "", "request body: %v", err)
	}
	if st := stateOf(r.Context()); st != nil {
		st.body = b
	}
	return nil
}

// parameters decodes HF's "parameters" into v (absent or null: left as it
// is).
func parameters(raw json.RawMessage, v any) *apiError {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errorf(http.StatusUnprocessableEntity, "Validation", "parameters", `"parameters": %v`, err)
	}
	return nil
}

// captured holds a native handler's answer for the root to reshape.
type captured struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.header }

func (c *captured) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *captured) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(p)
}

// reshape runs h into a buffer; a 200 answer is decoded into v and
// answered as convert makes it, any other is relayed as it is.
func reshape[T any](w http.ResponseWriter, r *http.Request, h http.HandlerFunc, convert func(T) any) {
	c := &captured{header: http.Header{}}
	h(c, r)
	if c.status != http.StatusOK {
		maps.Copy(w.Header(), c.header)
		w.WriteHeader(c.status)
		_, _ = w.Write(c.body.Bytes())
		return
	}
	var v T
	if err := json.Unmarshal(c.body.Bytes(), &v); err != nil {
		writeTEIError(w, errorf(http.StatusInternalServerError, "Backend", "", "reshaping the answer: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, convert(v))
}

// hfTextClassification answers HF's text classification with /predict:
// every text (or pair) a row of a /predict batch, so that the answer is a
// list of lists of {label, score}, best first, one list per text.
func (s *Server) hfTextClassification(w http.ResponseWriter, r *http.Request, b rootBody) {
	var p struct {
		TopK            int    `json:"top_k"`
		FunctionToApply string `json:"function_to_apply"`
	}
	var req TEIPredictRequest
	e := parameters(b.Parameters, &p)
	if e == nil {
		e = s.decodeCompat(w, r, &req)
	}
	if e == nil {
		switch strings.ToLower(p.FunctionToApply) {
		case "", "default":
		case "none":
			req.RawScores = true
		default:
			e = errorf(http.StatusUnprocessableEntity, "Validation", "parameters", `"parameters.function_to_apply" %q: the scores are the model's own (a softmax over the labels, or a sigmoid of each, by its problem_type); "none" gives the logits`, p.FunctionToApply)
		}
	}
	if e == nil && p.TopK < 0 {
		e = errorf(http.StatusUnprocessableEntity, "Validation", "parameters", `"parameters.top_k" %d: want at least 1`, p.TopK)
	}
	if e == nil {
		req.Inputs, e = s.classificationBatch(req.Inputs)
	}
	if e == nil {
		e = rebody(r, req)
	}
	if e != nil {
		writeTEIError(w, e)
		return
	}
	reshape(w, r, s.teiPredict, func(out [][]TEIPrediction) any {
		for i := range out {
			if p.TopK > 0 && p.TopK < len(out[i]) {
				out[i] = out[i][:p.TopK]
			}
		}
		return out
	})
}

// classificationBatch turns HF's text classification inputs (a text,
// {"text", "text_pair"}, or a list of them; a list may hold /predict's
// arrays of one or two strings too) into a /predict batch, [["a"], ["a",
// "b"], …]. What it does not know it leaves for /predict to refuse; a list
// of more than MaxInputs items it refuses (413) before it makes their rows.
func (s *Server) classificationBatch(raw json.RawMessage) (json.RawMessage, *apiError) {
	row := func(x json.RawMessage) (json.RawMessage, bool) {
		var one string
		if json.Unmarshal(x, &one) == nil {
			b, _ := json.Marshal([]string{one})
			return b, true
		}
		var pair struct {
			Text     *string `json:"text"`
			TextPair *string `json:"text_pair"`
		}
		if t := bytes.TrimSpace(x); len(t) > 0 && t[0] == '{' && json.Unmarshal(t, &pair) == nil && pair.Text != nil {
			xs := []string{*pair.Text}
			if pair.TextPair != nil {
				xs = append(xs, *pair.TextPair)
			}
			b, _ := json.Marshal(xs)
			return b, true
		}
		var xs []string
		return x, json.Unmarshal(x, &xs) == nil
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		if one, ok := row(raw); ok {
			return append(append(json.RawMessage("["), one...), ']'), nil
		}
		return raw, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return raw, nil
	}
	if len(list) > s.opts.MaxInputs {
		return nil, s.tooManyInputs("inputs", len(list))
	}
	for i, x := range list {
		var ok bool
		if list[i], ok = row(x); !ok {
			return raw, nil
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return raw, nil
	}
	return b, nil
}

// hfTokenClassification answers HF's token classification with
// /v1/token-classification, whose answer has HF's shape already; the
// aggregation is HF's Inference API's default, "simple", unless the
// parameters say.
func (s *Server) hfTokenClassification(w http.ResponseWriter, r *http.Request, b rootBody) {
	req := TokenClassificationRequest{Inputs: b.Inputs, AggregationStrategy: "simple"}
	e := parameters(b.Parameters, &req)
	if e == nil {
		req.Inputs = b.Inputs
		e = rebody(r, req)
	}
	if e != nil {
		s.bodyDone(stateOf(r.Context()))
		writeTEIError(w, e)
		return
	}
	s.tokenClassification(w, r)
}

// hfQuestionAnswering answers HF's question answering ({"inputs":
// {"question", "context"}, "parameters": {…}}, or a list of inputs) with
// /v1/question-answering; its own body passes as it is.
func (s *Server) hfQuestionAnswering(w http.ResponseWriter, r *http.Request, b rootBody) {
	if len(b.Inputs) == 0 {
		s.questionAnswering(w, r)
		return
	}
	var base QuestionAnsweringRequest
	e := parameters(b.Parameters, &base)
	var list []json.RawMessage
	one := !bytes.HasPrefix(bytes.TrimSpace(b.Inputs), []byte("["))
	if e == nil {
		if one {
			list = []json.RawMessage{b.Inputs}
		} else if err := json.Unmarshal(b.Inputs, &list); err != nil {
			e = errorf(http.StatusUnprocessableEntity, "Validation", "inputs", `"inputs": %v`, err)
		} else if len(list) > s.opts.MaxInputs { // before a request is made for each
			e = s.tooManyInputs("inputs", len(list))
		}
	}
	reqs := make([]QuestionAnsweringRequest, len(list))
	for i := 0; e == nil && i < len(list); i++ {
		var q struct {
			Question string `json:"question"`
			Context  string `json:"context"`
		}
		if err := json.Unmarshal(list[i], &q); err != nil {
			e = errorf(http.StatusUnprocessableEntity, "Validation", "inputs", `"inputs" %d: %v`, i, err)
			break
		}
		reqs[i] = base
		reqs[i].Question, reqs[i].Context = q.Question, q.Context
	}
	if e == nil {
		if one {
			e = rebody(r, reqs[0])
		} else {
			e = rebody(r, reqs)
		}
	}
	if e != nil {
		s.bodyDone(stateOf(r.Context()))
		writeTEIError(w, e)
		return
	}
	s.questionAnswering(w, r)
}

// hfFillMask answers HF's fill-mask with /v1/fill-mask, reshaped as HF's
// pipeline answers: per text, the candidates of its mask, or a list per
// mask when it has more than one; a list of those for a list of texts.
func (s *Server) hfFillMask(w http.ResponseWriter, r *http.Request, b rootBody) {
	var p struct {
		TopK    int             `json:"top_k"`
		Targets json.RawMessage `json:"targets"`
	}
	e := parameters(b.Parameters, &p)
	if e == nil && len(p.Targets) > 0 {
		e = errorf(http.StatusUnprocessableEntity, "Validation", "parameters", `"parameters.targets" is not taken: the candidates are the whole vocabulary's best top_k`)
	}
	if e == nil {
		// The inputs as the client sent them, for /v1/fill-mask to read
		// and check.
		e = rebody(r, struct {
			Inputs json.RawMessage `json:"inputs"`
			TopK   int             `json:"top_k,omitempty"`
		}{b.Inputs, p.TopK})
	}
	if e != nil {
		s.bodyDone(stateOf(r.Context()))
		writeTEIError(w, e)
		return
	}
	one := !bytes.HasPrefix(bytes.TrimSpace(b.Inputs), []byte("["))
	reshape(w, r, s.fillMask, func(res FillMaskResponse) any {
		out := make([]any, len(res.Results))
		for i, masks := range res.Results {
			if len(masks) == 1 {
				out[i] = masks[0]
			} else {
				out[i] = masks
			}
		}
		if one && len(out) == 1 {
			return out[0]
		}
		return out
	})
}

// muxPattern is the mux pattern of a route's path: "/" is the root alone
// ("/{$}"), not the mux's catch-all.
func muxPattern(path string) string {
	if path == "/" {
		return "/{$}"
	}
	return path
}
