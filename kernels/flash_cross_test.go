package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// keyMasks are the key masks of the cross-attention tests for B = 2 rows
// of Tk keys: none, right padding of the second row, a fully padded second
// row and a scattered mask.
func keyMasks(Tk int) map[string][]float32 {
	right, blank, scatter := make([]float32, 2*Tk), make([]float32, 2*Tk), make([]float32, 2*Tk)
	for j := 0; j < Tk; j++ {
		right[j], blank[j] = 1, 1
		if j < (Tk+1)/2 {
			right[Tk+j] = 1
		}
		if j%3 != 1 {
			scatter[j] = 1
		}
		if j%5 == 2 {
			scatter[Tk+j] = 1
		}
	}
	return map[string][]float32{"nomask": nil, "rightpad": right, "blankrow": blank, "scatter": scatter}
}

// flashBackwardNaive differentiates flashForwardNaive in float64 from its
// probabilities: dv = Pᵀ·dout, dS = P⊙(dP − Σ_j P⊙dP)/√HS with
// dP = dout·vᵀ for a query that sees a key (0 for one that sees none,
// whose uniform weights do not depend on the scores), dq = dS·k,
// dk = dSᵀ·q.
func flashBackwardNaive(dq, dk, dv, dout, q, k, v, probs []float32, lse []float64, B, Tq, Tk, NH, HS int) {
	C := NH * HS
	scale := math.Sqrt(float64(HS))
	clear(dq)
	clear(dk)
	clear(dv)
	dP := make([]float64, Tk)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < Tq; i++ {
				bhi := (b*NH+h)*Tq + i
				P := probs[bhi*Tk : bhi*Tk+Tk]
				dot := 0.0
				for j := 0; j < Tk; j++ {
					d := 0.0
					for c := 0; c < HS; c++ {
						g := float64(dout[(b*Tq+i)*C+h*HS+c])
						d += g * float64(v[(b*Tk+j)*C+h*HS+c])
						dv[(b*Tk+j)*C+h*HS+c] += float32(float64(P[j]) * g)
					}
					dP[j] = d
					dot += float64(P[j]) * d
				}
				if math.IsInf(lse[bhi], -1) {
					continue
				}
				for j := 0; j < Tk; j++ {
					ds := float64(P[j]) * (dP[j] - dot) / scale
					if ds == 0 {
						continue
					}
					for c := 0; c < HS; c++ {
						dq[(b*Tq+i)*C+h*HS+c] += float32(ds * float64(k[(b*Tk+j)*C+h*HS+c]))
						dk[(b*Tk+j)*C+h*HS+c] += float32(ds * float64(q[(b*Tq+i)*C+h*HS+c]))
					}
				}
			}
		}
	}
}

// checkLSE compares a fused pass's lse with the naive one.
func checkLSE(t *testing.T, got []float32, want []float64) {
	t.Helper()
	for i, w := range want {
		g := float64(got[i])
		if math.IsInf(w, -1) != math.IsInf(g, -1) || (!math.IsInf(w, -1) && math.Abs(g-w) > 1e-5*math.Max(1, math.Abs(w))) {
			t.Fatalf("lse[%d] = %v, want %v", i, g, w)
		}
	}
}

