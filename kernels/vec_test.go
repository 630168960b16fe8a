package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/tensor"
)

// paths runs f on every kernel level: AVX2 with AVX-512 exp and GELU, AVX2,
// and the scalar twins; a level the CPU lacks (or a purego build) is skipped
// and says so.
func paths(t *testing.T, f func(t *testing.T)) {
	for _, l := range []struct {
		name  string
		level int
	}{{"avx512", 2}, {"avx2", 1}, {"scalar", 0}} {
		t.Run(l.name, func(t *testing.T) {
			restore, ok := withLevel(l.level)
			defer restore()
			if !ok {
				t.Skipf("this CPU or build has no %s path", l.name)
			}
			f(t)
		})
	}
}

// ulps returns |got − want| in units of float32's spacing at want (want
// normal), so 1 means one float32 step.
func ulps(got float32, want float64) float64 {
	w := float32(want)
	step := math.Abs(float64(math.Nextafter32(w, float32(math.Inf(1)))) - float64(w))
	return math.Abs(float64(got)-want) / step
}

// expInputs spans softmax and cross-entropy arguments plus the edges.
func expInputs() []float32 {
	var xs []float32
	for x := -90.0; x <= 60; x += 0.0137 {
		xs = append(xs, float32(x))
	}
	for x := -1.0; x <= 1; x += 1e-4 {
		xs = append(xs, float32(x))
	}
	return append(xs, 0, float32(math.Copysign(0, -1)), -87, -86.99, float32(math.Inf(-1)))
}

func TestVecExp(t *testing.T) {
	paths(t, func(t *testing.T) {
		xs := expInputs()
		for _, m := range []float32{0, 1.5, -3} {
			got := append([]float32(nil), xs...)
			sum := expSubSum(got, m)
			if ro := expSum(xs, m); ro != sum {
				t.Errorf("m %v: expSum %v, expSubSum %v", m, ro, sum)
			}
			want := 0.0
			worst := 0.0
			for i, x := range xs {
				d := float64(x - m)
				e := math.Exp(d)
				if d < -87 {
					if got[i] > 1.7e-38 { // the scalar twin keeps tiny values; both are fine
						t.Fatalf("m %v: exp(%v) = %v, want 0 (below −87)", m, d, got[i])
					}
					want += float64(got[i])
					continue
				}
				want += float64(float32(e))
				if u := ulps(got[i], e); !(u <= worst) {
					worst = u
				}
			}
			if !(worst <= 2) {
				t.Errorf("m %v: worst error %.2f ulp, want ≤ 2", m, worst)
			}
			if math.Abs(sum-want) > 1e-6*want {
				t.Errorf("m %v: sum %v, want %v", m, sum, want)
			}
			t.Logf("m %v: worst %.2f ulp over %d values", m, worst, len(xs))
		}
		for _, at := range []int{0, 17, 37} {
			x := make([]float32, 40)
			x[at], x[at+1], x[at+2] = float32(math.NaN()), float32(math.Inf(-1)), -100
			// e^−100 is 0 on the vector paths and a denormal on the scalar twin.
			if expSubSum(x, 0); !math.IsNaN(float64(x[at])) || x[at+1] != 0 || x[at+2] > 1.7e-38 || x[(at+3)%40] != 1 {
				t.Errorf("exp(NaN, −Inf, −100) at %d = %v, and e^0 next to them %v", at, x[at:at+3], x[(at+3)%40])
			}
		}
	})
}

func TestVecExpSubScale(t *testing.T) {
	paths(t, func(t *testing.T) {
		for n := 0; n <= 37; n++ {
			x := testutil.RandN(testutil.Rand(uint64(n)), n, 3)
			want := make([]float64, n)
			for i, v := range x {
				want[i] = -0.25 * math.Exp(float64(v-1))
			}
			expSubScale(x, 1, -0.25)
			for i := range x {
				if ulps(x[i], want[i]) > 2 {
					t.Fatalf("n %d: [%d] = %v, want %v", n, i, x[i], want[i])
				}
			}
		}
	})
}

