package metrics

import (
	"math"
	"strings"
	"testing"
)

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.IsNaN(want) {
		if !math.IsNaN(got) {
			t.Errorf("%s = %v, want NaN", name, got)
		}
		return
	}
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("%s = %.9f, want %.9f", name, got, want)
	}
}

// The expected values below were computed by hand from the confusion
// matrices written in each case's comment.
func TestClassification(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pred, gold  []int
		acc, macro  float64
		f1pos, mcc  float64 // f1pos: binary F1 of class 1
		perClassF1  []float64
		confusion   [][]int
		description string
	}{
		{
			name: "binary",
			// tp 3, fn 1, fp 2, tn 2
			gold: []int{1, 1, 1, 0, 0, 0, 1, 0}, pred: []int{1, 0, 1, 0, 1, 0, 1, 1},
			acc: 5.0 / 8, f1pos: 6.0 / 9, macro: (6.0/9 + 4.0/7) / 2,
			mcc:        4 / math.Sqrt(240), // (3·2 − 2·1)/sqrt(5·4·4·3)
			perClassF1: []float64{4.0 / 7, 6.0 / 9},
			confusion:  [][]int{{2, 2}, {1, 3}},
		},
		{
			name: "three_classes",
			// rows gold: [2 1 0] [0 1 1] [0 0 1]
			gold: []int{0, 0, 0, 1, 1, 2}, pred: []int{0, 1, 0, 1, 2, 2},
			acc: 4.0 / 6, f1pos: 0.5, macro: (0.8 + 0.5 + 2.0/3) / 3,
			mcc:        12 / math.Sqrt(24*22), // t=[3 2 1], p=[2 2 2], c=4, s=6
			perClassF1: []float64{0.8, 0.5, 2.0 / 3},
			confusion:  [][]int{{2, 1, 0}, {0, 1, 1}, {0, 0, 1}},
		},
		{
			name: "constant_prediction",
			// every prediction 0: class 1 is never predicted
			gold: []int{0, 1, 0, 1}, pred: []int{0, 0, 0, 0},
			acc: 0.5, f1pos: 0, macro: (2.0 / 3) / 2, mcc: 0,
			perClassF1: []float64{2.0 / 3, 0},
			confusion:  [][]int{{2, 0}, {2, 0}},
		},
		{
			name: "perfect",
			gold: []int{0, 1, 2, 1}, pred: []int{0, 1, 2, 1},
			acc: 1, f1pos: 1, macro: 1, mcc: 1,
			perClassF1: []float64{1, 1, 1},
			confusion:  [][]int{{1, 0, 0}, {0, 2, 0}, {0, 0, 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			near(t, "Accuracy", Accuracy(tc.pred, tc.gold), tc.acc)
			near(t, "F1", F1(tc.pred, tc.gold, 1), tc.f1pos)
			near(t, "MacroF1", MacroF1(tc.pred, tc.gold), tc.macro)
			near(t, "Matthews", Matthews(tc.pred, tc.gold), tc.mcc)
			labels := make([]string, len(tc.perClassF1))
			for i := range labels {
				labels[i] = string(rune('a' + i))
			}
			c := NewConfusion(tc.pred, tc.gold, labels)
			for g := range tc.confusion {
				for p := range tc.confusion[g] {
					if c.Counts[g][p] != tc.confusion[g][p] {
						t.Errorf("Counts[%d][%d] = %d, want %d", g, p, c.Counts[g][p], tc.confusion[g][p])
					}
				}
			}
			if c.Total() != len(tc.gold) {
				t.Errorf("Total = %d, want %d", c.Total(), len(tc.gold))
			}
			for k, want := range tc.perClassF1 {
				_, _, f, _ := c.Class(k)
				near(t, "Class F1 "+labels[k], f, want)
				_, _, f2 := PRF(tc.pred, tc.gold, k)
				near(t, "PRF F1 "+labels[k], f2, want)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	if Accuracy(nil, nil) != 0 || MacroF1(nil, nil) != 0 || Matthews(nil, nil) != 0 {
		t.Error("empty input should score 0")
	}
	if !math.IsNaN(Pearson(nil, nil)) {
		t.Error("Pearson of empty input should be NaN")
	}
}

func TestLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for mismatched lengths")
		}
	}()
	Accuracy([]int{1}, []int{1, 2})
}

func TestCorrelation(t *testing.T) {
	for _, tc := range []struct {
		name              string
		x, y              []float64
		pearson, spearman float64
	}{
		// x̄ = 3, ȳ = 4: Σdxdy = 6, Σdx² = 10, Σdy² = 6.
		// ranks of y with ties averaged: [1 2.5 4.5 2.5 4.5]: Σdxdy = 7, Σdy² = 9.
		{"ties", []float64{1, 2, 3, 4, 5}, []float64{2, 4, 5, 4, 5}, 6 / math.Sqrt(60), 7 / math.Sqrt(90)},
		// monotone but not linear: Spearman 1, Pearson below 1.
		// y = x³ = [1 8 27 64]: x̄ = 2.5, ȳ = 25;
		// dx = [−1.5 −.5 .5 1.5], dy = [−24 −17 2 39]: Σdxdy = 36+8.5+1+58.5 = 104,
		// Σdx² = 5, Σdy² = 576+289+4+1521 = 2390.
		{"cubic", []float64{1, 2, 3, 4}, []float64{1, 8, 27, 64}, 104 / math.Sqrt(5*2390), 1},
		{"anti", []float64{1, 2, 3}, []float64{3, 2, 1}, -1, -1},
		{"constant", []float64{1, 2, 3}, []float64{7, 7, 7}, math.NaN(), math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			near(t, "Pearson", Pearson(tc.x, tc.y), tc.pearson)
			near(t, "Spearman", Spearman(tc.x, tc.y), tc.spearman)
		})
	}
}

func TestRanks(t *testing.T) {
	got := Ranks([]float64{10, 30, 20, 30, 10, 30})
	want := []float64{1.5, 5, 3, 5, 1.5, 5}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Ranks = %v, want %v", got, want)
		}
	}
}

func TestMultiLabel(t *testing.T) {
	b := func(v ...int) []bool {
		out := make([]bool, len(v))
		for i, x := range v {
			out[i] = x == 1
		}
		return out
	}
	gold := [][]bool{b(1, 0, 1), b(0, 1, 0), b(1, 1, 0)}
	pred := [][]bool{b(1, 0, 0), b(0, 1, 0), b(1, 0, 1)}
	m := ScoreMultiLabel(pred, gold)
	// column F1: [1, 2/3, 0]; pooled tp 3, fp 1, fn 2
	near(t, "SubsetAccuracy", m.SubsetAccuracy, 1.0/3)
	near(t, "MacroF1", m.MacroF1, (1+2.0/3)/3)
	near(t, "MicroF1", m.MicroF1, 6.0/9)
}

func TestConfusionString(t *testing.T) {
	c := NewConfusion([]int{0, 1, 1}, []int{0, 1, 0}, []string{"ham", "spam"})
	s := c.String()
	for _, want := range []string{"gold \\ pred", "ham", "spam", "0.500", "1.000"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if lines := strings.Count(s, "\n"); lines != 3 {
		t.Errorf("table has %d lines, want 3:\n%s", lines, s)
	}
}
