package kernels

import (
	"math"

	"github.com/roformer-go/roformer/blas"
)

// LinearAttentionEps is added to every denominator of linear attention, as
// Katharopoulos et al. do, so that a query that sees no key (or whose
// features underflow) gets 0 instead of 0/0.
const LinearAttentionEps = 1e-6

// LinearAttentionForward is kernelized ("linear") attention (Katharopoulos
// et al., ICML 2020, eq. 4–6) in the general form of RoFormer's eq. (19)
// (Su et al. 2021, §3.3), for each row b and head h:
//
//	out_m = Σ_{n∈N(m)} (qn_m·kn_n) v_n  /  (Σ_{n∈N(m)} qd_m·kd_n + ε)
//
// where qn, kn are the numerator features and qd, kd the denominator
// features of queries and keys (the feature maps φ(q), φ(k), of width F per
// head). Plain linear attention passes the same slices for both; RoPE in
// linear attention (eq. 19) passes qn = R_m φ(q_m), kn = R_n φ(k_n) and the
// unrotated qd = φ(q_m), kd = φ(k_n): the rotation acts after the feature
// map and the normaliser stays unrotated, so it stays positive.
// N(m) holds the visible keys: keyMask[b, n] == 1 and, if causal, n ≤ m.
// ε is LinearAttentionEps.
//
// The sums are reassociated as Katharopoulos et al. do, which is what keeps
// memory O(T): S = Σ_n kn_n v_nᵀ [F, HS] and z = Σ_n kd_n [F]. Bidirectional
// attention forms them once, out = qn·S / (qd·z + ε). Causal attention walks
// the sequence in chunks of linChunk tokens: within a chunk the masked
// scores (qn·knᵀ) [c, c] multiply v directly, the earlier chunks enter
// through their prefix sums S and z, and S then absorbs the chunk (the
// chunked form of the causal prefix sums; every product is a GEMM). No T×T
// matrix exists: the scratch is O(c² + c·(F+HS) + F·HS) per worker. There
// are no attention probabilities and therefore no attention dropout.
//
//	out     [B, T, NH·HS]
//	den     [B, NH, T]   the denominators qd_m·z_m + ε, saved for the
//	        backward pass; nil when not needed (inference)
//	qn, kn  [B, T, NH·F] heads are column blocks of width F
//	qd, kd  [B, T, NH·F] may be the same slices as qn, kn
//	v       [B, T, NH·HS]
//	keyMask [B, T]  1 for a real token, 0 for padding; nil means all 1
func LinearAttentionForward(out, den, qn, kn, qd, kd, v, keyMask []float32, causal bool, B, T, NH, F, HS int) {
	CF, CV := NH*F, NH*HS
	c := T
	if causal {
		c = min(T, linChunk)
	}
	parallelFor(B*NH, 1, func(lo, hi int) {
		w := newLinScratch(c, F, HS, causal)
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			km := rowMask(keyMask, b, T)
			clear(w.S)
			clear(w.z)
			for t0 := 0; t0 < T; t0 += c {
				n := min(c, T-t0)
				fo, vo := (b*T+t0)*CF+h*F, (b*T+t0)*CV+h*HS
				w.maskedKeys(kn[fo:], CF, km, t0, n, F)
				o := out[vo:]
				if causal {
					// out_c = tril(qn_c·k̃_cᵀ)·v_c + qn_c·S
					w.scores(qn[fo:], CF, n, F)
					blas.HeadSgemm(false, false, n, HS, n, 1, w.A, c, v[vo:], CV, 0, o, CV)
					blas.HeadSgemm(false, false, n, HS, F, 1, qn[fo:], CF, w.S, HS, 1, o, CV)
				} else {
					// S = k̃ᵀ·v, out = qn·S
					blas.HeadSgemm(true, false, F, HS, n, 1, w.K, F, v[vo:], CV, 0, w.S, HS)
					sumVisible(w.z, kd[fo:], CF, km, t0, n, F)
					blas.HeadSgemm(false, false, n, HS, F, 1, qn[fo:], CF, w.S, HS, 0, o, CV)
				}
				// den_m = qd_m·z_m + ε with z_m the (prefix) sum of visible kd
				for i := 0; i < n; i++ {
					m := t0 + i
					if causal && (km == nil || km[m] != 0) {
						addRow(w.z, kd[fo+i*CF:][:F])
					}
					d := featureDot(qd[fo+i*CF:][:F], w.z) + LinearAttentionEps
					if den != nil {
						den[bh*T+m] = float32(d)
					}
					inv := float32(1 / d)
					for x, row := 0, o[i*CV:][:HS]; x < HS; x++ {
						row[x] *= inv
					}
				}
				if causal {
					// S += k̃_cᵀ·v_c
					blas.HeadSgemm(true, false, F, HS, n, 1, w.K, F, v[vo:], CV, 1, w.S, HS)
				}
			}
		}
	})
}