// GELU and its derivative against float64 math.Erfc, region by region:
// relative error in float32 steps where the value is not tiny, absolute
// error in the far negative tail (where PyTorch's own 1 + erf(x/√2) is
// exactly 0). NaN fails every check.
func TestVecGELU(t *testing.T) {
	paths(t, func(t *testing.T) {
		var xs []float32
		for x := -16.0; x <= 16; x += 0.000317 {
			xs = append(xs, float32(x))
		}
		xs = append(xs, 0, float32(math.Copysign(0, -1)), -1e-30, 1e-30, 40, -40)
		out := make([]float32, len(xs))
		grad := make([]float32, len(xs))
		out2 := make([]float32, len(xs))
		geluVec(out, xs)
		geluGradVec(out2, grad, xs)
		type bound struct {
			name      string
			lo, hi    float64
			rel, relG float64 // float32 steps; 0: not checked
			abs, absG float64 // absolute; 0: not checked
			worst, wG float64
		}
		regions := []*bound{
			{name: "x ≥ −3", lo: -3, hi: math.Inf(1), rel: 10, absG: 2e-7},
			{name: "−8 ≤ x < −3", lo: -8, hi: -3, rel: 50, relG: 20},
			{name: "x < −8", lo: math.Inf(-1), hi: -8, abs: 1e-13, absG: 1e-13},
		}
		for i, v := range xs {
			x := float64(v)
			cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
			want := x * cdf
			wantG := cdf + x*math.Exp(-0.5*x*x)/math.Sqrt(2*math.Pi)
			if out[i] != out2[i] && !(math.IsNaN(float64(out[i])) && math.IsNaN(float64(out2[i]))) {
				t.Fatalf("gelu(%v): %v alone, %v with the gradient", x, out[i], out2[i])
			}
			for _, r := range regions {
				if x < r.lo || x >= r.hi {
					continue
				}
				e, eg := math.Abs(float64(out[i])-want), math.Abs(float64(grad[i])-wantG)
				if r.rel > 0 {
					e /= ulpOf(want)
				}
				if r.relG > 0 {
					eg /= ulpOf(wantG)
				}
				if !(e <= r.worst) {
					r.worst = e
				}
				if !(eg <= r.wG) {
					r.wG = eg
				}
			}
		}
		for _, r := range regions {
			lim, limG := max(r.rel, r.abs), max(r.relG, r.absG)
			t.Logf("%s: worst GELU error %.3g, derivative %.3g (limits %g, %g: float32 steps when ≥ 1, absolute otherwise)", r.name, r.worst, r.wG, lim, limG)
			if !(r.worst <= lim) || !(r.wG <= limG) {
				t.Errorf("%s: worst GELU error %.3g (limit %g), derivative %.3g (limit %g)", r.name, r.worst, lim, r.wG, limG)
			}
		}
		// The special values inside a 16-lane block, an 8-lane block and the tail.
		for _, at := range []int{0, 17, 37} {
			in := make([]float32, 40)
			in[at], in[at+1], in[at+2] = float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())
			got := make([]float32, len(in))
			geluVec(got, in)
			if !math.IsInf(float64(got[at]), 1) || !math.IsNaN(float64(got[at+1])) || !math.IsNaN(float64(got[at+2])) {
				t.Errorf("gelu(+Inf, −Inf, NaN) at %d = %v, want [+Inf NaN NaN] (x·Φ(x) as PyTorch computes it)", at, got[at:at+3])
			}
		}
	})
}

// ulpOf is float32's spacing at |v| (at least the smallest normal's).
func ulpOf(v float64) float64 {
	a := math.Max(math.Abs(v), 0x1p-126)
	return math.Ldexp(1, math.Ilogb(a)-23)
}

