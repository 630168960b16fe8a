package experiment

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

// TestLongTextPlotRuns: long-text's plot draws one small dot per run (two
// seeds of one accuracy as two dots, apart) and the learned table's single
// length is drawn too.
func TestLongTextPlotRuns(t *testing.T) {
	dir := t.TempDir()
	o := DefaultLongText(dir)
	o.Encodings, o.Lengths, o.Seeds = []roformer.PositionEncoding{roformer.PosRotary, roformer.PosLearned}, []int{512, 1024}, []uint64{1, 2}
	res := &LongTextResult{Options: o}
	for _, r := range []struct {
		pe   roformer.PositionEncoding
		L    int
		seed uint64
		acc  float64
	}{
		{roformer.PosRotary, 512, 1, 0.57}, {roformer.PosRotary, 512, 2, 0.57}, // a tie
		{roformer.PosLearned, 512, 1, 0.58}, {roformer.PosLearned, 512, 2, 0.59},
		{roformer.PosRotary, 1024, 1, 0.64}, {roformer.PosRotary, 1024, 2, 0.60},
	} {
		res.Runs = append(res.Runs, LongTextRun{Encoding: r.pe, MaxLen: r.L, Seed: r.seed, ValAccuracy: 0.5, TestAccuracy: Number(r.acc), TestLoss: 1, Coverage: 0.5})
	}
	for _, seed := range o.Seeds {
		res.Runs = append(res.Runs, LongTextRun{Encoding: roformer.PosLearned, MaxLen: 1024, Seed: seed, Skipped: "too long",
			ValAccuracy: Number(math.NaN()), TestAccuracy: Number(math.NaN()), TestLoss: Number(math.NaN())})
	}
	if err := writeLongText(dir, res); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "accuracy.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// A run's dot is a filled circle of radius 1.8 points, a mean's of 3.
	dots := regexp.MustCompile(`M([-0-9.]+),([-0-9.]+)A1\.8,1\.8`).FindAllStringSubmatch(string(svg), -1)
	at := map[[2]string]bool{}
	for _, d := range dots {
		at[[2]string{d[1], d[2]}] = true
	}
	if len(dots) != 6 || len(at) != 6 {
		t.Errorf("%d run dots at %d places; want 6 at 6 (one per run, the tie apart)", len(dots), len(at))
	}
	if means := regexp.MustCompile(`A3,3 0 1 1`).FindAllString(string(svg), -1); len(means) != 2*(3+2) {
		t.Errorf("%d arcs of the means' glyphs; want %d (3 means and 2 legend entries, 2 arcs each)", len(means), 2*(3+2))
	}
}

// TestPalette: the 16 colours differ from each other and none is a grey
// (the grid's colour is grey 128).
func TestPalette(t *testing.T) {
	if len(palette) != 16 {
		t.Fatalf("%d colours, want 16", len(palette))
	}
	for i, a := range palette {
		r, g, b := float64(a.R), float64(a.G), float64(a.B)
		if max(r, g, b)-min(r, g, b) < 40 && max(r, g, b) > 40 {
			t.Errorf("colour %d %v is a grey", i, a)
		}
		for j, c := range palette[:i] {
			if d := math.Abs(r-float64(c.R)) + math.Abs(g-float64(c.G)) + math.Abs(b-float64(c.B)); d < 90 {
				t.Errorf("colours %d %v and %d %v are %.0f apart in RGB", j, c, i, a, d)
			}
		}
	}
}
