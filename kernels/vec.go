package kernels

import (
	"math"

	"github.com/roformer-go/roformer/tensor"
)

//go:generate go run gen_erfc.go

// Vector primitives for the element-wise work around the matrix products:
// the exponential of softmax and cross-entropy, the exact GELU and its
// derivative, and a few reductions. On amd64 with AVX2 and FMA they run in
// assembly (vec_amd64.s), eight float32 lanes at a time, and exp and GELU in
// sixteen lanes where the CPU has AVX-512F (vec512_amd64.s); elsewhere, or
// with useAVX2 false, the scalar twins below run instead. The twins are also
// the reference the tests compare the assembly with.
//
// Float32 exp: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in two float32
// parts, the reduction done with FMA), e^r by its degree-7 Taylor polynomial
// (truncation (ln2/2)⁸/8! < 6e-9, a tenth of a float32 ulp), and 2ⁿ put into
// the exponent bits. Arguments are clamped to [−87, 88]: below −87 the
// result is 0 (e^−87 ≈ 1.6e−38 is float32's smallest normal range, and a
// softmax cannot tell), −∞ gives 0, NaN stays NaN, and anything from 88 up,
// +∞ included, gives e^88 ≈ 1.65e38 where the scalar twin overflows to +∞.
// No caller passes more than about 0: softmax and cross-entropy subtract
// the maximum first, and GELU's exponents are Q − z² and −x²/2. Measured
// error: within 0.9 float32 steps (TestVecExp checks ≤ 2).
//
// Float32 GELU, x·Φ(x) with Φ(x) = ½·erfc(−x/√2): with z = |x|/√2 and
// t = 1/(1 + z/2),
//
//	erfc(z) = t·exp(−z² + Q(t)),
//
// where Q is a degree-9 polynomial in u = (2t − 1 − t₀)/(1 − t₀), fitted by
// least squares to ln(erfc(z)/t) + z² on t ∈ [t₀, 1], t₀ = 1/6 (z ∈ [0, 10]):
// the form of the classic Chebyshev-fitted erfc approximations, with the
// coefficients fitted here (gen_erfc.go writes vec_erfc.go). Q's fit error is
// below 5e-8, so erfc's relative error is below 5e-8 before float32 rounding.
// Then Φ(x) = ½erfc(z) for x < 0 and 1 − ½erfc(z) otherwise, and
// Φ'(x) = φ(x) = exp(−x²/2)/√(2π). z is clamped at 10, where erfc is 2e−45,
// below float32's range.
//
// Measured against float64 math.Erfc (TestVecGELU): GELU within 8.3 float32
// steps for x ≥ −3; on [−8, −3), where |GELU| < 0.004, within 42 steps
// (x²/2 is rounded to float32 inside the exponent, an error of about
// x²·2⁻²⁴); below −8, where |GELU| < 1e−14, within 2e−20 absolute. The
// derivative is within 1.5e−7 absolute for x ≥ −3 and 17 steps on [−8, −3).
// For comparison, PyTorch's float32 x·½(1 + erf(x/√2)) loses all relative
// precision below x ≈ −3 and is exactly 0 below about −5.5.

// Indices of the broadcast constants in vconst; the assembly reads row i at
// byte offset 32·i.
const (
	vcLog2e    = iota // log₂e
	vcLn2Hi           // float32(ln 2)
	vcLn2Lo           // ln 2 − float32(ln 2)
	vcC7              // 1/7! … 1/2!, 1 (Taylor coefficients of e^r)
	vcC6              //
	vcC5              //
	vcC4              //
	vcC3              //
	vcC2              //
	vcOne             // 1 (also the coefficient of r)
	vcExpLo           // −87: exp(x) for x < −87 is 0
	vcExpHi           // 88: arguments are clamped here (e^88 < MaxFloat32)
	vcBias            // int32 127, the exponent bias
	vcAbs             // 0x7fffffff, clears the sign bit
	vcRSqrt2          // 1/√2
	vcHalf            // ½
	vcZMax            // 10: GELU clamps z = |x|/√2 here
	vcUA              // u = t·ua + ub maps [t₀, 1] to [−1, 1]
	vcUB              //
	vcQ0              // Q(u) coefficients q0 … q9
	vcQ9       = vcQ0 + 9
	vcRSqrt2Pi = vcQ9 + 1 // 1/√(2π)
	vcNegInf   = vcQ9 + 2 // −∞
	vcCount    = vcQ9 + 3
)