// The reductions and row updates equal plain loops at lengths that cross
// the 8-lane blocks.
func TestVecReductions(t *testing.T) {
	paths(t, func(t *testing.T) {
		for n := 0; n <= 41; n++ {
			r := testutil.Rand(uint64(100 + n))
			x, y := testutil.RandN(r, n, 2), testutil.RandN(r, n, 2)
			t.Run(fmt.Sprint("n", n), func(t *testing.T) {
				wantMax := float32(math.Inf(-1))
				dot := 0.0
				for i := range x {
					wantMax = max(wantMax, x[i])
					dot += float64(x[i]) * float64(y[i])
				}
				if got := maxOf(x); got != wantMax {
					t.Errorf("maxOf = %v, want %v", got, wantMax)
				}
				if got := dotVec(x, y); math.Abs(float64(got)-dot) > 1e-5*(1+math.Abs(dot)) {
					t.Errorf("dotVec = %v, want %v", got, dot)
				}
				d := append([]float32(nil), x...)
				dm := divMax(d, 3)
				wm := float32(math.Inf(-1))
				for i := range d {
					if want := x[i] / 3; d[i] != want {
						t.Fatalf("divMax [%d] = %v, want %v", i, d[i], want)
					}
					wm = max(wm, x[i]/3)
				}
				if dm != wm {
					t.Errorf("divMax max = %v, want %v", dm, wm)
				}
				s := append([]float32(nil), x...)
				scaleVec(s, 0.7)
				for i := range s {
					if want := x[i] * 0.7; s[i] != want {
						t.Fatalf("scaleVec [%d] = %v, want %v", i, s[i], want)
					}
				}
				// LayerNorm rows: sums against float64 loops, element-wise
				// parts bit for bit against the scalar formulas.
				w, bb := testutil.RandN(r, n, 1), testutil.RandN(r, n, 1)
				m, rs := float32(0.1), float32(1.7)
				s1, s2, sx, sq := 0.0, 0.0, 0.0, 0.0
				for i := range x {
					dx := float64(y[i] * w[i])
					xh := float64((x[i] - m) * rs)
					s1 += dx
					s2 += dx * xh
					sx += float64(x[i])
					sq += (float64(x[i]) - 0.1) * (float64(x[i]) - 0.1)
				}
				close := func(name string, got, want float64) {
					if math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
						t.Errorf("%s = %v, want %v", name, got, want)
					}
				}
				close("sum64", sum64(x), sx)
				close("sqdev64", sqdev64(x, 0.1), sq)
				g1, g2 := lnBackSums(y, w, x, m, rs)
				close("lnBackSums s1", g1, s1)
				close("lnBackSums s2", g2, s2)
				o := make([]float32, n)
				lnApply(o, x, w, bb, m, rs)
				di := append([]float32(nil), bb...)
				lnBackApply(di, y, w, x, m, rs, 0.2, -0.3)
				dw, db := append([]float32(nil), w...), append([]float32(nil), bb...)
				lnBackParam(dw, db, y, x, m, rs)
				for i := range o {
					xh := (x[i] - m) * rs
					// float32(…) rounds each product (no fused multiply-add).
					if want := float32((x[i]-m)*rs*w[i]) + bb[i]; o[i] != want {
						t.Fatalf("lnApply [%d] = %v, want %v", i, o[i], want)
					}
					if want := bb[i] + float32(rs*(float32(y[i]*w[i])-0.2-float32(xh*-0.3))); di[i] != want {
						t.Fatalf("lnBackApply [%d] = %v, want %v", i, di[i], want)
					}
					if want := w[i] + float32(y[i]*xh); dw[i] != want {
						t.Fatalf("lnBackParam dw [%d] = %v, want %v", i, dw[i], want)
					}
					if want := bb[i] + y[i]; db[i] != want {
						t.Fatalf("lnBackParam db [%d] = %v, want %v", i, db[i], want)
					}
				}
				b := append([]float32(nil), x...)
				softmaxBackRow(b, y, 0.3, 8)
				for i := range b {
					if want := y[i] * (x[i] - 0.3) / 8; b[i] != want {
						t.Fatalf("softmaxBackRow [%d] = %v, want %v", i, b[i], want)
					}
				}
			})
		}
	})
}

