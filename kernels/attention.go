package kernels

import (
	"math"

	"github.com/roformer-go/roformer/blas"
)

// AttentionForward is multi-head scaled dot-product attention over q, k, v
// that are already projected (and rotated by RoPE):
//
//	S = q_h·k_hᵀ / float32(√HS),  P = softmax(S + mask),  out_h = P·v_h
//
// for each row b and head h, where x_h is the HS-wide column block h of x.
// The mask follows HF exactly: key j is visible to query i when
// keyMask[b,j] == 1 and, if causal, j ≤ i. HF adds (1 − m)·float32_min to the
// scores, so masked keys get probability exactly 0, and a query that sees no
// key at all (a padded query of a left-padded row under the causal mask) gets
// scores that all round to float32_min: a uniform distribution over all T
// keys. This kernel reproduces both without adding huge numbers.
//
//	out     [B, T, C]   C = NH·HS; heads are column blocks
//	probs   [B, NH, T, T] the softmax, saved for the backward pass or for
//	        output; nil to use scratch space instead
//	q, k, v [B, T, C]
//	keyMask [B, T]  1 for a real token, 0 for padding; nil means all 1
//
// drop is HF's dropout on the attention probabilities (training only): out
// is then (P⊙mask)·v while probs keeps the undropped P. The factor of
// P[b,h,i,j] is drop.Scale(((b·NH+h)·T+i)·T+j), so rows r0… of a larger
// batch draw their masks there with drop.Offset = r0·NH·T·T.
func AttentionForward(out, probs, q, k, v, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	C := NH * HS
	scale := float32(math.Sqrt(float64(HS)))
	// Without saved probabilities (inference), queries are processed in
	// blocks of attnBlock rows: each row's softmax needs only its own scores,
	// so the result is the same while the scratch is attnBlock·T, not T·T
	// (a 1 × 4096 input needs 1 MB per worker instead of 64 MB).
	rows := T
	if probs == nil {
		rows = min(T, attnBlock)
	}
	parallelFor(B*NH, 1, func(lo, hi int) {
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
			var km []float32
			if keyMask != nil {
				km = keyMask[b*T : b*T+T]
			}
			for i0 := 0; i0 < T; i0 += rows {
				n := min(rows, T-i0)
				var P []float32
				if probs != nil {
					P = probs[bh*T*T : (bh+1)*T*T]
				} else {
					P = scratch[:n*T]
				}
				// S = q_h·k_hᵀ for queries i0 … i0+n−1, then /scale, mask and softmax row by row.
				blas.HeadSgemm(false, true, n, T, HS, 1, q[base+i0*C:], C, k[base:], C, 0, P, T)
				for i := 0; i < n; i++ {
					maskedSoftmaxRow(P[i*T:i*T+T], scale, km, causal, i0+i)
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

// attnBlock is the query-block size of inference attention.
const attnBlock = 64

// visible reports whether query i may see key j.
func visible(km []float32, causal bool, i, j int) bool {
	return (km == nil || km[j] != 0) && (!causal || j <= i)
}

// maskedSoftmaxRow turns one row of raw scores into probabilities in place:
// s/scale, then a softmax over the visible keys (float32, max-subtracted, as
// torch.softmax), zero for hidden ones, or uniform when none is visible.
// Hidden keys are set to −∞ before the maximum, so their exponential is 0;
// under the causal mask only the first i+1 keys are touched at all.
func maskedSoftmaxRow(row []float32, scale float32, km []float32, causal bool, i int) {
	T := len(row)
	n := T
	if causal {
		n = min(i+1, T)
	}
	head := row[:n]
	if km != nil {
		for j, m := range km[:n] {
			if m == 0 {
				head[j] = float32(math.Inf(-1))
			}
		}
	}
	mx := divMax(head, scale)
	if math.IsInf(float64(mx), -1) { // no visible key
		u := 1 / float32(T)
		for j := range row {
			row[j] = u
		}
		return
	}
	sum := expSubSum(head, mx)
	clear(row[n:])
	scaleVec(head, float32(1/sum))
}

// AttentionBackward differentiates AttentionForward, given the saved probs.
//
//	dq, dk, dv [B, T, C]  written (=)
//	dout       [B, T, C]
//	q, k, v    [B, T, C]
//	probs      [B, NH, T, T]
//	keyMask    [B, T] or nil
//	drop       the dropout of the forward pass
func AttentionBackward(dq, dk, dv, dout, q, k, v, probs, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	C := NH * HS
	scale := float32(math.Sqrt(float64(HS)))
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
			probsBackward(dP, dropped, dv[base:], dout[base:], v[base:], probs[bh*T*T:(bh+1)*T*T], rowMask(keyMask, b, T), causal, drop, bh*T*T, T, HS, C, scale)
			// S = q_h·k_hᵀ  ⇒  dq_h = dS·k_h, dk_h = dSᵀ·q_h
			blas.HeadSgemm(false, false, T, HS, T, 1, dP, T, k[base:], C, 0, dq[base:], C)
			blas.HeadSgemm(true, false, T, HS, T, 1, dP, T, q[base:], C, 0, dk[base:], C)
		}
	})
}

// probsBackward is the part of the attention backward pass that every score
// function shares, for one (row, head): with P the softmax of the scaled
// scores (undropped) and Pd = P⊙mask the probabilities the forward pass used,
//
//	out_h = Pd·v_h  ⇒  dv_h = Pdᵀ·dout_h (written), dPd = dout_h·v_hᵀ, dP = dPd⊙mask
//	P = softmax(S/scale) over visible keys  ⇒  dS = P⊙(dP − Σ_j dP⊙P)/scale
//
// and leaves dS in dP ([T, T]); a row that sees no key is constant (uniform)
// and gets 0. dropped is [T, T] scratch when drop is active; off is the flat
// index of this block in [B, NH, T, T] (the dropout stream); dv, dout and v
// start at the head's first column, with leading dimension C.
func probsBackward(dP, dropped, dv, dout, v, P, km []float32, causal bool, drop Dropout, off, T, HS, C int, scale float32) {
	blas.HeadSgemm(false, true, T, T, HS, 1, dout, C, v, C, 0, dP, T)
	Pd := P
	if drop.Active() {
		// One pass draws the mask once for both: Pd = P⊙mask, dP = dPd⊙mask.
		m := drop.mask()
		m.mul(dropped[:T*T], nil, off)
		for j, s := range dropped[:T*T] {
			dropped[j] = P[j] * s
			dP[j] *= s
		}
		Pd = dropped
	}
	blas.HeadSgemm(true, false, T, HS, T, 1, Pd, T, dout, C, 0, dv, C)
	for i := 0; i < T; i++ {
		p := P[i*T : i*T+T]
		d := dP[i*T : i*T+T]
		seen := false
		for j := range p {
			if visible(km, causal, i, j) {
				seen = true
				break
			}
		}
		if !seen {
			clear(d)
			continue
		}
		softmaxBackRow(d, p, dotVec(p, d), scale)
	}
}

// attentionForwardNaive is the reference twin of AttentionForward: plain
// loops, float64 sums, HF's additive float32_min mask taken literally.
func attentionForwardNaive(out, q, k, v, keyMask []float32, causal bool, B, T, NH, HS int) {
	C := NH * HS
	scale := float32(math.Sqrt(float64(HS)))
	s := make([]float32, T)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < T; i++ {
				for j := 0; j < T; j++ {
					dot := 0.0
					for c := 0; c < HS; c++ {
						dot += float64(q[b*T*C+i*C+h*HS+c]) * float64(k[b*T*C+j*C+h*HS+c])
					}
					m := float32(1)
					if keyMask != nil {
						m = keyMask[b*T+j]
					}
					if causal && j > i {
						m = 0
					}
					s[j] = float32(dot)/scale + (1-m)*(-math.MaxFloat32)
				}
				mx := s[0]
				for _, x := range s {
					mx = max(mx, x)
				}
				sum := 0.0
				e := make([]float64, T)
				for j, x := range s {
					e[j] = math.Exp(float64(x - mx))
					sum += e[j]
				}
				for c := 0; c < HS; c++ {
					acc := 0.0
					for j := 0; j < T; j++ {
						acc += e[j] / sum * float64(v[b*T*C+j*C+h*HS+c])
					}
					out[b*T*C+i*C+h*HS+c] = float32(acc)
				}
			}
		}
	}
}

// applyDrop sets dst = src⊙mask for the block that starts at flat index off
// of the dropout stream.
func applyDrop(dst, src []float32, drop Dropout, off int) {
	drop.mask().mul(dst, src[:len(dst)], off)
}