// linChunk is the chunk length of causal linear attention.
const linChunk = 64

// linScratch is one worker's scratch for linear attention.
type linScratch struct {
	c       int
	S, U    []float32 // [F, HS]
	z       []float64 // [F]
	K       []float32 // [c, F] the chunk's numerator keys, padded ones zeroed
	A, P    []float32 // [c, c] masked scores (causal only)
	num     []float32 // [c, HS]
	dnum    []float32 // [T or c, HS]
	dd      []float64 // [c]
	scratch []float64 // [F]
}

func newLinScratch(c, F, HS int, causal bool) *linScratch {
	w := &linScratch{c: c, S: make([]float32, F*HS), z: make([]float64, F), K: make([]float32, c*F), scratch: make([]float64, F)}
	if causal {
		w.A = make([]float32, c*c)
	}
	return w
}

// maskedKeys copies n key rows (stride ld) into w.K [n, F], zeroing the
// rows of padded keys, so that they drop out of every product.
func (w *linScratch) maskedKeys(k []float32, ld int, km []float32, t0, n, F int) {
	for i := 0; i < n; i++ {
		dst := w.K[i*F : i*F+F]
		if km != nil && km[t0+i] == 0 {
			clear(dst)
		} else {
			copy(dst, k[i*ld:i*ld+F])
		}
	}
}

// scores sets w.A [n, n] (leading dimension c) to tril(q·w.Kᵀ).
func (w *linScratch) scores(q []float32, ld, n, F int) {
	blas.HeadSgemm(false, true, n, n, F, 1, q, ld, w.K, F, 0, w.A, w.c)
	for i := 0; i < n; i++ {
		clear(w.A[i*w.c+i+1 : i*w.c+n])
	}
}

// sumVisible sets z to the sum of the visible rows of kd (n rows, stride ld).
func sumVisible(z []float64, kd []float32, ld int, km []float32, t0, n, F int) {
	clear(z)
	for i := 0; i < n; i++ {
		if km == nil || km[t0+i] != 0 {
			addRow(z, kd[i*ld:i*ld+F])
		}
	}
}

func addRow(z []float64, x []float32) {
	for f, v := range x {
		z[f] += float64(v)
	}
}

