package experiment

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writeJSON writes v, indented, to dir/name.
func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("experiment: encoding %s: %w", name, err)
	}
	return writeFile(dir, name, append(b, '\n'))
}

// readResults decodes dir/results.json into v.
func readResults(dir string, v any) error {
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("experiment: %s: %w", filepath.Join(dir, "results.json"), err)
	}
	return nil
}

// writeCSV writes a header and rows to dir/name.
func writeCSV(dir, name string, header []string, rows [][]string) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write(header)
	w.WriteAll(rows)
	if err := w.Error(); err != nil {
		return fmt.Errorf("experiment: %s: %w", name, err)
	}
	return writeFile(dir, name, buf.Bytes())
}

func writeFile(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	return nil
}

// ftoa formats a number for CSV: shortest float64 form, empty for NaN.
func ftoa(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// series is one line of a plot, with an optional band (lo, hi) around it.
type series struct {
	name   string
	x, y   []float64
	lo, hi []float64 // nil: no band
	dashed bool
	points bool    // mark every point (few points)
	width  float64 // line width in points; 0: 1.5
}

// palette has 16 colours that read apart on white and from the grid's grey,
// so that a figure of up to 16 arms never repeats one (char-lm has 14):
// matplotlib's first seven (a figure of up to seven arms keeps its
// colours), then black and pure blue, then seven picked one at a time as
// the candidate (CIELAB lightness 42–72, so that a thin line neither fades
// on white nor looks black; chroma ≥ 35, so no grey) farthest in CIEDE2000
// from those already in, white and the grid (no pair of the 16 closer
// than 16). Past it, lines of the same colour are told apart by dashes.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {0, 0, 0, 255},
	{0, 0, 255, 255}, {0, 187, 187, 255}, {187, 170, 0, 255}, {119, 102, 17, 255},
	{153, 170, 255, 255}, {204, 0, 119, 255}, {255, 136, 136, 255}, {0, 119, 85, 255},
}

// fitY sets p's y range to the values of ss (lines and bands) with a
// margin of 4% of the span on either side, so that no curve touches or
// leaves the frame.
func fitY(p *plot.Plot, ss []series) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, ys := range [][]float64{s.y, s.lo, s.hi} {
			for _, y := range ys {
				if !math.IsNaN(y) {
					lo, hi = min(lo, y), max(hi, y)
				}
			}
		}
	}
	if lo > hi {
		return
	}
	m := 0.04 * (hi - lo)
	if hi-lo <= 1e-9*max(1, math.Abs(hi)) { // one value: a range of ±2% of it
		m = 0.02 * max(math.Abs(hi), 1e-9)
	}
	p.Y.Min, p.Y.Max = lo-m, hi+m
}

// niceTicks marks a value axis at multiples of 1, 2 or 5 × 10^k, about five
// labelled ones and four minor ones between each, each label written with
// as many decimals as the step needs (plot.DefaultTicks can label a tick
// at 3.52 as "3.5" when the range is not round).
type niceTicks struct{}

