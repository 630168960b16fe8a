package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// The routes that follow Hugging Face text-embeddings-inference (TEI: GET
// /health, GET /info, POST /embed) and OpenAI's embeddings API (POST
// /v1/embeddings). Their bodies are read as their anchors read them:
// unknown fields are ignored, so their clients' extra fields do no harm.

// apiError is a failed compatible request: its status, TEI's error_type, and,
// for OpenAI, the request field at fault.
type apiError struct {
	status int
	kind   string // TEI's error_type: Validation, Tokenizer, Empty, Overloaded, Backend, Unhealthy
	param  string
	msg    string
}

func errorf(status int, kind, param, format string, args ...any) *apiError {
	return &apiError{status: status, kind: kind, param: param, msg: fmt.Sprintf(format, args...)}
}

// TEIError is the body of TEI's error answers.
type TEIError struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

func writeTEIError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status, TEIError{Error: e.msg, ErrorType: e.kind})
}

// OpenAIError is the body of OpenAI's error answers.
type OpenAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeOpenAIError(w http.ResponseWriter, e *apiError) {
	var body OpenAIError
	body.Error.Message = e.msg
	if e.param != "" {
		body.Error.Param = &e.param
	}
	switch {
	case e.status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		code := "rate_limit_exceeded"
		body.Error.Type, body.Error.Code = "requests", &code
	case e.status >= 500 || e.status == http.StatusFailedDependency:
		body.Error.Type = "server_error"
	default:
		body.Error.Type = "invalid_request_error"
	}
	writeJSON(w, e.status, body)
}

// decodeCompat reads a compatible route's JSON body (read by handle,
// guard.go) into v (unknown fields ignored): 422 when it is not JSON of
// v's shape.
func (s *Server) decodeCompat(w http.ResponseWriter, r *http.Request, v any) *apiError {
	defer s.bodyDone(stateOf(r.Context()))
	dec := json.NewDecoder(bytes.NewReader(bodyOf(r)))
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusUnprocessableEntity, "Validation", "", "request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusUnprocessableEntity, "Validation", "", "request body: more than one JSON value, or data after it")
	}
	return nil
}

// texts reads "inputs" (TEI) or "input" (OpenAI): a string or an array of
// strings.
func texts(raw json.RawMessage, field string) ([]string, *apiError) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "%q is missing", field)
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", field, "%q: want a string or an array of strings (token ids are not taken)", field)
	}
	return many, nil
}

// truncates says whether a request that says truncate (nil: it does not
// say) has its long inputs cut: what it says, else Options.AutoTruncate
// (TEI's rule: an explicit "truncate": false refuses them even under
// --auto-truncate).
func (s *Server) truncates(truncate *bool) bool {
	if truncate != nil {
		return *truncate
	}
	return s.opts.AutoTruncate
}

// embedOptions are what a compatible request asks of its vectors.
type embedOptions struct {
	truncate, left bool // cut inputs that are too long, keeping their end when left
	dims           int  // keep the first dims values (0: all)
	normalize      bool
	advice         string  // what the route's too-long error advises (default: TEI's "truncate": true)
	promptName     *string // TEI's prompt_name (nil: the server's default prompt)
}

// embedTexts embeds texts for a compatible route: it checks them against
// the limits, tokenizes and truncates them, runs them through the batcher
// (which takes the request's slot over), cuts the vectors to o.dims and
// normalizes them after. It returns the vectors and the tokens they came
// from, [CLS] and [SEP] included.
func (s *Server) embedTexts(r *http.Request, texts []string, o embedOptions, field string) ([][]float32, int, *apiError) {
	in := make([]embedInput, len(texts))
	for i, t := range texts {
		in[i].text = t
	}
	return s.embedInputs(r, in, o, field)
}

// embedInputs is embedTexts for inputs that may be token ids.
func (s *Server) embedInputs(r *http.Request, in []embedInput, o embedOptions, field string) ([][]float32, int, *apiError) {
	eo, e := s.vectorOptions(pipeline.PoolDefault, o.promptName)
	if e != nil {
		return nil, 0, e
	}
	if D := eo.Vectorizer().Dim(s.model.Config.HiddenSize); o.dims < 0 || o.dims > D {
		return nil, 0, errorf(http.StatusUnprocessableEntity, "Validation", "dimensions", "dimensions %d: want 1 to the model's vector size %d", o.dims, D)
	}
	rows, tokens, e := s.prepareRows(r, in, o, field, poolVector, &eo)
	if e != nil {
		return nil, 0, e
	}
	if e := s.runRows(r, rows); e != nil {
		return nil, 0, e
	}
	out := make([][]float32, len(rows))
	for i, row := range rows {
		v := row.vec
		if o.dims > 0 {
			v = v[:o.dims]
		}
		if o.normalize {
			pipeline.Normalize(v)
		}
		out[i] = v
	}
	return out, tokens, nil
}

