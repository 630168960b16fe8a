package experiment

import (
	"fmt"
	"strconv"

	"github.com/roformer-go/roformer/rope"
)

// DecayOptions configure the long-term decay experiment (§3.4.3, Fig. 2).
type DecayOptions struct {
	Dim         int     // d, the rotated dimensions; the paper's figure uses 128
	Base        float64 // θ's base; 0 means 10000
	MaxDistance int     // largest relative distance r; the figure goes to 250
	Out         string  // results folder
}

// DefaultDecay returns the settings of Fig. 2: d = 128, base 10000, r ≤ 250.
func DefaultDecay(out string) DecayOptions {
	return DecayOptions{Dim: 128, Base: rope.DefaultBase, MaxDistance: 250, Out: out}
}

// DecayResult is decay.json.
type DecayResult struct {
	Dim      int       `json:"dim"`
	Base     float64   `json:"base"`
	Distance []int     `json:"distance"`
	Bound    []float64 `json:"bound"`
}

// Decay computes rope.DecayBound for r = 0 … MaxDistance and writes
// decay.json ({"dim", "base", "distance", "bound"}), decay.csv, decay.png,
// decay.svg and summary.md into opts.Out.
func Decay(opts DecayOptions) (*DecayResult, error) {
	if opts.Base == 0 {
		opts.Base = rope.DefaultBase
	}
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: decay: no output folder")
	}
	bound, err := rope.DecayCurve(opts.Dim, opts.Base, opts.MaxDistance)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	res := &DecayResult{Dim: opts.Dim, Base: opts.Base, Bound: bound, Distance: make([]int, len(bound))}
	rows := make([][]string, len(bound))
	xs := make([]float64, len(bound))
	for r := range bound {
		res.Distance[r] = r
		xs[r] = float64(r)
		rows[r] = []string{strconv.Itoa(r), ftoa(bound[r])}
	}
	if err := writeJSON(opts.Out, "decay.json", res); err != nil {
		return nil, err
	}
	if err := writeCSV(opts.Out, "decay.csv", []string{"distance", "bound"}, rows); err != nil {
		return nil, err
	}
	p, err := linePlot(fmt.Sprintf("RoPE long-term decay (d = %d, base %g)", opts.Dim, opts.Base),
		"relative distance", "relative upper bound (1/(d/2))·Σ|S_j|", []series{{name: "bound", x: xs, y: bound}})
	if err != nil {
		return nil, err
	}
	p.X.Min = 0
	if err := savePlot(p, opts.Out, "decay"); err != nil {
		return nil, err
	}
	md := "| distance | 0 | 10 | 50 | 100 | 250 | max |\n|---|---|---|---|---|---|---|\n| bound |"
	for _, r := range []int{0, 10, 50, 100, 250, opts.MaxDistance} {
		if r <= opts.MaxDistance {
			md += fmt.Sprintf(" %.3f |", bound[r])
		} else {
			md += " – |"
		}
	}
	md = fmt.Sprintf("Relative upper bound of §3.4.3 for d = %d, base %g (max distance %d).\n\n%s\n", opts.Dim, opts.Base, opts.MaxDistance, md)
	return res, writeFile(opts.Out, "summary.md", []byte(md))
}
