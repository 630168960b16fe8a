package pretrain

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// lossPlot renders the training loss (one point per logged step) and the
// evaluation loss against the step as a PNG.
func lossPlot(records []Record, title string) ([]byte, error) {
	var tr, ev plotter.XYs
	for _, r := range records {
		if r.Loss != nil {
			tr = append(tr, plotter.XY{X: float64(r.Step), Y: *r.Loss})
		}
		if r.EvalLoss != nil {
			ev = append(ev, plotter.XY{X: float64(r.Step), Y: *r.EvalLoss})
		}
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.X.Min = 0
	p.Y.Label.Text = "MLM loss (nats)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	if len(tr) > 0 {
		l, err := plotter.NewLine(tr)
		if err != nil {
			return nil, fmt.Errorf("pretrain: plotting: %w", err)
		}
		l.Color = plotColor(0)
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add("train", l)
	}
	if len(ev) > 0 {
		l, s, err := plotter.NewLinePoints(ev)
		if err != nil {
			return nil, fmt.Errorf("pretrain: plotting: %w", err)
		}
		l.Color, s.Color = plotColor(1), plotColor(1)
		l.Width = vg.Points(1.2)
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		p.Legend.Add("eval", l, s)
	}
	c := vgimg.NewWith(vgimg.UseWH(8*vg.Inch, 5*vg.Inch), vgimg.UseDPI(96))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	// Fast deflate: the plot is redrawn at every evaluation.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, c.Image()); err != nil {
		return nil, fmt.Errorf("pretrain: plotting: %w", err)
	}
	return buf.Bytes(), nil
}

// plotColor returns the i-th line colour (blue, orange).
func plotColor(i int) color.Color {
	return []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}}[i%2]
}
