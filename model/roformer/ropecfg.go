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