// vconst is the table of 8-lane broadcast constants of the AVX2 kernels.
var vconst = func() (c [vcCount][8]float32) {
	set := func(i int, v float32) {
		for l := range c[i] {
			c[i][l] = v
		}
	}
	ln2hi := float32(math.Ln2)
	set(vcLog2e, math.Log2E)
	set(vcLn2Hi, ln2hi)
	set(vcLn2Lo, float32(math.Ln2-float64(ln2hi)))
	fact := 1.0
	for k := 2; k <= 7; k++ {
		fact *= float64(k)
		set(vcC2+2-k, float32(1/fact))
	}
	set(vcOne, 1)
	set(vcExpLo, -87)
	set(vcExpHi, 88)
	set(vcBias, math.Float32frombits(127))
	set(vcAbs, math.Float32frombits(0x7fffffff))
	set(vcRSqrt2, 1/math.Sqrt2)
	set(vcHalf, 0.5)
	set(vcZMax, 10)
	set(vcUA, float32(2/(1-erfcT0)))
	set(vcUB, float32(-(1+erfcT0)/(1-erfcT0)))
	for i, q := range erfcQ {
		set(vcQ0+i, float32(q))
	}
	set(vcRSqrt2Pi, float32(1/math.Sqrt(2*math.Pi)))
	set(vcNegInf, float32(math.Inf(-1)))
	return c
}()

// sumChunk is the number of elements whose exponentials the assembly adds
// in float32 (eight lanes of 64) before the sum moves to float64: float32
// rounding then stays near 64·2⁻²⁴ relative, whatever the row length.
const sumChunk = 512

// expSubSum sets x[i] = e^(x[i]−m) and returns Σ x[i]; x[i] − m ≤ 88.
func expSubSum(x []float32, m float32) float64 { return expSumChunks(x, m, true) }

// expSum returns Σ e^(x[i]−m) and leaves x as it is; x[i] − m ≤ 88.
func expSum(x []float32, m float32) float64 { return expSumChunks(x, m, false) }

// expSumChunks is expSubSum (store) or expSum: the kernels add up to
// sumChunk exponentials in float32, the chunks are added in float64, and a
// tail shorter than 8 goes through a buffer padded with −∞ (e^−∞ = 0).
func expSumChunks(x []float32, m float32, store bool) float64 {
	s := 0.0
	if !useAVX2 {
		for i, v := range x {
			e := float32(exp64(float64(v - m)))
			if store {
				x[i] = e
			}
			s += float64(e)
		}
		return s
	}
	for len(x) >= 8 {
		n := min(len(x), sumChunk) &^ 7
		switch {
		case useAVX512 && n >= 16 && store:
			n &^= 15
			s += float64(expSubSum512(&x[0], n, m))
		case useAVX512 && n >= 16:
			n &^= 15
			s += float64(expSum512(&x[0], n, m))
		case store:
			s += float64(expSubSumAVX2(&x[0], n, m))
		default:
			s += float64(expSumAVX2(&x[0], n, m))
		}
		x = x[n:]
	}
	if len(x) > 0 {
		var buf [8]float32
		copy(buf[:], x)
		for i := len(x); i < 8; i++ {
			buf[i] = float32(math.Inf(-1))
		}
		s += float64(expSubSumAVX2(&buf[0], 8, m))
		if store {
			copy(x, buf[:])
		}
	}
	return s
}

// expSubScale sets x[i] = g·e^(x[i]−m); x[i] − m ≤ 88.
func expSubScale(x []float32, m, g float32) {
	if !useAVX2 {
		for i, v := range x {
			x[i] = g * float32(exp64(float64(v-m)))
		}
		return
	}
	n16 := 0
	if useAVX512 {
		n16 = len(x) &^ 15
		if n16 > 0 {
			expSubScale512(&x[0], n16, m, g)
		}
	}
	n := len(x) &^ 7
	if n > n16 {
		expSubScaleAVX2(&x[n16], n-n16, m, g)
	}
	if n < len(x) {
		var buf [8]float32
		tail := x[n:]
		copy(buf[:], tail)
		expSubScaleAVX2(&buf[0], 8, m, g)
		copy(tail, buf[:])
	}
}

// divMax sets x[i] /= s and returns max x[i] (−∞ for an empty x).
func divMax(x []float32, s float32) float32 {
	mx := float32(math.Inf(-1))
	n := 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			mx = divMaxAVX2(&x[0], n, s)
		}
	}
	for i := n; i < len(x); i++ {
		x[i] /= s
		mx = max(mx, x[i])
	}
	return mx
}

