package sentence

import (
	"fmt"
	"math"
	"strings"
)

// Pooling is the Pooling module: 1_Pooling/config.json. Each mode that is
// set adds a vector of Dim values to the output; several are concatenated
// in the order of the fields (sentence-transformers' order): CLS, Max,
// Mean, MeanSqrtLen, WeightedMean, LastToken.
type Pooling struct {
	Dim          int  // word_embedding_dimension: the transformer's hidden size
	CLS          bool // pooling_mode_cls_token
	Max          bool // pooling_mode_max_tokens
	Mean         bool // pooling_mode_mean_tokens
	MeanSqrtLen  bool // pooling_mode_mean_sqrt_len_tokens
	WeightedMean bool // pooling_mode_weightedmean_tokens
	LastToken    bool // pooling_mode_lasttoken
	// IncludePrompt (include_prompt, default true) keeps a prompt's
	// tokens in the pooling. Without it the prompt's positions, and
	// [CLS] before them, are left out of every mode but CLS.
	IncludePrompt bool
}

// The mode names, as Pooling's pooling_mode argument and the flags take
// them, in the order of the output.
var modeNames = []string{"cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"}

// ModeNames returns the names ParseModes takes.
func ModeNames() []string { return append([]string(nil), modeNames...) }

// modes returns the pointers to p's mode flags in output order.
func (p *Pooling) modes() []*bool {
	return []*bool{&p.CLS, &p.Max, &p.Mean, &p.MeanSqrtLen, &p.WeightedMean, &p.LastToken}
}

// ParseModes returns a Pooling of dim values per mode with the modes named
// in s, separated by "+" or "," ("mean", "cls+max"), and IncludePrompt set.
func ParseModes(s string, dim int) (Pooling, error) {
	p := Pooling{Dim: dim, IncludePrompt: true}
	flags := p.modes()
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' }) {
		i := indexOf(modeNames, strings.TrimSpace(name))
		if i < 0 {
			return Pooling{}, fmt.Errorf("sentence: pooling mode %q: want one of %s", name, strings.Join(modeNames, ", "))
		}
		*flags[i] = true
	}
	if p.Count() == 0 {
		return Pooling{}, fmt.Errorf("sentence: pooling %q names no mode (want one of %s)", s, strings.Join(modeNames, ", "))
	}
	return p, nil
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

// Modes returns the names of p's modes in output order, joined by "+".
func (p Pooling) Modes() string {
	var names []string
	for i, f := range p.modes() {
		if *f {
			names = append(names, modeNames[i])
		}
	}
	return strings.Join(names, "+")
}

// Count returns the number of modes set.
func (p Pooling) Count() int {
	n := 0
	for _, f := range p.modes() {
		if *f {
			n++
		}
	}
	return n
}

// OutDim returns the length of p's output: Dim per mode.
func (p Pooling) OutDim() int { return p.Count() * p.Dim }

// maskedMax is the value sentence-transformers gives the positions outside
// the mask before it takes the maximum.
const maskedMax = -1e9

// Pool returns the pooled vector [OutDim] of one row: h [T, Dim] its last
// hidden state and mask [T] its attention mask (1 for a token, 0 for
// padding). skip leading positions are left out as padding is (every mode
// but CLS): sentence-transformers' prompt_length when IncludePrompt is false
// ([CLS] and the prompt's tokens), else 0. With m[t] the mask after skip,
// n = Σ m[t] and w[t] = t+1 (positions count from 1, [CLS] included):
//
//	cls          h[0]
//	max          max over t of (m[t] ? h[t] : -1e9)
//	mean         Σ m[t] h[t] / max(n, 1e-9)
//	mean_sqrt    Σ m[t] h[t] / √max(n, 1e-9)
//	weightedmean Σ m[t] w[t] h[t] / max(Σ m[t] w[t], 1e-9)
//	lasttoken    h[last t with m[t] = 1] (0 when there is none; v2.4 on)
//
// The sums are in float64, in position order, so a row's padding changes
// nothing.
func (p *Pooling) Pool(h []float32, mask []int32, T, skip int) []float32 {
	H := p.Dim
	if len(h) < T*H || len(mask) < T {
		panic(fmt.Sprintf("sentence: Pool: %d values and %d mask entries for %d positions of %d", len(h), len(mask), T, H))
	}
	on := func(t int) bool { return t >= skip && mask[t] != 0 }
	out := make([]float32, 0, p.OutDim())
	if p.CLS {
		out = append(out, h[:H]...)
	}
	if p.Max {
		mx := make([]float32, H)
		for j := range mx {
			mx[j] = maskedMax
		}
		for t := range T {
			if !on(t) {
				continue
			}
			for j, x := range h[t*H : t*H+H] {
				mx[j] = max(mx[j], x)
			}
		}
		out = append(out, mx...)
	}
	if p.Mean || p.MeanSqrtLen || p.WeightedMean {
		sum, wsum := make([]float64, H), make([]float64, H)
		n, wn := 0.0, 0.0
		for t := range T {
			if !on(t) {
				continue
			}
			w := float64(t + 1)
			n++
			wn += w
			for j, x := range h[t*H : t*H+H] {
				sum[j] += float64(x)
				wsum[j] += w * float64(x)
			}
		}
		n, wn = max(n, 1e-9), max(wn, 1e-9)
		if p.Mean {
			for _, s := range sum {
				out = append(out, float32(s/n))
			}
		}
		if p.MeanSqrtLen {
			for _, s := range sum {
				out = append(out, float32(s/math.Sqrt(n)))
			}
		}
		if p.WeightedMean {
			for _, s := range wsum {
				out = append(out, float32(s/wn))
			}
		}
	}
	if p.LastToken {
		last := -1
		for t := T - 1; t >= 0; t-- {
			if on(t) {
				last = t
				break
			}
		}
		if last < 0 {
			out = append(out, make([]float32, H)...)
		} else {
			out = append(out, h[last*H:last*H+H]...)
		}
	}
	return out
}

// normEps is the smallest norm Normalize divides by (torch's F.normalize).
const normEps = 1e-12

// Normalize scales v to unit Euclidean length in place, v / max(‖v‖₂,
// 1e-12), with the norm summed in float64: the Normalize module.
func Normalize(v []float32) {
	norm := 0.0
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	norm = max(math.Sqrt(norm), normEps)
	for j := range v {
		v[j] = float32(float64(v[j]) / norm)
	}
}
