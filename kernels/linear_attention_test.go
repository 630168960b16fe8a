package kernels

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// positive returns n log-normal samples: feature values as φ produces them.
func positive(r interface{ NormFloat64() float64 }, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.Exp(0.5 * r.NormFloat64()))
	}
	return s
}

func TestLinearAttentionAgainstNaive(t *testing.T) {
	r := testutil.Rand(21)
	B, T, NH, F, HS := 2, 7, 3, 6, 5
	CF, CV := NH*F, NH*HS
	qd, kd := positive(r, B*T*CF), positive(r, B*T*CF)
	qn, kn := testutil.RandN(r, B*T*CF, 1), testutil.RandN(r, B*T*CF, 1) // rotated features may be negative
	v := testutil.RandN(r, B*T*CV, 1)
	for name, m := range masks() {
		for _, rotated := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s_rotated%v", name, rotated), func(t *testing.T) {
				a, b := qd, kd
				if rotated {
					a, b = qn, kn
				}
				got, want := make([]float32, B*T*CV), make([]float32, B*T*CV)
				den := make([]float32, B*NH*T)
				LinearAttentionForward(got, den, a, b, qd, kd, v, m.km, m.causal, B, T, NH, F, HS)
				linearAttentionNaive(want, a, b, qd, kd, v, m.km, m.causal, B, T, NH, F, HS)
				testutil.AssertClose(t, "out", got, want, 1e-6, 1e-5)
				LinearAttentionForward(got, nil, a, b, qd, kd, v, m.km, m.causal, B, T, NH, F, HS)
				testutil.AssertClose(t, "out without saved denominators", got, want, 1e-6, 1e-5)
			})
		}
	}
}

func TestLinearAttentionBackward(t *testing.T) {
	r := testutil.Rand(22)
	B, T, NH, F, HS := 2, 7, 2, 4, 3
	CF, CV := NH*F, NH*HS
	qd, kd := positive(r, B*T*CF), positive(r, B*T*CF)
	qn, kn := testutil.RandN(r, B*T*CF, 1), testutil.RandN(r, B*T*CF, 1)
	v := testutil.RandN(r, B*T*CV, 1)
	proj := testutil.RandN(r, B*T*CV, 1)
	for name, m := range masks() {
		t.Run(name, func(t *testing.T) {
			out, den := make([]float32, B*T*CV), make([]float32, B*NH*T)
			loss := func() float64 {
				LinearAttentionForward(out, den, qn, kn, qd, kd, v, m.km, m.causal, B, T, NH, F, HS)
				return testutil.Dot(out, proj)
			}
			loss()
			dqn, dkn, dqd, dkd := make([]float32, B*T*CF), make([]float32, B*T*CF), make([]float32, B*T*CF), make([]float32, B*T*CF)
			dv := make([]float32, B*T*CV)
			LinearAttentionBackward(dqn, dkn, dqd, dkd, dv, proj, qn, kn, qd, kd, v, den, m.km, m.causal, B, T, NH, F, HS)
			testutil.GradCheck(t, "dqn", qn, dqn, loss, 1e-2, 2e-3)
			testutil.GradCheck(t, "dkn", kn, dkn, loss, 1e-2, 2e-3)
			testutil.GradCheck(t, "dqd", qd, dqd, loss, 1e-3, 2e-3)
			testutil.GradCheck(t, "dkd", kd, dkd, loss, 1e-3, 2e-3)
			testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
		})
	}
}

