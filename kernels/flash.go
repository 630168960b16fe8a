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

// flashMask is the visibility rule of a fused pass on top of the padding
// mask. Under causal, query i of Tq sees key j of Tk when j ≤ i + Tk − Tq
// (the queries are the last Tq positions of the keys' sequence: j ≤ i when
// Tq = Tk). Under seg (the UniLM mask, Tq = Tk), query i of row b sees key
// j when seg[b·T+j] ≤ seg[b·T+i].
type flashMask struct {
	causal bool
	seg    []int32 // [B, T] or nil
}

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
// element the same stream (the factor of P[b,h,i,j] is
// drop.Scale(((b·NH+h)·T+i)·T+j), drop.Offset included): out is
// (P⊙mask)·v, and the sums l and lse are those of the undropped P.
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
	flashForward(out, lse, q, k, v, keyMask, flashMask{causal: causal}, drop, tileMath{}, B, T, T, NH, HS)
}

// FlashAttentionForwardBF16 is FlashAttentionForward with the two products
// of every tile, q·kᵀ and P·v, in bfloat16 (blas.GemmBF16: q, k, the
// tile's unnormalised probabilities and v rounded to bfloat16, k and v
// once for the whole call, float32 accumulation); the softmax, its
// running maximum and sums, the masks and the output stay float32. Its
// error against FlashAttentionForward is that of rounding those operands
// (relative 2⁻⁸ each). It needs AVX512_BF16 or AMX-BF16 and oneDNN
// (blas.BF16Supported) and panics without them.
func FlashAttentionForwardBF16(out, lse, q, k, v, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	flashForward(out, lse, q, k, v, keyMask, flashMask{causal: causal}, drop, tileMath{bf16: true}, B, T, T, NH, HS)
}

// tileMath is how the fused attention multiplies its tiles: in float32
// (blas.HeadSgemm), or with bf16 in bfloat16 with float32 accumulation
// (blas.GemmBF16) on operands rounded once each: the tensors that many
// tiles read (k and v forward; q, k, v and dout backward) before the
// first tile, a query tile when it starts, and each tile the kernel makes
// in float32 (P, dS) after it is made, into the worker's scratch.
//
// With hp set (the fused attention's float32 tiles on go-asm, headPanels)
// an operand may be panels packed once (packed, p): the product takes
// their leading part for its dimensions.
type tileMath struct {
	bf16 bool
	hp   blas.HeadPacker
}

// operand is one side of a tile product: float32 values with their
// leading dimension and, in bfloat16, their rounding with its own; or,
// with packed, float32 panels packed for go-asm.
type operand struct {
	f      []float32
	ld     int
	h      []uint16
	hld    int
	p      blas.Operand
	packed bool
}

// span is the operand from offset off of a tensor f with leading
// dimension ld and its rounding h (nil in float32).
func span(f []float32, h []uint16, off, ld int) operand {
	o := operand{f: f[off:], ld: ld, hld: ld}
	if h != nil {
		o.h = h[off:]
	}
	return o
}

// tile is a float32 tile f with leading dimension ld as an operand; in
// bfloat16 it is rounded into h16 first.
func (tm tileMath) tile(f []float32, ld int, h16 []uint16) operand {
	o := operand{f: f, ld: ld}
	if tm.bf16 {
		o.h, o.hld = h16[:len(f)], ld
		toBF16(o.h, f)
	}
	return o
}

// mul is c = op(a)·op(b) + beta·c for one tile.
func (tm tileMath) mul(transA, transB bool, m, n, k int, a, b operand, beta float32, c []float32, ldc int) {
	if tm.bf16 {
		blas.GemmBF16(transA, transB, m, n, k, a.h, a.hld, b.h, b.hld, beta, c, ldc)
		return
	}
	if a.packed || b.packed {
		pa, pb := blas.Matrix(transA, a.f, a.ld), blas.Matrix(transB, b.f, b.ld)
		if a.packed {
			pa = a.p.Sub(m, k)
		}
		if b.packed {
			pb = b.p.Sub(n, k)
		}
		tm.hp.Sgemm(m, n, k, 1, pa, pb, beta, c, ldc)
		return
	}
	blas.HeadSgemm(transA, transB, m, n, k, 1, a.f, a.ld, b.f, b.ld, beta, c, ldc)
}