// LinearAttentionBackward differentiates LinearAttentionForward given its
// saved denominators. With g_m = dL/dout_m, num_m = Σ_{n∈N(m)} (qn_m·kn_n) v_n
// (recomputed) and d_m = den_m:
//
//	dnum_m = g_m / d_m,   dd_m = −(g_m·num_m) / d_m²
//	dqn_m = Σ_{n∈N(m)} (dnum_m·v_n) kn_n,   dqd_m = dd_m Σ_{n∈N(m)} kd_n
//	dkn_n = Σ_{m: n∈N(m)} (dnum_m·v_n) qn_m,   dv_n = Σ_{m: n∈N(m)} (qn_m·kn_n) dnum_m
//	dkd_n = Σ_{m: n∈N(m)} dd_m qd_m
//
// Bidirectional: through S, z and U = Σ_m qn_m dnum_mᵀ, w = Σ_m dd_m qd_m.
// Causal: a forward pass over the chunks (prefix sums S, z) gives dnum, dd,
// dqn, dqd; a backward pass (suffix sums U, w) gives dkn, dv, dkd; within a
// chunk the masked c×c products stand in for the sums. Memory stays O(T)
// (dnum and dd of one row and head).
//
//	dqn, dkn, dqd, dkd [B, T, NH·F]  written (=); must not alias each other
//	dv                 [B, T, NH·HS] written (=)
//	dout               [B, T, NH·HS]
//	den                [B, NH, T] from the forward pass
func LinearAttentionBackward(dqn, dkn, dqd, dkd, dv, dout, qn, kn, qd, kd, v, den, keyMask []float32, causal bool, B, T, NH, F, HS int) {
	CF, CV := NH*F, NH*HS
	c := T
	if causal {
		c = min(T, linChunk)
	}
	parallelFor(B*NH, 1, func(lo, hi int) {
		w := newLinScratch(c, F, HS, causal)
		w.U, w.num, w.dnum, w.dd = make([]float32, F*HS), make([]float32, c*HS), make([]float32, T*HS), make([]float64, T)
		if causal {
			w.P = make([]float32, c*c)
		}
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			km := rowMask(keyMask, b, T)
			vis := func(m int) bool { return km == nil || km[m] != 0 }
			// Pass 1, in token order: num, dnum, dd, dqn, dqd.
			clear(w.S)
			clear(w.z)
			for t0 := 0; t0 < T; t0 += c {
				n := min(c, T-t0)
				fo, vo := (b*T+t0)*CF+h*F, (b*T+t0)*CV+h*HS
				w.maskedKeys(kn[fo:], CF, km, t0, n, F)
				dn := w.dnum[t0*HS:]
				if causal {
					w.scores(qn[fo:], CF, n, F)
					blas.HeadSgemm(false, false, n, HS, n, 1, w.A, c, v[vo:], CV, 0, w.num, HS)
					blas.HeadSgemm(false, false, n, HS, F, 1, qn[fo:], CF, w.S, HS, 1, w.num, HS)
				} else {
					blas.HeadSgemm(true, false, F, HS, n, 1, w.K, F, v[vo:], CV, 0, w.S, HS)
					sumVisible(w.z, kd[fo:], CF, km, t0, n, F)
					blas.HeadSgemm(false, false, n, HS, F, 1, qn[fo:], CF, w.S, HS, 0, w.num, HS)
				}
				for i := 0; i < n; i++ {
					m := t0 + i
					// out_m = num_m / d_m
					d := float64(den[bh*T+m])
					g, nm, dr := dout[vo+i*CV:][:HS], w.num[i*HS:][:HS], dn[i*HS:][:HS]
					gnum := 0.0
					for x := range dr {
						dr[x] = float32(float64(g[x]) / d)
						gnum += float64(g[x]) * float64(nm[x])
					}
					w.dd[m] = -gnum / (d * d)
					// d_m = qd_m·z_m + ε  ⇒  dqd_m = dd_m z_m
					if causal && vis(m) {
						addRow(w.z, kd[fo+i*CF:][:F])
					}
					dq := dqd[fo+i*CF:][:F]
					for f := range dq {
						dq[f] = float32(w.dd[m] * w.z[f])
					}
				}
				// num = tril(qn·k̃ᵀ)·v + qn·S  ⇒  dqn = tril(dnum·vᵀ)·k̃ + dnum·Sᵀ
				if causal {
					w.grads(dn, v[vo:], CV, km, t0, n, HS)
					blas.HeadSgemm(false, false, n, F, n, 1, w.P, c, w.K, F, 0, dqn[fo:], CF)
					blas.HeadSgemm(false, true, n, F, HS, 1, dn, HS, w.S, HS, 1, dqn[fo:], CF)
					blas.HeadSgemm(true, false, F, HS, n, 1, w.K, F, v[vo:], CV, 1, w.S, HS)
				} else {
					blas.HeadSgemm(false, true, n, F, HS, 1, dn, HS, w.S, HS, 0, dqn[fo:], CF)
				}
			}
			// Pass 2, in reverse: dkn, dv, dkd through U = Σ qn dnumᵀ and
			// w = Σ dd·qd over the queries that see each key.
			clear(w.U)
			clear(w.scratch)
			wsum := w.scratch
			last := ((T - 1) / c) * c
			if !causal {
				last = 0
			}
			for t0 := last; t0 >= 0; t0 -= c {
				n := min(c, T-t0)
				fo, vo := (b*T+t0)*CF+h*F, (b*T+t0)*CV+h*HS
				w.maskedKeys(kn[fo:], CF, km, t0, n, F)
				dn := w.dnum[t0*HS:]
				if causal {
					// dkn = tril(dnum·vᵀ)ᵀ·qn + v·Uᵀ,  dv = tril(qn·k̃ᵀ)ᵀ·dnum + k̃·U
					w.scores(qn[fo:], CF, n, F)
					w.grads(dn, v[vo:], CV, km, t0, n, HS)
					blas.HeadSgemm(true, false, n, F, n, 1, w.P, c, qn[fo:], CF, 0, dkn[fo:], CF)
					blas.HeadSgemm(false, true, n, F, HS, 1, v[vo:], CV, w.U, HS, 1, dkn[fo:], CF)
					blas.HeadSgemm(true, false, n, HS, n, 1, w.A, c, dn, HS, 0, dv[vo:], CV)
					blas.HeadSgemm(false, false, n, HS, F, 1, w.K, F, w.U, HS, 1, dv[vo:], CV)
				} else {
					blas.HeadSgemm(true, false, F, HS, n, 1, qn[fo:], CF, dn, HS, 0, w.U, HS)
					for i := 0; i < n; i++ {
						qdm := qd[fo+i*CF:][:F]
						for f, x := range qdm {
							wsum[f] += w.dd[t0+i] * float64(x)
						}
					}
					blas.HeadSgemm(false, true, n, F, HS, 1, v[vo:], CV, w.U, HS, 0, dkn[fo:], CF)
					blas.HeadSgemm(false, false, n, HS, F, 1, w.K, F, w.U, HS, 0, dv[vo:], CV)
				}
				for i := n - 1; i >= 0; i-- {
					m := t0 + i
					if causal {
						for f, x := range qd[fo+i*CF:][:F] {
							wsum[f] += w.dd[m] * float64(x)
						}
					}
					dk, dkdm := dkn[fo+i*CF:][:F], dkd[fo+i*CF:][:F]
					if !vis(m) {
						clear(dk)
						clear(dkdm)
						continue
					}
					// z = Σ kd  ⇒  dkd_n = w
					for f := range dkdm {
						dkdm[f] = float32(wsum[f])
					}
				}
				if causal {
					blas.HeadSgemm(true, false, F, HS, n, 1, qn[fo:], CF, dn, HS, 1, w.U, HS)
				}
			}
		}
	})
}

