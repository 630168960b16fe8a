package contrastive

import "math"

// MNRLForward returns sentence-transformers' MultipleNegativesRankingLoss
// of anchors a [B, stride] and candidates c [M, stride], M = B·k: the B
// positives (candidate i is anchor i's), then k−1 blocks of B hard
// negatives. With u the unit rows over the first d values,
//
//	S[i,j] = scale · u(a_i) · u(c_j)                        [B, M]
//	L      = (1/B) Σ_i ( log Σ_j exp S[i,j] − S[i,i] )       (cross-entropy, target i)
//
// and with symmetric set (MultipleNegativesSymmetricRankingLoss) the mean
// of L and the positive→anchor direction over the first B columns, which
// leaves out the hard negatives:
//
//	L' = (1/B) Σ_j ( log Σ_i exp S[i,j] − S[j,j] ),   j < B;   loss (L + L') / 2
func MNRLForward(a, c []float32, B, M, stride, d int, scale float64, symmetric bool) float64 {
	return mnrl(nil, nil, a, c, B, M, stride, d, scale, symmetric, 0)
}

// MNRLBackward adds w · the gradient of MNRLForward's loss into da
// [B, stride] and dc [M, stride] (the first d values of each row), and
// returns the loss.
func MNRLBackward(da, dc, a, c []float32, B, M, stride, d int, scale float64, symmetric bool, w float64) float64 {
	return mnrl(da, dc, a, c, B, M, stride, d, scale, symmetric, w)
}

func mnrl(da, dc, a, c []float32, B, M, stride, d int, scale float64, symmetric bool, w float64) float64 {
	ua, uc := newUnit(a, B, stride, d), newUnit(c, M, stride, d)
	S := make([]float64, B*M)
	for i := range B {
		for j := range M {
			S[i*M+j] = scale * dot64(ua.row(i), uc.row(j))
		}
	}
	// dS is the loss's gradient with respect to the scores: softmax − one-hot.
	dS := make([]float64, B*M)
	fw := 1.0
	if symmetric {
		fw = 0.5
	}
	loss := 0.0
	for i := range B {
		row := S[i*M : (i+1)*M]
		lse := logSumExp(row)
		loss += fw * (lse - row[i]) / float64(B)
		for j, s := range row {
			dS[i*M+j] = fw * math.Exp(s-lse) / float64(B)
		}
		dS[i*M+i] -= fw / float64(B)
	}
	if symmetric {
		col := make([]float64, B)
		for j := range B {
			for i := range B {
				col[i] = S[i*M+j]
			}
			lse := logSumExp(col)
			loss += 0.5 * (lse - col[j]) / float64(B)
			for i, s := range col {
				dS[i*M+j] += 0.5 * math.Exp(s-lse) / float64(B)
			}
			dS[j*M+j] -= 0.5 / float64(B)
		}
	}
	if da == nil && dc == nil {
		return loss
	}
	// S = scale · Ua Ucᵀ: dUa = scale · dS Uc, dUc = scale · dSᵀ Ua.
	dua, duc := make([]float64, B*d), make([]float64, M*d)
	for i := range B {
		gi := dua[i*d : (i+1)*d]
		ai := ua.row(i)
		for j := range M {
			g := scale * dS[i*M+j]
			if g == 0 {
				continue
			}
			axpy(gi, g, uc.row(j))
			axpy(duc[j*d:(j+1)*d], g, ai)
		}
	}
	ua.backward(da, dua, stride, w)
	uc.backward(dc, duc, stride, w)
	return loss
}

// logSumExp returns log Σ exp(x_i), shifted by the maximum.
func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

func dot64(x, y []float64) float64 {
	s := 0.0
	for i := range x {
		s += x[i] * y[i]
	}
	return s
}

func axpy(dst []float64, a float64, x []float64) {
	for i := range dst {
		dst[i] += a * x[i]
	}
}
