package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/roformer-go/roformer/pipeline"
)

// The vectors of the embedding routes. A sentence-transformers folder
// (Options.Sentence) makes them as its modules say: its pooling, its Dense
// and Normalize modules, its lowercasing and its prompts (the request's
// prompt_name, else Options.DefaultPromptName or Options.DefaultPrompt, else
// the folder's default_prompt_name), so that they equal
// sentence-transformers' encode. A plain folder pools by the model's pooler
// when it has one (RoFormer-Sim), else by the mean, as TEI does. The
// pipeline package does the work (pipeline.EmbedOptions, pipeline.Vectorizer);
// the routes only say what the request changes.

// vectorOptions returns the resolved pipeline options of an embedding
// request that asks for pooling (PoolDefault: the folder's or the model's)
// and the prompt named promptName (nil: the server's default).
func (s *Server) vectorOptions(pooling pipeline.Pooling, promptName *string) (pipeline.EmbedOptions, *apiError) {
	o := pipeline.EmbedOptions{Sentence: s.opts.Sentence, Pooling: pooling, MaxLength: s.opts.MaxLength}
	switch {
	case promptName != nil:
		o.PromptName = *promptName
	case s.opts.DefaultPrompt != nil:
		o.Prompt = s.opts.DefaultPrompt
	default:
		o.PromptName = s.opts.DefaultPromptName
	}
	o, err := o.WithDefaults(s.model)
	if err != nil {
		field := "pooling"
		if promptName != nil {
			field = "prompt_name"
		}
		return o, errorf(http.StatusUnprocessableEntity, "Validation", field, "%v", err)
	}
	return o, nil
}

// checkSentence checks Options.Sentence, the default prompt and the max
// length against the model when the server starts.
func (s *Server) checkSentence() error {
	if s.opts.DefaultPrompt != nil && s.opts.DefaultPromptName != "" {
		return errors.New("server: a default prompt and a default prompt name: give one")
	}
	eo, e := s.vectorOptions(pipeline.PoolDefault, nil)
	if e != nil {
		return errors.New("server: " + e.msg)
	}
	if _, err := pipeline.PromptSkip(s.tok, eo); err != nil {
		return fmt.Errorf("server: %w (max length %d: --max-length)", err, s.opts.MaxLength)
	}
	return nil
}

// normalizes says whether the default vectors of the embedding routes come
// out with unit length without a final normalization (a folder whose last
// module is Normalize).
func (s *Server) normalizes() bool {
	return s.opts.Sentence != nil && s.opts.Sentence.Normalizes()
}

// similarity returns the folder's similarity of a and b (similarity_fn_name:
// cosine, the default, and TEI's; dot; the negative euclidean or manhattan
// distance, as sentence-transformers scores them), in float64.
func (s *Server) similarity(a, b []float32) float64 {
	fn := ""
	if s.opts.Sentence != nil {
		fn = s.opts.Sentence.SimilarityFn
	}
	var dot, na, nb, l2, l1 float64
	for j := range a {
		x, y := float64(a[j]), float64(b[j])
		dot += x * y
		na += x * x
		nb += y * y
		l2 += (x - y) * (x - y)
		l1 += math.Abs(x - y)
	}
	switch fn {
	case "dot":
		return dot
	case "euclidean":
		return -math.Sqrt(l2)
	case "manhattan":
		return -l1
	}
	return dot / max(math.Sqrt(na)*math.Sqrt(nb), 1e-8)
}
