package kernels

import (
	"math"

	"github.com/roformer-go/roformer/blas"
)

// CrossAttentionForward is multi-head scaled dot-product attention of Tq
// queries over Tk keys and values from another sequence (an encoder-decoder's
// cross-attention, Vaswani et al. 2017 §3.2.3), or over a key/value cache:
//
//	S = q_h·k_hᵀ / float32(√HS),  P = softmax(S + mask),  out_h = P·v_h
//
// for each row b and head h. Key j is visible when keyMask[b,j] == 1; a query
// that sees no key gets a uniform distribution, as AttentionForward. There is
// no causal mask and no dropout.
//
//	out     [B, Tq, C]  C = NH·HS; heads are column blocks
//	probs   [B, NH, Tq, Tk] the softmax, saved for the backward pass; nil in inference
//	q       [B, Tq, C]
//	k, v    [B, Tk, C]
//	keyMask [B, Tk]  1 for a real token, 0 for padding; nil means all 1
func CrossAttentionForward(out, probs, q, k, v, keyMask []float32, B, Tq, Tk, NH, HS int) {
	C := NH * HS
	scale := float32(math.Sqrt(float64(HS)))
	parallelFor(B*NH, 1, func(lo, hi int) {
		var scratch []float32
		if probs == nil {
			p := getScratch(Tq * Tk)
			defer putScratch(p)
			scratch = *p
		}
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			qb, kb := b*Tq*C+h*HS, b*Tk*C+h*HS
			P := scratch
			if probs != nil {
				P = probs[bh*Tq*Tk : (bh+1)*Tq*Tk]
			}
			blas.HeadSgemm(false, true, Tq, Tk, HS, 1, q[qb:], C, k[kb:], C, 0, P, Tk)
			km := rowMask(keyMask, b, Tk)
			for i := 0; i < Tq; i++ {
				maskedSoftmaxRow(P[i*Tk:i*Tk+Tk], scale, km, false, i)
			}
			blas.HeadSgemm(false, false, Tq, HS, Tk, 1, P, Tk, v[kb:], C, 0, out[qb:], C)
		}
	})
}

// CrossAttentionBackward differentiates CrossAttentionForward, given the
// saved probs.
//
//	dq      [B, Tq, C]  written (=)
//	dk, dv  [B, Tk, C]  written (=)
//	dout    [B, Tq, C]
//	q       [B, Tq, C]
//	k, v    [B, Tk, C]
//	probs   [B, NH, Tq, Tk]
//	keyMask [B, Tk] or nil
func CrossAttentionBackward(dq, dk, dv, dout, q, k, v, probs, keyMask []float32, B, Tq, Tk, NH, HS int) {
	C := NH * HS
	scale := float32(math.Sqrt(float64(HS)))
	parallelFor(B*NH, 1, func(lo, hi int) {
		pdP := getScratch(Tq * Tk)
		defer putScratch(pdP)
		dP := (*pdP)[:Tq*Tk]
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			qb, kb := b*Tq*C+h*HS, b*Tk*C+h*HS
			P := probs[bh*Tq*Tk : (bh+1)*Tq*Tk]
			// out_h = P·v_h  ⇒  dv_h = Pᵀ·dout_h, dP = dout_h·v_hᵀ
			blas.HeadSgemm(true, false, Tk, HS, Tq, 1, P, Tk, dout[qb:], C, 0, dv[kb:], C)
			blas.HeadSgemm(false, true, Tq, Tk, HS, 1, dout[qb:], C, v[kb:], C, 0, dP, Tk)
			// P = softmax(S/scale) over visible keys  ⇒  dS = P⊙(dP − Σ_j dP⊙P)/scale
			km := rowMask(keyMask, b, Tk)
			seen := km == nil
			for j := 0; !seen && j < Tk; j++ {
				seen = km[j] != 0
			}
			for i := 0; i < Tq; i++ {
				d, p := dP[i*Tk:i*Tk+Tk], P[i*Tk:i*Tk+Tk]
				if !seen { // uniform: constant in S
					clear(d)
					continue
				}
				softmaxBackRow(d, p, dotVec(p, d), scale)
			}
			// S = q_h·k_hᵀ  ⇒  dq_h = dS·k_h, dk_h = dSᵀ·q_h
			blas.HeadSgemm(false, false, Tq, HS, Tk, 1, dP, Tk, k[kb:], C, 0, dq[qb:], C)
			blas.HeadSgemm(true, false, Tk, HS, Tq, 1, dP, Tk, q[qb:], C, 0, dk[kb:], C)
		}
	})
}

// crossAttentionForwardNaive is the reference twin of CrossAttentionForward:
// plain loops, float64 sums, HF's additive float32_min mask taken literally.
func crossAttentionForwardNaive(out, q, k, v, keyMask []float32, B, Tq, Tk, NH, HS int) {
	C := NH * HS
	scale := math.Sqrt(float64(HS))
	s := make([]float64, Tk)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < Tq; i++ {
				mx := math.Inf(-1)
				for j := 0; j < Tk; j++ {
					dot := 0.0
					for c := 0; c < HS; c++ {
						dot += float64(q[(b*Tq+i)*C+h*HS+c]) * float64(k[(b*Tk+j)*C+h*HS+c])
					}
					m := 1.0
					if keyMask != nil {
						m = float64(keyMask[b*Tk+j])
					}
					s[j] = dot/scale + (1-m)*(-math.MaxFloat32)
					mx = math.Max(mx, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for c := 0; c < HS; c++ {
					acc := 0.0
					for j := 0; j < Tk; j++ {
						acc += s[j] / sum * float64(v[(b*Tk+j)*C+h*HS+c])
					}
					out[(b*Tq+i)*C+h*HS+c] = float32(acc)
				}
			}
		}
	}
}