// prepareRows checks inputs against the limits (MaxInputs, MaxLength,
// the vocabulary for token ids), tokenizes the texts (prepared as eo says:
// its prompt, the folder's lowercasing; see pipeline.EmbedOptions.Text)
// and truncates what is too long when asked to (or when
// Options.AutoTruncate says so), and returns the rows, each pooled by pool
// (poolVector: by eo's vectorizer), with their tokens in all.
func (s *Server) prepareRows(r *http.Request, in []embedInput, o embedOptions, field string, pool pooling, eo *pipeline.EmbedOptions) ([]embedRow, int, *apiError) {
	switch {
	case len(in) == 0:
		return nil, 0, errorf(http.StatusBadRequest, "Empty", field, "batch is empty")
	case len(in) > s.opts.MaxInputs:
		return nil, 0, s.tooManyInputs(field, len(in))
	}
	advice := o.advice
	if advice == "" {
		advice = `ask for truncation with "truncate": true`
	}
	skip, err := pipeline.PromptSkip(s.tok, *eo)
	if err != nil {
		return nil, 0, errorf(http.StatusUnprocessableEntity, "Validation", "prompt_name", "%v", err)
	}
	if o.left && eo.PromptText() != "" {
		return nil, 0, errorf(http.StatusUnprocessableEntity, "Validation", "truncation_direction",
			"truncation_direction Left with a prompt (%q) would cut the prompt off; sentence-transformers truncates on the right", eo.PromptText())
	}
	rows := make([]embedRow, len(in))
	tokens := 0
	for i, x := range in {
		var ids, types []int32
		rowSkip := skip
		if x.isIDs {
			rowSkip = 0 // token ids are taken as they are: no prompt
			if n := len(x.ids); n == 0 {
				return nil, 0, errorf(http.StatusUnprocessableEntity, "Validation", field, "input %d has no token ids", i)
			}
			ids, types = x.ids, make([]int32, len(x.ids))
			if n := len(ids); n > s.opts.MaxLength {
				if !o.truncate {
					return nil, 0, errorf(http.StatusRequestEntityTooLarge, "Validation", field,
						"input %d has %d tokens; the limit is %d (max_input_length); %s", i, n, s.opts.MaxLength, advice)
				}
				if o.left {
					ids, types = ids[n-s.opts.MaxLength:], types[n-s.opts.MaxLength:]
				} else {
					ids, types = ids[:s.opts.MaxLength], types[:s.opts.MaxLength]
				}
			}
		} else {
			noteChars(r.Context(), x.text)
			// Without truncation the tokens past the limit are counted, not
			// kept; cut at the end, the tokenizer stops once it has the kept
			// ones; cut at the start (left), it needs them all (the body's
			// limit bounds them).
			opts := tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone, Limit: s.opts.MaxLength}
			if o.truncate {
				opts.Limit = 0
				if !o.left {
					opts = tokenizer.EncodeOptions{MaxLength: s.opts.MaxLength, Truncation: tokenizer.TruncateLongestFirst}
				}
			}
			enc, err := s.tok.Encode(eo.Text(x.text), opts)
			if n, ok := tooLong(err); ok {
				return nil, 0, errorf(http.StatusRequestEntityTooLarge, "Validation", field,
					"input %d has %d tokens; the limit is %d (max_input_length); %s", i, n, s.opts.MaxLength, advice)
			}
			if err != nil {
				return nil, 0, errorf(http.StatusUnprocessableEntity, "Tokenizer", field, "input %d: %v", i, err)
			}
			ids, types = tokenizer.Int32s(enc.IDs), tokenizer.Int32s(enc.TypeIDs)
			if n := len(ids); n > s.opts.MaxLength {
				if !o.truncate {
					return nil, 0, errorf(http.StatusRequestEntityTooLarge, "Validation", field,
						"input %d has %d tokens; the limit is %d (max_input_length); %s", i, n, s.opts.MaxLength, advice)
				}
				ids, types = pipeline.Truncate(enc, s.opts.MaxLength, o.left)
			}
		}
		rows[i] = embedRow{ids: ids, types: types, pool: pool, vz: eo.Vectorizer(), skip: rowSkip}
		tokens += len(ids)
	}
	return rows, tokens, nil
}

