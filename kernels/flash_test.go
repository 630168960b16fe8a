package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// flashMasks are the masks of the fused-attention tests for B = 2 rows of T
// tokens: right padding, a fully padded second row, left padding under the
// causal mask (its first queries see no key) and a scattered mask.
func flashMasks(T int) map[string]struct {
	km     []float32
	causal bool
} {
	right := make([]float32, 2*T)
	blank := make([]float32, 2*T)
	left := make([]float32, 2*T)
	scatter := make([]float32, 2*T)
	for j := 0; j < T; j++ {
		right[j], right[T+j] = 1, 1
		if j >= (T+1)/2 {
			right[T+j] = 0
		}
		blank[j] = 1
		left[j] = 1
		if j >= T/3 {
			left[T+j] = 1
		}
		if j%3 != 1 {
			scatter[j] = 1
		}
		if j%5 == 2 {
			scatter[T+j] = 1
		}
	}
	return map[string]struct {
		km     []float32
		causal bool
	}{
		"nomask":         {nil, false},
		"rightpad":       {right, false},
		"blankrow":       {blank, false},
		"scatter":        {scatter, false},
		"causal":         {nil, true},
		"causal_leftpad": {left, true},
		"causal_blank":   {blank, true},
		"causal_scatter": {scatter, true},
	}
}

// flashDrops: no dropout, and HF's attention dropout in training.
var flashDrops = []Dropout{{}, {P: 0.3, Seed: 42}}

// lseNaive is the log-sum-exp of the visible scaled scores in float64, −∞
// for a query that sees no key.
func lseNaive(q, k, keyMask []float32, causal bool, B, T, NH, HS int) []float64 {
	C := NH * HS
	scale := math.Sqrt(float64(HS))
	out := make([]float64, B*NH*T)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < T; i++ {
				mx, s := math.Inf(-1), []float64{}
				for j := 0; j < T; j++ {
					if (keyMask != nil && keyMask[b*T+j] == 0) || (causal && j > i) {
						continue
					}
					d := 0.0
					for c := 0; c < HS; c++ {
						d += float64(q[b*T*C+i*C+h*HS+c]) * float64(k[b*T*C+j*C+h*HS+c])
					}
					s = append(s, d/scale)
					mx = math.Max(mx, d/scale)
				}
				sum := 0.0
				for _, x := range s {
					sum += math.Exp(x - mx)
				}
				out[(b*NH+h)*T+i] = mx + math.Log(sum)
			}
		}
	}
	return out
}