// maxOf returns max x[i] (−∞ for an empty x).
func maxOf(x []float32) float32 {
	mx := float32(math.Inf(-1))
	n := 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			mx = maxAVX2(&x[0], n)
		}
	}
	for _, v := range x[n:] {
		mx = max(mx, v)
	}
	return mx
}

// scaleVec sets x[i] *= a.
func scaleVec(x []float32, a float32) {
	n := 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			scaleAVX2(&x[0], n, a)
		}
	}
	for i := n; i < len(x); i++ {
		x[i] *= a
	}
}

// dotVec returns Σ x[i]·y[i] (float32, eight partial sums); len(y) ≥ len(x).
func dotVec(x, y []float32) float32 {
	y = y[:len(x)]
	s := float32(0)
	n := 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			s = dotAVX2(&x[0], &y[0], n)
		}
	}
	for i := n; i < len(x); i++ {
		s += x[i] * y[i]
	}
	return s
}

// softmaxBackRow sets d[i] = p[i]·(d[i] − dot)/s: the softmax backward of one
// row, with dot = Σ p·d and s the score scale; len(p) ≥ len(d).
func softmaxBackRow(d, p []float32, dot, s float32) {
	p = p[:len(d)]
	n := 0
	if useAVX2 {
		n = len(d) &^ 7
		if n > 0 {
			softmaxBackAVX2(&d[0], &p[0], n, dot, s)
		}
	}
	for i := n; i < len(d); i++ {
		d[i] = p[i] * (d[i] - dot) / s
	}
}

// geluVec sets out[i] = GELU(in[i]) = in[i]·Φ(in[i]); out may alias in.
func geluVec(out, in []float32) {
	in = in[:len(out)]
	if !useAVX2 {
		for i, v := range in {
			out[i] = float32(geluExact(float64(v)))
		}
		return
	}
	n16 := 0
	if useAVX512 {
		n16 = len(out) &^ 15
		if n16 > 0 {
			gelu512(&out[0], &in[0], n16)
		}
	}
	n := len(out) &^ 7
	if n > n16 {
		geluAVX2(&out[n16], &in[n16], n-n16)
	}
	if n < len(out) {
		var buf [8]float32
		copy(buf[:], in[n:])
		geluAVX2(&buf[0], &buf[0], 8)
		copy(out[n:], buf[:])
	}
}

// geluGradVec sets out[i] = GELU(in[i]) and grad[i] = GELU'(in[i]) =
// Φ(in[i]) + in[i]·φ(in[i]); out may alias in.
func geluGradVec(out, grad, in []float32) {
	in, grad = in[:len(out)], grad[:len(out)]
	if !useAVX2 {
		for i, v := range in {
			c, p := normCDFPDF(float64(v))
			out[i] = float32(float64(v) * c)
			grad[i] = float32(c + float64(v)*p)
		}
		return
	}
	n16 := 0
	if useAVX512 {
		n16 = len(out) &^ 15
		if n16 > 0 {
			geluGrad512(&out[0], &grad[0], &in[0], n16)
		}
	}
	n := len(out) &^ 7
	if n > n16 {
		geluGradAVX2(&out[n16], &grad[n16], &in[n16], n-n16)
	}
	if n < len(out) {
		var buf, gbuf [8]float32
		copy(buf[:], in[n:])
		geluGradAVX2(&buf[0], &gbuf[0], &buf[0], 8)
		copy(out[n:], buf[:])
		copy(grad[n:], gbuf[:])
	}
}

// LayerNorm rows. The sums are accumulated in float64 (four lanes in the
// assembly); the element-wise parts round exactly as the scalar loops do
// (no fused multiply-add: the scalar loops convert each product with
// float32(…), which keeps Go from fusing it on any architecture), so both
// paths give the same float32 results up to the order of the float64 sums.

// sum64 returns Σ x[i] in float64.
func sum64(x []float32) float64 {
	s, n := 0.0, 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			s = sum64AVX2(&x[0], n)
		}
	}
	for _, v := range x[n:] {
		s += float64(v)
	}
	return s
}

// sqdev64 returns Σ (x[i] − m)² in float64.
func sqdev64(x []float32, m float64) float64 {
	s, n := 0.0, 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			s = sqdev64AVX2(&x[0], n, m)
		}
	}
	for _, v := range x[n:] {
		d := float64(v) - m
		s += d * d
	}
	return s
}

