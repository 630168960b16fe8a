package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// POST /generate, text-generation-inference's (TGI's) route: {"inputs":
// "text", "parameters": {…}, "stream": bool}. A causal-LM model continues
// the text without special tokens (as HF's text-generation pipeline);
// RoFormer-Sim (a masked-LM model with a pooler whose config says
// is_decoder, or any LM model asked with "unilm": true) encodes [CLS] text
// [SEP] and decodes in UniLM mode until [SEP]. Generation holds the gate of
// the forward passes (server.go's run, batch.go's scheduler) from its
// prompt to its last token, so it runs one at a time with the other
// requests' forwards. A streaming answer is server-sent events, one per
// token; a client that leaves stops the generation at its next token.

// DefaultMaxNewTokens is max_new_tokens of a POST /generate that does not
// say (at most Options.MaxNewTokens; the prompt and the new tokens
// together are bounded by Options.MaxLength).
const DefaultMaxNewTokens = 20

// A generation's cost is checked before anything is allocated for it, in
// this order: max_new_tokens against Options.MaxNewTokens, num_beams
// against Options.MaxBeams (and the vocabulary), then, once the prompt is
// tokenized, prompt + new tokens against Options.MaxLength, beams ×
// (prompt + new tokens), the rows the cache holds, against
// Options.MaxBatchTokens, the memory that roformer.Model.GenerateCost
// estimates against Options.MaxGenerateBytes, and a beam search's beams ×
// vocabulary × (prompt + new tokens) against Options.MaxBeamWork. Each refusal is a 422 that
// names the field, the value and the limit.