// Causal linear attention allocates O(T): quadrupling T at most
// quadruples what forward and backward allocate (plus a margin), and at
// T = 8192 that is far below the 256 MB of one T×T score matrix.
func TestLinearAttentionMemory(t *testing.T) {
	prev := Threads()
	SetThreads(1)
	defer SetThreads(prev)
	alloc := func(T int) uint64 {
		B, NH, F, HS := 1, 1, 8, 8
		r := testutil.Rand(23)
		q, k := positive(r, T*F), positive(r, T*F)
		v := testutil.RandN(r, T*HS, 1)
		out, den := make([]float32, T*HS), make([]float32, T)
		d := [5][]float32{make([]float32, T*F), make([]float32, T*F), make([]float32, T*F), make([]float32, T*F), make([]float32, T*HS)}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		LinearAttentionForward(out, den, q, k, q, k, v, nil, true, B, T, NH, F, HS)
		LinearAttentionBackward(d[0], d[1], d[2], d[3], d[4], out, q, k, q, k, v, den, nil, true, B, T, NH, F, HS)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(2048), alloc(8192)
	if large > 5*small+(64<<10) || large > 8192*8192*4/64 {
		t.Errorf("allocated %d bytes at T=2048 and %d at T=8192: not O(T) (a T×T matrix at 8192 is %d)", small, large, 8192*8192*4)
	}
	t.Logf("allocated %d bytes at T=2048, %d at T=8192", small, large)
}

// Causal attention over several chunks (and a partial last one) matches
// the naive twin, forward and backward.
func TestLinearAttentionChunks(t *testing.T) {
	r := testutil.Rand(29)
	B, T, NH, F, HS := 1, 2*linChunk+5, 1, 4, 3
	qd, kd := positive(r, B*T*F), positive(r, B*T*F)
	qn, kn := testutil.RandN(r, B*T*F, 1), testutil.RandN(r, B*T*F, 1)
	v, proj := testutil.RandN(r, B*T*HS, 1), testutil.RandN(r, B*T*HS, 1)
	km := make([]float32, T)
	for i := range km {
		km[i] = 1
	}
	km[5], km[linChunk], km[T-2] = 0, 0, 0
	for _, mask := range [][]float32{nil, km} {
		t.Run(fmt.Sprintf("mask%v", mask != nil), func(t *testing.T) {
			got, want, den := make([]float32, T*HS), make([]float32, T*HS), make([]float32, T)
			LinearAttentionForward(got, den, qn, kn, qd, kd, v, mask, true, B, T, NH, F, HS)
			linearAttentionNaive(want, qn, kn, qd, kd, v, mask, true, B, T, NH, F, HS)
			testutil.AssertClose(t, "out", got, want, 1e-6, 1e-5)
			loss := func() float64 {
				LinearAttentionForward(got, den, qn, kn, qd, kd, v, mask, true, B, T, NH, F, HS)
				return testutil.Dot(got, proj)
			}
			loss()
			dqn, dkn, dqd, dkd, dv := make([]float32, T*F), make([]float32, T*F), make([]float32, T*F), make([]float32, T*F), make([]float32, T*HS)
			LinearAttentionBackward(dqn, dkn, dqd, dkd, dv, proj, qn, kn, qd, kd, v, den, mask, true, B, T, NH, F, HS)
			testutil.GradCheck(t, "dqn", qn, dqn, loss, 1e-2, 2e-3)
			testutil.GradCheck(t, "dkn", kn, dkn, loss, 1e-2, 2e-3)
			testutil.GradCheck(t, "dqd", qd, dqd, loss, 1e-3, 2e-3)
			testutil.GradCheck(t, "dkd", kd, dkd, loss, 1e-3, 2e-3)
			testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
		})
	}
}

func TestEluFeature(t *testing.T) {
	r := testutil.Rand(24)
	N := 40
	x := testutil.RandN(r, N, 2)
	for i := range x { // keep the kink at 0 away from the finite differences
		if math.Abs(float64(x[i])) < 0.02 {
			x[i] = 0.5
		}
	}
	out, proj := make([]float32, N), testutil.RandN(r, N, 1)
	loss := func() float64 { EluFeatureForward(out, x, N); return testutil.Dot(out, proj) }
	loss()
	for i, y := range out {
		if !(y > 0) {
			t.Fatalf("φ(%v) = %v is not positive", x[i], y)
		}
	}
	dx := make([]float32, N)
	EluFeatureBackward(dx, proj, x, N)
	testutil.GradCheck(t, "elu+1", x, dx, loss, 1e-3, 1e-3)
}

// gaussian returns an [M, HS] matrix of independent N(0, 1) directions.
func gaussian(seed uint64, M, HS int) []float32 {
	return testutil.RandN(testutil.Rand(seed), M*HS, 1)
}

func TestFavorFeatureBackward(t *testing.T) {
	r := testutil.Rand(25)
	B, T, NH, HS, M := 2, 3, 2, 4, 6
	x := testutil.RandN(r, B*T*NH*HS, 1)
	omega := gaussian(26, M, HS)
	proj := testutil.RandN(r, B*T*NH*M, 1)
	rows := B * T * NH
	for _, query := range []bool{true, false} {
		t.Run(fmt.Sprintf("query%v", query), func(t *testing.T) {
			out := make([]float32, B*T*NH*M)
			FavorFeatureForward(out, x, omega, query, B, T, NH, HS, M)
			// Keys follow the formula exactly. A query's features are
			// exp(ω·x')/√M times a per-row constant (its stabiliser), which
			// the backward pass holds fixed: so does the reference.
			factor := make([]float64, rows)
			for row := range factor {
				f := favorRow(x[row*HS:row*HS+HS], omega, HS, M, !query)
				factor[row] = float64(out[row*M]) / f[0]
				if !query {
					for i, v := range f {
						if math.Abs(float64(out[row*M+i])-v) > 1e-6*v {
							t.Fatalf("key feature [%d][%d] = %v, formula %v", row, i, out[row*M+i], v)
						}
					}
				}
			}
			loss := func() float64 {
				s := 0.0
				for row := range factor {
					for i, v := range favorRow(x[row*HS:row*HS+HS], omega, HS, M, !query) {
						s += v * factor[row] * float64(proj[row*M+i])
					}
				}
				return s
			}
			dx := make([]float32, len(x))
			FavorFeatureBackward(dx, proj, out, x, omega, query, B, T, NH, HS, M)
			testutil.GradCheck(t, "dx", x, dx, loss, 1e-3, 2e-3)
		})
	}
}

// favorRow is exp(ω·x' − |x'|²/2)/√M in float64, without the |x'|² term
// when diag is false.
func favorRow(x, omega []float32, HS, M int, diag bool) []float64 {
	s := math.Pow(float64(HS), -0.25)
	d := 0.0
	if diag {
		for _, v := range x {
			d += float64(v) * s * float64(v) * s / 2
		}
	}
	out := make([]float64, M)
	for i := range out {
		a := 0.0
		for j, v := range x {
			a += float64(omega[i*HS+j]) * float64(v) * s
		}
		out[i] = math.Exp(a-d) / math.Sqrt(float64(M))
	}
	return out
}

// With many random features, FAVOR+ linear attention approximates softmax
// attention (the estimator is unbiased for exp(q·k/√HS)), and the
// stabilisers cancel.
func TestFavorApproximatesSoftmax(t *testing.T) {
	r := testutil.Rand(27)
	B, T, NH, HS, M := 1, 6, 1, 4, 1<<14
	q, k := testutil.RandN(r, T*HS, 0.5), testutil.RandN(r, T*HS, 0.5)
	v := testutil.RandN(r, T*HS, 1)
	omega := gaussian(28, M, HS)
	for _, causal := range []bool{false, true} {
		fq, fk := make([]float32, T*M), make([]float32, T*M)
		FavorFeatureForward(fq, q, omega, true, B, T, NH, HS, M)
		FavorFeatureForward(fk, k, omega, false, B, T, NH, HS, M)
		got, want := make([]float32, T*HS), make([]float32, T*HS)
		LinearAttentionForward(got, nil, fq, fk, fq, fk, v, nil, causal, B, T, NH, M, HS)
		attentionForwardNaive(want, q, k, v, nil, causal, B, T, NH, HS)
		testutil.AssertClose(t, fmt.Sprintf("causal=%v", causal), got, want, 0.03, 0)
	}
}
