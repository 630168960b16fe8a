package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
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
// [SEP] and decodes in UniLM mode until [SEP]. Generation takes the gate of
// the forward passes (server.go's run, batch.go's scheduler) for each of its
// passes, the prompt's and each token's, and gives it back between them
// (generate_gate.go): embedding batches, the other routes' forwards and
// other generations run between its steps, so a request of one kind never
// waits for the whole of another. A streaming answer is server-sent events,
// one per token; a client that leaves stops the generation at its next
// token.
//
// As TGI: "stop" ends the generation once the new text contains one of its
// strings (the text keeps it, and the rest of the token that completed it;
// finish_reason "stop_sequence"); "details": true adds to the answer the
// finish reason, the number of tokens, the seed when sampling and each
// token's id, text, log-probability and special flag, and "top_n_tokens"
// the most likely tokens of each step. A token's log-probability is the
// log-softmax, in float64, of the scores it was chosen from, after the
// logits processors as TGI reports it (generate.StepToken: the
// repetition-penalised logits for greedy decoding, the warped ones for
// sampling); a streaming answer's tokens always carry it, and its last event
// carries the details when asked. Prefill tokens (TGI's
// decoder_input_details) are not reported: details.prefill is empty.

// DefaultMaxNewTokens is max_new_tokens of a POST /generate that does not
// say (at most Options.MaxNewTokens; the prompt and the new tokens
// together are bounded by Options.MaxLength).
const DefaultMaxNewTokens = 20

// Bounds of a POST /generate's parameters: at most MaxStopSequences stop
// sequences (TGI's --max-stop-sequences default), each of 1 to
// MaxStopBytes bytes, and top_n_tokens at most MaxTopNTokens (TGI's
// --max-top-n-tokens default).
const (
	MaxStopSequences = 4
	MaxStopBytes     = 256
	MaxTopNTokens    = 5
)

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
	Stop              []string `json:"stop"`
	Details           bool     `json:"details"`
	TopNTokens        *int     `json:"top_n_tokens"`
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
	GeneratedText string           `json:"generated_text"`
	Details       *GenerateDetails `json:"details,omitempty"`
}

// GenerateDetails are the details of a POST /generate asked with
// "details": true, TGI's.
type GenerateDetails struct {
	FinishReason    string  `json:"finish_reason"` // "length", "eos_token" or "stop_sequence"
	GeneratedTokens int     `json:"generated_tokens"`
	Seed            *uint64 `json:"seed"` // when sampling
	// Prefill is always empty (TGI's decoder_input_details is not
	// supported); Tokens are the generated tokens (empty for beam
	// search); TopTokens, with top_n_tokens, each step's most likely
	// tokens, best first.
	Prefill   []StreamToken   `json:"prefill"`
	Tokens    []StreamToken   `json:"tokens"`
	TopTokens [][]StreamToken `json:"top_tokens,omitempty"`
}

// StreamToken is one generated token (TGI's Token): its id, text,
// log-probability and whether it is a special token.
type StreamToken struct {
	ID      int     `json:"id"`
	Text    string  `json:"text"`
	LogProb float64 `json:"logprob"`
	Special bool    `json:"special"`
}

// StreamEvent is one server-sent event of a streaming POST /generate: a
// token, with top_n_tokens the step's most likely ones, and on the last
// event the whole generated text (null before) and, with "details": true,
// the details.
type StreamEvent struct {
	Token         StreamToken    `json:"token"`
	TopTokens     []StreamToken  `json:"top_tokens,omitempty"`
	GeneratedText *string        `json:"generated_text"`
	Details       *StreamDetails `json:"details"`
}

