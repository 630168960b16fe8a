package jieba

import "math"

// Double-double arithmetic for a correctly rounded natural logarithm.
//
// jieba scores a route by sums of log(freq) − log(total) and breaks ties by
// exact float64 comparison, so the Go port must produce the very same
// float64 values as CPython's math.log, which calls the C library's log.
// glibc's log returns the correctly rounded result for every frequency in
// jieba's dictionary (checked for all 5,088 distinct values and the total),
// while Go's math.Log is off by one unit in the last place for 78 of them,
// enough to flip ties between routes. ln below evaluates the logarithm to
// about 104 bits and rounds once, which gives the correctly rounded value.

// dd is an unevaluated sum hi + lo with |lo| <= ulp(hi)/2.
type dd struct{ hi, lo float64 }

// twoSum returns s, e with s = fl(a+b) and s + e = a + b exactly (Knuth).
func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return s, e
}

// fastTwoSum is twoSum for |a| >= |b| (Dekker).
func fastTwoSum(a, b float64) (s, e float64) {
	s = a + b
	e = b - (s - a)
	return s, e
}

// twoProd returns p, e with p = fl(a·b) and p + e = a·b exactly, using a
// fused multiply-add.
func twoProd(a, b float64) (p, e float64) {
	p = a * b
	e = math.FMA(a, b, -p)
	return p, e
}

func ddAdd(a, b dd) dd {
	s, e := twoSum(a.hi, b.hi)
	t, f := twoSum(a.lo, b.lo)
	e += t
	s, e = fastTwoSum(s, e)
	e += f
	s, e = fastTwoSum(s, e)
	return dd{s, e}
}

func ddMul(a, b dd) dd {
	p, e := twoProd(a.hi, b.hi)
	e += a.hi*b.lo + a.lo*b.hi
	p, e = fastTwoSum(p, e)
	return dd{p, e}
}

// ddDiv returns a / b to about 2^-104 relative error: one quotient digit,
// its exact remainder, then a correction digit.
func ddDiv(a, b dd) dd {
	q1 := a.hi / b.hi
	// r = a − q1·b, computed exactly enough with FMA.
	p, pe := twoProd(q1, b.hi)
	r := ((a.hi - p) - pe + a.lo) - q1*b.lo
	q2 := r / b.hi
	q, e := fastTwoSum(q1, q2)
	return dd{q, e}
}

// ln2DD is log(2) as a double-double.
var ln2DD = dd{0.6931471805599453, 2.3190468138462996e-17}

// invOdd[k] = 1/(2k+1) as double-doubles, for the atanh series.
var invOdd = func() [atanhTerms]dd {
	var t [atanhTerms]dd
	for k := range t {
		n := float64(2*k + 1)
		h := 1 / n
		l := math.FMA(-h, n, 1) / n
		t[k] = dd{h, l}
	}
	return t
}()

// atanhTerms terms of atanh(s)/s = Σ s^(2k)/(2k+1) reach 2^-110 for |s| <= 0.172.
const atanhTerms = 24

// ln returns the natural logarithm of x > 0, correctly rounded to float64
// (the double-double result carries about 104 correct bits, so a wrong
// rounding needs the true value to sit within 2^-50 ulp of a midpoint).
//
// Method: x = m·2^e with m in [√½, √2); ln m = 2·atanh(s), s = (m−1)/(m+1),
// |s| < 0.172, summed by Horner's rule in double-double; ln x = e·ln2 + ln m.
func ln(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return math.Log(x)
	}
	m, e := math.Frexp(x) // m in [0.5, 1)
	if m < math.Sqrt2/2 {
		m *= 2
		e--
	}
	num := dd{m - 1, 0} // exact (Sterbenz)
	dh, dl := twoSum(m, 1)
	s := ddDiv(num, dd{dh, dl})
	t := ddMul(s, s)
	p := invOdd[atanhTerms-1]
	for k := atanhTerms - 2; k >= 0; k-- {
		p = ddAdd(ddMul(p, t), invOdd[k])
	}
	lnm := ddMul(ddMul(s, p), dd{2, 0})
	r := ddAdd(ddMul(dd{float64(e), 0}, ln2DD), lnm)
	return r.hi + r.lo
}
