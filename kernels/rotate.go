package kernels

// RotatePairs turns adjacent pairs of x in place, the inner loop of rotary
// position embedding (package rope) in RoFormer's interleaved layout:
//
//	x'[2i]   = x[2i]·cos2[2i]     + x[2i+1]·sin2[2i]
//	x'[2i+1] = x[2i+1]·cos2[2i+1] + x[2i]·sin2[2i+1]
//
// With cos2 = (c₀, c₀, c₁, c₁, …) and sin2 = (−s₀, s₀, −s₁, s₁, …) this is
// HF's x⊙cos + rotate_half(x)⊙sin: each product rounds to float32, then
// the sum (no fused multiply-add), so both paths give HF's bits.
//
//	x, cos2, sin2 [n], n even
func RotatePairs(x, cos2, sin2 []float32) {
	cos2, sin2 = cos2[:len(x)], sin2[:len(x)]
	n := 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			rotatePairsAVX2(&x[0], &cos2[0], &sin2[0], n)
		}
	}
	rotatePairsNaive(x[n:], cos2[n:], sin2[n:])
}

// rotatePairsNaive is the scalar twin of RotatePairs.
func rotatePairsNaive(x, cos2, sin2 []float32) {
	for j := 0; j+1 < len(x); j += 2 {
		a, b := x[j], x[j+1]
		x[j] = float32(a*cos2[j]) + float32(b*sin2[j])
		x[j+1] = float32(b*cos2[j+1]) + float32(a*sin2[j+1])
	}
}
