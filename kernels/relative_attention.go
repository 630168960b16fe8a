package kernels

import (
	"math"

	"github.com/roformer-go/roformer/blas"
)

// RelativeAttentionForward is AttentionForward with the relative key
// embeddings of Shaw, Uszkoreit and Vaswani ("Self-Attention with Relative
// Position Representations", NAACL 2018, eq. 4–5 with a^K only):
//
//	S_ij = q_i·(k_j + a_{clip(j−i, K)}) / float32(√HS),   clip(x, K) = max(−K, min(K, x))
//
// then the masked softmax and P·v exactly as AttentionForward (same mask
// semantics, same dropout). relK holds the 2K+1 learned vectors a_{−K} … a_K,
// shared by every head (Shaw §3.1), per layer. The relative term is formed
// as R = q_h·relKᵀ [T, 2K+1] and gathered, so it costs O(T·K·HS), not
// O(T²·HS).
//
//	out     [B, T, C]    C = NH·HS
//	probs   [B, NH, T, T] saved for backward; nil to use scratch (inference)
//	q, k, v [B, T, C]
//	relK    [2K+1, HS]   row r is a_{r−K}
//	keyMask [B, T] or nil
func RelativeAttentionForward(out, probs, q, k, v, relK, keyMask []float32, causal bool, drop Dropout, K, B, T, NH, HS int) {
	C := NH * HS
	W := 2*K + 1
	scale := float32(math.Sqrt(float64(HS)))
	// As in AttentionForward, inference (probs nil) takes the queries in
	// blocks of attnBlock rows, so its scratch is attnBlock·T, not T·T.
	rows := T
	if probs == nil {
		rows = min(T, attnBlock)
	}
	parallelFor(B*NH, 1, func(lo, hi int) {
		pR := getScratch(rows * W)
		defer putScratch(pR)
		R := *pR
		var scratch, dropped []float32
		if probs == nil {
			p := getScratch(rows * T)
			defer putScratch(p)
			scratch = *p
		}
		if drop.Active() {
			p := getScratch(rows * T)
			defer putScratch(p)
			dropped = *p
		}
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			base := b*T*C + h*HS
			for i0 := 0; i0 < T; i0 += rows {
				n := min(rows, T-i0)
				P := scratch[:min(len(scratch), n*T)]
				if probs != nil {
					P = probs[bh*T*T : (bh+1)*T*T]
				}
				// S = q_h·k_hᵀ + gather(q_h·relKᵀ) for queries i0 … i0+n−1,
				// then /scale, mask, softmax.
				blas.HeadSgemm(false, true, n, T, HS, 1, q[base+i0*C:], C, k[base:], C, 0, P, T)
				blas.HeadSgemm(false, true, n, W, HS, 1, q[base+i0*C:], C, relK, HS, 0, R, W)
				for r := 0; r < n; r++ {
					i := i0 + r
					row, rr := P[r*T:r*T+T], R[r*W:r*W+W]
					for j := range row {
						row[j] += rr[clipDistance(j-i, K)+K]
					}
					maskedSoftmaxRow(row, scale, rowMask(keyMask, b, T), causal, i)
				}
				if drop.Active() {
					applyDrop(dropped[:n*T], P, drop, bh*T*T+i0*T)
					P = dropped[:n*T]
				}
				blas.HeadSgemm(false, false, n, HS, T, 1, P, T, v[base:], C, 0, out[base+i0*C:], C)
			}
		}
	})
}

// clipDistance is Shaw et al.'s clip(x, K) = max(−K, min(K, x)).
func clipDistance(x, K int) int { return max(-K, min(K, x)) }