func BenchmarkVec(b *testing.B) {
	r := testutil.Rand(3)
	const n = 4096
	x := testutil.RandN(r, n, 2)
	y := make([]float32, n)
	g := make([]float32, n)
	for level, name := range []string{"scalar", "avx2", "avx512"} {
		run := func(op string, f func()) {
			b.Run(name+"/"+op, func(b *testing.B) {
				restore, ok := withLevel(level)
				defer restore()
				if !ok {
					b.Skip("no " + name + " here")
				}
				for i := 0; i < b.N; i++ {
					f()
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
			})
		}
		run("expSubSum", func() { copy(y, x); expSubSum(y, 3) })
		run("gelu", func() { geluVec(y, x) })
		run("geluGrad", func() { geluGradVec(y, g, x) })
	}
}

// The precomputed threshold drops exactly the elements Scale drops.
func TestDropoutMaskEqualsScale(t *testing.T) {
	for _, p := range []float32{1e-7, 0.1, 1.0 / 3, 0.5, 0.9, 0.999999} {
		d := Dropout{P: p, Seed: 12345}
		x := make([]float32, 20000)
		for i := range x {
			x[i] = 1 + float32(i)
		}
		y := append([]float32(nil), x...)
		DropoutForward(y, d, len(y))
		for i := range x {
			if want := x[i] * d.Scale(i); y[i] != want {
				t.Fatalf("P %v: element %d = %v, want %v", p, i, y[i], want)
			}
		}
	}
}

// AdamWUpdate's vector path gives the scalar twin's bits, and addVec and
// mulVec equal plain loops.
func TestAdamWAndAddVec(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 64, 1001} {
		r := testutil.Rand(uint64(n))
		p, g := testutil.RandN(r, n, 1), testutil.RandN(r, n, 0.1)
		m, v := testutil.RandN(r, n, 0.01), make([]float32, n)
		for i := range v {
			v[i] = float32(r.Float64() * 1e-4)
		}
		g[0] = 0
		k := AdamWScalars{Decay: 0.999, B1: 0.9, OneMinusB1: 0.1, B2: 0.999, OneMinusB2: 0.001, StepSize: 1e-3, BC2Sqrt: 0.03, Eps: 1e-8}
		p2, m2, v2 := append([]float32(nil), p...), append([]float32(nil), m...), append([]float32(nil), v...)
		AdamWUpdate(p, g, m, v, &k)
		adamWNaive(p2, g, m2, v2, &k)
		for i := range p {
			if p[i] != p2[i] || m[i] != m2[i] || v[i] != v2[i] {
				t.Fatalf("n %d: element %d: p %v m %v v %v, scalar p %v m %v v %v", n, i, p[i], m[i], v[i], p2[i], m2[i], v2[i])
			}
		}
		sum := make([]float32, n)
		addVec(sum, p, g)
		for i := range sum {
			if sum[i] != p[i]+g[i] {
				t.Fatalf("n %d: addVec [%d] = %v, want %v", n, i, sum[i], p[i]+g[i])
			}
		}
		prod := make([]float32, n)
		mulVec(prod, p, g)
		for i := range prod {
			if prod[i] != p[i]*g[i] {
				t.Fatalf("n %d: mulVec [%d] = %v, want %v", n, i, prod[i], p[i]*g[i])
			}
		}
		mulVec(p2, p2, p2) // in place
		for i := range p2 {
			if p2[i] != p[i]*p[i] {
				t.Fatalf("n %d: mulVec in place [%d] = %v, want %v", n, i, p2[i], p[i]*p[i])
			}
		}
	}
}

func TestRotatePairs(t *testing.T) {
	paths(t, func(t *testing.T) {
		for _, n := range []int{2, 6, 8, 10, 64, 130} {
			r := testutil.Rand(uint64(n))
			x, c, s := testutil.RandN(r, n, 1), testutil.RandN(r, n/2, 1), testutil.RandN(r, n/2, 1)
			cos2, sin2 := make([]float32, n), make([]float32, n)
			for i := range c {
				cos2[2*i], cos2[2*i+1] = c[i], c[i]
				sin2[2*i], sin2[2*i+1] = -s[i], s[i]
			}
			got := append([]float32(nil), x...)
			RotatePairs(got, cos2, sin2)
			for i := range c {
				a, b := x[2*i], x[2*i+1]
				if w := float32(a*c[i]) - float32(b*s[i]); got[2*i] != w {
					t.Fatalf("n %d: [%d] = %v, want %v", n, 2*i, got[2*i], w)
				}
				if w := float32(b*c[i]) + float32(a*s[i]); got[2*i+1] != w {
					t.Fatalf("n %d: [%d] = %v, want %v", n, 2*i+1, got[2*i+1], w)
				}
			}
		}
	})
}

