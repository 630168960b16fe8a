package rope

import (
	"fmt"
	"math"

	"github.com/roformer-go/roformer/kernels"
)

// Layout names which dimensions of a head form a rotated pair.
type Layout int

const (
	// Interleaved pairs adjacent dimensions (x[2i], x[2i+1]): RoFormer's layout.
	Interleaved Layout = iota
	// Halves pairs x[i] with x[i+d/2]: the GPT-NeoX layout.
	Halves
)

func (l Layout) String() string {
	switch l {
	case Interleaved:
		return "interleaved"
	case Halves:
		return "halves"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// ParseLayout maps "interleaved" (also "gptj", "normal") or "halves" (also
// "neox") to a Layout.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "interleaved", "gptj", "normal", "":
		return Interleaved, nil
	case "halves", "neox":
		return Halves, nil
	}
	return 0, fmt.Errorf("rope: unknown layout %q (want interleaved or halves)", s)
}

// DefaultBase is θ's base in the paper and in every RoFormer checkpoint.
const DefaultBase = 10000.0

// Config describes a rotary embedding.
type Config struct {
	HeadSize   int     // dimensions per head
	RotaryDims int     // dimensions turned, even, ≤ HeadSize; 0 means HeadSize
	Base       float64 // θ_i = Base^(−2i/RotaryDims); 0 means 10000
	Layout     Layout
	// Scaling stretches the frequencies to run past the training length
	// (HF's rope_scaling); the zero value is none. MaxPositions is the
	// model's max_position_embeddings, which dynamic, yarn, longrope and
	// llama3 scaling refer to.
	Scaling      Scaling
	MaxPositions int
}

// Rotary applies R_{Θ,m} to heads of width HeadSize. It is immutable and safe
// for concurrent use.
type Rotary struct {
	cfg  Config
	d    int       // rotated dims
	freq []float64 // Base^(2i/d) for i < d/2 (HF divides the position by it)

	// With scaling: the inverse frequencies and attention factor, when they
	// do not depend on the sequence's length.
	scaled   bool
	invFreq  []float64
	attnFact float64
}

// New checks cfg and returns the rotation it describes.
func New(cfg Config) (*Rotary, error) {
	if cfg.RotaryDims == 0 {
		cfg.RotaryDims = cfg.HeadSize
	}
	if cfg.Base == 0 {
		cfg.Base = DefaultBase
	}
	switch {
	case cfg.HeadSize <= 0:
		return nil, fmt.Errorf("rope: head size %d must be positive", cfg.HeadSize)
	case cfg.RotaryDims%2 != 0 || cfg.RotaryDims < 0 || cfg.RotaryDims > cfg.HeadSize:
		return nil, fmt.Errorf("rope: rotary dims %d must be even and at most the head size %d", cfg.RotaryDims, cfg.HeadSize)
	case cfg.Base <= 1 || math.IsInf(cfg.Base, 0) || math.IsNaN(cfg.Base):
		return nil, fmt.Errorf("rope: base %v must be a finite number above 1", cfg.Base)
	}
	d := cfg.RotaryDims
	r := &Rotary{cfg: cfg, d: d, freq: make([]float64, d/2)}
	for i := range r.freq {
		r.freq[i] = math.Pow(cfg.Base, float64(2*i)/float64(d))
	}
	if k := cfg.Scaling.kind(); k != "default" {
		if err := cfg.Scaling.Validate(d); err != nil {
			return nil, err
		}
		if cfg.MaxPositions <= 0 {
			return nil, fmt.Errorf("rope: %s scaling needs the model's max_position_embeddings, got %d", k, cfg.MaxPositions)
		}
		r.scaled = true
		if !cfg.Scaling.DependsOnLength() {
			r.invFreq, r.attnFact = cfg.Scaling.Frequencies(cfg.Base, d, cfg.MaxPositions, cfg.MaxPositions)
		}
	}
	return r, nil
}

// Scaled reports whether the frequencies are scaled (rope_scaling).
func (r *Rotary) Scaled() bool { return r.scaled }

