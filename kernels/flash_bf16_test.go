package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

// checkBF16Attention compares the bf16 fused pass got (and its lse) with
// the naive twin on the operands rounded to bfloat16 (want, probs, wl from
// flashForwardNaive on roundBF16(q), roundBF16(k), roundBF16(v)). What is left
// between them is the rounding of each tile's probabilities to bfloat16
// (relative 2⁻⁸ each) and float32 sums, so every output element must lie
// within 2⁻⁸·Σ_j p_ij·|v_jc| (+1e-5) of want: a bound derived, not fitted.
// A query that sees no key takes the mean of the unrounded values, inside
// the same bound.
func checkBF16Attention(t *testing.T, got, lse, want, probs []float32, wl []float64, rv []float32, B, Tq, Tk, NH, HS int) {
	t.Helper()
	C := NH * HS
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < Tq; i++ {
				p := probs[((b*NH+h)*Tq+i)*Tk:][:Tk]
				for c := 0; c < HS; c++ {
					bound := 0.0
					for j, pj := range p {
						bound += float64(pj) * math.Abs(float64(rv[(b*Tk+j)*C+h*HS+c]))
					}
					bound = bound/256*1.01 + 1e-5
					idx := (b*Tq+i)*C + h*HS + c
					d := math.Abs(float64(got[idx]) - float64(want[idx]))
					if !(d <= bound) {
						t.Fatalf("out[b %d, h %d, i %d, c %d] = %v, naive on bf16 operands %v: |diff| %.3g > bound %.3g", b, h, i, c, got[idx], want[idx], d, bound)
					}
				}
			}
		}
	}
	checkLSE(t, lse, wl)
}

// TestFlashAttentionBF16 checks the bf16 fused forward against the naive
// twin on bfloat16-rounded operands (checkBF16Attention) for every mask of
// the float32 tests, lengths across the tile edges (192 queries, 512
// keys), and that it is not the float32 pass (the products do round).
func TestFlashAttentionBF16(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	r := testutil.Rand(91)
	B, NH := 2, 2
	for _, T := range []int{1, 7, 200, 600} {
		for _, HS := range []int{16, 64} {
			C := NH * HS
			q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
			rq, rk, rv := roundBF16(q), roundBF16(k), roundBF16(v)
			for name, m := range flashMasks(T) {
				t.Run(fmt.Sprintf("T%d_HS%d_%s", T, HS, name), func(t *testing.T) {
					got, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
					FlashAttentionForwardBF16(got, lse, q, k, v, m.km, m.causal, Dropout{}, B, T, NH, HS)
					want, probs, wl := make([]float32, B*T*C), make([]float32, B*NH*T*T), make([]float64, B*NH*T)
					flashForwardNaive(want, probs, wl, rq, rk, rv, m.km, flashMask{causal: m.causal}, B, T, T, NH, HS)
					checkBF16Attention(t, got, lse, want, probs, wl, rv, B, T, T, NH, HS)
					// Without lse, the same output.
					again := make([]float32, B*T*C)
					FlashAttentionForwardBF16(again, nil, q, k, v, m.km, m.causal, Dropout{}, B, T, NH, HS)
					for i := range got {
						if got[i] != again[i] {
							t.Fatalf("out[%d] %v without lse, %v with", i, again[i], got[i])
						}
					}
					if T >= 7 && m.km == nil {
						fp := make([]float32, B*T*C)
						FlashAttentionForward(fp, nil, q, k, v, m.km, m.causal, Dropout{}, B, T, NH, HS)
						diff := 0.0
						for i := range fp {
							diff = max(diff, math.Abs(float64(fp[i]-got[i])))
						}
						if diff == 0 {
							t.Error("the bf16 pass equals the float32 one: its products did not round")
						}
					}
				})
			}
		}
	}
}

// TestFlashSegmentAttentionBF16 is TestFlashAttentionBF16 under the UniLM
// mask, for every segment pattern and key mask of the float32 test.
func TestFlashSegmentAttentionBF16(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	r := testutil.Rand(92)
	B, NH := 2, 2
	for _, T := range []int{1, 7, 600} {
		HS := 32
		C := NH * HS
		q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
		rq, rk, rv := roundBF16(q), roundBF16(k), roundBF16(v)
		for sname, seg := range segments(T) {
			for kname, km := range keyMasks(T) {
				t.Run(fmt.Sprintf("T%d_%s_%s", T, sname, kname), func(t *testing.T) {
					got, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
					FlashSegmentAttentionForwardBF16(got, lse, q, k, v, km, seg, Dropout{}, B, T, NH, HS)
					want, probs, wl := make([]float32, B*T*C), make([]float32, B*NH*T*T), make([]float64, B*NH*T)
					flashForwardNaive(want, probs, wl, rq, rk, rv, km, flashMask{seg: seg}, B, T, T, NH, HS)
					checkBF16Attention(t, got, lse, want, probs, wl, rv, B, T, T, NH, HS)
				})
			}
		}
	}
}

