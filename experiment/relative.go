package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/rope"
)

// RelativeOptions configure the check of the paper's central claim (§3.2,
// eq. 16): rotating q and k by their absolute positions makes their score
// depend on the positions only through the offset, (R_m q)ᵀ(R_n k) =
// qᵀR_{n−m}k, also inside linear attention (eq. 19), while an absolute
// encoding added to the inputs does not.
type RelativeOptions struct {
	Dim       int    `json:"dim"`        // head size d
	Positions int    `json:"positions"`  // m, n range over 0 … Positions−1
	MaxOffset int    `json:"max_offset"` // offsets r = n − m in [−MaxOffset, MaxOffset]
	Seed      uint64 `json:"seed"`       // of the random q and k
	Out       string `json:"-"`
}

// DefaultRelative returns d = 64, positions 0 … 511, offsets |r| ≤ 64.
func DefaultRelative(out string) RelativeOptions {
	return RelativeOptions{Dim: 64, Positions: 512, MaxOffset: 64, Seed: 1, Out: out}
}

// RelativeResult is relative.json. For each scheme and offset r, Spread
// is max_m s(m, m+r) − min_m s(m, m+r) over every position pair with that
// offset: 0 up to rounding when the score depends only on r.
type RelativeResult struct {
	Options RelativeOptions      `json:"options"`
	Offsets []int                `json:"offsets"`
	Spread  map[string][]float64 `json:"spread"`     // scheme → spread per offset
	Worst   map[string]float64   `json:"worst"`      // scheme → largest spread
	Scale   map[string]float64   `json:"mean_score"` // scheme → mean |s| (for scale)
}

// relativeSchemes are the scores compared:
//
//	rotary             (R_m q)·(R_n k), float32 as the model computes it
//	rotary-linear-num  (R_m φ(q))·(R_n φ(k)), φ = elu+1: eq. (19)'s numerator
//	linear-den         φ(q)·φ(k): eq. (19)'s denominator, no position at all
//	sinusoidal         (q + p_m)·(k + p_n), Vaswani's encoding added
var relativeSchemes = []string{"rotary", "rotary-linear-num", "linear-den", "sinusoidal"}

