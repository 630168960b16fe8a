package kernels

import (
	"sync"

	"github.com/roformer-go/roformer/blas"
)

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
	panelStore // buf: nt·(kLen + vLen) + qLen values; ops: per key tile kᵀ [HS, nk], v [nk, HS]
	hp         blas.HeadPacker
	kLen, vLen int // a whole key tile's panels
	bh, ready  int // the head packed, and its key tiles [0, ready)
}

// panelStore is the storage of a worker's packed operands: a scratch
// buffer and the operands that point into it. The structs holding it
// come from pools (headPanelsFree, backPanelsFree), so a warm call
// allocates neither the struct nor its operands.
type panelStore struct {
	buf *[]float32
	ops []blas.Operand
}

var headPanelsFree, backPanelsFree sync.Pool

// take gives the store n values of scratch and nops operands.
func (s *panelStore) take(n, nops int) {
	s.buf = getScratch(n)
	if cap(s.ops) < nops {
		s.ops = make([]blas.Operand, nops)
	}
	s.ops = s.ops[:nops]
}

// give returns the scratch and forgets the operands pointing into it.
func (s *panelStore) give() {
	putScratch(s.buf)
	s.buf = nil
	clear(s.ops)
}

// newHeadPanels returns a worker's panels for a call of Tq queries over Tk
// keys of head size HS, or nil when its products run in bfloat16 or do
// not run on go-asm (HeadSgemm's rule for a head's Tq×Tk×HS product:
// a library packs its own operands). Release it with release.
func newHeadPanels(tm tileMath, Tq, Tk, HS int) *headPanels {
	hp, ok := headPacker(tm, Tq, Tk, HS)
	if !ok {
		return nil
	}
	nt := (Tk + flashK - 1) / flashK
	p, _ := headPanelsFree.Get().(*headPanels)
	if p == nil {
		p = new(headPanels)
	}
	*p = headPanels{panelStore: p.panelStore, hp: hp, kLen: hp.LenB(HS, flashK), vLen: hp.LenB(flashK, HS), bh: -1}
	p.take(nt*(p.kLen+p.vLen)+hp.LenA(flashQ, HS), 2*nt)
	return p
}

// headPacker returns the packer of a fused pass's float32 products where
// they run on go-asm (blas.HeadPacking of a head's Tq×Tk×HS product).
func headPacker(tm tileMath, Tq, Tk, HS int) (blas.HeadPacker, bool) {
	if tm.bf16 || !packHeads {
		return blas.HeadPacker{}, false
	}
	return blas.HeadPacking(Tq, Tk, HS)
}

// packHeads lets the fused passes pack their operands (headPanels,
// backPanels); tests turn it off to compare the passes with and without.
var packHeads = true

func (p *headPanels) release() {
	if p != nil {
		p.give()
		headPanelsFree.Put(p)
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

// backPanels are one worker's packed operands of the fused backward's
// float32 tile products on go-asm, as headPanels are the forward's: the
// queries and output gradients of its current head in both forms the
// products read them (the A side of q·kᵀ and dout·vᵀ, the B side of
// dv += Pᵀ·dout and dk += dSᵀ·q), packed once per head for every tile
// of keys, and the current key tile's kᵀ, vᵀ and k, packed once for every
// tile of queries.
type backPanels struct {
	panelStore // ops: per query tile q and dout as A, then as B
	hp         blas.HeadPacker
	bq, bk     int
	qLen       int // a query tile's four forms
	kt, vt     operand
	kn         operand
}

// newBackPanels returns a worker's panels for a backward pass of Tq
// queries over Tk keys in tiles of bq × bk, or nil where
// newHeadPanels returns nil.
func newBackPanels(tm tileMath, Tq, Tk, HS, bq, bk int) *backPanels {
	hp, ok := headPacker(tm, Tq, Tk, HS)
	if !ok {
		return nil
	}
	nq := (Tq + bq - 1) / bq
	p, _ := backPanelsFree.Get().(*backPanels)
	if p == nil {
		p = new(backPanels)
	}
	*p = backPanels{panelStore: p.panelStore, hp: hp, bq: bq, bk: bk, qLen: 2*hp.LenA(bq, HS) + 2*hp.LenB(bq, HS)}
	p.take(nq*p.qLen+2*hp.LenB(HS, bk)+hp.LenB(bk, HS), 4*nq)
	return p
}

func (p *backPanels) release() {
	if p != nil {
		p.give()
		backPanelsFree.Put(p)
	}
}

// head packs the query tiles of one head: q and dout [B, Tq, C] from
// offset qb (the head's first query).
func (p *backPanels) head(q, dout []float32, qb, C, Tq, HS int) {
	la, lb := p.hp.LenA(p.bq, HS), p.hp.LenB(p.bq, HS)
	for t := 0; t*p.bq < Tq; t++ {
		i0 := t * p.bq
		n := min(p.bq, Tq-i0)
		b := (*p.buf)[t*p.qLen:]
		qs, ds := q[qb+i0*C:], dout[qb+i0*C:]
		p.ops[4*t] = p.hp.PackA(b[:la], false, n, HS, qs, C)
		p.ops[4*t+1] = p.hp.PackA(b[la:2*la], false, n, HS, ds, C)
		p.ops[4*t+2] = p.hp.PackB(b[2*la:2*la+lb], false, n, HS, qs, C)
		p.ops[4*t+3] = p.hp.PackB(b[2*la+lb:2*la+2*lb], false, n, HS, ds, C)
	}
}

// query returns query tile i0/bq's q and dout as A and as B operands.
func (p *backPanels) query(i0 int) (qa, da, qb, db operand) {
	o := p.ops[4*(i0/p.bq):]
	return operand{p: o[0], packed: true}, operand{p: o[1], packed: true}, operand{p: o[2], packed: true}, operand{p: o[3], packed: true}
}

// keys packs nk keys and values of the current key tile (rows of k and
// v [B, Tk, C] from offset off) as kᵀ, vᵀ and k.
func (p *backPanels) keys(k, v []float32, off, nk, C, HS int) {
	b := (*p.buf)[len(p.ops)/4*p.qLen:]
	lt, ln := p.hp.LenB(HS, p.bk), p.hp.LenB(p.bk, HS)
	p.kt = operand{p: p.hp.PackB(b[:lt], true, HS, nk, k[off:], C), packed: true}
	p.vt = operand{p: p.hp.PackB(b[lt:2*lt], true, HS, nk, v[off:], C), packed: true}
	p.kn = operand{p: p.hp.PackB(b[2*lt:2*lt+ln], false, nk, HS, k[off:], C), packed: true}
}
