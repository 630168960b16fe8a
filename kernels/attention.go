package kernels

import "math"

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
	attentionForward(tileMath{}, out, probs, q, k, v, keyMask, causal, drop, B, T, NH, HS)
}

// AttentionForwardBF16 is AttentionForward with its two products per head,
// q·kᵀ and P·v, in bfloat16 with float32 accumulation (blas.GemmBF16: q,
// k and v rounded once for the call, each head's P after its softmax), as
// FlashAttentionForwardBF16 does; the softmax, the masks and probs stay
// float32 (probs holds the float32 P, not its rounding). It needs what
// FlashAttentionForwardBF16 needs.
func AttentionForwardBF16(out, probs, q, k, v, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	attentionForward(tileMath{bf16: true}, out, probs, q, k, v, keyMask, causal, drop, B, T, NH, HS)
}

func attentionForward(tm tileMath, out, probs, q, k, v, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	C := NH * HS
	pq, q16 := tm.rounded(q, B*T, C)
	pk, k16 := tm.rounded(k, B*T, C)
	pv, v16 := tm.rounded(v, B*T, C)
	defer release(pq, pk, pv)
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
		var p16 []uint16 // bfloat16: the block's P
		if tm.bf16 {
			p := getScratch((rows*T + 1) / 2)
			defer putScratch(p)
			p16 = BF16Buffer(*p)
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
				tm.mul(false, true, n, T, HS, span(q, q16, base+i0*C, C), span(k, k16, base, C), 0, P, T)
				for i := 0; i < n; i++ {
					maskedSoftmaxRow(P[i*T:i*T+T], scale, km, causal, i0+i)
				}
				if drop.Active() {
					applyDrop(dropped[:n*T], P, drop, bh*T*T+i0*T)
					P = dropped[:n*T]
				}
				tm.mul(false, false, n, HS, T, tm.tile(P, T, p16), span(v, v16, base, C), 0, out[base+i0*C:], C)
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
	attentionBackward(tileMath{}, dq, dk, dv, dout, q, k, v, probs, keyMask, causal, drop, B, T, NH, HS)
}

// AttentionBackwardBF16 differentiates AttentionForwardBF16 (the same
// causal and drop): its four products per head (dout·vᵀ, Pᵀ·dout, dS·k,
// dSᵀ·q) in bfloat16 with float32 accumulation, q, k, v and dout rounded
// once for the call, P and dS per head; dS and the gradients stay float32.
func AttentionBackwardBF16(dq, dk, dv, dout, q, k, v, probs, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	attentionBackward(tileMath{bf16: true}, dq, dk, dv, dout, q, k, v, probs, keyMask, causal, drop, B, T, NH, HS)
}

func attentionBackward(tm tileMath, dq, dk, dv, dout, q, k, v, probs, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	C := NH * HS
	scale := float32(math.Sqrt(float64(HS)))
	pq, q16 := tm.rounded(q, B*T, C)
	pk, k16 := tm.rounded(k, B*T, C)
	pv, v16 := tm.rounded(v, B*T, C)
	pd, d16 := tm.rounded(dout, B*T, C)
	defer release(pq, pk, pv, pd)
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
		var h16 []uint16 // bfloat16: a head's P, then its dS
		if tm.bf16 {
			p := getScratch((T*T + 1) / 2)
			defer putScratch(p)
			h16 = BF16Buffer(*p)
		}
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			base := b*T*C + h*HS
			probsBackward(tm, dP, dropped, h16, dv[base:], span(dout, d16, base, C), span(v, v16, base, C), probs[bh*T*T:(bh+1)*T*T], rowMask(keyMask, b, T), causal, drop, bh*T*T, T, HS, C, scale)
			// S = q_h·k_hᵀ  ⇒  dq_h = dS·k_h, dk_h = dSᵀ·q_h
			ds := tm.tile(dP[:T*T], T, h16)
			tm.mul(false, false, T, HS, T, ds, span(k, k16, base, C), 0, dq[base:], C)
			tm.mul(true, false, T, HS, T, ds, span(q, q16, base, C), 0, dk[base:], C)
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
// start at the head's first column, with leading dimension C. The two
// products run through tm; h16 is [T, T] bfloat16 scratch when tm is bf16.
func probsBackward(tm tileMath, dP, dropped []float32, h16 []uint16, dv []float32, dout, v operand, P, km []float32, causal bool, drop Dropout, off, T, HS, C int, scale float32) {
	tm.mul(false, true, T, T, HS, dout, v, 0, dP, T)
	Pd := P
	if drop.Active() {
		// One pass draws the mask once for both: Pd = P⊙mask, dP = dPd⊙mask.
		m := drop.mask()
		m.mul(dropped[:T*T], nil, off)
		mulVec(dP[:T*T], dP[:T*T], dropped[:T*T])
		mulVec(dropped[:T*T], P[:T*T], dropped[:T*T])
		Pd = dropped
	}
	tm.mul(true, false, T, HS, T, tm.tile(Pd[:T*T], T, h16), dout, 0, dv, C)
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