// rounded returns x [rows, cols] rounded to bfloat16 under tm.bf16 (and
// the scratch to give back with release), nothing in float32.
func (tm tileMath) rounded(x []float32, rows, cols int) (*[]float32, []uint16) {
	if !tm.bf16 {
		return nil, nil
	}
	return bf16Operand(x, rows, cols)
}

// release gives back what rounded took.
func release(ps ...*[]float32) {
	for _, p := range ps {
		if p != nil {
			putScratch(p)
		}
	}
}

// FlashCrossAttentionForward is CrossAttentionForward (Tq queries over Tk
// keys and values of another sequence or of a key/value cache) computed as
// FlashAttentionForward computes it, tile by tile without the Tq×Tk
// probabilities. Key j is visible to query i when keyMask[b,j] ≠ 0 and, if
// causal, j ≤ i + Tk − Tq (the queries are the last Tq tokens of the keys'
// sequence, as a decoder's new tokens over its cache); a query that sees
// no key gets the mean of all Tk values. There is no dropout.
//
//	out     [B, Tq, C]  C = NH·HS
//	lse     [B, NH, Tq] saved for FlashCrossAttentionBackward; nil in inference
//	q       [B, Tq, C]
//	k, v    [B, Tk, C]
//	keyMask [B, Tk] or nil
//
// CrossAttentionForward is the reference twin (AttentionForward under
// causal with Tq = Tk).
func FlashCrossAttentionForward(out, lse, q, k, v, keyMask []float32, causal bool, B, Tq, Tk, NH, HS int) {
	flashForward(out, lse, q, k, v, keyMask, flashMask{causal: causal}, Dropout{}, tileMath{}, B, Tq, Tk, NH, HS)
}

// FlashSegmentAttentionForward is FlashAttentionForward under the UniLM
// mask of RoFormer-Sim, applied tile by tile from seg, the running sums of
// each row's token types: key j is visible to query i of row b when
// seg[b·T+j] ≤ seg[b·T+i] and keyMask[b,j] ≠ 0 (type-0 text sees itself
// both ways; a type-1 part that follows sees all of it and itself
// causally). A query that sees no key gets the mean of all T values, and
// key tiles that no query of a tile sees are skipped. drop is as in
// FlashAttentionForward.
//
//	out     [B, T, C]
//	lse     [B, NH, T] saved for FlashSegmentAttentionBackward; nil in inference
//	q, k, v [B, T, C]
//	keyMask [B, T] or nil
//	seg     [B, T]
func FlashSegmentAttentionForward(out, lse, q, k, v, keyMask []float32, seg []int32, drop Dropout, B, T, NH, HS int) {
	flashForward(out, lse, q, k, v, keyMask, flashMask{seg: seg}, drop, tileMath{}, B, T, T, NH, HS)
}

// FlashSegmentAttentionForwardBF16 is FlashSegmentAttentionForward with
// its products in bfloat16, as FlashAttentionForwardBF16.
func FlashSegmentAttentionForwardBF16(out, lse, q, k, v, keyMask []float32, seg []int32, drop Dropout, B, T, NH, HS int) {
	flashForward(out, lse, q, k, v, keyMask, flashMask{seg: seg}, drop, tileMath{bf16: true}, B, T, T, NH, HS)
}