func TestFlashAttentionForward(t *testing.T) {
	r := testutil.Rand(61)
	B, NH := 2, 2
	for _, T := range []int{1, 7, 65, 130, 300} {
		for _, HS := range []int{16, 64} {
			C := NH * HS
			q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
			for name, m := range flashMasks(T) {
				for _, drop := range flashDrops {
					t.Run(fmt.Sprintf("T%d_HS%d_%s_drop%v", T, HS, name, drop.P), func(t *testing.T) {
						got, want := make([]float32, B*T*C), make([]float32, B*T*C)
						lse := make([]float32, B*NH*T)
						FlashAttentionForward(got, lse, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						AttentionForward(want, nil, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						testutil.AssertClose(t, "out vs AttentionForward", got, want, 2e-6, 2e-5)
						if T <= 65 && !drop.Active() {
							attentionForwardNaive(want, q, k, v, m.km, m.causal, B, T, NH, HS)
							testutil.AssertClose(t, "out vs naive", got, want, 2e-6, 2e-5)
						}
						wl := lseNaive(q, k, m.km, m.causal, B, T, NH, HS)
						for i, w := range wl {
							g := float64(lse[i])
							if math.IsInf(w, -1) != math.IsInf(g, -1) || (!math.IsInf(w, -1) && math.Abs(g-w) > 1e-5*math.Max(1, math.Abs(w))) {
								t.Fatalf("lse[%d] = %v, want %v", i, g, w)
							}
						}
						// inference: no lse
						FlashAttentionForward(want, nil, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						for i := range got {
							if got[i] != want[i] {
								t.Fatalf("out[%d] %v without lse, %v with", i, want[i], got[i])
							}
						}
					})
				}
			}
		}
	}
}

func TestFlashAttentionBackward(t *testing.T) {
	r := testutil.Rand(62)
	B, NH := 2, 2
	for _, T := range []int{1, 7, 65, 130} {
		for _, HS := range []int{16, 64} {
			C := NH * HS
			q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
			dout := testutil.RandN(r, B*T*C, 1)
			for name, m := range flashMasks(T) {
				for _, drop := range flashDrops {
					t.Run(fmt.Sprintf("T%d_HS%d_%s_drop%v", T, HS, name, drop.P), func(t *testing.T) {
						out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
						FlashAttentionForward(out, lse, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
						for i := range dq { // written, not accumulated
							dq[i], dk[i], dv[i] = 9, 9, 9
						}
						FlashAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, m.km, m.causal, drop, B, T, NH, HS)
						probs := make([]float32, B*NH*T*T)
						wq, wk, wv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
						AttentionForward(make([]float32, B*T*C), probs, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						AttentionBackward(wq, wk, wv, dout, q, k, v, probs, m.km, m.causal, drop, B, T, NH, HS)
						testutil.AssertClose(t, "dq", dq, wq, 2e-5, 1e-4)
						testutil.AssertClose(t, "dk", dk, wk, 2e-5, 1e-4)
						testutil.AssertClose(t, "dv", dv, wv, 2e-5, 1e-4)
					})
				}
			}
		}
	}
}

// TestFlashAttentionGradCheck checks the fused backward against float64
// finite differences of the fused forward on tiny shapes.
func TestFlashAttentionGradCheck(t *testing.T) {
	r := testutil.Rand(63)
	B, T, NH, HS := 2, 5, 2, 3
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	proj := testutil.RandN(r, B*T*C, 1)
	for name, m := range flashMasks(T) {
		for _, drop := range flashDrops {
			t.Run(fmt.Sprintf("%s_drop%v", name, drop.P), func(t *testing.T) {
				out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
				loss := func() float64 {
					FlashAttentionForward(out, lse, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
					return testutil.Dot(out, proj)
				}
				loss()
				dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
				FlashAttentionBackward(dq, dk, dv, proj, q, k, v, out, lse, m.km, m.causal, drop, B, T, NH, HS)
				testutil.GradCheck(t, "dq", q, dq, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dk", k, dk, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
			})
		}
	}
}

// TestFlashAttentionThreads: the result does not depend on the thread count.
func TestFlashAttentionThreads(t *testing.T) {
	r := testutil.Rand(64)
	B, T, NH, HS := 2, 300, 3, 16
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	dout := testutil.RandN(r, B*T*C, 1)
	run := func() []float32 {
		out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
		FlashAttentionForward(out, lse, q, k, v, nil, true, Dropout{P: 0.1, Seed: 3}, B, T, NH, HS)
		dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
		FlashAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, nil, true, Dropout{P: 0.1, Seed: 3}, B, T, NH, HS)
		return append(append(append(append(out, lse...), dq...), dk...), dv...)
	}
	defer SetThreads(Threads())
	SetThreads(1)
	one := run()
	SetThreads(4)
	four := run()
	for i := range one {
		if one[i] != four[i] {
			t.Fatalf("element %d: %v on one thread, %v on four", i, one[i], four[i])
		}
	}
}

// TestFlashAttentionVectorLevels: the fused kernels agree with the
// reference kernels on every vector path (scalar twins, AVX2, AVX-512 exp).
func TestFlashAttentionVectorLevels(t *testing.T) {
	r := testutil.Rand(66)
	B, T, NH, HS := 2, 130, 2, 16
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	dout := testutil.RandN(r, B*T*C, 1)
	m := flashMasks(T)["causal_leftpad"]
	drop := Dropout{P: 0.2, Seed: 5}
	for level := 0; level <= 2; level++ {
		t.Run(fmt.Sprint("level", level), func(t *testing.T) {
			restore, ok := withLevel(level)
			defer restore()
			if !ok {
				t.Skipf("the CPU lacks vector level %d", level)
			}
			out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
			FlashAttentionForward(out, lse, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
			want, probs := make([]float32, B*T*C), make([]float32, B*NH*T*T)
			AttentionForward(want, probs, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
			testutil.AssertClose(t, "out", out, want, 2e-6, 2e-5)
			dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
			FlashAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, m.km, m.causal, drop, B, T, NH, HS)
			wq, wk, wv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
			AttentionBackward(wq, wk, wv, dout, q, k, v, probs, m.km, m.causal, drop, B, T, NH, HS)
			testutil.AssertClose(t, "dq", dq, wq, 2e-5, 1e-4)
			testutil.AssertClose(t, "dk", dk, wk, 2e-5, 1e-4)
			testutil.AssertClose(t, "dv", dv, wv, 2e-5, 1e-4)
		})
	}
}