// grads sets w.P [n, n] (leading dimension c) to tril(dnum·vᵀ) with the
// columns of padded keys zeroed.
func (w *linScratch) grads(dnum, v []float32, ldv int, km []float32, t0, n, HS int) {
	blas.HeadSgemm(false, true, n, n, HS, 1, dnum, HS, v, ldv, 0, w.P, w.c)
	for i := 0; i < n; i++ {
		row := w.P[i*w.c : i*w.c+n]
		clear(row[i+1:])
		if km != nil {
			for j := 0; j <= i; j++ {
				if km[t0+j] == 0 {
					row[j] = 0
				}
			}
		}
	}
}

// rowMask returns row b of keyMask [B, T], or nil.
func rowMask(keyMask []float32, b, T int) []float32 {
	if keyMask == nil {
		return nil
	}
	return keyMask[b*T : b*T+T]
}

func featureDot(q []float32, z []float64) float64 {
	acc := 0.0
	for f, x := range q {
		acc += float64(x) * z[f]
	}
	return acc
}

// linearAttentionNaive is the reference twin of LinearAttentionForward: the
// T×T weights of eq. (19) formed explicitly, in float64.
func linearAttentionNaive(out, qn, kn, qd, kd, v, keyMask []float32, causal bool, B, T, NH, F, HS int) {
	CF, CV := NH*F, NH*HS
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for m := 0; m < T; m++ {
				acc := make([]float64, HS)
				d := 0.0
				for n := 0; n < T; n++ {
					if (keyMask != nil && keyMask[b*T+n] == 0) || (causal && n > m) {
						continue
					}
					wn, wd := 0.0, 0.0
					for f := 0; f < F; f++ {
						wn += float64(qn[(b*T+m)*CF+h*F+f]) * float64(kn[(b*T+n)*CF+h*F+f])
						wd += float64(qd[(b*T+m)*CF+h*F+f]) * float64(kd[(b*T+n)*CF+h*F+f])
					}
					d += wd
					for c := 0; c < HS; c++ {
						acc[c] += wn * float64(v[(b*T+n)*CV+h*HS+c])
					}
				}
				for c := 0; c < HS; c++ {
					out[(b*T+m)*CV+h*HS+c] = float32(acc[c] / (d + LinearAttentionEps))
				}
			}
		}
	}
}

// EluFeatureForward is the feature map of Katharopoulos et al. (§3.2):
// φ(x) = elu(x) + 1, i.e. x + 1 for x > 0 and eˣ otherwise, element-wise.
//
//	out, inp [N]
func EluFeatureForward(out, inp []float32, N int) {
	parallelFor(N, 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if x := inp[i]; x > 0 {
				out[i] = x + 1
			} else {
				out[i] = float32(math.Exp(float64(x)))
			}
		}
	})
}

