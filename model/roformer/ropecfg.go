package roformer

import (
	"fmt"
	"math"

	"github.com/roformer-go/roformer/rope"
)

// RopeScaling is config.json's rope_scaling, with Hugging Face's key names
// (transformers' modeling_rope_utils): how the rotary frequencies are
// stretched to run past the length a model was trained at.
type RopeScaling struct {
	RopeType                      string    `json:"rope_type,omitempty"` // default, linear, dynamic, yarn, longrope, llama3
	Type                          string    `json:"type,omitempty"`      // the legacy name of rope_type
	Factor                        float64   `json:"factor,omitempty"`
	OriginalMaxPositionEmbeddings int       `json:"original_max_position_embeddings,omitempty"`
	AttentionFactor               float64   `json:"attention_factor,omitempty"`
	BetaFast                      float64   `json:"beta_fast,omitempty"`
	BetaSlow                      float64   `json:"beta_slow,omitempty"`
	ShortFactor                   []float64 `json:"short_factor,omitempty"`
	LongFactor                    []float64 `json:"long_factor,omitempty"`
	LowFreqFactor                 float64   `json:"low_freq_factor,omitempty"`
	HighFreqFactor                float64   `json:"high_freq_factor,omitempty"`
}

// XPosConfig is config.json's xpos: Sun et al.'s length-extrapolatable
// rotary embedding (2022), as rotary-embedding-torch implements it: q is
// scaled by ζ_i^(n/scale_base) and k by ζ_i^(−n/scale_base) on top of the
// rotation, positions n centred on the sequence's middle, so that q·k
// decays with the distance.
type XPosConfig struct {
	ScaleBase float64 `json:"scale_base,omitempty"` // default 512
}

// RotaryDims returns the number of dimensions of each head that are turned:
// head size × partial_rotary_factor, rounded down to even (all of them by
// default).
func (c *Config) RotaryDims() int {
	hs := c.HeadSize()
	if c.PartialRotaryFactor == 0 {
		return hs
	}
	return int(float64(hs)*c.PartialRotaryFactor) &^ 1
}

// ropeConfig returns the rotary embedding config.json describes.
func (c *Config) ropeConfig() rope.Config {
	rc := rope.Config{HeadSize: c.HeadSize(), RotaryDims: c.RotaryDims(), Base: c.RopeTheta, MaxPositions: c.MaxPositionEmbeddings}
	if s := c.RopeScaling; s != nil {
		t := s.RopeType
		if t == "" {
			t = s.Type
		}
		rc.Scaling = rope.Scaling{Type: t, Factor: s.Factor, OriginalMaxPositions: s.OriginalMaxPositionEmbeddings,
			AttentionFactor: s.AttentionFactor, BetaFast: s.BetaFast, BetaSlow: s.BetaSlow,
			ShortFactor: s.ShortFactor, LongFactor: s.LongFactor, LowFreqFactor: s.LowFreqFactor, HighFreqFactor: s.HighFreqFactor}
	}
	return rc
}

// validateRope checks rope_theta, partial_rotary_factor and rope_scaling.
func (c *Config) validateRope() []error {
	var errs []error
	if c.RopeTheta != 0 && !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		errs = append(errs, fmt.Errorf("rope_theta %v must be a finite number above 1", c.RopeTheta))
	}
	if c.PartialRotaryFactor != 0 && !(c.PartialRotaryFactor > 0 && c.PartialRotaryFactor <= 1) {
		errs = append(errs, fmt.Errorf("partial_rotary_factor %v must be in (0, 1]", c.PartialRotaryFactor))
	} else if c.HeadSize() > 0 && c.RotaryDims() == 0 {
		errs = append(errs, fmt.Errorf("partial_rotary_factor %v turns no dimension of a head of %d", c.PartialRotaryFactor, c.HeadSize()))
	}
	if x := c.XPos; x != nil {
		if err := (rope.XPos{ScaleBase: x.ScaleBase}).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("xpos: %w", err))
		}
		if c.RotaryValue {
			errs = append(errs, fmt.Errorf("xpos with rotary_value true is not defined (xPos scales q and k in opposite directions)"))
		}
		if c.Attention() != AttnSoftmax || c.PosEnc() != PosRotary {
			errs = append(errs, fmt.Errorf("xpos needs rotary positions and softmax attention, not %s %s attention", c.PosEnc(), c.Attention()))
		}
	}
	if s := c.RopeScaling; s != nil {
		if s.RopeType != "" && s.Type != "" && s.RopeType != s.Type {
			errs = append(errs, fmt.Errorf("rope_scaling: rope_type %q and its legacy name type %q disagree", s.RopeType, s.Type))
		}
		if err := c.ropeConfig().Scaling.Validate(c.RotaryDims()); err != nil {
			errs = append(errs, fmt.Errorf("rope_scaling: %w", err))
		}
	}
	return errs
}

// Rotary returns the rotary embedding config.json describes (rope_theta,
// partial_rotary_factor, rope_scaling, max_position_embeddings), the one a
// model built from it uses.
func (c *Config) Rotary() (*rope.Rotary, error) { return rope.New(c.ropeConfig()) }

// RopeType returns rope_scaling's type ("default" without scaling).
func (c *Config) RopeType() string {
	if s := c.RopeScaling; s != nil {
		if s.RopeType != "" {
			return s.RopeType
		}
		if s.Type != "" {
			return s.Type
		}
	}
	return "default"
}

// keySinCos returns the rotation of the keys: the queries' one, or with
// xPos its own.
func (s *State) keySinCos() (sin, cos []float32) {
	if s.ksin != nil {
		return s.ksin, s.kcos
	}
	return s.sin, s.cos
}

// xposScale turns s.sin, s.cos (the rotation of positions pos) into xPos's
// query rotation and makes the keys' one: scaled by ζ_i^(±(n − ⌊L/2⌋)/scale_base)
// for a sequence of L = largest position + 1 tokens.
func (m *Model) xposScale(s *State, pos []int) {
	seqLen := 0
	for _, p := range pos {
		seqLen = max(seqLen, p+1)
	}
	d := m.rotary.Config().RotaryDims
	sc := rope.XPos{ScaleBase: m.Config.XPos.ScaleBase}.Scales(d, pos, seqLen)
	n := len(sc)
	s.ksin, s.kcos = grow(&s.ksin, n), grow(&s.kcos, n)
	for i, z := range sc {
		sn, cs := float64(s.sin[i]), float64(s.cos[i])
		s.ksin[i], s.kcos[i] = float32(sn/z), float32(cs/z)
		s.sin[i], s.cos[i] = float32(sn*z), float32(cs*z)
	}
}