// Ticks returns the ticks of [lo, hi].
func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag // the nice step nearest to raw on a log scale
	for _, f := range []float64{2, 5, 10} {
		if math.Abs(math.Log(f*mag/raw)) < math.Abs(math.Log(step/raw)) {
			step = f * mag
		}
	}
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var ticks []plot.Tick
	minor := step / 5
	for i := math.Ceil(lo / minor); i*minor <= hi+1e-9*step; i++ {
		v := i * minor
		t := plot.Tick{Value: v}
		if k := math.Round(v / step); math.Abs(v-k*step) < 1e-6*step {
			t.Label = strconv.FormatFloat(k*step+0, 'f', dec, 64) // +0: no "-0"
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// fromX returns s without its points before x0.
func fromX(s series, x0 float64) series {
	i := 0
	for i < len(s.x) && s.x[i] < x0 {
		i++
	}
	s.x, s.y = s.x[i:], s.y[i:]
	if s.lo != nil {
		s.lo, s.hi = s.lo[i:], s.hi[i:]
	}
	return s
}

// linePlot draws the series (bands first, translucent, then the lines),
// its y range fitted to every line and band (fitY).
func linePlot(title, xLabel, yLabel string, ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, s := range ss {
		if s.lo == nil {
			continue
		}
		var pts plotter.XYs
		for j := range s.x {
			pts = append(pts, plotter.XY{X: s.x[j], Y: s.hi[j]})
		}
		for j := len(s.x) - 1; j >= 0; j-- {
			pts = append(pts, plotter.XY{X: s.x[j], Y: s.lo[j]})
		}
		if len(pts) < 3 {
			continue
		}
		poly, err := plotter.NewPolygon(pts)
		if err != nil {
			return nil, fmt.Errorf("experiment: plotting %s: %w", s.name, err)
		}
		c := palette[i%len(palette)]
		poly.Color = color.NRGBA{R: c.R, G: c.G, B: c.B, A: 60} // translucent (not premultiplied)
		poly.LineStyle.Width = 0
		p.Add(poly)
	}
	for i, s := range ss {
		var pts plotter.XYs
		for j := range s.x {
			if !math.IsNaN(s.y[j]) {
				pts = append(pts, plotter.XY{X: s.x[j], Y: s.y[j]})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("experiment: plotting %s: %w", s.name, err)
		}
		l.Color, sc.Color = palette[i%len(palette)], palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		if s.width > 0 {
			l.Width = vg.Points(s.width)
		}
		switch {
		case s.dashed:
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		case i/len(palette) == 1: // past the palette's colours, the same colours dashed
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(2)}
		case i/len(palette) >= 2: // then dotted
			l.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2)}
		}
		if s.points {
			sc.Shape = draw.CircleGlyph{}
			sc.Radius = vg.Points(3)
			p.Add(l, sc)
			p.Legend.Add(s.name, l, sc)
		} else {
			p.Add(l)
			p.Legend.Add(s.name, l)
		}
	}
	fitY(p, ss)
	p.Y.Tick.Marker = niceTicks{}
	return p, nil
}

// runsPlot draws one family of arms a series (x the maximum length, say,
// in increasing order): a line through the means (y) with an error bar
// (lo, hi) at every point, so that a series of a single point has its
// interval too, and beside each mean one small dot per run, runs[k][i]
// the values of the runs of series k at point i. The families are drawn
// side by side, apart in x by a step of apart times the span of x (or of
// its smallest value, if larger), so that bars at one x do not hide each
// other; spread > 0 also sets the dots of one point apart, by spread times
// that step from one run to the next, so that runs with the same value
// show as two dots. The y range is fitted to the bars and every run; ss is
// not changed.
func runsPlot(title, xLabel, yLabel string, ss []series, runs [][][]float64, apart, spread float64) (*plot.Plot, error) {
	ss = append([]series(nil), ss...)
	minL, maxL := math.Inf(1), 0.0
	for _, s := range ss {
		for _, x := range s.x {
			minL, maxL = math.Min(minL, x), math.Max(maxL, x)
		}
	}
	shift := apart * max(maxL-minL, minL)
	drawn := 0 // the series with points: those are set apart
	for _, s := range ss {
		if len(s.x) > 0 {
			drawn++
		}
	}
	r := 0
	for k := range ss {
		if len(ss[k].x) == 0 {
			continue
		}
		xs := make([]float64, len(ss[k].x))
		for i, x := range ss[k].x {
			xs[i] = x + (float64(r)-float64(drawn-1)/2)*shift
		}
		ss[k].x = xs
		r++
	}
	bars := make([]series, len(ss))
	var fit []series
	for k := range ss {
		bars[k], ss[k].lo, ss[k].hi = ss[k], nil, nil
		fit = append(fit, bars[k])
		for i, acc := range runs[k] {
			for _, a := range acc {
				fit = append(fit, series{x: []float64{bars[k].x[i]}, y: []float64{a}})
			}
		}
	}
	p, err := linePlot(title, xLabel, yLabel, ss)
	if err != nil {
		return nil, err
	}
	fitY(p, fit)
	for k, b := range bars {
		e := errorPoints{}
		var dots plotter.XYs
		for i := range b.x {
			e.XYs = append(e.XYs, plotter.XY{X: b.x[i], Y: b.y[i]})
			e.YErrors = append(e.YErrors, struct{ Low, High float64 }{b.y[i] - b.lo[i], b.hi[i] - b.y[i]})
			for j, a := range runs[k][i] {
				dots = append(dots, plotter.XY{X: b.x[i] + (0.35+spread*float64(j))*shift, Y: a})
			}
		}
		eb, err := plotter.NewYErrorBars(e)
		if err != nil {
			return nil, fmt.Errorf("experiment: plotting %s: %w", b.name, err)
		}
		eb.Color = palette[k%len(palette)]
		p.Add(eb)
		if len(dots) > 0 {
			sc, err := plotter.NewScatter(dots)
			if err != nil {
				return nil, fmt.Errorf("experiment: plotting %s: %w", b.name, err)
			}
			sc.Color, sc.Shape, sc.Radius = palette[k%len(palette)], draw.CircleGlyph{}, vg.Points(1.8)
			p.Add(sc)
		}
	}
	p.X.Min, p.X.Max = minL*0.8, maxL*1.1
	return p, nil
}

