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
// memory O(T): S = Σ_n kn_n v_nᵀ [F, HS] and z = Σ_n kd_n [F] are formed once
// (bidirectional) or as prefix sums (causal), accumulated in float64, and
// out_m = qn_mᵀS / (qd_m·z + ε). No T×T matrix exists; the scratch is
// F·(HS+1) per worker. There are no attention probabilities and therefore no
// attention dropout.
//
//	out     [B, T, NH·HS]
//	den     [B, NH, T]   the denominators qd_m·z + ε, saved for the backward
//	        pass; nil when not needed (inference)
//	qn, kn  [B, T, NH·F] heads are column blocks of width F
//	qd, kd  [B, T, NH·F] may be the same slices as qn, kn
//	v       [B, T, NH·HS]
//	keyMask [B, T]  1 for a real token, 0 for padding; nil means all 1
func LinearAttentionForward(out, den, qn, kn, qd, kd, v, keyMask []float32, causal bool, B, T, NH, F, HS int) {
	CF, CV := NH*F, NH*HS
	parallelFor(B*NH, 1, func(lo, hi int) {
		S := make([]float64, F*HS)
		z := make([]float64, F)
		num := make([]float64, HS)
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			km := rowMask(keyMask, b, T)
			clear(S)
			clear(z)
			if !causal {
				for n := 0; n < T; n++ {
					if km == nil || km[n] != 0 {
						accumulateKV(S, z, kn[(b*T+n)*CF+h*F:][:F], kd[(b*T+n)*CF+h*F:][:F], v[(b*T+n)*CV+h*HS:][:HS])
					}
				}
			}
			for m := 0; m < T; m++ {
				if causal && (km == nil || km[m] != 0) {
					accumulateKV(S, z, kn[(b*T+m)*CF+h*F:][:F], kd[(b*T+m)*CF+h*F:][:F], v[(b*T+m)*CV+h*HS:][:HS])
				}
				qnm, qdm := qn[(b*T+m)*CF+h*F:][:F], qd[(b*T+m)*CF+h*F:][:F]
				d := featureDot(qdm, z) + LinearAttentionEps
				querySum(num, S, qnm, HS)
				o := out[(b*T+m)*CV+h*HS:][:HS]
				for c := range o {
					o[c] = float32(num[c] / d)
				}
				if den != nil {
					den[bh*T+m] = float32(d)
				}
			}
		}
	})
}