// Frequencies returns the inverse frequencies θ_i (d/2 values) and the
// attention factor that multiplies cos and sin for a sequence of seqLen
// tokens: the scaled ones with rope_scaling (dynamic and longrope change
// with the length), θ_i = Base^(−2i/d) and 1 otherwise.
func (r *Rotary) Frequencies(seqLen int) (invFreq []float64, attentionFactor float64) {
	switch {
	case !r.scaled:
		return r.Theta(), 1
	case r.invFreq != nil:
		return append([]float64(nil), r.invFreq...), r.attnFact
	}
	return r.cfg.Scaling.Frequencies(r.cfg.Base, r.d, r.cfg.MaxPositions, seqLen)
}

// Config returns the configuration (with defaults filled in).
func (r *Rotary) Config() Config { return r.cfg }

// Theta returns θ_i = Base^(−2i/d) for i < d/2.
func (r *Rotary) Theta() []float64 {
	th := make([]float64, len(r.freq))
	for i, f := range r.freq {
		th[i] = 1 / f
	}
	return th
}

// SinCos fills sin and cos ([len(pos), d/2] row-major) with
// float32(sin(p/Base^(2i/d))) and float32(cos(…)) for each position p in pos:
// HF's table entries, computed on demand for any position.
//
// With rope_scaling the frequencies are the scaled ones for a sequence as
// long as the largest position + 1 (as HF's modules take it), and the
// attention factor multiplies sin and cos.
func (r *Rotary) SinCos(sin, cos []float32, pos []int) {
	if r.scaled {
		seqLen := 0
		for _, p := range pos {
			seqLen = max(seqLen, p+1)
		}
		inv, af := r.invFreq, r.attnFact
		if inv == nil {
			inv, af = r.cfg.Scaling.Frequencies(r.cfg.Base, r.d, r.cfg.MaxPositions, seqLen)
		}
		SinCosFrom(sin, cos, pos, inv, af)
		return
	}
	h := r.d / 2
	for n, p := range pos {
		s, c := sin[n*h:n*h+h], cos[n*h:n*h+h]
		for i, f := range r.freq {
			a := float64(p) / f
			s[i] = float32(math.Sin(a))
			c[i] = float32(math.Cos(a))
		}
	}
}

// Table returns HF's sinusoid table for positions 0 … n−1 in its storage
// layout: row p is [sin(θ_0 p) … sin(θ_{d/2−1} p), cos(θ_0 p) … cos(θ_{d/2−1} p)]
// ([n, d], all sines first), the tensor stored as
// roformer.encoder.embed_positions.weight.
func (r *Rotary) Table(n int) []float32 {
	h := r.d / 2
	sin, cos := make([]float32, n*h), make([]float32, n*h)
	pos := make([]int, n)
	for i := range pos {
		pos[i] = i
	}
	r.SinCos(sin, cos, pos)
	out := make([]float32, n*r.d)
	for p := 0; p < n; p++ {
		copy(out[p*r.d:], sin[p*h:p*h+h])
		copy(out[p*r.d+h:], cos[p*h:p*h+h])
	}
	return out
}

// Positions returns offset, offset+1, …, offset+T−1: the positions of a row of
// T tokens that follows offset earlier ones (a KV cache). HF uses offset 0 for
// every row, left-padded ones included.
func Positions(T, offset int) []int {
	p := make([]int, T)
	for i := range p {
		p[i] = offset + i
	}
	return p
}

// Forward rotates, in place, every head of x by its position:
// x' = R_{Θ,pos} x on the first d dims of each head. sin and cos come from
// SinCos, either for the T positions of a row (shared by all rows: [T, d/2])
// or for every token ([B·T, d/2], explicit position ids). The pair (a, b)
// becomes (a·cos − b·sin, b·cos + a·sin), in float32, the order HF computes
// x⊙cos + rot(x)⊙sin.
//
//	x   [B, T, NH·HS] heads are column blocks of width HS
//	sin [T, d/2] or [B·T, d/2]
//	cos [T, d/2] or [B·T, d/2]
func (r *Rotary) Forward(x, sin, cos []float32, B, T, NH int) {
	r.apply(x, sin, cos, B, T, NH, 1)
}

