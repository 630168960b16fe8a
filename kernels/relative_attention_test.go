package kernels

import (
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

func TestRelativeAttentionAgainstNaive(t *testing.T) {
	r := testutil.Rand(31)
	B, T, NH, HS, K := 2, 7, 3, 5, 2 // T > K+1: distances get clipped
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	relK := testutil.RandN(r, (2*K+1)*HS, 1)
	for name, m := range masks() {
		t.Run(name, func(t *testing.T) {
			got, want := make([]float32, B*T*C), make([]float32, B*T*C)
			probs := make([]float32, B*NH*T*T)
			RelativeAttentionForward(got, probs, q, k, v, relK, m.km, m.causal, Dropout{}, K, B, T, NH, HS)
			relativeAttentionNaive(want, q, k, v, relK, m.km, m.causal, K, B, T, NH, HS)
			testutil.AssertClose(t, "out", got, want, 2e-6, 1e-5)
			RelativeAttentionForward(got, nil, q, k, v, relK, m.km, m.causal, Dropout{}, K, B, T, NH, HS)
			testutil.AssertClose(t, "out without saved probs", got, want, 2e-6, 1e-5)
			// With zero relative embeddings it is plain attention.
			plain := make([]float32, B*T*C)
			AttentionForward(plain, nil, q, k, v, m.km, m.causal, Dropout{}, B, T, NH, HS)
			RelativeAttentionForward(got, nil, q, k, v, make([]float32, len(relK)), m.km, m.causal, Dropout{}, K, B, T, NH, HS)
			testutil.AssertClose(t, "zero embeddings", got, plain, 1e-7, 1e-6)
		})
	}
}

func TestRelativeAttentionBackward(t *testing.T) {
	r := testutil.Rand(32)
	B, T, NH, HS, K := 2, 7, 2, 3, 2
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	relK := testutil.RandN(r, (2*K+1)*HS, 1)
	proj := testutil.RandN(r, B*T*C, 1)
	for name, m := range masks() {
		for _, drop := range []Dropout{{}, {P: 0.3, Seed: 42}} {
			t.Run(fmt.Sprintf("%s_drop%v", name, drop.P), func(t *testing.T) {
				out, probs := make([]float32, B*T*C), make([]float32, B*NH*T*T)
				loss := func() float64 {
					RelativeAttentionForward(out, probs, q, k, v, relK, m.km, m.causal, drop, K, B, T, NH, HS)
					return testutil.Dot(out, proj)
				}
				loss()
				dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
				drel := make([]float32, len(relK))
				RelativeAttentionBackward(dq, dk, dv, drel, proj, q, k, v, relK, probs, m.km, m.causal, drop, K, B, T, NH, HS)
				testutil.GradCheck(t, "dq", q, dq, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dk", k, dk, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "drelK", relK, drel, loss, 1e-2, 2e-3)
				// The parameter gradient accumulates: a second call doubles it.
				loss() // the checks left probs at a perturbed point
				clear(drel)
				RelativeAttentionBackward(dq, dk, dv, drel, proj, q, k, v, relK, probs, m.km, m.causal, drop, K, B, T, NH, HS)
				once := append([]float32(nil), drel...)
				RelativeAttentionBackward(dq, dk, dv, drel, proj, q, k, v, relK, probs, m.km, m.causal, drop, K, B, T, NH, HS)
				for i := range once {
					once[i] *= 2
				}
				testutil.AssertClose(t, "drelK after two calls", drel, once, 1e-6, 1e-5)
			})
		}
	}
}

// Inference takes the queries in blocks of attnBlock: the same result as the
// whole-matrix path, across a partial last block, with masks and dropout.
func TestRelativeAttentionBlocks(t *testing.T) {
	r := testutil.Rand(12)
	B, T, NH, HS, K := 2, attnBlock*2+5, 2, 4, 3
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	relK := testutil.RandN(r, (2*K+1)*HS, 1)
	km := make([]float32, B*T)
	for i := range km {
		km[i] = 1
	}
	km[3], km[T-1], km[T+70] = 0, 0, 0
	for _, causal := range []bool{false, true} {
		for _, drop := range []Dropout{{}, {P: 0.2, Seed: 4}} {
			a, b := make([]float32, B*T*C), make([]float32, B*T*C)
			RelativeAttentionForward(a, make([]float32, B*NH*T*T), q, k, v, relK, km, causal, drop, K, B, T, NH, HS)
			RelativeAttentionForward(b, nil, q, k, v, relK, km, causal, drop, K, B, T, NH, HS)
			testutil.AssertClose(t, fmt.Sprintf("blocked causal=%v dropout=%v", causal, drop.P), b, a, 1e-6, 1e-6)
		}
	}
}