// LinearAttentionBackward differentiates LinearAttentionForward given its
// saved denominators. With g_m = dL/dout_m, num_m = qn_mᵀS_m, d_m = den_m:
//
//	dnum_m = g_m / d_m,   dd_m = −(g_m·num_m) / d_m²
//	dqn_m = S_m dnum_m,   dqd_m = dd_m z_m
//	dkn_n = U_n v_n,      dv_n = U_nᵀ kn_n,   dkd_n = w_n
//
// with U_n = Σ_{m: n∈N(m)} qn_m dnum_mᵀ and w_n = Σ_{m: n∈N(m)} dd_m qd_m:
// totals when bidirectional, suffix sums when causal. S_m, z_m are rebuilt
// by a prefix pass, so memory stays O(T) (dnum and dd, T·(HS+1) per worker).
//
//	dqn, dkn, dqd, dkd [B, T, NH·F]  written (=); must not alias each other
//	dv                 [B, T, NH·HS] written (=)
//	dout               [B, T, NH·HS]
//	den                [B, NH, T] from the forward pass
func LinearAttentionBackward(dqn, dkn, dqd, dkd, dv, dout, qn, kn, qd, kd, v, den, keyMask []float32, causal bool, B, T, NH, F, HS int) {
	CF, CV := NH*F, NH*HS
	parallelFor(B*NH, 1, func(lo, hi int) {
		S := make([]float64, F*HS)
		z := make([]float64, F)
		num := make([]float64, HS)
		dnum := make([]float64, T*HS)
		dd := make([]float64, T)
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			km := rowMask(keyMask, b, T)
			vis := func(n int) bool { return km == nil || km[n] != 0 }
			at := func(x []float32, t int) []float32 { return x[(b*T+t)*CF+h*F:][:F] }
			atV := func(x []float32, t int) []float32 { return x[(b*T+t)*CV+h*HS:][:HS] }
			// Prefix (or total) pass: S_m, z_m, then dnum, dd, dqn, dqd.
			clear(S)
			clear(z)
			if !causal {
				for n := 0; n < T; n++ {
					if vis(n) {
						accumulateKV(S, z, at(kn, n), at(kd, n), atV(v, n))
					}
				}
			}
			for m := 0; m < T; m++ {
				if causal && vis(m) {
					accumulateKV(S, z, at(kn, m), at(kd, m), atV(v, m))
				}
				// out_m = num_m / d_m
				d := float64(den[bh*T+m])
				querySum(num, S, at(qn, m), HS)
				g := atV(dout, m)
				dn := dnum[m*HS : m*HS+HS]
				gnum := 0.0
				for c := range dn {
					dn[c] = float64(g[c]) / d
					gnum += float64(g[c]) * num[c]
				}
				dd[m] = -gnum / (d * d)
				// num_m = Σ_f qn_m[f] S[f, :]  ⇒  dqn_m[f] = S[f, :]·dnum_m
				dq := at(dqn, m)
				for f := range dq {
					s := S[f*HS : f*HS+HS]
					acc := 0.0
					for c, x := range dn {
						acc += s[c] * x
					}
					dq[f] = float32(acc)
				}
				// d_m = qd_m·z_m + ε  ⇒  dqd_m = dd_m z_m
				dqdm := at(dqd, m)
				for f := range dqdm {
					dqdm[f] = float32(dd[m] * z[f])
				}
			}
			// Suffix (or total) pass: U, w, then dkn, dv, dkd. S and z are
			// reused as U [F, HS] and w [F].
			U, w := S, z
			clear(U)
			clear(w)
			addQ := func(m int) {
				qnm, qdm := at(qn, m), at(qd, m)
				dn := dnum[m*HS : m*HS+HS]
				for f, x := range qnm {
					if x == 0 {
						continue
					}
					u := U[f*HS : f*HS+HS]
					for c, y := range dn {
						u[c] += float64(x) * y
					}
				}
				for f, x := range qdm {
					w[f] += dd[m] * float64(x)
				}
			}
			if !causal {
				for m := 0; m < T; m++ {
					addQ(m)
				}
			}
			for n := T - 1; n >= 0; n-- {
				if causal {
					addQ(n)
				}
				dk, dkdn, dvn := at(dkn, n), at(dkd, n), atV(dv, n)
				if !vis(n) {
					clear(dk)
					clear(dkdn)
					clear(dvn)
					continue
				}
				knn, vn := at(kn, n), atV(v, n)
				// S = Σ_n kn_n v_nᵀ  ⇒  dkn_n = U v_n, dv_n = Uᵀ kn_n
				dvAcc := num // HS scratch
				clear(dvAcc)
				for f := range dk {
					u := U[f*HS : f*HS+HS]
					acc := 0.0
					kf := float64(knn[f])
					for c, x := range vn {
						acc += u[c] * float64(x)
						dvAcc[c] += u[c] * kf
					}
					dk[f] = float32(acc)
					dkdn[f] = float32(w[f]) // z = Σ_n kd_n  ⇒  dkd_n = w
				}
				for c := range dvn {
					dvn[c] = float32(dvAcc[c])
				}
			}
		}
	})
}

// rowMask returns row b of keyMask [B, T], or nil.
func rowMask(keyMask []float32, b, T int) []float32 {
	if keyMask == nil {
		return nil
	}
	return keyMask[b*T : b*T+T]
}

// accumulateKV adds kn vᵀ to S [F, HS] and kd to z [F].
func accumulateKV(S, z []float64, kn, kd, v []float32) {
	HS := len(v)
	for f, x := range kn {
		if x != 0 {
			s := S[f*HS : f*HS+HS]
			xf := float64(x)
			for c, y := range v {
				s[c] += xf * float64(y)
			}
		}
	}
	for f, x := range kd {
		z[f] += float64(x)
	}
}

// querySum sets num = qᵀS for S [F, HS].
func querySum(num, S []float64, q []float32, HS int) {
	clear(num)
	for f, x := range q {
		if x != 0 {
			s := S[f*HS : f*HS+HS]
			xf := float64(x)
			for c := range num {
				num[c] += xf * s[c]
			}
		}
	}
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
		blas.Sgemm(false, true, hi-lo, M, HS, s, inp[lo*HS:], HS, omega, HS, 0, out[lo*M:], M)
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
		blas.Sgemm(false, false, n, HS, M, s, g, M, omega, HS, 0, dinp[lo*HS:], HS)
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