// answer runs h and answers its error, if any, with fail.
func answer(w http.ResponseWriter, fail func(http.ResponseWriter, *apiError), h func() *apiError) {
	if e := h(); e != nil {
		fail(w, e)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
}

// TEIInfo is what GET /info returns: TEI's main fields.
type TEIInfo struct {
	ModelID               string         `json:"model_id"`
	ServedModelName       string         `json:"served_model_name"` // Options.Name, as model_id (TEI's model_id is the Hub id)
	ModelSHA              *string        `json:"model_sha"`
	ModelDType            string         `json:"model_dtype"` // float32, bfloat16 or int8
	ModelType             map[string]any `json:"model_type"`  // {"embedding": {"pooling": …}}, or {"classifier"|"reranker": {"id2label", "label2id"}} (tei.go)
	Pooling               string         `json:"pooling"`     // the folder's pooling modes ("mean", "cls+max"), pooler (the model's, RoFormer-Sim) or mean
	MaxConcurrentRequests int            `json:"max_concurrent_requests"`
	MaxInputLength        int            `json:"max_input_length"`
	MaxBatchTokens        int            `json:"max_batch_tokens"`
	MaxBatchRequests      int            `json:"max_batch_requests"`
	MaxClientBatchSize    int            `json:"max_client_batch_size"`
	Routes                []string       `json:"routes"` // the routes that answer for this model, as GET /v1/model lists them
}

// TEIInfo describes the model and the limits as TEI's GET /info does.
func (s *Server) TEIInfo() TEIInfo {
	dtype := map[roformer.Precision]string{roformer.PrecisionBF16: "bfloat16", roformer.PrecisionInt8: "int8"}[s.model.Precision()]
	if dtype == "" {
		dtype = "float32"
	}
	pooling := "mean"
	if eo, e := s.vectorOptions(pipeline.PoolDefault, nil); e == nil {
		pooling = string(eo.Pooling)
	}
	return TEIInfo{ModelID: s.opts.Name, ServedModelName: s.opts.Name, ModelDType: dtype, ModelType: s.teiModelType(pooling),
		Pooling: pooling, MaxConcurrentRequests: s.opts.MaxConcurrentRequests, MaxInputLength: s.opts.MaxLength,
		MaxBatchTokens: s.opts.MaxBatchTokens, MaxBatchRequests: s.opts.MaxBatchRequests, MaxClientBatchSize: s.opts.MaxInputs,
		Routes: s.Info().Endpoints}
}

func (s *Server) teiInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.TEIInfo())
}

// TEIEmbedRequest is the body of POST /embed.
type TEIEmbedRequest struct {
	Inputs              json.RawMessage `json:"inputs"`                         // a string, an array of strings, token ids or an array of token-id arrays
	Normalize           *bool           `json:"normalize,omitempty"`            // default true
	Truncate            *bool           `json:"truncate,omitempty"`             // default: --auto-truncate's (false: too long is a 413)
	TruncationDirection string          `json:"truncation_direction,omitempty"` // "Right" (default) or "Left"
	Dimensions          *int            `json:"dimensions,omitempty"`           // keep the first n values
	PromptName          *string         `json:"prompt_name,omitempty"`          // one of a sentence-transformers folder's prompts (default: the server's)
}

// teiEmbed answers POST /embed with a bare [[float]].
func (s *Server) teiEmbed(w http.ResponseWriter, r *http.Request) {
	answer(w, writeTEIError, func() *apiError {
		var req TEIEmbedRequest
		if e := s.decodeCompat(w, r, &req); e != nil {
			return e
		}
		in, e := s.inputs(req.Inputs, "inputs")
		if e != nil {
			return e
		}
		o := embedOptions{truncate: s.truncates(req.Truncate), normalize: req.Normalize == nil || *req.Normalize, promptName: req.PromptName}
		if o.left, e = truncationDirection(req.TruncationDirection); e != nil {
			return e
		}
		if req.Dimensions != nil {
			if *req.Dimensions < 1 {
				return errorf(http.StatusUnprocessableEntity, "Validation", "dimensions", "dimensions %d: want at least 1", *req.Dimensions)
			}
			o.dims = *req.Dimensions
		}
		vecs, _, e := s.embedInputs(r, in, o, "inputs")
		if e != nil {
			return e
		}
		writeJSON(w, http.StatusOK, vecs)
		return nil
	})
}