// errorPoints are points with vertical error bars.
type errorPoints struct {
	plotter.XYs
	plotter.YErrors
}

// savePlot writes dir/base.png (96 dpi) and dir/base.svg. The legend is
// drawn beside the data, to the right of the axes, never over the curves:
// the canvas is 8 × 5 inches plus the legend's width.
func savePlot(p *plot.Plot, dir, base string) error {
	w, h := 8*vg.Inch, 5*vg.Inch
	leg := p.Legend
	p.Legend = plot.NewLegend()
	defer func() { p.Legend = leg }()
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	pad := vg.Points(8)
	lw := leg.Rectangle(draw.New(vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96)))).Size().X
	if lw > 0 {
		lw += 2 * pad
	}
	drawAll := func(c draw.Canvas) {
		p.Draw(draw.Crop(c, 0, -lw, 0, 0))
		if lw > 0 {
			top := vg.Length(0)
			if p.Title.Text != "" {
				top = p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
			}
			leg.Draw(draw.Crop(c, w+pad, 0, 0, -top-pad))
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(w+lw, h), vgimg.UseDPI(96))
	drawAll(draw.New(img))
	var png bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&png); err != nil {
		return fmt.Errorf("experiment: %s.png: %w", base, err)
	}
	if err := writeFile(dir, base+".png", png.Bytes()); err != nil {
		return err
	}
	svg := vgsvg.New(w+lw, h)
	drawAll(draw.New(svg))
	var sb bytes.Buffer
	if _, err := svg.WriteTo(&sb); err != nil {
		return fmt.Errorf("experiment: %s.svg: %w", base, err)
	}
	return writeFile(dir, base+".svg", sb.Bytes())
}

// meanStd returns the mean and the sample standard deviation (0 for one
// value) of xs, ignoring NaN; NaN when none is left.
func meanStd(xs []float64) (mean, std float64) {
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) {
			mean += x
			n++
		}
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	mean /= float64(n)
	if n == 1 {
		return mean, 0
	}
	for _, x := range xs {
		if !math.IsNaN(x) {
			std += (x - mean) * (x - mean)
		}
	}
	return mean, math.Sqrt(std / float64(n-1))
}

// meanStdN is meanStd as Numbers.
func meanStdN(xs []float64) (Number, Number) {
	m, s := meanStd(xs)
	return Number(m), Number(s)
}

// say writes one progress line when w is not nil.
func say(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}

// Number is a float64 that JSON encodes NaN (a target never reached, a mean
// over nothing) as null, and decodes null back to NaN.
type Number float64

// MarshalJSON writes the shortest form of n, or null for NaN and ±Inf.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number, or null as NaN.
func (n *Number) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Number(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("experiment: %s is not a number: %w", b, err)
	}
	*n = Number(f)
	return nil
}
