package kernels

import (
	"math"

	"github.com/roformer-go/roformer/blas"
)

// Tile sizes of the fused attention: a worker holds one flashQ × flashK
// score tile (384 KiB, in L2) instead of a row block against every key.
// Measured on the small model's heads (NH 6, HS 64) at T 8192 on 2 Zen 5
// cores, per CPU-second: 64×256 115 GFLOP/s, 96×256 118, 192×512 144,
// 384×1024 151 (larger tiles repack k and v less often; 192 rows keep
// enough tiles to share out at T 1024).
const (
	flashQ = 192 // queries per tile
	flashK = 512 // keys per tile
)

// FlashAttentionForward is AttentionForward without the T×T probabilities
// (FlashAttention, Dao et al. 2022): for each row b, head h and tile of
// flashQ queries it walks the keys in tiles of flashK,
//
//	S = q_h·k_hᵀ/float32(√HS) + mask,  m' = max(m, rowmax S),
//	l = l·e^(m−m') + rowsum e^(S−m'),  out_h = out_h·e^(m−m') + e^(S−m')·v_h
//
// and divides by l at the end, so the scratch is one tile per worker.
// Masks and the all-masked rows are those of AttentionForward: key j is
// visible to query i when keyMask[b,j] ≠ 0 and, if causal, j ≤ i; a query
// that sees no key gets the mean of all T values (HF's uniform softmax).
// Under the causal mask the key tiles past the query tile are skipped.
// drop is AttentionForward's dropout on the probabilities, element for
// element the same stream (the factor of P[b,h,i,j] is drop's element
// ((b·NH+h)·T+i)·T+j): out is (P⊙mask)·v, and the sums l and lse are those
// of the undropped P.
//
//	out     [B, T, C]   C = NH·HS; heads are column blocks
//	lse     [B, NH, T]  log Σ_j e^(S_ij) over the visible keys, saved for
//	        FlashAttentionBackward; −∞ for a query that sees no key; nil
//	        when not needed (inference)
//	q, k, v [B, T, C]
//	keyMask [B, T]  1 for a real token, 0 for padding; nil means all 1
//
// Rows, heads and query tiles are split over the workers; each writes only
// its own rows of out and lse. AttentionForward is the reference twin.
func FlashAttentionForward(out, lse, q, k, v, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	C := NH * HS
	dm := drop.mask()
	scale := float32(math.Sqrt(float64(HS)))
	nq := (T + flashQ - 1) / flashQ
	parallelFor(B*NH*nq, 1, func(lo, hi int) {
		ps := getScratch(flashQ*flashK + 2*flashQ)
		defer putScratch(ps)
		S := (*ps)[:flashQ*flashK]
		mrow := (*ps)[flashQ*flashK : flashQ*flashK+flashQ]
		var lrow [flashQ]float64
		for t := lo; t < hi; t++ {
			bh, qt := t/nq, t%nq
			b, h := bh/NH, bh%NH
			base := b*T*C + h*HS
			km := rowMask(keyMask, b, T)
			i0 := qt * flashQ
			n := min(flashQ, T-i0)
			o := out[base+i0*C:]
			for r := 0; r < n; r++ {
				clear(o[r*C : r*C+HS])
				mrow[r] = float32(math.Inf(-1))
				lrow[r] = 0
			}
			jEnd := T
			if causal {
				jEnd = i0 + n
			}
			for j0 := 0; j0 < jEnd; j0 += flashK {
				nk := min(flashK, jEnd-j0)
				if km != nil && !anyVisible(km[j0:j0+nk]) {
					continue
				}
				P := S[:n*nk]
				blas.Sgemm(false, true, n, nk, HS, 1, q[base+i0*C:], C, k[base+j0*C:], C, 0, P, nk)
				for r := 0; r < n; r++ {
					row := P[r*nk : r*nk+nk]
					lim := nk
					if causal {
						lim = min(nk, i0+r-j0+1)
					}
					if lim <= 0 {
						clear(row)
						continue
					}
					head := row[:lim]
					if km != nil {
						for j, m := range km[j0 : j0+lim] {
							if m == 0 {
								head[j] = float32(math.Inf(-1))
							}
						}
					}
					mx := divMax(head, scale)
					if math.IsInf(float64(mx), -1) { // nothing visible in this tile
						clear(row)
						continue
					}
					clear(row[lim:])
					if m := mrow[r]; mx > m {
						if lrow[r] > 0 {
							a := math.Exp(float64(m - mx))
							lrow[r] *= a
							scaleVec(o[r*C:r*C+HS], float32(a))
						}
						mrow[r] = mx
					}
					lrow[r] += expSubSum(head, mrow[r])
					if drop.Active() {
						off := (bh*T+i0+r)*T + j0
						for j := range head {
							head[j] *= dm.at(off + j)
						}
					}
				}
				blas.Sgemm(false, false, n, HS, nk, 1, P, nk, v[base+j0*C:], C, 1, o, C)
			}
			var ls []float32
			if lse != nil {
				ls = lse[bh*T+i0 : bh*T+i0+n]
			}
			for r := 0; r < n; r++ {
				or := o[r*C : r*C+HS]
				if lrow[r] == 0 { // no visible key: uniform over all T keys
					meanRows(or, v[base:], 1/float32(T), T, C, drop, dm, (bh*T+i0+r)*T)
					if ls != nil {
						ls[r] = float32(math.Inf(-1))
					}
					continue
				}
				scaleVec(or, float32(1/lrow[r]))
				if ls != nil {
					ls[r] = mrow[r] + float32(math.Log(lrow[r]))
				}
			}
		}
	})
}