// TestFlashCrossAttention: the fused kernel of Tq queries over Tk ≠ Tq keys
// against CrossAttentionForward and CrossAttentionBackward (no causal
// mask) and the naive twins (every mask, causal aligned to the last key),
// at lengths that break the 192×512 forward and 128×128 backward tiles.
func TestFlashCrossAttention(t *testing.T) {
	r := testutil.Rand(71)
	B, NH := 2, 2
	for _, sh := range [][2]int{{1, 1}, {1, 600}, {7, 13}, {13, 7}, {200, 5}, {130, 530}, {300, 41}} {
		Tq, Tk := sh[0], sh[1]
		for _, HS := range []int{16, 64} {
			C := NH * HS
			q, k, v := testutil.RandN(r, B*Tq*C, 1), testutil.RandN(r, B*Tk*C, 1), testutil.RandN(r, B*Tk*C, 1)
			dout := testutil.RandN(r, B*Tq*C, 1)
			for name, km := range keyMasks(Tk) {
				for _, causal := range []bool{false, true} {
					if causal && Tq > Tk {
						continue // the first queries see no key at all: covered by the grad check
					}
					t.Run(fmt.Sprintf("Tq%d_Tk%d_HS%d_%s_causal%v", Tq, Tk, HS, name, causal), func(t *testing.T) {
						got, lse := make([]float32, B*Tq*C), make([]float32, B*NH*Tq)
						FlashCrossAttentionForward(got, lse, q, k, v, km, causal, B, Tq, Tk, NH, HS)
						want, probs, wl := make([]float32, B*Tq*C), make([]float32, B*NH*Tq*Tk), make([]float64, B*NH*Tq)
						flashForwardNaive(want, probs, wl, q, k, v, km, flashMask{causal: causal}, B, Tq, Tk, NH, HS)
						testutil.AssertClose(t, "out vs naive", got, want, 2e-6, 2e-5)
						checkLSE(t, lse, wl)
						if !causal {
							CrossAttentionForward(want, nil, q, k, v, km, B, Tq, Tk, NH, HS)
							testutil.AssertClose(t, "out vs CrossAttentionForward", got, want, 2e-6, 2e-5)
						}
						// inference: no lse, the same output
						inf := make([]float32, B*Tq*C)
						FlashCrossAttentionForward(inf, nil, q, k, v, km, causal, B, Tq, Tk, NH, HS)
						for i := range got {
							if got[i] != inf[i] {
								t.Fatalf("out[%d] %v without lse, %v with", i, inf[i], got[i])
							}
						}
						dq, dk, dv := make([]float32, B*Tq*C), make([]float32, B*Tk*C), make([]float32, B*Tk*C)
						for i := range dk { // written, not accumulated
							dk[i], dv[i] = 9, 9
						}
						for i := range dq {
							dq[i] = 9
						}
						FlashCrossAttentionBackward(dq, dk, dv, dout, q, k, v, got, lse, km, causal, B, Tq, Tk, NH, HS)
						wq, wk, wv := make([]float32, B*Tq*C), make([]float32, B*Tk*C), make([]float32, B*Tk*C)
						flashBackwardNaive(wq, wk, wv, dout, q, k, v, probs, wl, B, Tq, Tk, NH, HS)
						testutil.AssertClose(t, "dq vs naive", dq, wq, 2e-5, 1e-4)
						testutil.AssertClose(t, "dk vs naive", dk, wk, 2e-5, 1e-4)
						testutil.AssertClose(t, "dv vs naive", dv, wv, 2e-5, 1e-4)
						if !causal {
							cp := make([]float32, B*NH*Tq*Tk)
							CrossAttentionForward(make([]float32, B*Tq*C), cp, q, k, v, km, B, Tq, Tk, NH, HS)
							CrossAttentionBackward(wq, wk, wv, dout, q, k, v, cp, km, B, Tq, Tk, NH, HS)
							testutil.AssertClose(t, "dq vs CrossAttentionBackward", dq, wq, 2e-5, 1e-4)
							testutil.AssertClose(t, "dk vs CrossAttentionBackward", dk, wk, 2e-5, 1e-4)
							testutil.AssertClose(t, "dv vs CrossAttentionBackward", dv, wv, 2e-5, 1e-4)
						}
					})
				}
			}
		}
	}
}

// segments are UniLM running sums of token types for B = 2 rows of T
// tokens: type 0 then type 1 from T/3 (and from 2T/3 in the second row),
// every type 0 (bidirectional), alternating types, strictly increasing
// sums (the causal mask), and sums that go down (no running sum does; the
// kernel's count of visible keys takes another branch).
func segments(T int) map[string][]int32 {
	var split, zero, alt, inc, wild []int32 = make([]int32, 2*T), make([]int32, 2*T), make([]int32, 2*T), make([]int32, 2*T), make([]int32, 2*T)
	for b := 0; b < 2; b++ {
		var cs, ca int32
		for j := 0; j < T; j++ {
			if (b == 0 && j >= T/3) || (b == 1 && j >= 2*T/3) {
				cs++
			}
			ca += int32(j % 2)
			split[b*T+j], alt[b*T+j] = cs, ca
			inc[b*T+j] = int32(j)
			wild[b*T+j] = int32((j*7 + b) % 5)
		}
	}
	return map[string][]int32{"split": split, "zero": zero, "alt": alt, "inc": inc, "wild": wild}
}

