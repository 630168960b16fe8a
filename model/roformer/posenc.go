package roformer

import (
	"fmt"
	"math"
	"strings"

	"github.com/roformer-go/roformer/kernels"
)

// PositionEncoding names how the model sees token positions
// (config.json key position_embedding_type).
type PositionEncoding string

const (
	// PosRotary is RoPE (Su et al. 2021, eq. 14–16): q and k are rotated by
	// their position inside each attention layer; nothing is added to the
	// embeddings. The default, and the only one HF's RoFormer implements.
	PosRotary PositionEncoding = "rotary"
	// PosSinusoidal is the fixed absolute encoding of Vaswani et al. 2017
	// (§3.5), added to the token embeddings:
	// PE(p, 2i) = sin(p/10000^(2i/E)), PE(p, 2i+1) = cos(p/10000^(2i/E)).
	PosSinusoidal PositionEncoding = "sinusoidal"
	// PosLearned is BERT's learned absolute table (Devlin et al. 2019),
	// embeddings.position_embeddings.weight [max_position_embeddings, E],
	// added to the token embeddings. Positions past the table are an error.
	PosLearned PositionEncoding = "learned"
	// PosRelative is the relative key embeddings of Shaw et al. 2018: each
	// layer learns a_{−k} … a_k [2k+1, HS] (shared by the heads) and the
	// scores become q_i·(k_j + a_{clip(j−i, k)})/√HS, k = relative_max_distance.
	PosRelative PositionEncoding = "relative"
	// PosNone uses no position information at all (a bag of tokens, except
	// for what a causal mask implies).
	PosNone PositionEncoding = "none"
)

// PositionEncodings lists the valid position_embedding_type values.
var PositionEncodings = []PositionEncoding{PosRotary, PosSinusoidal, PosLearned, PosRelative, PosNone}

// AttentionKind names the attention of every layer (config.json key
// attention_type).
type AttentionKind string

const (
	// AttnSoftmax is scaled dot-product attention, HF's RoFormer. The default.
	AttnSoftmax AttentionKind = "softmax"
	// AttnLinear is the linear attention of Katharopoulos et al. 2020 with
	// φ(x) = elu(x)+1; with rotary positions it is RoFormer's eq. (19).
	AttnLinear AttentionKind = "linear"
	// AttnPerformer is FAVOR+ (Choromanski et al. 2021): positive orthogonal
	// random features of the softmax kernel, redrawn every
	// feature_redraw_interval training steps; with rotary positions, eq. (19).
	AttnPerformer AttentionKind = "performer"
)

// AttentionKinds lists the valid attention_type values.
var AttentionKinds = []AttentionKind{AttnSoftmax, AttnLinear, AttnPerformer}

// ParsePositionEncoding checks a position_embedding_type name.
func ParsePositionEncoding(s string) (PositionEncoding, error) {
	for _, p := range PositionEncodings {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(PositionEncodings))
	for i, p := range PositionEncodings {
		names[i] = string(p)
	}
	return "", fmt.Errorf("roformer: unknown position_embedding_type %q (valid: %s)", s, strings.Join(names, ", "))
}

// ParseAttentionKind checks an attention_type name.
func ParseAttentionKind(s string) (AttentionKind, error) {
	for _, a := range AttentionKinds {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(AttentionKinds))
	for i, a := range AttentionKinds {
		names[i] = string(a)
	}
	return "", fmt.Errorf("roformer: unknown attention_type %q (valid: %s)", s, strings.Join(names, ", "))
}

// PosEnc returns position_embedding_type, empty meaning rotary.
func (c *Config) PosEnc() PositionEncoding {
	if c.PositionEmbeddingType == "" {
		return PosRotary
	}
	return c.PositionEmbeddingType
}

// Attention returns attention_type, empty meaning softmax.
func (c *Config) Attention() AttentionKind {
	if c.AttentionType == "" {
		return AttnSoftmax
	}
	return c.AttentionType
}