// TestFlashAttentionBackwardBF16 checks the bf16 fused backward against
// the float32 one on operands bfloat16 holds exactly (q, k, v and dout
// rounded; the same out and lse): then q·kᵀ and dout·vᵀ are exact in
// either, and what is left is the rounding of the tile's probabilities P
// (in dv = Pᵀ·dout) and of dS = P⊙(dP − D)/√HS (in dq = dS·k, dk = dSᵀ·q),
// relative 2⁻⁸ each. So every element lies within 2⁻⁸ of the sum of the
// magnitudes of its terms, computed here from the naive probabilities
// (+1e-5 and 1e-5 relative for float32 sums): a bound derived, not
// fitted. With dropout, where the bound would need the masks, the
// gradients stay within 1% (relative norm) of the float32 ones.
func TestFlashAttentionBackwardBF16(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	r := testutil.Rand(93)
	B, NH := 2, 2
	for _, T := range []int{1, 7, 130, 300} {
		for _, HS := range []int{16, 64} {
			C := NH * HS
			q, k, v := roundBF16(testutil.RandN(r, B*T*C, 1)), roundBF16(testutil.RandN(r, B*T*C, 1)), roundBF16(testutil.RandN(r, B*T*C, 1))
			dout := roundBF16(testutil.RandN(r, B*T*C, 1))
			for name, m := range flashMasks(T) {
				t.Run(fmt.Sprintf("T%d_HS%d_%s", T, HS, name), func(t *testing.T) {
					out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
					FlashAttentionForward(out, lse, q, k, v, m.km, m.causal, Dropout{}, B, T, NH, HS)
					grads := func(bf16 bool, drop Dropout) [3][]float32 {
						g := [3][]float32{make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)}
						if bf16 {
							FlashAttentionBackwardBF16(g[0], g[1], g[2], dout, q, k, v, out, lse, m.km, m.causal, drop, B, T, NH, HS)
						} else {
							FlashAttentionBackward(g[0], g[1], g[2], dout, q, k, v, out, lse, m.km, m.causal, drop, B, T, NH, HS)
						}
						return g
					}
					got, want := grads(true, Dropout{}), grads(false, Dropout{})
					probs := make([]float32, B*NH*T*T)
					flashForwardNaive(make([]float32, B*T*C), probs, make([]float64, B*NH*T), q, k, v, m.km, flashMask{causal: m.causal}, B, T, T, NH, HS)
					checkBF16Grads(t, got, want, gradBoundsBF16(dout, out, probs, q, k, v, B, T, NH, HS))
					if T < 7 {
						return
					}
					if diff := maxAbsDiff(got[0], want[0]); diff == 0 {
						t.Error("the bf16 dq equals the float32 one: its products did not round")
					}
					drop := Dropout{P: 0.2, Seed: 5}
					FlashAttentionForward(out, lse, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
					checkRelNorm(t, "dropout", grads(true, drop), grads(false, drop), 0.01)
				})
			}
		}
	}
}

// gradBoundsBF16 is the bound on |bf16 − float32| of each element of dq,
// dk and dv for operands that bfloat16 holds exactly: 2⁻⁸ (the rounding
// of P and dS, relative) times the sum of the magnitudes of its terms,
// from the naive probabilities: Σ_j |dS_ij|·|k_j|, Σ_i |dS_ij|·|q_i| and
// Σ_i p_ij·|dout_i|, with dS_ij = p_ij·|dP_ij − D_i|/√HS.
func gradBoundsBF16(dout, out, probs, q, k, v []float32, B, T, NH, HS int) [3][]float64 {
	C := NH * HS
	bounds := [3][]float64{make([]float64, B*T*C), make([]float64, B*T*C), make([]float64, B*T*C)}
	sq := math.Sqrt(float64(HS))
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < T; i++ {
				ri := (b*T+i)*C + h*HS
				var D float64
				for c := 0; c < HS; c++ {
					D += float64(dout[ri+c]) * float64(out[ri+c])
				}
				for j := 0; j < T; j++ {
					p := float64(probs[((b*NH+h)*T+i)*T+j])
					if p == 0 {
						continue
					}
					rj := (b*T+j)*C + h*HS
					var dP float64
					for c := 0; c < HS; c++ {
						dP += float64(dout[ri+c]) * float64(v[rj+c])
					}
					ds := p * math.Abs(dP-D) / sq
					for c := 0; c < HS; c++ {
						bounds[0][ri+c] += ds * math.Abs(float64(k[rj+c]))
						bounds[1][rj+c] += ds * math.Abs(float64(q[ri+c]))
						bounds[2][rj+c] += p * math.Abs(float64(dout[ri+c]))
					}
				}
			}
		}
	}
	return bounds
}