// GenerateParameters are TGI's "parameters" of POST /generate that this
// server honours (others are ignored, as the compatible routes ignore
// unknown fields).
type GenerateParameters struct {
	MaxNewTokens      *int     `json:"max_new_tokens"`
	DoSample          bool     `json:"do_sample"`
	Temperature       *float64 `json:"temperature"`
	TopK              *int     `json:"top_k"`
	TopP              *float64 `json:"top_p"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	Seed              *uint64  `json:"seed"`
	NumBeams          *int     `json:"num_beams"`
	// UniLM asks for RoFormer-Sim's decoding on a model whose config does
	// not say so (not a TGI parameter).
	UniLM *bool `json:"unilm"`
}

// GenerateRequest is the body of POST /generate.
type GenerateRequest struct {
	Inputs     *string            `json:"inputs"`
	Parameters GenerateParameters `json:"parameters"`
	Stream     bool               `json:"stream"`
}

// GenerateResponse is the answer of a POST /generate that does not stream.
type GenerateResponse struct {
	GeneratedText string `json:"generated_text"`
}

// StreamToken is one generated token of a streaming answer.
type StreamToken struct {
	ID      int    `json:"id"`
	Text    string `json:"text"`
	Special bool   `json:"special"`
}

// StreamEvent is one server-sent event of a streaming POST /generate: a
// token, and on the last event the whole generated text (null before).
type StreamEvent struct {
	Token         StreamToken `json:"token"`
	GeneratedText *string     `json:"generated_text"`
	Details       any         `json:"details"`
}

// unilmDefault says whether the model is RoFormer-Sim (roformer.Model.IsSim:
// is_decoder in its config and a pooler) with an LM head.
func (s *Server) unilmDefault() bool {
	return s.model.LM != nil && s.model.IsSim()
}

// generator says whether POST /generate answers for this model (with the
// default mode).
func (s *Server) generator() bool {
	return s.model.Head == roformer.HeadCausalLM || s.unilmDefault()
}

// genJob is a checked generation request: the prompt, the model's decoder
// options and the search's.
type genJob struct {
	prompt []int32
	dec    roformer.DecoderOptions
	opts   generate.Options
}

// generateOptions checks the request and turns it into the prompt and the
// library's options.
func (s *Server) generateOptions(req *GenerateRequest) (*genJob, *apiError) {
	job := &genJob{dec: roformer.DecoderOptions{Mode: roformer.DecodeCausal}}
	o := &job.opts
	p := &req.Parameters
	unilm := s.unilmDefault()
	if p.UniLM != nil {
		unilm = *p.UniLM
	}
	if s.model.LM == nil || (!unilm && s.model.Head != roformer.HeadCausalLM) {
		return nil, errorf(http.StatusFailedDependency, "Backend", "",
			"model is not a generator: %s has no causal-LM head (RoFormer-Sim's UniLM decoding needs an LM head; ask for it with \"unilm\": true)", s.model.Head.HFClass())
	}
	o.MaxNewTokens, o.EOS = DefaultMaxNewTokens, -1
	if unilm {
		job.dec.Mode, o.EOS = roformer.DecodeUniLM, s.tok.SepID()
	}
	if req.Inputs == nil {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", "inputs", `"inputs" is missing`)
	}
	o.MaxNewTokens = min(o.MaxNewTokens, s.opts.MaxNewTokens)
	if p.MaxNewTokens != nil {
		if *p.MaxNewTokens < 1 {
			return nil, invalidParameters("`max_new_tokens` must be strictly positive")
		}
		if *p.MaxNewTokens > s.opts.MaxNewTokens {
			return nil, errorf(http.StatusUnprocessableEntity, "Validation", "max_new_tokens",
				"`max_new_tokens` must be <= %d (the server's max new tokens). Given: %d", s.opts.MaxNewTokens, *p.MaxNewTokens)
		}
		o.MaxNewTokens = *p.MaxNewTokens
	}
	sample, e := samplingOptions(p, o)
	if e != nil {
		return nil, e
	}
	if e := s.beamOptions(p, sample, req.Stream, o); e != nil {
		return nil, e
	}
	if job.prompt, e = s.generatePrompt(*req.Inputs, unilm, o); e != nil {
		return nil, e
	}
	return job, nil
}

// invalidParameters is the 422 answer for a request's parameters.
func invalidParameters(format string, args ...any) *apiError {
	return errorf(http.StatusUnprocessableEntity, "Validation", "parameters", format, args...)
}

// samplingOptions checks the sampling parameters (temperature, top_k, top_p,
// repetition_penalty, seed) into o and reports whether they ask for sampling.
func samplingOptions(p *GenerateParameters, o *generate.Options) (sample bool, e *apiError) {
	sample = p.DoSample
	o.Temperature = 1
	if p.Temperature != nil {
		if !(*p.Temperature > 0) {
			return false, invalidParameters("`temperature` must be strictly positive")
		}
		o.Temperature, sample = *p.Temperature, sample || *p.Temperature != 1
	}
	if p.TopK != nil {
		if *p.TopK <= 0 {
			return false, invalidParameters("`top_k` must be strictly positive")
		}
		o.TopK, sample = *p.TopK, true
	}
	if p.TopP != nil {
		if !(*p.TopP > 0 && *p.TopP < 1) {
			return false, invalidParameters("`top_p` must be > 0.0 and < 1.0")
		}
		o.TopP, sample = *p.TopP, true
	}
	if p.RepetitionPenalty != nil {
		if !(*p.RepetitionPenalty > 0) {
			return false, invalidParameters("`repetition_penalty` must be strictly positive")
		}
		o.RepetitionPenalty = *p.RepetitionPenalty
	}
	o.Seed = rand.Uint64()
	if p.Seed != nil {
		o.Seed = *p.Seed
	}
	if sample {
		o.Strategy = generate.Sample
	}
	return sample, nil
}

// beamOptions checks num_beams against the server's limits and the other
// parameters (beam search neither samples nor streams) into o.
func (s *Server) beamOptions(p *GenerateParameters, sample, stream bool, o *generate.Options) *apiError {
	if p.NumBeams == nil || *p.NumBeams == 1 {
		return nil
	}
	switch {
	case *p.NumBeams < 1:
		return invalidParameters("`num_beams` must be at least 1")
	case *p.NumBeams > s.opts.MaxBeams:
		return errorf(http.StatusUnprocessableEntity, "Validation", "num_beams",
			"`num_beams` must be <= %d (the server's max beams). Given: %d", s.opts.MaxBeams, *p.NumBeams)
	case *p.NumBeams > s.model.Config.VocabSize:
		return errorf(http.StatusUnprocessableEntity, "Validation", "num_beams",
			"`num_beams` must be <= %d (the vocabulary's size). Given: %d", s.model.Config.VocabSize, *p.NumBeams)
	case sample:
		return invalidParameters("`num_beams` > 1 is beam search, which does not sample: drop do_sample, temperature, top_k and top_p")
	case stream:
		return invalidParameters("`num_beams` > 1 cannot stream: a beam's tokens are final only at the end")
	}
	o.Strategy, o.NumBeams, o.LengthPenalty = generate.Beam, *p.NumBeams, 1
	return nil
}

// generatePrompt encodes the inputs and checks the generation's length, work
// and memory against the server's limits.
func (s *Server) generatePrompt(inputs string, unilm bool, o *generate.Options) ([]int32, *apiError) {
	enc, err := s.tok.Encode(inputs, tokenizer.EncodeOptions{NoSpecialTokens: !unilm, Truncation: tokenizer.TruncateNone})
	if err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, "Tokenizer", "inputs", "%v", err)
	}
	if len(enc.IDs) == 0 {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", "inputs", "`inputs` gives no tokens: generation needs at least one to continue")
	}
	// max_new_tokens ≤ MaxNewTokens, so the sum cannot overflow.
	if n := len(enc.IDs) + o.MaxNewTokens; n > s.opts.MaxLength {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", "inputs",
			"`inputs` tokens + `max_new_tokens` must be <= %d. Given: %d `inputs` tokens and %d `max_new_tokens`", s.opts.MaxLength, len(enc.IDs), o.MaxNewTokens)
	}
	cost, err := s.model.GenerateCost(1, len(enc.IDs), *o)
	switch {
	case err != nil:
		return nil, invalidParameters("%v", err)
	case cost.Tokens > int64(s.opts.MaxBatchTokens):
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", "num_beams",
			"`num_beams` × (`inputs` tokens + `max_new_tokens`) must be <= %d (the server's max batch tokens). Given: %d × (%d + %d) = %d",
			s.opts.MaxBatchTokens, cost.Rows, len(enc.IDs), o.MaxNewTokens, cost.Tokens)
	case o.NumBeams > 1 && cost.Work > s.opts.MaxBeamWork:
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", "num_beams",
			"`num_beams` × vocabulary × (`inputs` tokens + `max_new_tokens`) must be <= %d (the server's max beam work). Given: %d × %d × (%d + %d) = %d: ask for fewer `num_beams` or `max_new_tokens`",
			s.opts.MaxBeamWork, cost.Rows, s.model.Config.VocabSize, len(enc.IDs), o.MaxNewTokens, cost.Work)
	case cost.Bytes > s.opts.MaxGenerateBytes:
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", "num_beams",
			"this generation would take about %d MiB (%d beams × %d tokens of cache, %d × %d vocabulary scores); the limit is %d MiB (the server's max generate bytes): ask for fewer `num_beams` or `max_new_tokens`",
			cost.Bytes>>20, cost.Rows, len(enc.IDs)+o.MaxNewTokens, cost.Rows, s.model.Config.VocabSize, s.opts.MaxGenerateBytes>>20)
	}
	return int32s(enc.IDs), nil
}

// newText decodes the generated ids, without the EOS and special tokens.
func (s *Server) newText(ids []int, eos int) string {
	if eos >= 0 {
		for i, id := range ids {
			if id == eos {
				ids = ids[:i]
				break
			}
		}
	}
	return s.tok.Decode(ids, true)
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req GenerateRequest
	if e := s.decodeCompat(w, r, &req); e != nil {
		writeTEIError(w, e)
		return
	}
	job, e := s.generateOptions(&req)
	if e != nil {
		writeTEIError(w, e)
		return
	}
	prompt, o := job.prompt, &job.opts
	dec, err := s.model.NewDecoder(job.dec)
	if err != nil {
		s.generateFailed(w, r, err)
		return
	}
	ctx := r.Context()
	s.yieldCPU(stateOf(ctx))
	select {
	case s.gate <- struct{}{}:
	case <-ctx.Done():
		writeTEIError(w, errorf(http.StatusServiceUnavailable, "Unhealthy", "", "request cancelled while waiting: %v", ctx.Err()))
		return
	case <-s.quit:
		writeTEIError(w, errorf(http.StatusServiceUnavailable, "Unhealthy", "", "%v", errClosed))
		return
	}
	defer func() { <-s.gate }() // released even if generation panics
	if !req.Stream {
		gen, err := generate.Generate(ctx, dec, [][]int32{prompt}, *o)
		if err != nil {
			s.generateFailed(w, r, err)
			return
		}
		ids := gen.Sequences[0][len(prompt):]
		writeJSON(w, http.StatusOK, GenerateResponse{GeneratedText: s.newText(ints(ids), o.EOS)})
		return
	}
	var (
		started bool
		ids     []int
		prev    string
		flusher = http.NewResponseController(w)
	)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return flusher.Flush()
	}
	o.OnToken = func(step int, next []int32) error {
		if err := ctx.Err(); err != nil {
			return err // the client has gone: stop
		}
		id := int(next[0])
		ids = append(ids, id)
		special := s.tok.IsSpecialID(id)
		// A token's text is what it adds to the decoded text (a
		// word piece's "##" goes, a new word gets its space).
		text := s.newText(ids, o.EOS)
		tokText := strings.TrimPrefix(text, prev)
		if !strings.HasPrefix(text, prev) {
			tokText = s.tok.Decode([]int{id}, true)
		}
		prev = text
		ev := StreamEvent{Token: StreamToken{ID: id, Text: tokText, Special: special}}
		if step+1 == o.MaxNewTokens || (o.EOS >= 0 && id == o.EOS) {
			ev.GeneratedText = &text
		}
		if err := send(ev); err != nil {
			return err
		}
		return ctx.Err()
	}
	if _, err := generate.Generate(ctx, dec, [][]int32{prompt}, *o); err != nil {
		if !started {
			s.generateFailed(w, r, err)
			return
		}
		if ctx.Err() == nil {
			s.opts.Log.Printf("server: %s %s: %v", r.Method, r.URL.Path, err)
			_ = send(map[string]string{"error": err.Error(), "error_type": "generation"})
		}
	}
}

// generateFailed answers a /generate whose generation failed before it
// answered anything.
func (s *Server) generateFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		writeTEIError(w, errorf(http.StatusServiceUnavailable, "Unhealthy", "", "request cancelled: %v", r.Context().Err()))
		return
	}
	s.opts.Log.Printf("server: %s %s: %v", r.Method, r.URL.Path, err)
	writeTEIError(w, errorf(http.StatusInternalServerError, "Backend", "", "%v", err))
}

func ints(xs []int32) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}
