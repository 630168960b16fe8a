package contrastive

import "math"

// PairedForward returns RoFormer-Sim's in-batch similarity loss (SimBERT's,
// as Su's bert4keras scripts train it) of v [N, D], whose rows 2k and 2k+1
// are paraphrases of each other: with u the unit rows and p(i) = i xor 1
// the partner of row i,
//
//	S[i,j] = scale · u_i · u_j   (j ≠ i; a row is not its own candidate)
//	L      = (1/N) Σ_i ( log Σ_{j≠i} exp S[i,j] − S[i,p(i)] )
//
// the cross-entropy of picking each row's partner among the other rows of
// the batch. N must be even; N = 2 gives 0 (one candidate).
func PairedForward(v []float32, N, D int, scale float64) float64 {
	return paired(nil, v, N, D, scale, 0)
}

// PairedBackward adds w · the gradient of PairedForward's loss into dv
// [N, D] and returns the loss.
func PairedBackward(dv, v []float32, N, D int, scale, w float64) float64 {
	return paired(dv, v, N, D, scale, w)
}

func paired(dv, v []float32, N, D int, scale, w float64) float64 {
	if N < 2 || N%2 != 0 {
		return math.NaN()
	}
	u := newUnit(v, N, D, D)
	S := make([]float64, N*N)
	for i := range N {
		for j := range N {
			if j != i {
				S[i*N+j] = scale * dot64(u.row(i), u.row(j))
			}
		}
	}
	// dS = (softmax over j ≠ i − one-hot at p(i)) / N
	dS := make([]float64, N*N)
	loss := 0.0
	row := make([]float64, 0, N-1)
	for i := range N {
		row = row[:0]
		for j := range N {
			if j != i {
				row = append(row, S[i*N+j])
			}
		}
		lse := logSumExp(row)
		p := i ^ 1
		loss += (lse - S[i*N+p]) / float64(N)
		for j := range N {
			if j != i {
				dS[i*N+j] = math.Exp(S[i*N+j]-lse) / float64(N)
			}
		}
		dS[i*N+p] -= 1 / float64(N)
	}
	if dv == nil {
		return loss
	}
	// S = scale · U Uᵀ  ⇒  dU = scale · (dS + dSᵀ) U
	du := make([]float64, N*D)
	for i := range N {
		for j := range N {
			if g := scale * (dS[i*N+j] + dS[j*N+i]); g != 0 {
				axpy(du[i*D:(i+1)*D], g, u.row(j))
			}
		}
	}
	u.backward(dv, du, D, w)
	return loss
}