// lnApply sets out[i] = (x[i] − m)·rs·w[i] + b[i].
func lnApply(out, x, w, b []float32, m, rs float32) {
	x, w, b = x[:len(out)], w[:len(out)], b[:len(out)]
	n := 0
	if useAVX2 {
		n = len(out) &^ 7
		if n > 0 {
			lnApplyAVX2(&out[0], &x[0], &w[0], &b[0], n, m, rs)
		}
	}
	for i := n; i < len(out); i++ {
		out[i] = float32((x[i]-m)*rs*w[i]) + b[i] // float32(…): no fused multiply-add
	}
}

// lnBackSums returns Σ dxhat and Σ dxhat·xhat in float64, with
// dxhat = d[i]·w[i] and xhat = (x[i] − m)·rs in float32.
func lnBackSums(d, w, x []float32, m, rs float32) (s1, s2 float64) {
	w, x = w[:len(d)], x[:len(d)]
	n := 0
	if useAVX2 {
		n = len(d) &^ 7
		if n > 0 {
			s1, s2 = lnBackSumsAVX2(&d[0], &w[0], &x[0], n, m, rs)
		}
	}
	for i := n; i < len(d); i++ {
		dxhat := float64(d[i] * w[i])
		xhat := float64((x[i] - m) * rs)
		s1 += dxhat
		s2 += dxhat * xhat
	}
	return s1, s2
}

// lnBackApply adds rs·(d[i]·w[i] − m1 − xhat·m2) to di[i], xhat = (x[i] − m)·rs.
func lnBackApply(di, d, w, x []float32, m, rs, m1, m2 float32) {
	d, w, x = d[:len(di)], w[:len(di)], x[:len(di)]
	n := 0
	if useAVX2 {
		n = len(di) &^ 7
		if n > 0 {
			lnBackApplyAVX2(&di[0], &d[0], &w[0], &x[0], n, m, rs, m1, m2)
		}
	}
	for i := n; i < len(di); i++ {
		xhat := (x[i] - m) * rs
		di[i] += float32(rs * (float32(d[i]*w[i]) - m1 - float32(xhat*m2)))
	}
}

// lnBackParam adds d[i]·xhat to dw[i] and d[i] to db[i], xhat = (x[i] − m)·rs.
func lnBackParam(dw, db, d, x []float32, m, rs float32) {
	db, d, x = db[:len(dw)], d[:len(dw)], x[:len(dw)]
	n := 0
	if useAVX2 {
		n = len(dw) &^ 7
		if n > 0 {
			lnBackParamAVX2(&dw[0], &db[0], &d[0], &x[0], n, m, rs)
		}
	}
	for i := n; i < len(dw); i++ {
		xhat := (x[i] - m) * rs
		dw[i] += float32(d[i] * xhat)
		db[i] += d[i]
	}
}

// addVec sets out[i] = a[i] + b[i]; out may alias a or b.
func addVec(out, a, b []float32) {
	a, b = a[:len(out)], b[:len(out)]
	n := 0
	if useAVX2 {
		n = len(out) &^ 7
		if n > 0 {
			addVecAVX2(&out[0], &a[0], &b[0], n)
		}
	}
	for i := n; i < len(out); i++ {
		out[i] = a[i] + b[i]
	}
}

// mulVec sets out[i] = a[i]·b[i]; out may alias a or b.
func mulVec(out, a, b []float32) {
	a, b = a[:len(out)], b[:len(out)]
	n := 0
	if useAVX2 {
		n = len(out) &^ 7
		if n > 0 {
			mulVecAVX2(&out[0], &a[0], &b[0], n)
		}
	}
	for i := n; i < len(out); i++ {
		out[i] = a[i] * b[i]
	}
}

// VectorPath names the element-wise kernels in use: "avx512" (exp and GELU
// in 16 lanes, the rest in AVX2), "avx2" (AVX2 and FMA assembly) or "scalar"
// (the pure-Go twins: another CPU or architecture, or a purego build).
func VectorPath() string {
	switch {
	case useAVX512:
		return "avx512"
	case useAVX2:
		return "avx2"
	}
	return "scalar"
}

// toBF16 rounds src to bfloat16 into dst[:len(src)]: round to nearest,
// ties to even, NaN kept NaN (its quiet bit set), as tensor.F32ToBF16 and
// oneDNN's reorders do; subnormals are rounded, not flushed.
func toBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		n = len(src) &^ 15
		if n > 0 {
			toBF16AVX2(&dst[0], &src[0], n)
		}
	}
	for i := n; i < len(src); i++ {
		dst[i] = tensor.F32ToBF16(src[i]) // the assembly's twin
	}
}
