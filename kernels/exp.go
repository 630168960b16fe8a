package kernels

import "math"

// exp64 returns e^x for x ≤ 0 (softmax arguments after the maximum is
// subtracted) with a relative error below 1e-9, several times faster than
// math.Exp: x = k·ln2 + r with |r| ≤ ln2/2 (Cody–Waite split of ln2), e^r by
// its degree-8 Taylor polynomial (truncation (ln2/2)⁹/9! < 2e-10), and 2^k
// put into the exponent bits. Results below 2^−1022 flush to 0, far under
// float32's smallest value, so a float32 softmax cannot tell.
func exp64(x float64) float64 {
	if !(x > -708) { // also NaN → 0 is not wanted: keep NaN
		if x != x {
			return x
		}
		return 0
	}
	const (
		log2e = 1.4426950408889634
		ln2hi = 6.93147180369123816490e-01
		ln2lo = 1.90821492927058770002e-10
	)
	k := math.Floor(x*log2e + 0.5)
	r := x - k*ln2hi - k*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320))))))))
	return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
}
