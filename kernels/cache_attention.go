package kernels

import (
	"math"

	"github.com/roformer-go/roformer/blas"
)

// CacheAttentionForward is the self-attention of T new tokens over a
// key/value cache (cached decoding): the cache holds n earlier tokens per
// row, the new tokens' keys and values are already stored at slots n … n+T−1,
// and new token i (slot n+i) sees every slot j ≤ n+i whose mask is 1, and
// always its own:
//
//	s_j = q_i·k_jᵀ · float32(1/√HS),  p = softmax_j(s) over the visible j,  out_i = Σ_j p_j·v_j
//
// for each row b and head h; the softmax's sum runs in float64. The two
// products of each (row, head) go through package blas.
//
//	out  [B, T, C]         C = NH·HS; heads are column blocks
//	q    [B, T, C]         the new tokens' queries (rotated)
//	k, v [B, capacity, C]  the cache; slots 0 … n+T−1 filled
//	mask [B, capacity]     1 for a real token, 0 for a pad
func CacheAttentionForward(out, q, k, v, mask []float32, B, T, n, capacity, NH, HS int) {
	C := NH * HS
	N := n + T
	scale := float32(1 / math.Sqrt(float64(HS)))
	// One (row, head) pair per task: the scores of its T queries against
	// the N keys, then their softmax-weighted values, as two products.
	parallelFor(B*NH, 1, func(lo, hi int) {
		scores := make([]float32, T*N)
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			kb := k[b*capacity*C+h*HS:]
			vb := v[b*capacity*C+h*HS:]
			blas.HeadSgemm(false, true, T, N, HS, scale, q[b*T*C+h*HS:], C, kb, C, 0, scores, N)
			m := mask[b*capacity : b*capacity+N]
			for i := 0; i < T; i++ {
				row := scores[i*N : i*N+N]
				last := n + i // token i sees the keys up to its own position, pads excluded
				mx := float32(math.Inf(-1))
				for j := 0; j <= last; j++ {
					if m[j] != 0 || j == last {
						mx = max(mx, row[j])
					}
				}
				sum := 0.0
				for j := range row {
					if j > last || (m[j] == 0 && j != last) {
						row[j] = 0
						continue
					}
					e := math.Exp(float64(row[j] - mx))
					row[j] = float32(e)
					sum += e
				}
				inv := float32(1 / sum)
				for j := 0; j <= last; j++ {
					row[j] *= inv
				}
			}
			// Σ_j p_j·v_j from the row's first visible slot: the product's
			// inner dimension starts where the row's text does, so that a
			// left-padded row sums in the order it has alone (the padded
			// slots' p_j are 0; go-asm splits the inner dimension by its
			// length).
			f := firstVisible(m[:n])
			blas.HeadSgemm(false, false, T, HS, N-f, 1, scores[f:], N, vb[f*C:], C, 0, out[b*T*C+h*HS:], C)
		}
	})
}

// cacheAttentionNaive is CacheAttentionForward's twin: plain loops, float64
// dot products.
func cacheAttentionNaive(out, q, k, v, mask []float32, B, T, n, capacity, NH, HS int) {
	C := NH * HS
	p := make([]float64, n+T)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < T; i++ {
				qi := q[(b*T+i)*C+h*HS : (b*T+i)*C+h*HS+HS]
				last := n + i
				mx := math.Inf(-1)
				for j := 0; j <= last; j++ {
					p[j] = math.Inf(-1)
					if mask[b*capacity+j] == 0 && j != last {
						continue
					}
					kj := k[(b*capacity+j)*C+h*HS:]
					s := 0.0
					for d := 0; d < HS; d++ {
						s += float64(qi[d]) * float64(kj[d])
					}
					p[j] = s / math.Sqrt(float64(HS))
					mx = max(mx, p[j])
				}
				sum := 0.0
				for j := 0; j <= last; j++ {
					p[j] = math.Exp(p[j] - mx)
					sum += p[j]
				}
				o := out[(b*T+i)*C+h*HS : (b*T+i)*C+h*HS+HS]
				for d := range o {
					acc := 0.0
					for j := 0; j <= last; j++ {
						acc += p[j] / sum * float64(v[(b*capacity+j)*C+h*HS+d])
					}
					o[d] = float32(acc)
				}
			}
		}
	}
}
