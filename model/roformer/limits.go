package roformer

import (
	"fmt"
	"math"
	"math/bits"
)

// Limits on the sizes of config.json, checked by Validate before anything
// is allocated from them. Each is far above every released model (in
// brackets: the largest value we know of in a released checkpoint), so a
// real config never meets them; a config built to exhaust memory does.
const (
	// MaxConfigBytes is the largest config.json LoadConfig reads [a few KB;
	// an id2label of 10⁵ names is about 3 MB].
	MaxConfigBytes = 16 << 20
	// MaxVocabSize bounds vocab_size: 2²⁴ = 16,777,216 [262,144].
	MaxVocabSize = 1 << 24
	// MaxHiddenSize bounds hidden_size and embedding_size: 2¹⁶ = 65,536
	// [18,432 in PaLM; RoFormer's largest is 1,024].
	MaxHiddenSize = 1 << 16
	// MaxIntermediateSize bounds intermediate_size: 2¹⁸ = 262,144 [73,728].
	MaxIntermediateSize = 1 << 18
	// MaxLayers bounds num_hidden_layers [118].
	MaxLayers = 1024
	// MaxAttentionHeads bounds num_attention_heads [128].
	MaxAttentionHeads = 4096
	// MaxTypeVocabSize bounds type_vocab_size: 2¹⁶ [16; RoFormer's is 2].
	MaxTypeVocabSize = 1 << 16
	// MaxPositions bounds max_position_embeddings, which sizes the learned
	// position table and the saved sinusoid table: 2²⁴ [10,485,760].
	MaxPositions = 1 << 24
	// MaxLabels bounds num_labels and the size of id2label: 2²⁰ [about 10⁴
	// for a classifier; the extreme multi-label sets reach 3·10⁶ but are
	// not read through this head].
	MaxLabels = 1 << 20
	// MaxRelativeDistance bounds relative_max_distance: 2¹⁶ [128].
	MaxRelativeDistance = 1 << 16
	// MaxPerformerFeatures bounds performer_features: 2¹⁶ [a few hundred].
	MaxPerformerFeatures = 1 << 16
	// MaxParams bounds the number of parameters a configuration implies
	// (encoder and head): 2³⁴ ≈ 1.7·10¹⁰, 137 GB with their gradients as
	// float32 [RoFormer's largest: 3·10⁸].
	MaxParams = 1 << 34
)

// checkLimits reports every size of c above its limit, naming the
// config.json key, the value and the limit, and, when the sizes are
// positive (count), a parameter count above MaxParams.
func (c *Config) checkLimits(count bool) []error {
	var errs []error
	for _, f := range []struct {
		key   string
		v     int
		limit int
	}{
		{"vocab_size", c.VocabSize, MaxVocabSize},
		{"hidden_size", c.HiddenSize, MaxHiddenSize},
		{"embedding_size", c.EmbeddingSize, MaxHiddenSize},
		{"intermediate_size", c.IntermediateSize, MaxIntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers, MaxLayers},
		{"num_attention_heads", c.NumAttentionHeads, MaxAttentionHeads},
		{"type_vocab_size", c.TypeVocabSize, MaxTypeVocabSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings, MaxPositions},
		{"num_labels", c.NumLabels, MaxLabels},
		{"relative_max_distance", c.RelativeMaxDistance, MaxRelativeDistance},
		{"performer_features", c.PerformerFeatures, MaxPerformerFeatures},
	} {
		if f.v > f.limit {
			errs = append(errs, fmt.Errorf("%s %d is above the limit %d", f.key, f.v, f.limit))
		}
	}
	if len(errs) > 0 || !count {
		return errs
	}
	if n, err := c.encoderParams(true); err != nil {
		errs = append(errs, err)
	} else if n > MaxParams {
		errs = append(errs, fmt.Errorf("the sizes imply %d encoder parameters (%s), above the limit %d (%s)", n, c.sizeWords(), int64(MaxParams), "MaxParams"))
	}
	return errs
}