// EluFeatureBackward differentiates EluFeatureForward: dinp = dout·φ'(inp),
// φ'(x) = 1 for x > 0 and eˣ otherwise.
//
//	dinp [N] written (=)
//	dout, inp [N]
func EluFeatureBackward(dinp, dout, inp []float32, N int) {
	parallelFor(N, 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if x := inp[i]; x > 0 {
				dinp[i] = dout[i]
			} else {
				dinp[i] = dout[i] * float32(math.Exp(float64(x)))
			}
		}
	})
}

// FavorFeatureForward is FAVOR+'s positive random feature map
// (Choromanski et al., "Rethinking Attention with Performers", ICLR 2021,
// Lemma 1 and eq. 7), which makes φ(q)·φ(k) an unbiased estimate of the
// softmax kernel exp(q·k/√HS):
//
//	x' = x·HS^(−1/4),   φ(x)_i = exp(ω_i·x' − |x'|²/2) / √M,   i < M
//
// for each head of each token, with the M random directions ω_i (rows of
// omega, shared by all heads). Any factor common to all features of one
// query cancels in linear attention, whose numerator and denominator are
// both linear in φ(q_m); so queries drop exp(−|x'|²/2) and are divided by
// exp(max_i ω_i·x') instead (their largest feature is 1/√M, whatever the
// scale of q). Keys keep the exact formula: its exponent is at most
// |ω_i|²/2 (complete the square), a bound that does not depend on the data,
// so keys need no stabiliser, and none depends on other tokens (a causal
// model stays exactly causal). performer-pytorch instead subtracts a maximum
// over all keys of the sequence.
//
//	out   [B, T, NH·M]
//	inp   [B, T, NH·HS]
//	omega [M, HS]
func FavorFeatureForward(out, inp, omega []float32, query bool, B, T, NH, HS, M int) {
	s := float32(math.Pow(float64(HS), -0.25))
	invSqrtM := 1 / math.Sqrt(float64(M))
	rows := B * T * NH // rows (b, t, h) are contiguous in both layouts
	parallelFor(rows, 16, func(lo, hi int) {
		// a[r, i] = ω_i·x'_r
		blas.HeadSgemm(false, true, hi-lo, M, HS, s, inp[lo*HS:], HS, omega, HS, 0, out[lo*M:], M)
		for r := lo; r < hi; r++ {
			o := out[r*M : r*M+M]
			c := 0.0
			if query {
				mx := o[0]
				for _, a := range o {
					mx = max(mx, a)
				}
				c = float64(mx)
			} else {
				for _, xv := range inp[r*HS : r*HS+HS] {
					xs := float64(xv * s)
					c += xs * xs / 2
				}
			}
			for i, a := range o {
				o[i] = float32(math.Exp(float64(a)-c) * invSqrtM)
			}
		}
	})
}

// FavorFeatureBackward differentiates FavorFeatureForward given its output
// f, with x' = s·x, s = HS^(−1/4) (a query's stabiliser held constant, as
// it cancels):
//
//	keys:    ∂f_i/∂x' = f_i (ω_i − x')  ⇒  dx = s·(Ωᵀ(dout⊙f) − x'·Σ_i dout_i f_i)
//	queries: ∂f_i/∂x' = f_i ω_i         ⇒  dx = s·Ωᵀ(dout⊙f)
//
//	dinp  [B, T, NH·HS] written (=)
//	dout  [B, T, NH·M]
//	feat  [B, T, NH·M]  the forward output
//	inp   [B, T, NH·HS]
//	omega [M, HS]
func FavorFeatureBackward(dinp, dout, feat, inp, omega []float32, query bool, B, T, NH, HS, M int) {
	s := float32(math.Pow(float64(HS), -0.25))
	rows := B * T * NH
	parallelFor(rows, 16, func(lo, hi int) {
		n := hi - lo
		g := make([]float32, n*M)
		sums := make([]float32, n)
		for r := 0; r < n; r++ {
			gr := g[r*M : r*M+M]
			d, f := dout[(lo+r)*M:][:M], feat[(lo+r)*M:][:M]
			acc := float32(0)
			for i := range gr {
				gr[i] = d[i] * f[i]
				acc += gr[i]
			}
			sums[r] = acc
		}
		// dx = s·(g Ω) − s²·x·Σg (keys)
		blas.HeadSgemm(false, false, n, HS, M, s, g, M, omega, HS, 0, dinp[lo*HS:], HS)
		if query {
			return
		}
		for r := 0; r < n; r++ {
			x := inp[(lo+r)*HS:][:HS]
			dx := dinp[(lo+r)*HS:][:HS]
			k := s * s * sums[r]
			for c := range dx {
				dx[c] -= k * x[c]
			}
		}
	})
}