// Backward differentiates Forward in place: the rotation is orthogonal, so
// the gradient is rotated back, dx = R_{Θ,pos}ᵀ dx' (the angle negated).
//
//	dx  [B, T, NH·HS]  overwritten: dL/dx' in, dL/dx out
//	sin [T, d/2]
//	cos [T, d/2]
func (r *Rotary) Backward(dx, sin, cos []float32, B, T, NH int) {
	r.apply(dx, sin, cos, B, T, NH, -1)
}

// maxRotaryOnStack bounds the rotated width d whose spread cos/sin rows live
// on the stack (wider rotations take the scalar loop).
const maxRotaryOnStack = 512

func (r *Rotary) apply(x, sin, cos []float32, B, T, NH int, sign float32) {
	HS, d, h := r.cfg.HeadSize, r.d, r.d/2
	C := NH * HS
	perToken := len(sin) >= B*T*h // sin/cos given for every (b, t), not shared by rows
	rotate := func(lo, hi int) {
		// Interleaved pairs go through kernels.RotatePairs with cos and ±sin
		// spread over both members of each pair, built once per token.
		var buf [2 * maxRotaryOnStack]float32
		spread := r.cfg.Layout == Interleaved && d <= maxRotaryOnStack
		cos2, sin2 := buf[:d], buf[d:2*d]
		for bt := lo; bt < hi; bt++ {
			t := bt % T
			if perToken {
				t = bt
			}
			s, c := sin[t*h:t*h+h], cos[t*h:t*h+h]
			row := x[bt*C : bt*C+C]
			if spread {
				for i := 0; i < h; i++ {
					si := sign * s[i]
					cos2[2*i], cos2[2*i+1] = c[i], c[i]
					sin2[2*i], sin2[2*i+1] = -si, si
				}
				for hd := 0; hd < NH; hd++ {
					kernels.RotatePairs(row[hd*HS:hd*HS+d], cos2, sin2)
				}
				continue
			}
			for hd := 0; hd < NH; hd++ {
				v := row[hd*HS : hd*HS+d]
				if r.cfg.Layout == Interleaved {
					for i := 0; i < h; i++ {
						a, b := v[2*i], v[2*i+1]
						si := sign * s[i]
						// float32() rounds each product, as HF's separate tensor
						// multiplies do, and keeps the compiler from fusing.
						v[2*i] = float32(a*c[i]) - float32(b*si)
						v[2*i+1] = float32(b*c[i]) + float32(a*si)
					}
				} else {
					for i := 0; i < h; i++ {
						a, b := v[i], v[i+h]
						si := sign * s[i]
						v[i] = float32(a*c[i]) - float32(b*si)
						v[i+h] = float32(b*c[i]) + float32(a*si)
					}
				}
			}
		}
	}
	// Rows are independent: split them into two ranges on the kernels'
	// worker pool when there is enough work (the rotation is memory-bound;
	// more ranges do not help). A minimum range of n/2 rows (2 at least)
	// makes exactly two ranges from n = 4 rows on.
	n := B * T
	if n*C < 1<<15 {
		rotate(0, n)
		return
	}
	kernels.ParallelFor(n, max(n/2, 2), rotate)
}

// forwardNaive is the reference twin of Forward: it builds the full d×d
// rotation matrix R_{Θ,m} of eq. (15) and multiplies, in float64.
func (r *Rotary) forwardNaive(x []float32, pos []int, B, T, NH int) {
	HS, d := r.cfg.HeadSize, r.d
	C := NH * HS
	R := make([]float64, d*d)
	tmp := make([]float64, d)
	for bt := 0; bt < B*T; bt++ {
		p := float64(pos[bt%T])
		clear(R)
		for i := 0; i < d/2; i++ {
			a := p / r.freq[i]
			c, s := math.Cos(a), math.Sin(a)
			u, w := 2*i, 2*i+1
			if r.cfg.Layout == Halves {
				u, w = i, i+d/2
			}
			R[u*d+u], R[u*d+w] = c, -s
			R[w*d+u], R[w*d+w] = s, c
		}
		for hd := 0; hd < NH; hd++ {
			v := x[bt*C+hd*HS : bt*C+hd*HS+d]
			for i := 0; i < d; i++ {
				acc := 0.0
				for j := 0; j < d; j++ {
					acc += R[i*d+j] * float64(v[j])
				}
				tmp[i] = acc
			}
			for i := range v {
				v[i] = float32(tmp[i])
			}
		}
	}
}