// OpenAIEmbeddingsRequest is the body of POST /v1/embeddings.
type OpenAIEmbeddingsRequest struct {
	Input          json.RawMessage `json:"input"`                     // a string or an array of strings
	Model          string          `json:"model"`                     // any name: the server has one model and answers with its name
	EncodingFormat string          `json:"encoding_format,omitempty"` // "float" (default) or "base64"
	Dimensions     *int            `json:"dimensions,omitempty"`      // keep the first n values (then normalized)
}

// OpenAIEmbedding is one vector of an OpenAI answer: a []float32, or with
// encoding_format "base64" the base64 of its little-endian float32 bytes.
type OpenAIEmbedding struct {
	Object    string `json:"object"` // "embedding"
	Embedding any    `json:"embedding"`
	Index     int    `json:"index"`
}

// OpenAIEmbeddingsResponse is the answer of POST /v1/embeddings.
type OpenAIEmbeddingsResponse struct {
	Object string            `json:"object"` // "list"
	Data   []OpenAIEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// openAIEmbeddings answers POST /v1/embeddings. Vectors are normalized (as
// OpenAI's are), or for a sentence-transformers folder as its modules make
// them (sentence-transformers' encode); an input that is too long is a
// 400, as OpenAI answers.
func (s *Server) openAIEmbeddings(w http.ResponseWriter, r *http.Request) {
	answer(w, writeOpenAIError, func() *apiError {
		var req OpenAIEmbeddingsRequest
		if e := s.decodeCompat(w, r, &req); e != nil {
			if e.status == http.StatusUnprocessableEntity {
				e.status = http.StatusBadRequest
			}
			return e
		}
		in, e := texts(req.Input, "input")
		if e == nil {
			for i, t := range in {
				if t == "" {
					e = errorf(http.StatusBadRequest, "Validation", "input", "input %d is empty", i)
					break
				}
			}
		}
		if e != nil {
			e.status = http.StatusBadRequest
			return e
		}
		base64Out := false
		switch req.EncodingFormat {
		case "", "float":
		case "base64":
			base64Out = true
		default:
			return errorf(http.StatusBadRequest, "Validation", "encoding_format", `encoding_format %q: want "float" or "base64"`, req.EncodingFormat)
		}
		// A sentence-transformers folder's vectors are as its modules
		// make them (unit length when it ends with Normalize, and then
		// again after "dimensions" cuts them); a plain model's are
		// normalized, as OpenAI's are.
		o := embedOptions{truncate: s.opts.AutoTruncate, normalize: s.opts.Sentence == nil, advice: "shorten it (this route does not truncate; the server truncates when started with --auto-truncate)"}
		if req.Dimensions != nil {
			if *req.Dimensions < 1 {
				return errorf(http.StatusBadRequest, "Validation", "dimensions", "dimensions %d: want at least 1", *req.Dimensions)
			}
			o.dims = *req.Dimensions
			o.normalize = o.normalize || s.normalizes()
		}
		vecs, tokens, e := s.embedTexts(r, in, o, "input")
		if e != nil {
			if e.status < 500 && e.status != http.StatusTooManyRequests && e.status != http.StatusFailedDependency {
				e.status = http.StatusBadRequest
			}
			if e.status == http.StatusFailedDependency {
				e.status = http.StatusInternalServerError
			}
			return e
		}
		res := OpenAIEmbeddingsResponse{Object: "list", Data: make([]OpenAIEmbedding, len(vecs)), Model: s.opts.Name}
		for i, v := range vecs {
			res.Data[i] = OpenAIEmbedding{Object: "embedding", Embedding: v, Index: i}
			if base64Out {
				b := make([]byte, 4*len(v))
				for j, x := range v {
					binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
				}
				res.Data[i].Embedding = base64.StdEncoding.EncodeToString(b)
			}
		}
		res.Usage.PromptTokens, res.Usage.TotalTokens = tokens, tokens
		writeJSON(w, http.StatusOK, res)
		return nil
	})
}

// tooManyInputs is TEI's 413 for a batch of n inputs over MaxInputs.
func (s *Server) tooManyInputs(field string, n int) *apiError {
	return errorf(http.StatusRequestEntityTooLarge, "Validation", field, "batch size %d > maximum allowed batch size %d", n, s.opts.MaxInputs)
}