// NumFeatures returns F, the width per head of the feature map of linear
// attention: the head size for linear (elu+1), performer_features or
// ⌈HS·ln HS⌉ rounded up to even for performer (Choromanski et al. suggest
// M = Θ(d log d)); 0 for softmax.
func (c *Config) NumFeatures() int {
	switch c.Attention() {
	case AttnLinear:
		return c.HeadSize()
	case AttnPerformer:
		if c.PerformerFeatures > 0 {
			return c.PerformerFeatures
		}
		hs := float64(c.HeadSize())
		m := int(math.Ceil(hs * math.Log(math.Max(hs, 2))))
		return m + m%2
	}
	return 0
}

func (c *Config) validateSwitches() []error {
	var errs []error
	pe, err := ParsePositionEncoding(string(c.PosEnc()))
	if err != nil {
		errs = append(errs, err)
	}
	at, err := ParseAttentionKind(string(c.Attention()))
	if err != nil {
		errs = append(errs, err)
	}
	if pe == PosRelative && (at == AttnLinear || at == AttnPerformer) {
		errs = append(errs, fmt.Errorf("position_embedding_type relative adds to explicit attention scores, which attention_type %s never forms (rotary works inside linear attention: eq. 19)", at))
	}
	if pe == PosRelative && c.RelativeMaxDistance < 1 {
		errs = append(errs, fmt.Errorf("relative_max_distance %d must be at least 1", c.RelativeMaxDistance))
	}
	if pe == PosLearned && c.MaxPositionEmbeddings < 1 {
		errs = append(errs, fmt.Errorf("learned position embeddings need max_position_embeddings ≥ 1, got %d", c.MaxPositionEmbeddings))
	}
	if at == AttnPerformer {
		if c.PerformerFeatures < 0 || c.PerformerFeatures%2 != 0 {
			errs = append(errs, fmt.Errorf("performer_features %d must be even and not negative (RoPE turns the features in pairs)", c.PerformerFeatures))
		}
		if c.FeatureRedrawInterval < 0 {
			errs = append(errs, fmt.Errorf("feature_redraw_interval %d must not be negative", c.FeatureRedrawInterval))
		}
	}
	return errs
}

// clearDefaultSwitches empties the switch fields that hold their defaults or
// do not apply, so that Marshal leaves them out.
func (c *Config) clearDefaultSwitches() {
	pe, at := c.PosEnc(), c.Attention()
	if pe == PosRotary {
		c.PositionEmbeddingType = ""
	}
	if at == AttnSoftmax {
		c.AttentionType = ""
	}
	if pe != PosRelative {
		c.RelativeMaxDistance = 0
	}
	if at != AttnPerformer {
		c.PerformerFeatures, c.FeatureRedrawInterval = 0, 0
	}
}

// sinusoidRow writes Vaswani et al.'s encoding of position p into row [E]:
// row[2i] = sin(p/10000^(2i/E)), row[2i+1] = cos(p/10000^(2i/E)), computed
// in float64 and rounded once.
func sinusoidRow(row []float32, p int) {
	E := len(row)
	for i := 0; 2*i < E; i++ {
		a := float64(p) / math.Pow(10000, float64(2*i)/float64(E))
		row[2*i] = float32(math.Sin(a))
		if 2*i+1 < E {
			row[2*i+1] = float32(math.Cos(a))
		}
	}
}

// positionAt returns the position of token bt (row-major [B, T]).
func (s *State) positionAt(bt int) int {
	if len(s.pos) == s.T {
		return s.pos[bt%s.T]
	}
	return s.pos[bt]
}

// addPositions adds the absolute position encoding (sinusoidal or learned)
// to the summed token embeddings s.embSum [BT, E]; other encodings add
// nothing.
func (m *Model) addPositions(s *State) {
	E := m.Config.EmbeddingSize
	BT := s.B * s.T
	switch m.Config.PosEnc() {
	case PosSinusoidal:
		pe := s.sinusoid // cached for the default positions 0 … T−1
		if !s.defaultPos || len(pe) != BT*E {
			pe = grow(&s.sinusoid, BT*E)
			for bt := 0; bt < BT; bt++ {
				sinusoidRow(pe[bt*E:bt*E+E], s.positionAt(bt))
			}
			if s.defaultPos {
				s.sinusoid = pe
			} else {
				s.sinusoid = pe[:0] // these positions' encodings: not the cache
			}
		}
		kernels.AddForward(s.embSum, s.embSum, pe, BT*E)
	case PosLearned:
		tab := m.Encoder.Embeddings.Position.Data
		for bt := 0; bt < BT; bt++ {
			p := s.positionAt(bt)
			row, pe := s.embSum[bt*E:bt*E+E], tab[p*E:p*E+E]
			for c := range row {
				row[c] += pe[c]
			}
		}
	}
}