// sizeWords names the sizes that make up the parameter count.
func (c *Config) sizeWords() string {
	return fmt.Sprintf("vocab_size %d, embedding_size %d, hidden_size %d, num_hidden_layers %d, intermediate_size %d, type_vocab_size %d",
		c.VocabSize, c.EmbeddingSize, c.HiddenSize, c.NumHiddenLayers, c.IntermediateSize, c.TypeVocabSize)
}

// counter sums products of sizes with overflow checks; the first overflow
// or negative size sticks.
type counter struct {
	n   int64
	err error
}

// add adds the product of dims.
func (s *counter) add(dims ...int) {
	if s.err != nil {
		return
	}
	p := uint64(1)
	for _, d := range dims {
		if d < 0 {
			s.err = fmt.Errorf("negative size %d in %v", d, dims)
			return
		}
		hi, lo := bits.Mul64(p, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			s.err = fmt.Errorf("the product of the sizes %v overflows int64", dims)
			return
		}
		p = lo
	}
	if uint64(s.n) > math.MaxInt64-p {
		s.err = fmt.Errorf("the parameter count overflows int64 adding %v", dims)
		return
	}
	s.n += int64(p)
}

// addTimes adds k times the count that f adds.
func (s *counter) addTimes(k int, f func(*counter)) {
	var one counter
	f(&one)
	if one.err != nil {
		s.err = one.err
		return
	}
	s.add(k, int(one.n))
}

// encoderParams returns the number of parameters New allocates for the
// encoder of c (embeddings, projection, layers; no pooler, no head),
// computed from the sizes with overflow checks, without allocating. With
// buffers it adds the performer's random directions, which New allocates
// but a checkpoint need not hold.
func (c *Config) encoderParams(buffers bool) (int64, error) {
	E, H, I := c.EmbeddingSize, c.HiddenSize, c.IntermediateSize
	var s counter
	norm := func(s *counter, n int) {
		if !c.RMSNorm() {
			s.add(2, n)
		}
	}
	s.add(c.VocabSize, E)
	s.add(c.TypeVocabSize, E)
	norm(&s, E)
	if c.PosEnc() == PosLearned {
		s.add(c.MaxPositionEmbeddings, E)
	}
	if E != H {
		s.add(H, E)
		s.add(H)
	}
	s.addTimes(c.NumHiddenLayers, func(l *counter) {
		l.add(4, H, H)
		l.add(2, H, I)
		if c.Bias() {
			l.add(4, H)
			l.add(I)
			l.add(H)
		}
		norm(l, H)
		norm(l, H)
		// Negative distances and feature counts are Validate's to name.
		if c.PosEnc() == PosRelative && c.NumAttentionHeads > 0 {
			l.add(max(2*c.RelativeMaxDistance+1, 0), c.HeadSize())
		}
		if buffers && c.Attention() == AttnPerformer && c.NumAttentionHeads > 0 {
			l.add(max(c.NumFeatures(), 0), c.HeadSize()) // the performer's random directions
		}
	})
	return s.n, s.err
}

// headParams returns the number of parameters New allocates for head.
func (c *Config) headParams(head Head) (int64, error) {
	E, H, V, NL := c.EmbeddingSize, c.HiddenSize, c.VocabSize, c.NumLabels
	var s counter
	switch head {
	case HeadMaskedLM, HeadCausalLM:
		if !c.RMSNorm() {
			s.add(E, H)
			s.add(E)
			s.add(2, E)
			s.add(V)
		}
	case HeadSequenceCls:
		s.add(H, H)
		s.add(H)
		s.add(NL, H)
		s.add(NL)
	case HeadTokenCls:
		s.add(NL, H)
		s.add(NL)
	case HeadQA:
		s.add(2, H)
		s.add(2)
	case HeadMultipleChoice:
		s.add(1, H)
		s.add(1)
	}
	return s.n, s.err
}

// ParamCount returns the number of float32 parameters New(c, head)
// allocates (each with a gradient of the same size), split into the
// encoder's and the head's, computed from the sizes without allocating.
// A pooler, which only a checkpoint enables, is not counted.
func (c *Config) ParamCount(head Head) (encoder, headN int64, err error) {
	if encoder, err = c.encoderParams(false); err != nil {
		return 0, 0, err
	}
	if headN, err = c.headParams(head); err != nil {
		return 0, 0, err
	}
	return encoder, headN, nil
}