// RelativeAttentionBackward differentiates RelativeAttentionForward, given
// the saved probs. With dS the gradient of the scores (after the softmax
// backward, divided by the scale) and G[i, r] = Σ_{j: clip(j−i)+K = r} dS_ij:
//
//	dq_h = dS·k_h + G·relK,   dk_h = dSᵀ·q_h,   drelK += Σ_{b,h} Gᵀ·q_h
//
//	dq, dk, dv [B, T, C]  written (=)
//	drelK      [2K+1, HS] accumulated (+=): a parameter gradient, summed
//	           over rows and heads in a fixed order
//	dout       [B, T, C]
//	probs      [B, NH, T, T]
func RelativeAttentionBackward(dq, dk, dv, drelK, dout, q, k, v, relK, probs, keyMask []float32, causal bool, drop Dropout, K, B, T, NH, HS int) {
	C := NH * HS
	W := 2*K + 1
	scale := float32(math.Sqrt(float64(HS)))
	G := make([]float32, B*NH*T*W)
	parallelFor(B*NH, 1, func(lo, hi int) {
		pdP := getScratch(T * T)
		defer putScratch(pdP)
		dP := *pdP
		var dropped []float32
		if drop.Active() {
			p := getScratch(T * T)
			defer putScratch(p)
			dropped = *p
		}
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			base := b*T*C + h*HS
			probsBackward(tileMath{}, dP, dropped, nil, dv[base:], span(dout, nil, base, C), span(v, nil, base, C), probs[bh*T*T:(bh+1)*T*T], rowMask(keyMask, b, T), causal, drop, bh*T*T, T, HS, C, scale)
			// S_ij gets R_i,clip(j−i) added  ⇒  G_i,r = Σ_{j: clip(j−i) = r} dS_ij
			g := G[bh*T*W : (bh+1)*T*W]
			for i := 0; i < T; i++ {
				d, gi := dP[i*T:i*T+T], g[i*W:i*W+W]
				for j, dj := range d {
					gi[clipDistance(j-i, K)+K] += dj
				}
			}
			// S = q_h·k_hᵀ + gather(q_h·relKᵀ)  ⇒  dq_h = dS·k_h + G·relK, dk_h = dSᵀ·q_h
			blas.HeadSgemm(false, false, T, HS, T, 1, dP, T, k[base:], C, 0, dq[base:], C)
			blas.HeadSgemm(false, false, T, HS, W, 1, g, W, relK, HS, 1, dq[base:], C)
			blas.HeadSgemm(true, false, T, HS, T, 1, dP, T, q[base:], C, 0, dk[base:], C)
		}
	})
	// R = q_h·relKᵀ  ⇒  drelK += Gᵀ·q_h, serially in (b, h) order.
	for bh := 0; bh < B*NH; bh++ {
		b, h := bh/NH, bh%NH
		blas.HeadSgemm(true, false, W, HS, T, 1, G[bh*T*W:], W, q[b*T*C+h*HS:], C, 1, drelK, HS)
	}
}

// relativeAttentionNaive is the reference twin of RelativeAttentionForward:
// plain loops in float64, HF's additive float32_min mask taken literally.
func relativeAttentionNaive(out, q, k, v, relK, keyMask []float32, causal bool, K, B, T, NH, HS int) {
	C := NH * HS
	scale := math.Sqrt(float64(HS))
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < T; i++ {
				s := make([]float64, T)
				mx := math.Inf(-1)
				for j := 0; j < T; j++ {
					r := clipDistance(j-i, K) + K
					dot := 0.0
					for c := 0; c < HS; c++ {
						qc := float64(q[b*T*C+i*C+h*HS+c])
						dot += qc * (float64(k[b*T*C+j*C+h*HS+c]) + float64(relK[r*HS+c]))
					}
					m := 1.0
					if keyMask != nil {
						m = float64(keyMask[b*T+j])
					}
					if causal && j > i {
						m = 0
					}
					s[j] = float64(float32(dot/scale) + float32(1-m)*(-math.MaxFloat32))
					mx = max(mx, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for c := 0; c < HS; c++ {
					acc := 0.0
					for j := 0; j < T; j++ {
						acc += s[j] / sum * float64(v[b*T*C+j*C+h*HS+c])
					}
					out[b*T*C+i*C+h*HS+c] = float32(acc)
				}
			}
		}
	}
}
