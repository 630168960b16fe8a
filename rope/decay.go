package rope

import (
	"fmt"
	"math"
)

// DecayBound returns the relative upper bound of RoPE's long-term decay
// (Su et al. 2021, §3.4.3, Fig. 2) at relative distance r for d rotated
// dimensions and frequency base:
//
//	bound(r) = (1/(d/2)) · Σ_{j=1}^{d/2} |S_j|,   S_j = Σ_{k=0}^{j−1} e^{i·r·θ_k},
//	θ_k = base^(−2k/d).
//
// By Abel summation, |qᵀR_r k| = |Σ_k h_k e^{i r θ_k}| ≤ (max_k |h_{k+1} − h_k|) ·
// Σ_j |S_j|, where h_k = q_[2k:2k+1]·k*_[2k:2k+1] as complex numbers; the
// bound is that sum divided by d/2, so bound(0) = (d/2 + 1)/2. It is
// evaluated in float64: S_j accumulates cos(r·θ_k) and sin(r·θ_k) term by
// term, in the order of the formula.
func DecayBound(d int, base, r float64) (float64, error) {
	if d <= 0 || d%2 != 0 {
		return 0, fmt.Errorf("rope: decay bound: dimension %d must be even and positive", d)
	}
	if base <= 1 || math.IsInf(base, 0) || math.IsNaN(base) {
		return 0, fmt.Errorf("rope: decay bound: base %v must be a finite number above 1", base)
	}
	h := d / 2
	var re, im, sum float64
	for k := 0; k < h; k++ {
		a := r * math.Pow(base, -float64(2*k)/float64(d))
		re += math.Cos(a)
		im += math.Sin(a)
		sum += math.Hypot(re, im) // |S_{k+1}|
	}
	return sum / float64(h), nil
}

// DecayCurve returns DecayBound(d, base, r) for r = 0, 1, …, maxDistance:
// the curve of Fig. 2 (the paper plots d = 128, base 10000, r ≤ 250).
func DecayCurve(d int, base float64, maxDistance int) ([]float64, error) {
	if maxDistance < 0 {
		return nil, fmt.Errorf("rope: decay bound: maximum distance %d must not be negative", maxDistance)
	}
	out := make([]float64, maxDistance+1)
	for r := range out {
		b, err := DecayBound(d, base, float64(r))
		if err != nil {
			return nil, err
		}
		out[r] = b
	}
	return out, nil
}
