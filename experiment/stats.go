package experiment

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// The statistics of the summaries: a quantity measured once per seed is
// reported as its mean, sample standard deviation and a Student-t 95%
// confidence interval of the mean; two settings run on the same seeds (same
// data order, masks and initialisation) are compared by their per-seed
// differences, with a paired t-test and an exact sign-flip permutation
// test. One seed gives a value, never "± 0".

// Spread summarises one quantity measured once per seed: n values x_i,
// mean x̄, sample standard deviation s = √(Σ(x_i − x̄)²/(n−1)) and the
// t-based 95% confidence interval of the mean,
//
//	x̄ ± t_{0.975, n−1} · s/√n.
//
// SD and the interval are NaN (null in JSON) for fewer than 2 values.
type Spread struct {
	N    int    `json:"n"`
	Mean Number `json:"mean"`
	SD   Number `json:"sd"`
	CILo Number `json:"ci95_lo"`
	CIHi Number `json:"ci95_hi"`
}

// SeedSpread returns the Spread of xs, ignoring NaN values (a run that
// never reached a target, say); with no value left every field but N is
// NaN.
func SeedSpread(xs []float64) Spread {
	nan := Number(math.NaN())
	s := Spread{Mean: nan, SD: nan, CILo: nan, CIHi: nan}
	for _, x := range xs {
		if !math.IsNaN(x) {
			s.N++
		}
	}
	if s.N == 0 {
		return s
	}
	mean, sd := meanStd(xs)
	s.Mean = Number(mean)
	if s.N < 2 {
		return s
	}
	half := tQuantile975(s.N-1) * sd / math.Sqrt(float64(s.N))
	s.SD, s.CILo, s.CIHi = Number(sd), Number(mean-half), Number(mean+half)
	return s
}

// tQuantile975 is t_{0.975, df}, the 97.5% quantile of Student's t with df
// degrees of freedom (4.303 for 2, 2.776 for 4, → 1.960).
func tQuantile975(df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(0.975)
}

// Format writes the mean with dec decimals, followed by "± sd" for two or
// more values and by "(1 seed)" for one; "–" for none.
func (s Spread) Format(dec int) string {
	switch s.N {
	case 0:
		return "–"
	case 1:
		return fmt.Sprintf("%.*f (1 seed)", dec, float64(s.Mean))
	}
	return fmt.Sprintf("%.*f ± %.*f", dec, float64(s.Mean), dec, float64(s.SD))
}

// FormatCI writes the 95% interval as "[lo, hi]" with dec decimals, "–"
// for fewer than 2 values.
func (s Spread) FormatCI(dec int) string {
	if s.N < 2 {
		return "–"
	}
	return fmt.Sprintf("[%.*f, %.*f]", dec, float64(s.CILo), dec, float64(s.CIHi))
}

// PairedTest compares two settings measured on the same seeds through the
// differences d_i = a_i − b_i:
//
//	t = d̄ / (s_d/√n),  df = n − 1,  PT = P(|T_df| ≥ |t|)   (paired t-test)
//
// and PSignFlip, the exact two-sided sign-flip permutation p-value: the
// share of the 2ⁿ sign patterns ε ∈ {±1}ⁿ with |Σ ε_i d_i| ≥ |Σ d_i|. Under
// the null hypothesis that the settings do not differ, each d_i is as
// likely to be −d_i, so the test assumes no normality; with n seeds its p
// cannot be below 2/2ⁿ (0.25 for 3 seeds, 0.0625 for 5, 0.0078 for 8).
type PairedTest struct {
	Diff      Spread `json:"diff"`        // mean, sd and 95% CI of a − b
	Positive  int    `json:"positive"`    // seeds with a − b > 0
	Negative  int    `json:"negative"`    // seeds with a − b < 0
	T         Number `json:"t"`           // ±Inf (null) when every difference is the same non-zero value
	DF        int    `json:"df"`          // n − 1
	PT        Number `json:"p_t"`         // two-sided paired t-test
	PSignFlip Number `json:"p_sign_flip"` // exact, two-sided; null past MaxSignFlipN seeds
}