// Relative computes the spreads and writes relative.json, relative.csv,
// scores.png/svg (s(m, m+r) against r for three m: the rotary curves
// coincide, the sinusoidal ones do not) and summary.md.
func Relative(opts RelativeOptions) (*RelativeResult, error) {
	d, P, R := opts.Dim, opts.Positions, opts.MaxOffset
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: relative: no output folder")
	}
	if d <= 0 || d%2 != 0 || P < 2 || R < 0 || R >= P {
		return nil, fmt.Errorf("experiment: relative: dimension %d must be even and positive, positions %d at least 2, max offset %d in [0, %d)", d, P, R, P)
	}
	rot, err := rope.New(rope.Config{HeadSize: d})
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	r := rand.New(rand.NewPCG(opts.Seed, 0x72656c6174697665))
	q, k := make([]float32, d), make([]float32, d)
	for i := range q {
		q[i], k[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	fq, fk := make([]float32, d), make([]float32, d)
	kernels.EluFeatureForward(fq, q, d)
	kernels.EluFeatureForward(fk, k, d)
	// Every position's rotated vectors and sinusoid-shifted vectors.
	pos := rope.Positions(P, 0)
	sin, cos := make([]float32, P*d/2), make([]float32, P*d/2)
	rot.SinCos(sin, cos, pos)
	tile := func(x []float32) []float32 {
		out := make([]float32, P*d)
		for p := 0; p < P; p++ {
			copy(out[p*d:], x)
		}
		return out
	}
	rq, rk, rfq, rfk := tile(q), tile(k), tile(fq), tile(fk)
	for _, x := range [][]float32{rq, rk, rfq, rfk} {
		rot.Forward(x, sin, cos, 1, P, 1)
	}
	sq, sk := tile(q), tile(k)
	pe := make([]float32, d)
	for p := 0; p < P; p++ {
		for i := 0; i < d; i += 2 {
			a := float64(p) / math.Pow(10000, float64(i)/float64(d))
			pe[i], pe[i+1] = float32(math.Sin(a)), float32(math.Cos(a))
		}
		for i := range pe {
			sq[p*d+i] += pe[i]
			sk[p*d+i] += pe[i]
		}
	}
	den := 0.0 // φ(q)·φ(k): the same at every position
	for i := range fq {
		den += float64(fq[i] * fk[i])
	}
	dot := func(a, b []float32, m, n int) float64 {
		s := float32(0)
		for i := 0; i < d; i++ {
			s += a[m*d+i] * b[n*d+i]
		}
		return float64(s)
	}
	score := map[string]func(m, n int) float64{
		"rotary":            func(m, n int) float64 { return dot(rq, rk, m, n) },
		"rotary-linear-num": func(m, n int) float64 { return dot(rfq, rfk, m, n) },
		"linear-den":        func(m, n int) float64 { return den },
		"sinusoidal":        func(m, n int) float64 { return dot(sq, sk, m, n) },
	}
	res := &RelativeResult{Options: opts, Spread: map[string][]float64{}, Worst: map[string]float64{}, Scale: map[string]float64{}}
	for off := -R; off <= R; off++ {
		res.Offsets = append(res.Offsets, off)
	}
	for _, name := range relativeSchemes {
		f := score[name]
		sumAbs, cnt := 0.0, 0
		for _, off := range res.Offsets {
			lo, hi := math.Inf(1), math.Inf(-1)
			for m := max(0, -off); m < P && m+off < P; m++ {
				s := f(m, m+off)
				lo, hi = math.Min(lo, s), math.Max(hi, s)
				sumAbs += math.Abs(s)
				cnt++
			}
			res.Spread[name] = append(res.Spread[name], hi-lo)
			res.Worst[name] = math.Max(res.Worst[name], hi-lo)
		}
		res.Scale[name] = sumAbs / float64(cnt)
	}
	return res, writeRelative(opts, res, score)
}

func writeRelative(o RelativeOptions, res *RelativeResult, score map[string]func(m, n int) float64) error {
	if err := writeJSON(o.Out, "relative.json", res); err != nil {
		return err
	}
	var rows [][]string
	for i, off := range res.Offsets {
		row := []string{strconv.Itoa(off)}
		for _, name := range relativeSchemes {
			row = append(row, ftoa(res.Spread[name][i]))
		}
		rows = append(rows, row)
	}
	if err := writeCSV(o.Out, "relative.csv", append([]string{"offset"}, relativeSchemes...), rows); err != nil {
		return err
	}
	starts := []int{0, o.Positions / 3, o.Positions - 1 - o.MaxOffset}
	curves := func(names ...string) []series {
		var ss []series
		for _, name := range names {
			for k, m0 := range starts {
				s := series{name: fmt.Sprintf("%s, m = %d", name, m0), dashed: name == "sinusoidal"}
				if name != "sinusoidal" {
					// The curves of one score lie on top of each other: the
					// widest is drawn first, so that all three show.
					s.width = []float64{5, 3, 1.2}[k]
				}
				for _, off := range res.Offsets {
					if m0+off >= 0 && m0+off < o.Positions {
						s.x, s.y = append(s.x, float64(off)), append(s.y, score[name](m0, m0+off))
					}
				}
				ss = append(ss, s)
			}
		}
		return ss
	}
	for _, pl := range []struct {
		base, title string
		names       []string
	}{
		{"scores", fmt.Sprintf("Score s(m, m+r) of one random q, k (d = %d) against the offset r, from three positions m", o.Dim), []string{"rotary", "sinusoidal"}},
		{"scores_eq19", fmt.Sprintf("Linear attention with RoPE (eq. 19), φ = elu + 1, d = %d: numerator and normaliser", o.Dim), []string{"rotary-linear-num", "linear-den"}},
	} {
		ss := curves(pl.names...)
		p, err := linePlot(pl.title, "offset r = n − m", "score", ss)
		if err != nil {
			return err
		}
		if err := savePlot(p, o.Out, pl.base); err != nil {
			return err
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "One random q, k ~ N(0, I), d = %d, positions 0 … %d, offsets |r| ≤ %d. Spread = max − min over m of s(m, m+r), worst over r.\n\n", o.Dim, o.Positions-1, o.MaxOffset)
	md.WriteString("| score | worst spread over m | mean abs score |\n|---|---|---|\n")
	for _, name := range relativeSchemes {
		fmt.Fprintf(&md, "| %s | %.3g | %.3g |\n", name, res.Worst[name], res.Scale[name])
	}
	return writeFile(o.Out, "summary.md", []byte(md.String()))
}
