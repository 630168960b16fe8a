package rope

import (
	"fmt"
	"math"
	"strings"
)

// Scaling is Hugging Face's rope_scaling: how a RoPE model stretches its
// frequencies to run past the length it was trained at. rope_theta, the
// base, is the caller's (Frequencies takes it as an argument).
//
// The formulas are those of HF transformers' modeling_rope_utils.py, read at
// tag v4.44.2 (the newest release tag in the mirror we could read) and
// compared with later 4.5x versions of the same file; where the versions
// differ, the behaviour chosen is named on the field or in Frequencies.
//
// Zero values mean "key absent": HF's default applies where HF has one, and
// Validate reports a missing key where HF requires it.
type Scaling struct {
	// Type is rope_type (legacy key: type): "default" (or ""), "linear",
	// "dynamic", "yarn", "longrope" or "llama3".
	Type string
	// Factor is factor: the context extension ratio (≥ 1).
	Factor float64
	// OriginalMaxPositions is original_max_position_embeddings, the length
	// the model was pretrained at; 0 means the model's
	// max_position_embeddings. yarn: the length the correction range is
	// computed for (HF from 4.45 on; 4.44 always used
	// max_position_embeddings, which is what 0 gives). longrope: Phi-3's
	// top-level key; when set, the factor is max_position_embeddings /
	// OriginalMaxPositions, as HF computes it, and Factor is not used.
	// llama3: required.
	OriginalMaxPositions int
	// AttentionFactor is attention_factor (yarn, longrope), the multiplier
	// of cos and sin; 0 means HF's default formula.
	AttentionFactor float64
	// BetaFast and BetaSlow are beta_fast and beta_slow (yarn), in
	// rotations; 0 means HF's defaults 32 and 1.
	BetaFast, BetaSlow float64
	// ShortFactor and LongFactor are short_factor and long_factor
	// (longrope): dim/2 divisors of the frequencies each.
	ShortFactor, LongFactor []float64
	// LowFreqFactor and HighFreqFactor are low_freq_factor and
	// high_freq_factor (llama3).
	LowFreqFactor, HighFreqFactor float64
}

// scalingTypes lists the rope_type values Scaling knows, in HF's order.
var scalingTypes = []string{"default", "linear", "dynamic", "yarn", "longrope", "llama3"}

// kind returns the rope_type with "" read as "default".
func (s Scaling) kind() string {
	if s.Type == "" {
		return "default"
	}
	return s.Type
}