// flashForward is the fused forward pass of Tq queries over Tk keys under
// fm (Tq = Tk when fm.seg is set or drop is active); the exported forwards
// document it. The dropout factor of P[b,h,i,j] is
// drop.Scale(((b·NH+h)·Tq+i)·Tk+j).
func flashForward(out, lse, q, k, v, keyMask []float32, fm flashMask, drop Dropout, tm tileMath, B, Tq, Tk, NH, HS int) {
	C := NH * HS
	dm := drop.mask()
	scale := float32(math.Sqrt(float64(HS)))
	nq := (Tq + flashQ - 1) / flashQ
	shift := Tk - Tq // causal: query i sees keys up to i + shift
	pk, k16 := tm.rounded(k, B*Tk, C)
	pv, v16 := tm.rounded(v, B*Tk, C)
	defer release(pk, pv)
	parallelFor(B*NH*nq, 1, func(lo, hi int) {
		ps := getScratch(flashQ*flashK + 2*flashQ)
		defer putScratch(ps)
		pan := newHeadPanels(tm, Tq, Tk, HS)
		defer pan.release()
		tm := tm
		if pan != nil {
			tm.hp = pan.hp
		}
		S := (*ps)[:flashQ*flashK]
		mrow := (*ps)[flashQ*flashK : flashQ*flashK+flashQ]
		var lrow [flashQ]float64
		var p16, q16 []uint16 // bfloat16: the tile's P and queries
		if tm.bf16 {
			ph := getScratch((flashQ*flashK + flashQ*HS + 1) / 2)
			defer putScratch(ph)
			h := BF16Buffer(*ph)
			p16, q16 = h[:flashQ*flashK], h[flashQ*flashK:flashQ*flashK+flashQ*HS]
		}
		for t := lo; t < hi; t++ {
			bh, qt := t/nq, t%nq
			b, h := bh/NH, bh%NH
			qb, kb := b*Tq*C+h*HS, b*Tk*C+h*HS
			km := rowMask(keyMask, b, Tk)
			i0 := qt * flashQ
			n := min(flashQ, Tq-i0)
			o := out[qb+i0*C:]
			for r := 0; r < n; r++ {
				clear(o[r*C : r*C+HS])
				mrow[r] = float32(math.Inf(-1))
				lrow[r] = 0
			}
			var sg []int32
			var segMax int32
			if fm.seg != nil {
				sg = fm.seg[b*Tk : b*Tk+Tk]
				segMax = maxInt32(sg[i0 : i0+n])
			}
			qop := operand{f: q[qb+i0*C:], ld: C}
			if pan != nil {
				qop = pan.queries(q[qb+i0*C:], n, HS, C)
			}
			if tm.bf16 {
				for r := 0; r < n; r++ {
					toBF16(q16[r*HS:r*HS+HS], q[qb+(i0+r)*C:qb+(i0+r)*C+HS])
				}
				qop.h, qop.hld = q16, HS
			}
			// The keys run from the row's first visible one to its last,
			// so that padding before or after a text (any amount of it)
			// leaves every sum of the text's rows in the order it has
			// alone: the key tiles and expSubSum's chunks depend on where
			// they start and the length they are given (go-asm's inner
			// blocks on where they start; a tile cut at a tile of
			// queries' causal limit only drops zero terms at its end).
			jStart, jEnd := 0, Tk
			if km != nil {
				jStart, jEnd = firstVisible(km), lastVisible(km)
			}
			if fm.causal {
				jEnd = max(0, min(jEnd, i0+n+shift))
			}
			for j0 := jStart; j0 < jEnd; j0 += flashK {
				nk := min(flashK, jEnd-j0)
				if km != nil && !anyVisible(km[j0:j0+nk]) {
					continue
				}
				if sg != nil && minInt32(sg[j0:j0+nk]) > segMax {
					continue // no query of the tile sees these keys
				}
				P := S[:n*nk]
				kt, vt := span(k, k16, kb+j0*C, C), span(v, v16, kb+j0*C, C)
				if pan != nil && j0%flashK == 0 {
					// packed key tiles lie on the flashK grid; a row whose
					// keys start off it (left padding) takes them as they lie
					kt, vt = pan.keys(bh, j0/flashK, k, v, kb, C, Tk, HS)
				}
				tm.mul(false, true, n, nk, HS, qop, kt, 0, P, nk)
				for r := 0; r < n; r++ {
					row := P[r*nk : r*nk+nk]
					lim := nk
					if fm.causal {
						lim = min(nk, i0+r+shift-j0+1)
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
					if sg != nil {
						si := sg[i0+r]
						for j, s := range sg[j0 : j0+lim] {
							if s > si {
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
						dm.mul(head, head, (bh*Tq+i0+r)*Tk+j0)
					}
				}
				tm.mul(false, false, n, HS, nk, tm.tile(P, nk, p16), vt, 1, o, C)
			}
			var ls []float32
			if lse != nil {
				ls = lse[bh*Tq+i0 : bh*Tq+i0+n]
			}
			for r := 0; r < n; r++ {
				or := o[r*C : r*C+HS]
				if lrow[r] == 0 { // no visible key: uniform over all Tk keys
					meanRows(or, v[kb:], 1/float32(Tk), Tk, C, drop, dm, (bh*Tq+i0+r)*Tk)
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

// minInt32 and maxInt32 are the least and greatest of a non-empty x.
func minInt32(x []int32) int32 {
	m := x[0]
	for _, e := range x[1:] {
		m = min(m, e)
	}
	return m
}

func maxInt32(x []int32) int32 {
	m := x[0]
	for _, e := range x[1:] {
		m = max(m, e)
	}
	return m
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
	flashBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask, flashMask{causal: causal}, drop, tileMath{}, B, T, T, NH, HS)
}

// FlashCrossAttentionBackward differentiates FlashCrossAttentionForward
// as FlashAttentionBackward does, from its out and lse.
//
//	dq      [B, Tq, C]  written (=)
//	dk, dv  [B, Tk, C]  written (=)
//	dout    [B, Tq, C]
//	q       [B, Tq, C]
//	k, v    [B, Tk, C]
//	out     [B, Tq, C]  FlashCrossAttentionForward's output
//	lse     [B, NH, Tq] its saved log-sum-exp
//	keyMask [B, Tk] or nil
func FlashCrossAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask []float32, causal bool, B, Tq, Tk, NH, HS int) {
	flashBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask, flashMask{causal: causal}, Dropout{}, tileMath{}, B, Tq, Tk, NH, HS)
}

// FlashSegmentAttentionBackward differentiates
// FlashSegmentAttentionForward (the same seg and drop) as
// FlashAttentionBackward does, from its out and lse; the shapes are
// FlashAttentionBackward's.
func FlashSegmentAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask []float32, seg []int32, drop Dropout, B, T, NH, HS int) {
	flashBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask, flashMask{seg: seg}, drop, tileMath{}, B, T, T, NH, HS)
}

// FlashAttentionBackwardBF16 is FlashAttentionBackward with the five
// products of every tile (q·kᵀ again, dout·vᵀ, Pᵀ·dout, dS·k, dSᵀ·q) in
// bfloat16 with float32 accumulation (blas.GemmBF16; q, k, v and dout
// rounded once for the whole call), for mixed-precision
// training after FlashAttentionForwardBF16 (the same causal and drop); the
// softmax's recomputation, dS and the sums over tiles stay float32. It
// needs what FlashAttentionForwardBF16 needs.
func FlashAttentionBackwardBF16(dq, dk, dv, dout, q, k, v, out, lse, keyMask []float32, causal bool, drop Dropout, B, T, NH, HS int) {
	flashBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask, flashMask{causal: causal}, drop, tileMath{bf16: true}, B, T, T, NH, HS)
}

// FlashSegmentAttentionBackwardBF16 is FlashSegmentAttentionBackward with
// the products in bfloat16, as FlashAttentionBackwardBF16.
func FlashSegmentAttentionBackwardBF16(dq, dk, dv, dout, q, k, v, out, lse, keyMask []float32, seg []int32, drop Dropout, B, T, NH, HS int) {
	flashBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask, flashMask{seg: seg}, drop, tileMath{bf16: true}, B, T, T, NH, HS)
}

// flashBackward is the fused backward pass of flashForward (the same fm,
// drop and dims), its five tile products through tm.
func flashBackward(dq, dk, dv, dout, q, k, v, out, lse, keyMask []float32, fm flashMask, drop Dropout, tm tileMath, B, Tq, Tk, NH, HS int) {
	C := NH * HS
	dm := drop.mask()
	scale := float32(math.Sqrt(float64(HS)))
	// Tiles of 192 × 192: against 128 × 128, BenchmarkFlashAttention's
	// 1x4096 backward ran 0.41–0.45 s against 0.43–0.47 in float32 and
	// 0.31–0.37 against 0.37–0.42 in bfloat16 (Zen 4, 2 cores, three
	// alternating rounds; 256 × 256 between the two).
	bq, bk := 192, 192
	shift := Tk - Tq
	pq, q16 := tm.rounded(q, B*Tq, C)
	pd, d16 := tm.rounded(dout, B*Tq, C)
	pk, k16 := tm.rounded(k, B*Tk, C)
	pv, v16 := tm.rounded(v, B*Tk, C)
	defer release(pq, pd, pk, pv)
	parallelFor(B*NH, 1, func(lo, hi int) {
		ps := getScratch(2*bq*bk + 2*Tq + HS + bk)
		defer putScratch(ps)
		var p16, dp16 []uint16 // bfloat16: the tile's P and dS
		if tm.bf16 {
			ph := getScratch(bq * bk)
			defer putScratch(ph)
			h := BF16Buffer(*ph)
			p16, dp16 = h[:bq*bk], h[bq*bk:]
		}
		pan := newBackPanels(tm, Tq, Tk, HS, bq, bk)
		defer pan.release()
		tm := tm
		if pan != nil {
			tm.hp = pan.hp
		}
		mrow := (*ps)[2*bq*bk+2*Tq+HS : 2*bq*bk+2*Tq+HS+bk] // a row's dropout factors
		P := (*ps)[:bq*bk]
		dP := (*ps)[bq*bk : 2*bq*bk]
		D := (*ps)[2*bq*bk : 2*bq*bk+Tq]
		seen := (*ps)[2*bq*bk+Tq : 2*bq*bk+2*Tq] // visible keys per query (exact below 2^24)
		acc := (*ps)[2*bq*bk+2*Tq : 2*bq*bk+2*Tq+HS]
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			qb, kb := b*Tq*C+h*HS, b*Tk*C+h*HS
			km := rowMask(keyMask, b, Tk)
			var sg []int32
			if fm.seg != nil {
				sg = fm.seg[b*Tk : b*Tk+Tk]
			}
			ls := lse[bh*Tq : bh*Tq+Tq]
			total := visibleCounts(seen, km, sg, fm.causal, shift, Tk)
			// D_i, the zeroed outputs, then the uniform rows' share of dv.
			for i := 0; i < Tq; i++ {
				r := qb + i*C
				clear(dq[r : r+HS])
				D[i] = dotVec(dout[r:r+HS], out[r:r+HS])
			}
			for j := 0; j < Tk; j++ {
				r := kb + j*C
				clear(dk[r : r+HS])
				clear(dv[r : r+HS])
			}
			clear(acc)
			blind := 0
			for i := 0; i < Tq; i++ {
				if seen[i] != 0 {
					continue
				}
				r := qb + i*C
				if drop.Active() {
					blindDropped(dv[kb:], dout[r:r+HS], 1/float32(Tk), Tk, C, dm, (bh*Tq+i)*Tk)
					continue
				}
				addVec(acc, acc, dout[r:r+HS])
				blind++
			}
			if blind > 0 {
				u := 1 / float32(Tk)
				for j := 0; j < Tk; j++ {
					d := dv[kb+j*C : kb+j*C+HS]
					for c, a := range acc {
						d[c] = u * a
					}
				}
			}
			if total == 0 {
				continue // no query sees any key
			}
			if pan != nil {
				pan.head(q, dout, qb, C, Tq, HS)
			}
			for j0 := 0; j0 < Tk; j0 += bk {
				nk := min(bk, Tk-j0)
				if km != nil && !anyVisible(km[j0:j0+nk]) {
					continue
				}
				kt, vt := span(k, k16, kb+j0*C, C), span(v, v16, kb+j0*C, C)
				kn := kt // k as the B side of dq's product
				if pan != nil {
					pan.keys(k, v, kb+j0*C, nk, C, HS)
					kt, vt, kn = pan.kt, pan.vt, pan.kn
				}
				i1 := 0
				if fm.causal {
					i1 = max(0, j0-shift) / bq * bq
				}
				var segMin int32
				if sg != nil {
					segMin = minInt32(sg[j0 : j0+nk])
				}
				for i0 := i1; i0 < Tq; i0 += bq {
					n := min(bq, Tq-i0)
					if sg != nil && maxInt32(sg[i0:i0+n]) < segMin {
						continue // no query of the tile sees these keys
					}
					Pt, dPt := P[:n*nk], dP[:n*nk]
					qop, dop := span(q, q16, qb+i0*C, C), span(dout, d16, qb+i0*C, C)
					qB, dB := qop, dop // as the B side of dv's and dk's products
					if pan != nil {
						qop, dop, qB, dB = pan.query(i0)
					}
					tm.mul(false, true, n, nk, HS, qop, kt, 0, Pt, nk)
					for r := 0; r < n; r++ {
						i := i0 + r
						row := Pt[r*nk : r*nk+nk]
						lim := nk
						if fm.causal {
							lim = min(nk, i+shift-j0+1)
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
						if sg != nil {
							si := sg[i]
							for j, s := range sg[j0 : j0+lim] {
								if s > si {
									head[j] = float32(math.Inf(-1))
								}
							}
						}
						expSubScale(head, ls[i], 1)
						clear(row[lim:])
					}
					tm.mul(false, true, n, nk, HS, dop, vt, 0, dPt, nk)
					for r := 0; r < n; r++ {
						d, p := dPt[r*nk:r*nk+nk], Pt[r*nk:r*nk+nk]
						if drop.Active() {
							// one draw of the row's mask for both dP and P
							mk := mrow[:nk]
							off := (bh*Tq+i0+r)*Tk + j0
							dm.mul(mk, nil, off)
							mulVec(d, d, mk)
							if seen[i0+r] <= 1 {
								clear(d)
							} else {
								softmaxBackRow(d, p, D[i0+r], scale)
							}
							mulVec(p, p, mk)
							continue
						}
						if seen[i0+r] <= 1 {
							clear(d)
						} else {
							softmaxBackRow(d, p, D[i0+r], scale)
						}
					}
					pt, ds := tm.tile(Pt, nk, p16), tm.tile(dPt, nk, dp16)
					tm.mul(true, false, nk, HS, n, pt, dB, 1, dv[kb+j0*C:], C)
					tm.mul(false, false, n, HS, nk, ds, kn, 1, dq[qb+i0*C:], C)
					tm.mul(true, false, nk, HS, n, ds, qB, 1, dk[kb+j0*C:], C)
				}
			}
		}
	})
}

// visibleCounts sets seen[i] to the number of the Tk keys that query i
// sees (keyMask km, nil for all; seg sg or nil; causal with the given
// shift) and returns the number of real keys. Under seg it takes a pass
// when sg never decreases (the running sums of non-negative types) and
// compares every pair otherwise.
func visibleCounts(seen, km []float32, sg []int32, causal bool, shift, Tk int) float32 {
	real := func(j int) bool { return km == nil || km[j] != 0 }
	total := float32(0)
	for j := 0; j < Tk; j++ {
		if real(j) {
			total++
		}
	}
	switch {
	case causal:
		// seen[i] = real keys j ≤ i + shift
		c, j := float32(0), 0
		for i := range seen {
			for ; j < Tk && j <= i+shift; j++ {
				if real(j) {
					c++
				}
			}
			seen[i] = c
		}
	case sg != nil && nonDecreasing(sg):
		// the visible keys of query i are the j < end with sg[j] ≤ sg[i]
		c, j := float32(0), 0
		for i := range seen { // sg[i] never decreases with i either
			for ; j < Tk && sg[j] <= sg[i]; j++ {
				if real(j) {
					c++
				}
			}
			seen[i] = c
		}
	case sg != nil:
		for i := range seen {
			c := float32(0)
			for j, s := range sg {
				if s <= sg[i] && real(j) {
					c++
				}
			}
			seen[i] = c
		}
	default:
		for i := range seen {
			seen[i] = total
		}
	}
	return total
}

// nonDecreasing reports whether x[i] ≤ x[i+1] for every i.
func nonDecreasing(x []int32) bool {
	for i := 1; i < len(x); i++ {
		if x[i] < x[i-1] {
			return false
		}
	}
	return true
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

// flashForwardNaive is the reference twin of flashForward without
// dropout: plain loops and float64 sums, each query's visible keys listed
// one by one (fm and keyMask), a query that sees none uniform over all Tk
// keys. probs [B, NH, Tq, Tk] gets the weights when not nil; lse
// [B, NH, Tq] the log-sum-exp of the visible scaled scores (−∞ for none)
// when not nil.
func flashForwardNaive(out, probs []float32, lse []float64, q, k, v, keyMask []float32, fm flashMask, B, Tq, Tk, NH, HS int) {
	C := NH * HS
	scale := math.Sqrt(float64(HS))
	w := make([]float64, Tk)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < Tq; i++ {
				mx := math.Inf(-1)
				for j := 0; j < Tk; j++ {
					w[j] = math.Inf(-1)
					if (keyMask != nil && keyMask[b*Tk+j] == 0) || (fm.causal && j > i+Tk-Tq) || (fm.seg != nil && fm.seg[b*Tk+j] > fm.seg[b*Tk+i]) {
						continue
					}
					d := 0.0
					for c := 0; c < HS; c++ {
						d += float64(q[(b*Tq+i)*C+h*HS+c]) * float64(k[(b*Tk+j)*C+h*HS+c])
					}
					w[j] = d / scale
					mx = math.Max(mx, w[j])
				}
				bhi := (b*NH+h)*Tq + i
				sum := 0.0
				for j := range w {
					if math.IsInf(mx, -1) {
						w[j] = 1
					} else {
						w[j] = math.Exp(w[j] - mx)
					}
					sum += w[j]
				}
				if lse != nil {
					lse[bhi] = math.Inf(-1)
					if !math.IsInf(mx, -1) {
						lse[bhi] = mx + math.Log(sum)
					}
				}
				for j := range w {
					w[j] /= sum
					if probs != nil {
						probs[bhi*Tk+j] = float32(w[j])
					}
				}
				for c := 0; c < HS; c++ {
					acc := 0.0
					for j := 0; j < Tk; j++ {
						acc += w[j] * float64(v[(b*Tk+j)*C+h*HS+c])
					}
					out[(b*Tq+i)*C+h*HS+c] = float32(acc)
				}
			}
		}
	}
}

// firstVisible returns the first key of km that is visible, len(km) when
// none is.
func firstVisible(km []float32) int {
	for j, m := range km {
		if m != 0 {
			return j
		}
	}
	return len(km)
}

// lastVisible returns one past the last key of km (a row's key mask, 0
// for a masked key) that is visible, 0 when none is.
func lastVisible(km []float32) int {
	for j := len(km) - 1; j >= 0; j-- {
		if km[j] != 0 {
			return j + 1
		}
	}
	return 0
}
