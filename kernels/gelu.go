package kernels

import "math"

// The exact (erf) GELU, x·Φ(x), is evaluated through a table of the normal
// CDF Φ and density φ on [−geluRange, geluRange] with step 1/geluSteps,
// interpolated by cubic Hermite polynomials that use the exact derivatives
// (Φ' = φ, φ' = −x·φ). The interpolation error is below h⁴/384·max|f⁗| ≈
// 1e-11, far under float32 rounding, and it costs a few multiplications
// instead of math.Erf (≈ 20 ns): GELU was 40% of a training step before.
// Outside the range Φ is 0 or 1 to float64 precision (Φ(−8) ≈ 6e-16).
const (
	geluRange = 8
	geluSteps = 128 // points per unit
	geluN     = 2*geluRange*geluSteps + 1
)

// geluTab holds Φ(x_i) and φ(x_i) at x_i = −geluRange + i/geluSteps.
var geluTab = func() (t [geluN][2]float64) {
	for i := range t {
		x := -geluRange + float64(i)/geluSteps
		t[i][0] = 0.5 * math.Erfc(-x/math.Sqrt2)
		t[i][1] = math.Exp(-0.5*x*x) / math.Sqrt(2*math.Pi)
	}
	return t
}()

// normCDFPDF returns Φ(x) and φ(x).
func normCDFPDF(x float64) (cdf, pdf float64) {
	if !(x > -geluRange) { // also NaN → 0 (the product x·Φ stays NaN)
		return 0, 0
	}
	if x >= geluRange {
		return 1, 0
	}
	u := (x + geluRange) * geluSteps
	i := int(u)
	if i >= geluN-1 {
		i = geluN - 2
	}
	t := u - float64(i)
	const h = 1.0 / geluSteps
	f0, d0 := geluTab[i][0], geluTab[i][1]
	f1, d1 := geluTab[i+1][0], geluTab[i+1][1]
	x0 := -geluRange + float64(i)*h
	x1 := x0 + h
	// Cubic Hermite basis on t ∈ [0, 1).
	t2 := t * t
	t3 := t2 * t
	h00 := 2*t3 - 3*t2 + 1
	h10 := t3 - 2*t2 + t
	h01 := -2*t3 + 3*t2
	h11 := t3 - t2
	cdf = h00*f0 + h10*h*d0 + h01*f1 + h11*h*d1
	pdf = h00*d0 + h10*h*(-x0*d0) + h01*d1 + h11*h*(-x1*d1)
	return cdf, pdf
}

// geluExact returns x·Φ(x).
func geluExact(x float64) float64 {
	c, _ := normCDFPDF(x)
	return x * c
}

// geluExactGrad returns d/dx x·Φ(x) = Φ(x) + x·φ(x).
func geluExactGrad(x float64) float64 {
	c, p := normCDFPDF(x)
	return c + x*p
}