// Validate checks s for a rotary dimension dim (the rotated width: head size
// × partial rotary factor). Its errors name the rope_scaling key, with HF's
// JSON name, and the value found. Where HF only logs a warning (a factor
// below 1, list lengths, beta_fast < beta_slow, high_freq_factor ≤
// low_freq_factor) Validate refuses: those settings give frequencies no
// model was trained with.
func (s Scaling) Validate(dim int) error {
	if dim <= 0 || dim%2 != 0 {
		return fmt.Errorf("rope: rope_scaling: rotary dimension %d must be even and positive", dim)
	}
	typ := s.kind()
	bad := func(key string, val any, why string) error {
		return fmt.Errorf("rope: rope_scaling %s = %v (rope_type %q): %s", key, val, typ, why)
	}
	missing := func(key string) error {
		return fmt.Errorf("rope: rope_scaling for rope_type %q is missing the required key %s", typ, key)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	// factor: required (and ≥ 1) for the types that read it unconditionally.
	needFactor := func() error {
		switch {
		case s.Factor == 0:
			return missing("factor")
		case !finite(s.Factor) || s.Factor < 1:
			return bad("factor", s.Factor, "must be a finite number ≥ 1")
		}
		return nil
	}
	if s.OriginalMaxPositions < 0 {
		return bad("original_max_position_embeddings", s.OriginalMaxPositions, "must be positive")
	}
	if s.AttentionFactor < 0 || !finite(s.AttentionFactor) {
		return bad("attention_factor", s.AttentionFactor, "must be a finite number > 0 (or absent)")
	}
	switch typ {
	case "default":
		return nil
	case "linear":
		return needFactor()
	case "dynamic":
		if dim <= 2 {
			// The base is raised to d/(d−2): HF divides by zero.
			return fmt.Errorf("rope: rope_scaling rope_type %q needs a rotary dimension above 2, got %d", typ, dim)
		}
		return needFactor()
	case "yarn":
		if err := needFactor(); err != nil {
			return err
		}
		for _, b := range []struct {
			key string
			v   float64
		}{{"beta_fast", s.BetaFast}, {"beta_slow", s.BetaSlow}} {
			if b.v < 0 || !finite(b.v) {
				return bad(b.key, b.v, "must be a finite number > 0 (or absent)")
			}
		}
		if fast, slow := or(s.BetaFast, 32), or(s.BetaSlow, 1); fast < slow {
			return bad("beta_fast", s.BetaFast, fmt.Sprintf("must be at least beta_slow = %v (defaults 32 and 1)", slow))
		}
		return nil
	case "longrope":
		for _, l := range []struct {
			key string
			v   []float64
		}{{"short_factor", s.ShortFactor}, {"long_factor", s.LongFactor}} {
			if l.v == nil {
				return missing(l.key)
			}
			if len(l.v) != dim/2 {
				return bad(l.key, fmt.Sprintf("a list of %d numbers", len(l.v)), fmt.Sprintf("must have dim/2 = %d entries", dim/2))
			}
			for i, f := range l.v {
				if f <= 0 || !finite(f) {
					return bad(fmt.Sprintf("%s[%d]", l.key, i), f, "must be a finite number > 0")
				}
			}
		}
		if s.OriginalMaxPositions == 0 {
			// Without Phi-3's original length, HF reads factor for the
			// attention factor.
			return needFactor()
		}
		if s.Factor != 0 && (!finite(s.Factor) || s.Factor < 1) {
			return bad("factor", s.Factor, "must be a finite number ≥ 1")
		}
		return nil
	case "llama3":
		if err := needFactor(); err != nil {
			return err
		}
		if s.OriginalMaxPositions == 0 {
			return missing("original_max_position_embeddings")
		}
		for _, f := range []struct {
			key string
			v   float64
		}{{"low_freq_factor", s.LowFreqFactor}, {"high_freq_factor", s.HighFreqFactor}} {
			if f.v == 0 {
				return missing(f.key)
			}
			if f.v < 0 || !finite(f.v) {
				return bad(f.key, f.v, "must be a finite number > 0")
			}
		}
		if s.HighFreqFactor <= s.LowFreqFactor {
			return bad("high_freq_factor", s.HighFreqFactor, fmt.Sprintf("must be greater than low_freq_factor = %v", s.LowFreqFactor))
		}
		return nil
	}
	return fmt.Errorf("rope: rope_scaling rope_type = %q: unknown (want %s)", s.Type, strings.Join(scalingTypes, ", "))
}

// or returns v, or def where v is 0 (an absent key).
func or(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// DependsOnLength reports whether Frequencies changes with seqLen: dynamic
// (the base grows past max_position_embeddings) and longrope (long factors
// past the original length). A model using them recomputes sin and cos as a
// cached sequence grows.
func (s Scaling) DependsOnLength() bool {
	t := s.kind()
	return t == "dynamic" || t == "longrope"
}

// Frequencies returns the inverse frequencies θ_i (dim/2 values) and the
// attention factor (the multiplier of cos and sin) that a model with base
// theta (rope_theta; 0 means 10000), rotary dimension dim and
// max_position_embeddings maxPositions uses for a sequence of seqLen tokens,
// in float64, by HF's formulas:
//
//	default   θ_i = theta^(−2i/dim), attention factor 1
//	linear    θ_i / factor
//	dynamic   seqLen ≤ maxPositions: θ_i; above, theta replaced by
//	          theta·(factor·seqLen/maxPositions − (factor−1))^(dim/(dim−2))
//	yarn      θ_i/factor blended into θ_i over the pairs between
//	          floor(c(beta_fast)) and ceil(c(beta_slow)) (clamped to
//	          [0, dim−1]), c(r) = dim·ln(L/(2π·r)) / (2·ln theta), L the
//	          original length; attention factor 0.1·ln(factor) + 1 (1 for
//	          factor ≤ 1)
//	longrope  θ_i / long_factor[i] when seqLen > the original length, else
//	          θ_i / short_factor[i]; attention factor
//	          sqrt(1 + ln(factor)/ln(original)) (1 for factor ≤ 1)
//	llama3    wavelength 2π/θ_i below original/high_freq_factor: θ_i; above
//	          original/low_freq_factor: θ_i/factor; between: the mix
//	          (1−a)·θ_i/factor + a·θ_i, a = (original/wavelength −
//	          low_freq_factor)/(high_freq_factor − low_freq_factor)
//
// HF computes these in float32; the float64 values here differ from its
// tensors by float32 rounding only. Dynamic is HF's function of the
// sequence length; HF's modules also keep the largest length seen until the
// sequence falls back below maxPositions (a cache policy, the caller's).
// longrope picks its factors by seqLen, as HF's modules do since 4.45 (and
// Phi-3's own module did before); 4.44's parameter function picked them once,
// by max_position_embeddings > original.
//
// s must have passed Validate(dim); Frequencies panics on an unknown type.
func (s Scaling) Frequencies(theta float64, dim, maxPositions, seqLen int) (invFreq []float64, attentionFactor float64) {
	if theta == 0 {
		theta = DefaultBase
	}
	h := dim / 2
	// base^(2i/dim) for each pair: HF's "pos_freqs".
	posFreqs := func(base float64) []float64 {
		p := make([]float64, h)
		for i := range p {
			p[i] = math.Pow(base, float64(2*i)/float64(dim))
		}
		return p
	}
	inv := func(base float64) []float64 {
		p := posFreqs(base)
		for i, f := range p {
			p[i] = 1 / f
		}
		return p
	}
	original := s.OriginalMaxPositions
	if original == 0 {
		original = maxPositions
	}
	switch s.kind() {
	case "default":
		return inv(theta), 1
	case "linear":
		f := inv(theta)
		for i := range f {
			f[i] /= s.Factor
		}
		return f, 1
	case "dynamic":
		if seqLen <= maxPositions {
			return inv(theta), 1
		}
		r := s.Factor*float64(seqLen)/float64(maxPositions) - (s.Factor - 1)
		return inv(theta * math.Pow(r, float64(dim)/float64(dim-2))), 1
	case "yarn":
		return s.yarn(theta, dim, original)
	case "longrope":
		factor := s.Factor
		if s.OriginalMaxPositions != 0 {
			factor = float64(maxPositions) / float64(s.OriginalMaxPositions)
		}
		att := s.AttentionFactor
		if att == 0 {
			att = 1
			if factor > 1 {
				att = math.Sqrt(1 + math.Log(factor)/math.Log(float64(original)))
			}
		}
		ext := s.ShortFactor
		if seqLen > original {
			ext = s.LongFactor
		}
		p := posFreqs(theta)
		for i := range p {
			p[i] = 1 / (ext[i] * p[i])
		}
		return p, att
	case "llama3":
		f := inv(theta)
		old := float64(original)
		lowWave, highWave := old/s.LowFreqFactor, old/s.HighFreqFactor
		for i, w := range f {
			wave := 2 * math.Pi / w
			switch {
			case wave < highWave: // high frequencies: kept
			case wave > lowWave: // low frequencies: interpolated
				f[i] = w / s.Factor
			default: // between: a smooth mix
				a := (old/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				f[i] = (1-a)*w/s.Factor + a*w
			}
		}
		return f, 1
	}
	panic(fmt.Sprintf("rope: Scaling.Frequencies: unknown rope_type %q (call Validate first)", s.Type))
}

// yarn is YaRN's "NTK-by-parts" blend (Peng et al. 2023, arXiv 2309.00071)
// as HF computes it, for a model pretrained at original tokens.
func (s Scaling) yarn(theta float64, dim, original int) ([]float64, float64) {
	factor := s.Factor
	att := s.AttentionFactor
	if att == 0 {
		att = 1
		if factor > 1 {
			att = 0.1*math.Log(factor) + 1
		}
	}
	// The pair index whose wavelength fits r rotations into the original
	// length.
	corrDim := func(r float64) float64 {
		return float64(dim) * math.Log(float64(original)/(r*2*math.Pi)) / (2 * math.Log(theta))
	}
	low := max(math.Floor(corrDim(or(s.BetaFast, 32))), 0)
	high := min(math.Ceil(corrDim(or(s.BetaSlow, 1))), float64(dim-1))
	if low == high {
		high += 0.001 // HF's guard against a zero-width ramp
	}
	h := dim / 2
	f := make([]float64, h)
	for i := range f {
		p := math.Pow(theta, float64(2*i)/float64(dim))
		ramp := min(max((float64(i)-low)/(high-low), 0), 1)
		extra := 1 - ramp // weight of the unscaled (extrapolated) frequency
		f[i] = 1/(factor*p)*(1-extra) + 1/p*extra
	}
	return f, att
}

// SinCosFrom fills sin and cos ([len(pos), len(invFreq)] row-major) with
// float32(attentionFactor·sin(p·θ_i)) and float32(attentionFactor·cos(p·θ_i))
// for each position p in pos: the tables of a scaled rotation, in the layout
// Forward and Backward take. The angle is computed in float64 and rounded
// once.
func SinCosFrom(sin, cos []float32, pos []int, invFreq []float64, attentionFactor float64) {
	h := len(invFreq)
	for n, p := range pos {
		s, c := sin[n*h:n*h+h], cos[n*h:n*h+h]
		for i, th := range invFreq {
			a := float64(p) * th
			s[i] = float32(attentionFactor * math.Sin(a))
			c[i] = float32(attentionFactor * math.Cos(a))
		}
	}
}
