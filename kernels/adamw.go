package kernels

import "math"

// AdamWScalars are the per-step float32 constants of AdamWUpdate (the
// assembly reads them in this order).
type AdamWScalars struct {
	Decay      float32 // 1 − lr·weight_decay, or 1 for parameters without decay
	B1         float32 // β₁
	OneMinusB1 float32 // 1 − β₁, rounded from float64
	B2         float32 // β₂
	OneMinusB2 float32 // 1 − β₂, rounded from float64
	StepSize   float32 // lr/(1 − β₁^t)
	BC2Sqrt    float32 // √(1 − β₂^t)
	Eps        float32 // ε
}

// AdamWUpdate applies one AdamW step (Loshchilov & Hutter, decoupled weight
// decay, as torch.optim.AdamW defines it; PyTorch's kernels round some steps
// in another order) to a parameter slice:
//
//	x = p·Decay
//	m = B1·m + OneMinusB1·g
//	v = B2·v + OneMinusB2·g·g
//	p = x − StepSize·(m / (√v/BC2Sqrt + Eps))
//
// Every operation rounds to float32 in this order (√ correctly rounded, no
// fused multiply-add), so the vector and scalar paths give the same bits and
// a resumed run repeats an uninterrupted one exactly.
//
//	p, m, v [N]  updated in place
//	g       [N]
func AdamWUpdate(p, g, m, v []float32, k *AdamWScalars) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	n := 0
	if useAVX2 {
		n = len(p) &^ 7
		if n > 0 {
			adamWAVX2(&p[0], &g[0], &m[0], &v[0], n, k)
		}
	}
	adamWNaive(p[n:], g[n:], m[n:], v[n:], k)
}

// adamWNaive is the scalar twin of AdamWUpdate.
func adamWNaive(p, g, m, v []float32, k *AdamWScalars) {
	for j := range p {
		// float32(…) around each product keeps Go from fusing it with the
		// following addition (which it may do on arm64 or with GOAMD64=v3).
		x := p[j] * k.Decay
		gj := g[j]
		mj := float32(k.B1*m[j]) + float32(k.OneMinusB1*gj)
		vj := float32(k.B2*v[j]) + float32(float32(k.OneMinusB2*gj)*gj)
		m[j], v[j] = mj, vj
		denom := float32(math.Sqrt(float64(vj)))/k.BC2Sqrt + k.Eps
		p[j] = x - float32(k.StepSize*(mj/denom))
	}
}