// TestFlashSegmentAttention: the fused kernel under the UniLM mask against
// the naive twins (forward, lse and backward) for every segment pattern and
// key mask; with dropout, all-zero sums equal the bidirectional fused pass
// and strictly increasing ones the causal pass (both tested against
// AttentionForward's dropout), element for element.
func TestFlashSegmentAttention(t *testing.T) {
	r := testutil.Rand(72)
	B, NH := 2, 2
	for _, T := range []int{1, 7, 65, 300, 600} {
		for _, HS := range []int{16, 64} {
			C := NH * HS
			q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
			dout := testutil.RandN(r, B*T*C, 1)
			for sname, seg := range segments(T) {
				for kname, km := range keyMasks(T) {
					t.Run(fmt.Sprintf("T%d_HS%d_%s_%s", T, HS, sname, kname), func(t *testing.T) {
						got, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
						FlashSegmentAttentionForward(got, lse, q, k, v, km, seg, Dropout{}, B, T, NH, HS)
						want, probs, wl := make([]float32, B*T*C), make([]float32, B*NH*T*T), make([]float64, B*NH*T)
						flashForwardNaive(want, probs, wl, q, k, v, km, flashMask{seg: seg}, B, T, T, NH, HS)
						testutil.AssertClose(t, "out vs naive", got, want, 2e-6, 2e-5)
						checkLSE(t, lse, wl)
						if T > 300 {
							return // the naive backward is slow
						}
						dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
						FlashSegmentAttentionBackward(dq, dk, dv, dout, q, k, v, got, lse, km, seg, Dropout{}, B, T, NH, HS)
						wq, wk, wv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
						flashBackwardNaive(wq, wk, wv, dout, q, k, v, probs, wl, B, T, T, NH, HS)
						testutil.AssertClose(t, "dq vs naive", dq, wq, 2e-5, 1e-4)
						testutil.AssertClose(t, "dk vs naive", dk, wk, 2e-5, 1e-4)
						testutil.AssertClose(t, "dv vs naive", dv, wv, 2e-5, 1e-4)
					})
				}
				if sname != "zero" && sname != "inc" {
					continue
				}
				t.Run(fmt.Sprintf("T%d_HS%d_%s_dropout", T, HS, sname), func(t *testing.T) {
					drop := Dropout{P: 0.3, Seed: 9}
					km := keyMasks(T)["scatter"]
					causal := sname == "inc"
					got, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
					want, wlse := make([]float32, B*T*C), make([]float32, B*NH*T)
					FlashSegmentAttentionForward(got, lse, q, k, v, km, seg, drop, B, T, NH, HS)
					FlashAttentionForward(want, wlse, q, k, v, km, causal, drop, B, T, NH, HS)
					// all-zero sums: the same tiles and sums as the bidirectional
					// pass, bit for bit; increasing ones: the causal pass skips the
					// tiles past the diagonal, so its sums end elsewhere
					atol, rtol, gtol, grtol := 0.0, 0.0, 0.0, 0.0
					if causal {
						atol, rtol, gtol, grtol = 2e-6, 2e-5, 2e-5, 1e-4
					}
					testutil.AssertClose(t, "out", got, want, atol, rtol)
					for i := range lse {
						if d := math.Abs(float64(lse[i] - wlse[i])); lse[i] != wlse[i] && !(causal && d <= 1e-5*math.Max(1, math.Abs(float64(wlse[i])))) {
							t.Fatalf("lse[%d] = %v, the plain pass %v", i, lse[i], wlse[i])
						}
					}
					dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
					wq, wk, wv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
					FlashSegmentAttentionBackward(dq, dk, dv, dout, q, k, v, got, lse, km, seg, drop, B, T, NH, HS)
					FlashAttentionBackward(wq, wk, wv, dout, q, k, v, want, wlse, km, causal, drop, B, T, NH, HS)
					testutil.AssertClose(t, "dq", dq, wq, gtol, grtol)
					testutil.AssertClose(t, "dk", dk, wk, gtol, grtol)
					testutil.AssertClose(t, "dv", dv, wv, gtol, grtol)
				})
			}
		}
	}
}

// TestFlashCrossSegmentGradCheck checks the cross and segment backward
// passes against float64 finite differences of their forwards on tiny
// shapes (Tq 3 over Tk 5, with the causal mask also Tq 5 over Tk 3, whose
// first queries see no key; T 5 under every segment pattern).
func TestFlashCrossSegmentGradCheck(t *testing.T) {
	r := testutil.Rand(73)
	B, NH, HS := 2, 2, 3
	C := NH * HS
	for _, sh := range [][2]int{{3, 5}, {5, 3}} {
		Tq, Tk := sh[0], sh[1]
		q, k, v := testutil.RandN(r, B*Tq*C, 1), testutil.RandN(r, B*Tk*C, 1), testutil.RandN(r, B*Tk*C, 1)
		proj := testutil.RandN(r, B*Tq*C, 1)
		for name, km := range keyMasks(Tk) {
			for _, causal := range []bool{false, true} {
				t.Run(fmt.Sprintf("cross_Tq%d_Tk%d_%s_causal%v", Tq, Tk, name, causal), func(t *testing.T) {
					out, lse := make([]float32, B*Tq*C), make([]float32, B*NH*Tq)
					loss := func() float64 {
						FlashCrossAttentionForward(out, lse, q, k, v, km, causal, B, Tq, Tk, NH, HS)
						return testutil.Dot(out, proj)
					}
					loss()
					dq, dk, dv := make([]float32, B*Tq*C), make([]float32, B*Tk*C), make([]float32, B*Tk*C)
					FlashCrossAttentionBackward(dq, dk, dv, proj, q, k, v, out, lse, km, causal, B, Tq, Tk, NH, HS)
					testutil.GradCheck(t, "dq", q, dq, loss, 1e-2, 2e-3)
					testutil.GradCheck(t, "dk", k, dk, loss, 1e-2, 2e-3)
					testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
				})
			}
		}
	}
	T := 5
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	proj := testutil.RandN(r, B*T*C, 1)
	for sname, seg := range segments(T) {
		for kname, km := range keyMasks(T) {
			t.Run(fmt.Sprintf("segment_%s_%s", sname, kname), func(t *testing.T) {
				out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
				loss := func() float64 {
					FlashSegmentAttentionForward(out, lse, q, k, v, km, seg, Dropout{}, B, T, NH, HS)
					return testutil.Dot(out, proj)
				}
				loss()
				dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
				FlashSegmentAttentionBackward(dq, dk, dv, proj, q, k, v, out, lse, km, seg, Dropout{}, B, T, NH, HS)
				testutil.GradCheck(t, "dq", q, dq, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dk", k, dk, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
			})
		}
	}
}
