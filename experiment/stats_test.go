package experiment

import (
	"math"
	"strings"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// Student-t quantiles from the printed tables (6 significant digits).
func TestTQuantile975(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.7062}, {2, 4.30265}, {3, 3.18245}, {4, 2.77645}, {9, 2.26216}, {30, 2.04227}} {
		if got := tQuantile975(c.df); !near(got, c.want, 5e-5) {
			t.Errorf("t_{0.975,%d} = %.6f, want %.5f", c.df, got, c.want)
		}
	}
}

func TestSeedSpread(t *testing.T) {
	// 1, 2, 3, 4: mean 2.5, s² = (2.25+0.25+0.25+2.25)/3 = 5/3, half-width
	// t_{0.975,3}·s/2 = 3.18245·1.29099/2 = 2.05425.
	s := SeedSpread([]float64{1, 2, 3, 4})
	if s.N != 4 || !near(float64(s.Mean), 2.5, 1e-15) || !near(float64(s.SD), math.Sqrt(5.0/3), 1e-15) {
		t.Errorf("spread of 1..4 = %+v, want n 4, mean 2.5, sd %.6f", s, math.Sqrt(5.0/3))
	}
	if !near(float64(s.CILo), 2.5-2.05425, 5e-5) || !near(float64(s.CIHi), 2.5+2.05425, 5e-5) {
		t.Errorf("95%% CI of 1..4 = [%.5f, %.5f], want [0.44575, 4.55425]", float64(s.CILo), float64(s.CIHi))
	}
	if got, want := s.Format(3), "2.500 ± 1.291"; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
	if got, want := s.FormatCI(2), "[0.45, 4.55]"; got != want {
		t.Errorf("FormatCI = %q, want %q", got, want)
	}

	one := SeedSpread([]float64{math.NaN(), 6.25})
	if one.N != 1 || float64(one.Mean) != 6.25 || !math.IsNaN(float64(one.SD)) || !math.IsNaN(float64(one.CILo)) {
		t.Errorf("spread of one value = %+v, want n 1, mean 6.25, no sd or interval", one)
	}
	if got, want := one.Format(4), "6.2500 (1 seed)"; got != want {
		t.Errorf("one seed formats as %q, want %q", got, want)
	}
	if strings.Contains(one.Format(4), "±") || one.FormatCI(2) != "–" {
		t.Errorf("one seed must print no spread: %q, %q", one.Format(4), one.FormatCI(2))
	}
	if none := SeedSpread([]float64{math.NaN()}); none.N != 0 || none.Format(2) != "–" {
		t.Errorf("spread of nothing = %+v, %q", none, none.Format(2))
	}
}

func TestPairedDiff(t *testing.T) {
	// d = 1, 3: mean 2, s = √2, t = 2/(√2/√2) = 2 with 1 degree of
	// freedom, a Cauchy variable: p = 1 − (2/π)·atan 2 = 0.295167.
	p, err := PairedDiff([]float64{3, 5}, []float64{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.DF != 1 || !near(float64(p.T), 2, 1e-12) || !near(float64(p.PT), 1-2/math.Pi*math.Atan(2), 1e-9) {
		t.Errorf("d = 1, 3: t(%d) = %v, p = %v; want t(1) = 2, p = 0.295167", p.DF, float64(p.T), float64(p.PT))
	}
	if p.Positive != 2 || p.Negative != 0 || float64(p.PSignFlip) != 0.5 {
		t.Errorf("d = 1, 3: %d positive, %d negative, sign-flip p %v; want 2, 0, 0.5", p.Positive, p.Negative, float64(p.PSignFlip))
	}

	// d = m + (−2, −1, 0, 1, 2) with m = t_{0.975,4}·√(2.5/5) puts t exactly
	// at the 97.5% quantile of t(4): two-sided p = 0.05.
	m := 2.776445105 * math.Sqrt(0.5)
	a := []float64{m - 2, m - 1, m, m + 1, m + 2}
	p, err = PairedDiff(a, make([]float64, 5))
	if err != nil {
		t.Fatal(err)
	}
	if !near(float64(p.PT), 0.05, 1e-8) || !near(float64(p.T), 2.776445105, 1e-8) || p.DF != 4 {
		t.Errorf("t at the tabled quantile: t(%d) = %v, p = %v; want t(4) = 2.776445, p = 0.05", p.DF, float64(p.T), float64(p.PT))
	}
	// Every d has the same non-zero value: no spread, certain direction.
	p, _ = PairedDiff([]float64{2, 3, 4}, []float64{1, 2, 3})
	if !math.IsInf(float64(p.T), 1) || float64(p.PT) != 0 || float64(p.PSignFlip) != 0.25 {
		t.Errorf("d = 1, 1, 1: t = %v, p = %v, sign-flip %v; want +Inf, 0, 0.25", float64(p.T), float64(p.PT), float64(p.PSignFlip))
	}
	// Reversing the pair flips the sign of t and keeps the p-values.
	q1, _ := PairedDiff([]float64{6.092, 6.700, 6.644}, []float64{6.441, 6.710, 6.618})
	q2, _ := PairedDiff([]float64{6.441, 6.710, 6.618}, []float64{6.092, 6.700, 6.644})
	if !near(float64(q1.T), -float64(q2.T), 1e-12) || !near(float64(q1.PT), float64(q2.PT), 1e-12) || q1.PSignFlip != q2.PSignFlip {
		t.Errorf("reversed pairs: t %v and %v, p %v and %v", float64(q1.T), float64(q2.T), float64(q1.PT), float64(q2.PT))
	}
	if got := q1.Format(3); !strings.Contains(got, "1 of 3 seeds > 0") || !strings.Contains(got, "t(2) = ") {
		t.Errorf("Format = %q", got)
	}

	if _, err := PairedDiff([]float64{1, 2}, []float64{1}); err == nil || !strings.Contains(err.Error(), "2 and 1 values") {
		t.Errorf("unequal lengths: err = %v", err)
	}
	if _, err := PairedDiff([]float64{1, math.NaN()}, []float64{1, 2}); err == nil || !strings.Contains(err.Error(), "1 complete pairs") {
		t.Errorf("one complete pair: err = %v", err)
	}
}

func TestSignFlipP(t *testing.T) {
	for _, c := range []struct {
		name string
		d    []float64
		want float64
	}{
		// Σ ε_i d_i over the 8 patterns of (1, −2, 3): 2, 0, 6, 4, −4, −6, 0, −2;
		// six have |sum| ≥ 2.
		{"mixed signs", []float64{1, -2, 3}, 6.0 / 8},
		// Only all-plus and all-minus reach |15|.
		{"five positive", []float64{1, 2, 3, 4, 5}, 2.0 / 32},
		{"zero sum", []float64{1, -1}, 1},
		// ±1 ± 1 ± 1 is ±1 or ±3: every pattern ties or beats |1|.
		{"ties count", []float64{1, 1, -1}, 1},
		// The observed pattern and its mirror image: 2 of 8.
		{"decimal fractions", []float64{0.3, 0.2, 0.1}, 2.0 / 8},
	} {
		got, err := SignFlipP(c.d)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: p = %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := SignFlipP(make([]float64, MaxSignFlipN+1)); err == nil {
		t.Errorf("%d differences: no error", MaxSignFlipN+1)
	}
	if _, err := SignFlipP(nil); err == nil {
		t.Error("no differences: no error")
	}
}
