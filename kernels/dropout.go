package kernels

import "math"

// Dropout describes inverted dropout: each element is kept with probability
// 1−P and then scaled by 1/(1−P), or zeroed. The keep decision of element i
// is a pure function of (Seed, Offset+i) (a SplitMix64 hash), so the mask
// needs no storage: backward regenerates it, any thread split gives the
// same mask, and a run resumed at step s draws the same masks as one left
// alone. P = 0 disables it.
type Dropout struct {
	P    float32
	Seed uint64
	// Offset is the place of element 0 in the stream: element i draws the
	// decision of element Offset+i. A kernel run on rows r0, r0+1, … of a
	// larger batch, with Offset = r0 × (elements per row of the tensor it
	// drops), draws the masks those rows have in the larger batch (gradient
	// caching encodes a batch a few rows at a time). 0: the batch is whole.
	Offset int
}

// Active reports whether the dropout changes anything.
func (d Dropout) Active() bool { return d.P > 0 }

// mix is SplitMix64's finaliser.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Derive returns a dropout with the same P and a seed derived from d's and
// the given labels (step, layer, site), so every site gets its own stream;
// the offset is d's.
func (d Dropout) Derive(labels ...uint64) Dropout {
	s := d.Seed
	for _, l := range labels {
		s = mix(s ^ mix(l))
	}
	return Dropout{P: d.P, Seed: s, Offset: d.Offset}
}

// Scale returns the factor applied to element i: 1/(1−P) or 0.
func (d Dropout) Scale(i int) float32 {
	// Compare the top 24 bits with P·2^24.
	if float32(mix(d.Seed^uint64(d.Offset+i))>>40) < d.P*(1<<24) {
		return 0
	}
	return 1 / (1 - d.P)
}

// dropMask is Scale with its threshold computed once: element i is dropped
// when mix(seed^(off+i))>>40 < thr, and kept ones are scaled by keep. thr =
// ⌈P·2^24⌉ is exact: the top 24 bits are an integer u, and for an integer
// u < 2^24, float32(u) < P·2^24 ⇔ u < ⌈P·2^24⌉ (TestDropoutMaskEqualsScale).
type dropMask struct {
	seed, thr uint64
	off       int
	keep      float32
}

func (d Dropout) mask() dropMask {
	return dropMask{seed: d.Seed, thr: uint64(math.Ceil(float64(d.P * (1 << 24)))), off: d.Offset, keep: 1 / (1 - d.P)}
}

// at returns the factor of element i: keep or 0, as Scale(i).
func (m dropMask) at(i int) float32 {
	if mix(m.seed^uint64(m.off+i))>>40 < m.thr {
		return 0
	}
	return m.keep
}

// mul sets dst[j] = src[j]·at(off+j) for j < len(dst), or dst[j] =
// at(off+j) when src is nil; dst and src may be the same slice. With
// AVX-512 (F and DQ) sixteen factors are hashed at a time (dropMulAVX512),
// with AVX2 eight (dropMulAVX2, the 64-bit products from 32-bit ones): the
// same integers, so the same factors (TestDropMulAgainstAt); mulGo is the
// scalar twin.
func (m dropMask) mul(dst, src []float32, off int) {
	kern, w := dropMulAVX512, 16
	switch {
	case useAVX512 && hasAVX512DQ:
	case useAVX2:
		kern, w = dropMulAVX2, 8
	default:
		w = 0
	}
	j := 0
	if w > 0 && len(dst) >= w {
		n := len(dst) &^ (w - 1)
		var sp *float32
		if src != nil {
			_ = src[n-1]
			sp = &src[0]
		}
		kern(&dst[0], sp, n, m.seed, uint64(m.off+off), m.thr, m.keep)
		j = n
	}
	m.mulGo(dst[j:], src, off, j)
}

// mulGo is mul in plain Go from element j0 of src and off+j0 of the
// stream (dst starts at element j0).
func (m dropMask) mulGo(dst, src []float32, off, j0 int) {
	if src == nil {
		for j := range dst {
			dst[j] = m.at(off + j0 + j)
		}
		return
	}
	for j := range dst {
		dst[j] = src[j0+j] * m.at(off+j0+j)
	}
}

// DropoutForward applies d in place: x[i] *= d.Scale(i).
//
//	x [N]
func DropoutForward(x []float32, d Dropout, N int) {
	if !d.Active() {
		return
	}
	m := d.mask()
	parallelFor(N, 4096, func(lo, hi int) {
		m.mul(x[lo:hi], x[lo:hi], lo)
	})
}

// DropoutBackward differentiates DropoutForward in place: dx[i] *= d.Scale(i).
//
//	dx [N]
func DropoutBackward(dx []float32, d Dropout, N int) { DropoutForward(dx, d, N) }