// anyVisible reports whether any key of a mask tile is visible.
func anyVisible(km []float32) bool {
	for _, m := range km {
		if m != 0 {
			return true
		}
	}
	return false
}

// meanRows sets o = Σ_j u·s_j·x[j·ld : j·ld+len(o)] over j < n, where s_j
// is the dropout factor of element off+j (1 without dropout).
func meanRows(o, x []float32, u float32, n, ld int, drop Dropout, dm dropMask, off int) {
	clear(o)
	for j := 0; j < n; j++ {
		w := u
		if drop.Active() {
			w *= dm.at(off + j)
		}
		xj := x[j*ld : j*ld+len(o)]
		for c, e := range xj {
			o[c] += w * e
		}
	}
}

// FlashAttentionBackward differentiates FlashAttentionForward as
// FlashAttention-2 does, from the saved out and lse alone: for each key tile
// j and query tile i it recomputes P = e^(S − lse) and
//
//	dv_j += Pᵀ·dout_i,  dP = dout_i·v_jᵀ,  dS = P⊙(dP − D_i)/√HS,
//	dq_i += dS·k_j,  dk_j += dSᵀ·q_i,  with D_i = Σ_c dout_ic·out_ic.
//
// A query that sees no key had uniform weights 1/T on every key: it adds
// dout_i/T to every dv_j and nothing to dq and dk (its scores were
// constants), as AttentionBackward. A query that sees one key has P = 1
// there whatever the scores: its dS is exactly 0, as in AttentionBackward
// (where Σ_j P⊙dP cancels dP to the bit), rather than the rounding
// difference between D_i and dP. With dropout (drop as in the forward
// pass), dv_j += (P⊙mask)ᵀ·dout_i and dP is masked before dS; D_i is still
// dout_i·out_i, which is Σ_j P⊙dP.
//
//	dq, dk, dv [B, T, C]  written (=)
//	dout       [B, T, C]
//	q, k, v    [B, T, C]
//	out        [B, T, C]  FlashAttentionForward's output
//	lse        [B, NH, T] its saved log-sum-exp
//	keyMask    [B, T] or nil
//
// Rows and heads are split over the workers (a head's dq, dk and dv are
// its own column blocks); the scratch is a few tiles per worker.
func FlashAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	C := NH * HS
	dm := drop.mask()
	scale := float32(math.Sqrt(float64(HS)))
	bq, bk := 128, 128
	parallelFor(B*NH, 1, func(lo, hi int) {
		ps := getScratch(2*bq*bk + 2*T + HS + bk)
		defer putScratch(ps)
		mrow := (*ps)[2*bq*bk+2*T+HS : 2*bq*bk+2*T+HS+bk] // a row's dropout factors
		P := (*ps)[:bq*bk]
		dP := (*ps)[bq*bk : 2*bq*bk]
		D := (*ps)[2*bq*bk : 2*bq*bk+T]
		seen := (*ps)[2*bq*bk+T : 2*bq*bk+2*T] // visible keys per query (exact below 2^24)
		acc := (*ps)[2*bq*bk+2*T : 2*bq*bk+2*T+HS]
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			base := b*T*C + h*HS
			km := rowMask(keyMask, b, T)
			ls := lse[bh*T : bh*T+T]
			total := float32(0)
			for j := 0; j < T; j++ {
				if km == nil || km[j] != 0 {
					total++
				}
				seen[j] = total // visible keys up to j
			}
			if !causal {
				for i := range seen {
					seen[i] = total
				}
			}
			// D_i, the zeroed outputs, then the uniform rows' share of dv.
			for i := 0; i < T; i++ {
				r := base + i*C
				clear(dq[r : r+HS])
				clear(dk[r : r+HS])
				clear(dv[r : r+HS])
				D[i] = dotVec(dout[r:r+HS], out[r:r+HS])
			}
			clear(acc)
			blind := 0
			for i := 0; i < T; i++ {
				if seen[i] != 0 {
					continue
				}
				r := base + i*C
				if drop.Active() {
					blindDropped(dv[base:], dout[r:r+HS], 1/float32(T), T, C, dm, (bh*T+i)*T)
					continue
				}
				addVec(acc, acc, dout[r:r+HS])
				blind++
			}
			if blind > 0 {
				u := 1 / float32(T)
				for j := 0; j < T; j++ {
					d := dv[base+j*C : base+j*C+HS]
					for c, a := range acc {
						d[c] = u * a
					}
				}
			}
			if total == 0 {
				continue // no query sees any key
			}
			for j0 := 0; j0 < T; j0 += bk {
				nk := min(bk, T-j0)
				if km != nil && !anyVisible(km[j0:j0+nk]) {
					continue
				}
				i1 := 0
				if causal {
					i1 = j0 / bq * bq
				}
				for i0 := i1; i0 < T; i0 += bq {
					n := min(bq, T-i0)
					Pt, dPt := P[:n*nk], dP[:n*nk]
					blas.Sgemm(false, true, n, nk, HS, 1, q[base+i0*C:], C, k[base+j0*C:], C, 0, Pt, nk)
					for r := 0; r < n; r++ {
						i := i0 + r
						row := Pt[r*nk : r*nk+nk]
						lim := nk
						if causal {
							lim = min(nk, i-j0+1)
						}
						if lim <= 0 || seen[i] == 0 {
							clear(row)
							continue
						}
						head := row[:lim]
						divMax(head, scale)
						if km != nil {
							for j, m := range km[j0 : j0+lim] {
								if m == 0 {
									head[j] = float32(math.Inf(-1))
								}
							}
						}
						expSubScale(head, ls[i], 1)
						clear(row[lim:])
					}
					blas.Sgemm(false, true, n, nk, HS, 1, dout[base+i0*C:], C, v[base+j0*C:], C, 0, dPt, nk)
					for r := 0; r < n; r++ {
						d, p := dPt[r*nk:r*nk+nk], Pt[r*nk:r*nk+nk]
						if drop.Active() {
							// one draw of the row's mask for both dP and P
							mk := mrow[:nk]
							off := (bh*T+i0+r)*T + j0
							for j := range d {
								mk[j] = dm.at(off + j)
								d[j] *= mk[j]
							}
							if seen[i0+r] <= 1 {
								clear(d)
							} else {
								softmaxBackRow(d, p, D[i0+r], scale)
							}
							for j, x := range mk {
								p[j] *= x
							}
							continue
						}
						if seen[i0+r] <= 1 {
							clear(d)
						} else {
							softmaxBackRow(d, p, D[i0+r], scale)
						}
					}
					blas.Sgemm(true, false, nk, HS, n, 1, Pt, nk, dout[base+i0*C:], C, 1, dv[base+j0*C:], C)
					blas.Sgemm(false, false, n, HS, nk, 1, dPt, nk, k[base+j0*C:], C, 1, dq[base+i0*C:], C)
					blas.Sgemm(true, false, nk, HS, n, 1, dPt, nk, q[base+i0*C:], C, 1, dk[base+j0*C:], C)
				}
			}
		}
	})
}

// blindDropped adds u·s_j·d to row j of dv (leading dimension ld) for
// j < T, s_j the dropout factor of element off+j: the dv share of a query
// that sees no key, under dropout.
func blindDropped(dv, d []float32, u float32, T, ld int, dm dropMask, off int) {
	for j := 0; j < T; j++ {
		w := u * dm.at(off+j)
		if w == 0 {
			continue
		}
		row := dv[j*ld : j*ld+len(d)]
		for c, x := range d {
			row[c] += w * x
		}
	}
}
