package kernels

import "github.com/roformer-go/roformer/blas"

// headPanels are one worker's operands of the fused attention's float32
// tile products packed once for go-asm (blas.HeadPacker) instead of by
// every product: the keys (as kᵀ) and values of its current head, tile
// by tile of flashK keys as the worker first needs them, and its current
// tile of queries. Packing a head's keys and values once for all its query
// tiles, rather than once per query tile and key tile, took the packing
// from 16% of the fused attention's time to 5% at 16,384 tokens and the
// small model's 16,384-token pass from 20.2–20.8 s to 18.2–18.6 s on two
// Zen 4 cores (docs/performance.md). The panels of a head cost 2·Tk·HS
// values a worker (8 MiB at 16,384 tokens, HS 64).
type headPanels struct {
	hp         blas.HeadPacker
	buf        *[]float32     // nt·(kLen + vLen) + qLen values
	ops        []blas.Operand // per key tile: kᵀ [HS, nk] panels, v [nk, HS] panels
	kLen, vLen int            // a whole key tile's panels
	bh, ready  int            // the head packed, and its key tiles [0, ready)
}

// newHeadPanels returns a worker's panels for a call over Tk keys of head
// size HS, or nil when its products do not run on go-asm (a library packs
// its own operands) or run in bfloat16. Release it with release.
func newHeadPanels(tm tileMath, Tq, Tk, HS int) *headPanels {
	if tm.bf16 {
		return nil
	}
	hp, ok := blas.HeadPacking(min(flashQ, Tq), min(flashK, Tk), HS)
	if !ok {
		return nil
	}
	nt := (Tk + flashK - 1) / flashK
	p := &headPanels{hp: hp, kLen: hp.LenB(HS, flashK), vLen: hp.LenB(flashK, HS), bh: -1}
	p.buf = getScratch(nt*(p.kLen+p.vLen) + hp.LenA(flashQ, HS))
	p.ops = make([]blas.Operand, 2*nt)
	return p
}

func (p *headPanels) release() {
	if p != nil {
		putScratch(p.buf)
	}
}

// keys returns key tile jt (keys [jt·flashK, +flashK) of Tk) of head bh
// as the operands kᵀ and v, packing the head's tiles up to jt first if
// they are not yet: k and v are the whole tensors [B, Tk, C], kb the
// offset of the head's first key.
func (p *headPanels) keys(bh, jt int, k, v []float32, kb, C, Tk, HS int) (kt, vt operand) {
	if bh != p.bh {
		p.bh, p.ready = bh, 0
	}
	for ; p.ready <= jt; p.ready++ {
		j0 := p.ready * flashK
		nk := min(flashK, Tk-j0)
		o := p.ready * (p.kLen + p.vLen)
		p.ops[2*p.ready] = p.hp.PackB((*p.buf)[o:o+p.kLen], true, HS, nk, k[kb+j0*C:], C)
		p.ops[2*p.ready+1] = p.hp.PackB((*p.buf)[o+p.kLen:o+p.kLen+p.vLen], false, nk, HS, v[kb+j0*C:], C)
	}
	return operand{p: p.ops[2*jt], packed: true}, operand{p: p.ops[2*jt+1], packed: true}
}

// queries packs n queries of head size HS (rows of q with leading
// dimension C) as the A side of the score product.
func (p *headPanels) queries(q []float32, n, HS, C int) operand {
	o := len(p.ops) / 2 * (p.kLen + p.vLen)
	return operand{p: p.hp.PackA((*p.buf)[o:], false, n, HS, q, C), packed: true}
}