// A NaN anywhere in a row makes its maximum NaN on both paths (VMAXPS alone
// would drop it), so a softmax over it is NaN, as the scalar code and
// PyTorch give, not a uniform row.
func TestVecMaxNaN(t *testing.T) {
	paths(t, func(t *testing.T) {
		for _, n := range []int{1, 8, 13, 16, 40} {
			for _, at := range []int{0, n / 2, n - 1} {
				x := testutil.RandN(testutil.Rand(uint64(n)), n, 1)
				x[at] = float32(math.NaN())
				if m := maxOf(x); !math.IsNaN(float64(m)) {
					t.Errorf("n %d NaN at %d: maxOf = %v", n, at, m)
				}
				if m := divMax(append([]float32(nil), x...), 2); !math.IsNaN(float64(m)) {
					t.Errorf("n %d NaN at %d: divMax = %v", n, at, m)
				}
				row := append([]float32(nil), x...)
				maskedSoftmaxRow(row, 8, nil, false, 0)
				if !math.IsNaN(float64(row[0])) {
					t.Errorf("n %d NaN at %d: softmax row starts %v, want NaN", n, at, row[0])
				}
			}
		}
	})
}

// Scratch buffers come back from the pool of their size class, so mixed
// sizes do not evict each other.
func TestScratchClasses(t *testing.T) {
	for _, n := range []int{1, 2, 3, 64, 65, 4096, 5000} {
		p := getScratch(n)
		if len(*p) != n || cap(*p) < n || cap(*p)&(cap(*p)-1) != 0 {
			t.Fatalf("getScratch(%d): len %d cap %d", n, len(*p), cap(*p))
		}
		putScratch(p)
	}
	a := getScratch(100)
	putScratch(a)
	b := getScratch(3000) // another class: must not receive a's 128-float buffer
	if cap(*b) < 3000 {
		t.Fatalf("getScratch(3000) has capacity %d", cap(*b))
	}
}

// toBF16 gives tensor.F32ToBF16's bits on every path and length: edges
// (±0, subnormals, the largest finite values that round to ±Inf, ±Inf,
// NaNs of both signs and payloads, exact ties both ways) and random bit
// patterns; each finite result is also the nearer of the two bfloat16
// neighbours, the even one on a tie.
func TestToBF16(t *testing.T) {
	edges := []uint32{0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x00008000, 0x00018000, 0x3f808000, 0x3f818000,
		0x3f807fff, 0x3f808001, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f800000, 0xff800000, 0x7f800001,
		0xffc00000, 0x7fffffff, 0xff800001, 0x7fbfffff}
	r := testutil.Rand(5)
	paths(t, func(t *testing.T) {
		for _, n := range []int{0, 1, 15, 16, 17, 33, 64, 1000} {
			src := make([]float32, n)
			for i := range src {
				b := uint32(r.Uint64())
				if i < len(edges) && n > len(edges) {
					b = edges[i]
				}
				src[i] = math.Float32frombits(b)
			}
			dst := make([]uint16, n+1)
			dst[n] = 0xbeef
			toBF16(dst, src)
			if dst[n] != 0xbeef {
				t.Fatalf("n %d: wrote past len(src)", n)
			}
			for i, f := range src {
				if want := tensor.F32ToBF16(f); dst[i] != want {
					t.Fatalf("n %d: [%d] %#08x → %#04x, want %#04x", n, i, math.Float32bits(f), dst[i], want)
				}
				if f != f || math.IsInf(float64(f), 0) {
					continue
				}
				lo := math.Float32bits(f) &^ 0xffff
				down := float64(math.Float32frombits(lo)) // toward zero
				e := max(int(lo>>23&0xff), 1)
				up := down + math.Copysign(math.Ldexp(1, e-127-7), float64(f)) // one bfloat16 step away from zero
				got := float64(math.Float32frombits(uint32(dst[i]) << 16))
				x := float64(f)
				dd, du := math.Abs(x-down), math.Abs(up-x)
				want := down
				if du < dd || du == dd && (lo>>16)&1 == 1 {
					want = up
				}
				if math.Abs(want) >= math.Ldexp(1, 128) {
					want = math.Copysign(math.Inf(1), want)
				}
				if got != want {
					t.Fatalf("n %d: [%d] %v → %v, nearest bfloat16 is %v", n, i, f, got, want)
				}
			}
		}
	})
}