// checkBF16Grads asserts every element of the bf16 gradients got within
// bounds/256 (+1% of it, 1e-5 and 1e-5 relative for float32 sums) of the
// float32 ones.
func checkBF16Grads(t *testing.T, got, want [3][]float32, bounds [3][]float64) {
	t.Helper()
	for gi, name := range []string{"dq", "dk", "dv"} {
		for i := range got[gi] {
			d := math.Abs(float64(got[gi][i]) - float64(want[gi][i]))
			if bound := bounds[gi][i]/256*1.01 + 1e-5 + 1e-5*math.Abs(float64(want[gi][i])); !(d <= bound) {
				t.Fatalf("%s[%d] = %v, float32 %v: |diff| %.3g > bound %.3g", name, i, got[gi][i], want[gi][i], d, bound)
			}
		}
	}
}

// checkRelNorm asserts ‖got − want‖/‖want‖ ≤ tol for each gradient.
func checkRelNorm(t *testing.T, what string, got, want [3][]float32, tol float64) {
	t.Helper()
	for gi, name := range []string{"dq", "dk", "dv"} {
		var num, den float64
		for i := range got[gi] {
			e := float64(got[gi][i]) - float64(want[gi][i])
			num += e * e
			den += float64(want[gi][i]) * float64(want[gi][i])
		}
		if rel := math.Sqrt(num / den); !(rel <= tol) {
			t.Errorf("%s: %s relative error %.3g > %g", what, name, rel, tol)
		}
	}
}

// The per-head attention of training below the fused kernel's lengths, in
// bfloat16: on operands bfloat16 holds exactly, the forward output within
// checkBF16Attention's bound of the float32 kernel's (only P is rounded)
// and the probabilities it saves equal to float32 rounding; the backward
// within gradBoundsBF16's bound of AttentionBackward's; with dropout
// within 1% (relative norm); and not the float32 results.
func TestAttentionBF16(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	r := testutil.Rand(95)
	B, NH := 2, 2
	for _, T := range []int{1, 7, 70, 130} {
		for _, HS := range []int{16, 64} {
			C := NH * HS
			q, k, v := roundBF16(testutil.RandN(r, B*T*C, 1)), roundBF16(testutil.RandN(r, B*T*C, 1)), roundBF16(testutil.RandN(r, B*T*C, 1))
			dout := roundBF16(testutil.RandN(r, B*T*C, 1))
			for name, m := range flashMasks(T) {
				t.Run(fmt.Sprintf("T%d_HS%d_%s", T, HS, name), func(t *testing.T) {
					fwd := func(bf16 bool, drop Dropout) (out, probs []float32) {
						out, probs = make([]float32, B*T*C), make([]float32, B*NH*T*T)
						if bf16 {
							AttentionForwardBF16(out, probs, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						} else {
							AttentionForward(out, probs, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						}
						return out, probs
					}
					got, gp := fwd(true, Dropout{})
					want, wp := fwd(false, Dropout{})
					testutil.AssertClose(t, "probs", gp, wp, 1e-5, 1e-5)
					for i := range got {
						b, c := i/(T*C), i%C
						h, hc := c/HS, c%HS
						ti := i / C % T
						bound := 0.0
						for j := 0; j < T; j++ {
							bound += float64(wp[((b*NH+h)*T+ti)*T+j]) * math.Abs(float64(v[(b*T+j)*C+h*HS+hc]))
						}
						if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= bound/256*1.01+1e-5) {
							t.Fatalf("out[%d] = %v, float32 %v: |diff| %.3g > %.3g", i, got[i], want[i], d, bound/256*1.01+1e-5)
						}
					}
					grads := func(bf16 bool, probs []float32, drop Dropout) [3][]float32 {
						g := [3][]float32{make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)}
						if bf16 {
							AttentionBackwardBF16(g[0], g[1], g[2], dout, q, k, v, probs, m.km, m.causal, drop, B, T, NH, HS)
						} else {
							AttentionBackward(g[0], g[1], g[2], dout, q, k, v, probs, m.km, m.causal, drop, B, T, NH, HS)
						}
						return g
					}
					gg, wg := grads(true, wp, Dropout{}), grads(false, wp, Dropout{})
					checkBF16Grads(t, gg, wg, gradBoundsBF16(dout, want, wp, q, k, v, B, T, NH, HS))
					if T < 7 {
						return
					}
					if maxAbsDiff(got, want) == 0 || maxAbsDiff(gg[0], wg[0]) == 0 {
						t.Error("the bf16 pass equals the float32 one: its products did not round")
					}
					drop := Dropout{P: 0.2, Seed: 5}
					gd, _ := fwd(true, drop)
					wd, wdp := fwd(false, drop)
					checkRelNorm(t, "dropout forward", [3][]float32{gd, gd, gd}, [3][]float32{wd, wd, wd}, 0.01)
					checkRelNorm(t, "dropout", grads(true, wdp, drop), grads(false, wdp, drop), 0.01)
				})
			}
		}
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}
