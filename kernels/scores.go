package kernels

import "math"

// Softmax64 returns exp(z − max)/Σ exp(z − max) in float64: the
// probabilities that pipelines and evaluations report from a row of logits
// (−Inf logits get 0). It allocates; it is not the attention's softmax.
func Softmax64(z []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, float64(v))
	}
	p := make([]float64, len(z))
	sum := 0.0
	for i, v := range z {
		p[i] = math.Exp(float64(v) - mx)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// Cosine returns the cosine of the angle between a and b in float64, 0
// when either is the zero vector.
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// LogSoftmax64 writes log softmax(z) in float64 to out:
//
//	out_i = z_i − (m + log Σ_j exp(z_j − m)),  m = max_j z_j
//
// with the sum accumulated in float64 in index order, the log-probabilities
// of a row of logits that beam search ranks (−Inf logits get −Inf).
//
//	out [V]
//	z   [V]
func LogSoftmax64(out []float64, z []float32) {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, float64(v))
	}
	sum := 0.0
	for _, v := range z {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	out = out[:len(z)]
	for i, v := range z {
		out[i] = float64(v) - lse
	}
}

// Argmax returns the index of the largest value of z, the lowest among
// ties (numpy's argmax), and 0 for an empty z: greedy decoding, token
// accuracy and the tagging pipelines' labels. NaNs are never chosen over a
// number before them.
func Argmax[T float32 | float64](z []T) int {
	best := 0
	for j, v := range z {
		if v > z[best] {
			best = j
		}
	}
	return best
}