// positionsBackward accumulates the learned table's gradient from the
// gradient of the summed embeddings dembSum [BT, E].
func (m *Model) positionsBackward(s *State, dembSum []float32) {
	if m.Config.PosEnc() != PosLearned {
		return
	}
	E := m.Config.EmbeddingSize
	g := m.Encoder.Embeddings.Position.Grad
	for bt := 0; bt < s.B*s.T; bt++ {
		p := s.positionAt(bt)
		row, d := g[p*E:p*E+E], dembSum[bt*E:bt*E+E]
		for c := range row {
			row[c] += d[c]
		}
	}
}

// checkLearnedPositions rejects positions past a learned table: BERT's
// absolute positions exist only for 0 … max_position_embeddings−1.
func (b *Batch) checkLearnedPositions(cfg *Config) error {
	if cfg.PosEnc() != PosLearned {
		return nil
	}
	P := cfg.MaxPositionEmbeddings
	if b.PositionIDs == nil {
		if b.T > P {
			return fmt.Errorf("roformer: %d tokens per row need positions up to %d, but the learned position table has max_position_embeddings %d rows; learned absolute positions cannot go past their table (rotary can)", b.T, b.T-1, P)
		}
		return nil
	}
	for i, p := range b.PositionIDs {
		if int(p) >= P {
			return fmt.Errorf("roformer: position_ids[%d][%d] = %d is past the learned position table (max_position_embeddings %d); learned absolute positions cannot go past their table (rotary can)", i/b.T, i%b.T, p, P)
		}
	}
	return nil
}

// embedScale is the factor of the word embeddings: √E with scale_embedding,
// else 1.
func (c *Config) embedScale() float32 {
	if !c.ScaleEmbedding {
		return 1
	}
	return float32(math.Sqrt(float64(c.EmbeddingSize)))
}

// scaledEmbeddingForward writes s.embSum [BT, E] = √E·word[ids] +
// type[types] (scale_embedding; kernels.EmbeddingForward without it).
func (m *Model) scaledEmbeddingForward(s *State) {
	E, sc := m.Config.EmbeddingSize, m.Config.embedScale()
	emb := &m.Encoder.Embeddings
	stored := m.wordBF16()
	for bt := 0; bt < s.B*s.T; bt++ {
		o := s.embSum[bt*E : bt*E+E]
		w := o // a bfloat16 table's row, widened in place
		if id := int(s.ids[bt]); stored != nil {
			kernels.DecodeBF16(o, stored[2*id*E:2*(id+1)*E])
		} else {
			w = emb.Word.Data[id*E : id*E+E]
		}
		tt := emb.TokenType.Data[int(s.types[bt])*E : int(s.types[bt])*E+E]
		for c := range o {
			o[c] = sc*w[c] + tt[c]
		}
	}
}

// scaledEmbeddingBackward differentiates scaledEmbeddingForward,
// accumulating into the word and token-type gradients; the padding row gets
// none (as kernels.EmbeddingBackward).
//
//	dembSum [BT, E]
func (m *Model) scaledEmbeddingBackward(s *State, dembSum []float32) {
	E, sc, pad := m.Config.EmbeddingSize, m.Config.embedScale(), m.Config.PadID()
	emb := &m.Encoder.Embeddings
	for bt := 0; bt < s.B*s.T; bt++ {
		d := dembSum[bt*E : bt*E+E]
		// o = sc·w + tt
		if id := int(s.ids[bt]); id != pad {
			gw := emb.Word.Grad[id*E : id*E+E]
			for c, v := range d {
				gw[c] += sc * v
			}
		}
		gt := emb.TokenType.Grad[int(s.types[bt])*E : int(s.types[bt])*E+E]
		for c, v := range d {
			gt[c] += v
		}
	}
}