// StreamDetails are the details of a streaming answer's last event.
type StreamDetails struct {
	FinishReason    string  `json:"finish_reason"`
	GeneratedTokens int     `json:"generated_tokens"`
	Seed            *uint64 `json:"seed"`
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
	stops  []string // parameters.stop
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
	if e := outputOptions(p, job); e != nil {
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

// outputOptions checks stop and top_n_tokens into job.
func outputOptions(p *GenerateParameters, job *genJob) *apiError {
	beams := job.opts.Strategy == generate.Beam
	if len(p.Stop) > MaxStopSequences {
		return errorf(http.StatusUnprocessableEntity, "Validation", "stop",
			"`stop` supports up to %d stop sequences. Given: %d", MaxStopSequences, len(p.Stop))
	}
	for i, stop := range p.Stop {
		if len(stop) == 0 || len(stop) > MaxStopBytes {
			return errorf(http.StatusUnprocessableEntity, "Validation", "stop",
				"`stop[%d]` must have 1 to %d bytes. Given: %d bytes", i, MaxStopBytes, len(stop))
		}
	}
	if len(p.Stop) > 0 && beams {
		return invalidParameters("`stop` does not work with `num_beams` > 1: beam search ends its hypotheses by the EOS and `max_new_tokens`")
	}
	job.stops = p.Stop
	if p.TopNTokens == nil || *p.TopNTokens == 0 {
		return nil
	}
	if *p.TopNTokens < 0 || *p.TopNTokens > MaxTopNTokens {
		return errorf(http.StatusUnprocessableEntity, "Validation", "top_n_tokens",
			"`top_n_tokens` must be >= 0 and <= %d. Given: %d", MaxTopNTokens, *p.TopNTokens)
	}
	if beams {
		return invalidParameters("`top_n_tokens` does not work with `num_beams` > 1: beam search reports no token's log-probabilities")
	}
	job.opts.TopLogProbs = *p.TopNTokens
	return nil
}

// generatePrompt encodes the inputs and checks the generation's length, work
// and memory against the server's limits.
func (s *Server) generatePrompt(inputs string, unilm bool, o *generate.Options) ([]int32, *apiError) {
	// The tokens past the limit are counted, not kept.
	enc, err := s.tok.Encode(inputs, tokenizer.EncodeOptions{NoSpecialTokens: !unilm, Truncation: tokenizer.TruncateNone, Limit: s.opts.MaxLength})
	if n, ok := tooLong(err); ok {
		return nil, errorf(http.StatusUnprocessableEntity, "Validation", "inputs",
			"`inputs` tokens + `max_new_tokens` must be <= %d. Given: %d `inputs` tokens and %d `max_new_tokens`", s.opts.MaxLength, n, o.MaxNewTokens)
	}
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
	return tokenizer.Int32s(enc.IDs), nil
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

// Finish reasons of details.finish_reason, TGI's.
const (
	finishLength = "length"        // max_new_tokens tokens
	finishEOS    = "eos_token"     // the EOS token (RoFormer-Sim's [SEP])
	finishStop   = "stop_sequence" // the new text contains a stop sequence
)

// genRun is the answer of a generation (greedy or sampling) as its tokens
// come, one per step.
type genRun struct {
	s       *Server
	job     *genJob
	details bool // keep the tokens for details.tokens
	ids     []int
	text    string // the new ids decoded
	reason  string // the finish reason, once the last token is in
	tokens  []StreamToken
	top     [][]StreamToken
}

// add takes the step'th token: its text (what it adds to the decoded text:
// a word piece's "##" goes, a new word gets its space), its log-probability
// and the top ids, and whether generation ends with it. TGI's order of the
// reasons is kept: max_new_tokens, then the EOS, then a stop sequence.
func (g *genRun) add(step int, st generate.StepToken) (StreamToken, []StreamToken) {
	s, o := g.s, &g.job.opts
	id := int(st.ID)
	g.ids = append(g.ids, id)
	prev := g.text
	g.text = s.newText(g.ids, o.EOS)
	text, ok := strings.CutPrefix(g.text, prev)
	if !ok {
		text = s.tok.Decode([]int{id}, true)
	}
	tok := StreamToken{ID: id, Text: text, LogProb: st.LogProb, Special: s.tok.IsSpecialID(id)}
	var top []StreamToken
	for _, t := range st.Top {
		if math.IsInf(t.LogProb, 0) || math.IsNaN(t.LogProb) {
			continue // removed by top-k or top-p: probability 0, and not a JSON number
		}
		v := int(t.ID)
		top = append(top, StreamToken{ID: v, Text: s.tok.Decode([]int{v}, false), LogProb: t.LogProb, Special: s.tok.IsSpecialID(v)})
	}
	switch {
	case step+1 == o.MaxNewTokens:
		g.reason = finishLength
	case o.EOS >= 0 && id == o.EOS:
		g.reason = finishEOS
	case slices.ContainsFunc(g.job.stops, func(stop string) bool { return strings.Contains(g.text, stop) }):
		g.reason = finishStop
	}
	if g.details {
		g.tokens = append(g.tokens, tok)
		if g.job.opts.TopLogProbs > 0 {
			g.top = append(g.top, top)
		}
	}
	return tok, top
}

// seed is details.seed: the seed of a sampling generation, nil otherwise.
func (j *genJob) seed() *uint64 {
	if j.opts.Strategy != generate.Sample {
		return nil
	}
	seed := j.opts.Seed
	return &seed
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
	gated := &gatedDecoder{Decoder: dec, s: s}
	if o.Strategy == generate.Beam {
		s.generateBeams(w, r, gated, job, req.Parameters.Details)
		return
	}
	g := &genRun{s: s, job: job, details: req.Parameters.Details}
	var (
		started bool
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
	o.OnStep = func(step int, toks []generate.StepToken) error {
		if err := ctx.Err(); err != nil {
			return err // the client has gone: stop
		}
		tok, top := g.add(step, toks[0])
		if req.Stream {
			ev := StreamEvent{Token: tok, TopTokens: top}
			if g.reason != "" {
				ev.GeneratedText = &g.text
				if g.details {
					ev.Details = &StreamDetails{FinishReason: g.reason, GeneratedTokens: len(g.ids), Seed: job.seed()}
				}
			}
			if err := send(ev); err != nil {
				return err
			}
		}
		if g.reason == finishStop {
			return generate.ErrStop
		}
		return ctx.Err()
	}
	if _, err := generate.Generate(ctx, gated, [][]int32{prompt}, *o); err != nil {
		if !started {
			s.generateFailed(w, r, err)
			return
		}
		if ctx.Err() == nil {
			s.opts.Log.Printf("server: %s %s: %v", r.Method, r.URL.Path, err)
			_ = send(map[string]string{"error": err.Error(), "error_type": "generation"})
		}
		return
	}
	if req.Stream {
		return
	}
	res := GenerateResponse{GeneratedText: g.text}
	if g.details {
		res.Details = &GenerateDetails{FinishReason: g.reason, GeneratedTokens: len(g.ids), Seed: job.seed(),
			Prefill: []StreamToken{}, Tokens: g.tokens, TopTokens: g.top}
	}
	writeJSON(w, http.StatusOK, res)
}

// generateBeams answers a beam search, which does not stream. Its details
// have the finish reason and the number of tokens, and no tokens: beam
// search ranks whole hypotheses, and reports no token's log-probability.
func (s *Server) generateBeams(w http.ResponseWriter, r *http.Request, dec generate.Decoder, job *genJob, details bool) {
	o := &job.opts
	gen, err := generate.Generate(r.Context(), dec, [][]int32{job.prompt}, *o)
	if err != nil {
		s.generateFailed(w, r, err)
		return
	}
	ids := gen.Sequences[0][len(job.prompt):]
	res := GenerateResponse{GeneratedText: s.newText(ints(ids), o.EOS)}
	if details {
		reason := finishLength
		if len(ids) < o.MaxNewTokens {
			reason = finishEOS
		}
		res.Details = &GenerateDetails{FinishReason: reason, GeneratedTokens: len(ids), Prefill: []StreamToken{}, Tokens: []StreamToken{}}
	}
	writeJSON(w, http.StatusOK, res)
}

// generateFailed answers a /generate whose generation failed before it
// answered anything.
func (s *Server) generateFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		writeTEIError(w, errorf(http.StatusServiceUnavailable, "Unhealthy", "", "request cancelled: %v", r.Context().Err()))
		return
	}
	if errors.Is(err, errClosed) {
		writeTEIError(w, errorf(http.StatusServiceUnavailable, "Unhealthy", "", "%v", err))
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