// MaxSignFlipN is the largest number of pairs whose 2ⁿ sign patterns
// PairedDiff enumerates.
const MaxSignFlipN = 24

// PairedDiff returns the paired comparison of a and b (a_i and b_i from the
// same seed). Pairs where either value is NaN are dropped. It is an error
// when the lengths differ or fewer than 2 pairs remain.
func PairedDiff(a, b []float64) (PairedTest, error) {
	if len(a) != len(b) {
		return PairedTest{}, fmt.Errorf("experiment: paired test of %d and %d values; need one of each per seed", len(a), len(b))
	}
	var d []float64
	for i := range a {
		if !math.IsNaN(a[i]) && !math.IsNaN(b[i]) {
			d = append(d, a[i]-b[i])
		}
	}
	if len(d) < 2 {
		return PairedTest{}, fmt.Errorf("experiment: paired test of %d complete pairs; need at least 2", len(d))
	}
	p := PairedTest{Diff: SeedSpread(d), DF: len(d) - 1}
	for _, x := range d {
		if x > 0 {
			p.Positive++
		} else if x < 0 {
			p.Negative++
		}
	}
	mean, sd := float64(p.Diff.Mean), float64(p.Diff.SD)
	switch {
	case sd == 0 && mean == 0:
		p.T, p.PT = Number(math.NaN()), 1
	case sd == 0:
		p.T, p.PT = Number(math.Copysign(math.Inf(1), mean)), 0
	default:
		t := mean / (sd / math.Sqrt(float64(len(d))))
		p.T = Number(t)
		p.PT = Number(2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(p.DF)}.Survival(math.Abs(t)))
	}
	p.PSignFlip = Number(math.NaN())
	if ps, err := SignFlipP(d); err == nil {
		p.PSignFlip = Number(ps)
	}
	return p, nil
}

// SignFlipP is the exact two-sided sign-flip permutation p-value of the
// paired differences d: the share of the 2ⁿ sign patterns ε with
// |Σ ε_i d_i| ≥ |Σ d_i| (up to a relative 1e-9, so that ties count). It is
// an error for no difference or more than MaxSignFlipN of them.
func SignFlipP(d []float64) (float64, error) {
	n := len(d)
	if n == 0 || n > MaxSignFlipN {
		return math.NaN(), fmt.Errorf("experiment: sign-flip test of %d differences; it enumerates 1 to %d", n, MaxSignFlipN)
	}
	obs, scale := 0.0, 0.0
	for _, x := range d {
		obs += x
		scale += math.Abs(x)
	}
	obs = math.Abs(obs)
	tol := 1e-9 * scale
	count := 0
	for mask := 0; mask < 1<<n; mask++ {
		s := 0.0
		for i, x := range d {
			if mask&(1<<i) != 0 {
				s -= x
			} else {
				s += x
			}
		}
		if math.Abs(s) >= obs-tol {
			count++
		}
	}
	return float64(count) / float64(int(1)<<n), nil
}

// Format writes the comparison in one line with dec decimals for the
// differences, e.g. "−0.111 ± 0.201, 95% CI [−0.61, 0.39]; 1 of 3 seeds
// > 0; paired t(2) = −0.96, p = 0.44; sign-flip p = 0.75".
func (p PairedTest) Format(dec int) string {
	n := p.Diff.N
	return fmt.Sprintf("%s, 95%% CI %s; %d of %d seeds > 0; paired t(%d) = %.2f, p = %s; sign-flip p = %s",
		p.Diff.Format(dec), p.Diff.FormatCI(dec), p.Positive, n, p.DF, float64(p.T), fmtP(float64(p.PT)), fmtP(float64(p.PSignFlip)))
}

// fmtP writes a p-value with 2 decimals from 0.1 up ("0.25"), 4 below
// ("0.0625", the smallest sign-flip p of 5 seeds), "< 0.0001" below that,
// "–" for NaN.
func fmtP(p float64) string {
	switch {
	case math.IsNaN(p):
		return "–"
	case p < 1e-4:
		return "< 0.0001"
	case p >= 0.1:
		return fmt.Sprintf("%.2f", p)
	}
	return fmt.Sprintf("%.4f", p)
}
