package contrastive

import "math"

// CoSENTForward returns sentence-transformers' CoSENTLoss of the pairs
// (a_i, b_i), a and b [B, stride] read over their first d values, with
// gold scores labels [B]:
//
//	c_i = scale · cos(a_i, b_i)
//	L   = log(1 + Σ_{i,j: labels_i < labels_j} exp(c_i − c_j))
//
// (a pair scored lower than another should have the lower cosine). With no
// such (i, j), L = log 1 = 0.
func CoSENTForward(a, b []float32, labels []float64, B, stride, d int, scale float64) float64 {
	return cosent(nil, nil, a, b, labels, B, stride, d, scale, 0)
}

// CoSENTBackward adds w · the gradient of CoSENTForward's loss into da and
// db [B, stride] (the first d values of each row), and returns the loss.
func CoSENTBackward(da, db, a, b []float32, labels []float64, B, stride, d int, scale, w float64) float64 {
	return cosent(da, db, a, b, labels, B, stride, d, scale, w)
}

func cosent(da, db, a, b []float32, labels []float64, B, stride, d int, scale, w float64) float64 {
	ua, ub := newUnit(a, B, stride, d), newUnit(b, B, stride, d)
	c := make([]float64, B)
	for i := range B {
		c[i] = scale * dot64(ua.row(i), ub.row(i))
	}
	// L = m + log(exp(−m) + Σ exp(z − m)), m the largest z (at least 0).
	m := 0.0
	for i := range B {
		for j := range B {
			if labels[i] < labels[j] {
				m = max(m, c[i]-c[j])
			}
		}
	}
	sum := math.Exp(-m)
	for i := range B {
		for j := range B {
			if labels[i] < labels[j] {
				sum += math.Exp(c[i] - c[j] - m)
			}
		}
	}
	loss := m + math.Log(sum)
	if da == nil && db == nil {
		return loss
	}
	// ∂L/∂z_ij = exp(z_ij − L); z_ij = c_i − c_j.
	dc := make([]float64, B)
	for i := range B {
		for j := range B {
			if labels[i] < labels[j] {
				p := math.Exp(c[i] - c[j] - loss)
				dc[i] += p
				dc[j] -= p
			}
		}
	}
	dua, dub := make([]float64, B*d), make([]float64, B*d)
	for i := range B {
		g := scale * dc[i]
		axpy(dua[i*d:(i+1)*d], g, ub.row(i))
		axpy(dub[i*d:(i+1)*d], g, ua.row(i))
	}
	ua.backward(da, dua, stride, w)
	ub.backward(db, dub, stride, w)
	return loss
}
