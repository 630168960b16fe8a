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

// palette has 16 colours that read apart (matplotlib's tab10, then six
// more), so that a figure of up to 16 arms never repeats one (char-lm has
// 14); past it, lines of the same colour are told apart by their dashes.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255}, {0, 0, 0, 255}, {0, 0, 128, 255},
	{230, 171, 2, 255}, {0, 128, 128, 255}, {128, 0, 0, 255}, {102, 166, 30, 255},
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
	m := 0.04 * max(hi-lo, 1e-9)
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
