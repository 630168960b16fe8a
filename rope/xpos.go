package rope

import (
	"fmt"
	"math"
)

// DefaultXPosScaleBase is rotary-embedding-torch's xpos_scale_base.
const DefaultXPosScaleBase = 512.0

// XPos is the length-extrapolatable rotation of Sun et al. 2022 ("A
// Length-Extrapolatable Transformer", arXiv 2212.10554): on top of the
// rotation, the query at position m is multiplied per pair by ζ_i^(m'/B) and
// the key by ζ_i^(−m'/B), so that their product decays with the distance,
// ζ_i^((m−n)/B), ζ_i < 1.
//
// The formulas are those of lucidrains' rotary-embedding-torch (version
// 0.8.9, commit 8bb4643 of 2026-01-30: use_xpos, xpos_scale_base):
//
//	ζ_i = (2i + 0.4·dim) / (1.4·dim),  i = 0 … dim/2−1
//	m'  = m − ⌊seqLen/2⌋               (positions centred on the middle)
//
// Its rotate_queries_and_keys centres q and k on the same sequence length;
// its rotate_queries_with_cached_keys centres the q_len new queries on
// ⌊q_len/2⌋ and the k_len keys on ⌊k_len/2⌋, which multiplies every score
// of pair i by the constant ζ_i^((⌊k_len/2⌋−⌊q_len/2⌋)/B). Scales takes the
// seqLen to centre on, so either use can be reproduced.
type XPos struct {
	ScaleBase float64 // B, xpos_scale_base; 0 means 512
}

// Validate checks the scale base.
func (x XPos) Validate() error {
	if x.ScaleBase < 0 || math.IsNaN(x.ScaleBase) || math.IsInf(x.ScaleBase, 0) {
		return fmt.Errorf("rope: xpos scale_base = %v: must be a finite number > 0 (or absent)", x.ScaleBase)
	}
	return nil
}

// Scales returns, for each position in pos and each pair i < dim/2, the
// factor ζ_i^((p − ⌊seqLen/2⌋)/B) that multiplies the query's pair i (the
// key's is its reciprocal), [len(pos)][dim/2] flattened row-major.
func (x XPos) Scales(dim int, pos []int, seqLen int) []float64 {
	base := x.ScaleBase
	if base == 0 {
		base = DefaultXPosScaleBase
	}
	h := dim / 2
	zeta := make([]float64, h)
	for i := range zeta {
		zeta[i] = (float64(2*i) + 0.4*float64(dim)) / (1.4 * float64(dim))
	}
	// Python's floor division, for a negative seqLen too.
	centre := seqLen / 2
	if seqLen < 0 && seqLen%2 != 0 {
		centre--
	}
	out := make([]float64, len(pos)*h)
	for n, p := range pos {
		power := float64(p-centre) / base
		for i, z := range zeta {
			out[n*h+i] = math.Pow(z, power)
		}
	}
	return out
}
