package kernels

import (
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// A dropout with Offset o draws, on x[lo:hi], the mask the dropout without
// it draws on elements o+lo … o+hi of a longer tensor; Derive keeps the
// offset, and offset 0 is the mask of a Dropout that never heard of it.
func TestDropoutOffset(t *testing.T) {
	d := Dropout{P: 0.3, Seed: 99}
	N := 10007
	full := make([]float32, N)
	for i := range full {
		full[i] = 1 + float32(i%13)
	}
	want := append([]float32(nil), full...)
	DropoutForward(want, d, N)
	for _, lo := range []int{0, 1, 4096, 5000} {
		sub := append([]float32(nil), full[lo:]...)
		o := d
		o.Offset = lo
		DropoutForward(sub, o, len(sub))
		for i, v := range sub {
			if v != want[lo+i] {
				t.Fatalf("offset %d: element %d = %v, the whole tensor's %v", lo, i, v, want[lo+i])
			}
			if s := o.Scale(i); full[lo+i]*s != v {
				t.Fatalf("offset %d: Scale(%d) = %v disagrees with DropoutForward", lo, i, s)
			}
		}
	}
	o := d
	o.Offset = 17
	if got := o.Derive(3, 4); got.Offset != 17 || got.Seed != d.Derive(3, 4).Seed {
		t.Errorf("Derive: offset %d, seed %d; want 17 and %d", got.Offset, got.Seed, d.Derive(3, 4).Seed)
	}
}

// attnRows are B rows of attention inputs: q, k, v and the output's
// gradient [B, T, NH·HS], the key mask [B, T].
type attnRows struct {
	q, k, v, dout, km []float32
	B, T, NH, HS      int
}

// rows returns rows lo … hi−1 of a.
func (a attnRows) rows(lo, hi int) attnRows {
	n, T := a.T*a.NH*a.HS, a.T
	return attnRows{a.q[lo*n : hi*n], a.k[lo*n : hi*n], a.v[lo*n : hi*n], a.dout[lo*n : hi*n], a.km[lo*T : hi*T], hi - lo, T, a.NH, a.HS}
}

// newAttnRows returns 3 rows: no padding, right padding, a scattered mask.

func newAttnRows(seed uint64, T, NH, HS int) attnRows {
	r := testutil.Rand(seed)
	B, C := 3, NH*HS
	km := make([]float32, B*T)
	for j := range T {
		km[j] = 1
		if j < (T+1)/2 {
			km[T+j] = 1
		}
		if j%3 != 1 {
			km[2*T+j] = 1
		}
	}
	n := B * T * C
	return attnRows{testutil.RandN(r, n, 1), testutil.RandN(r, n, 1), testutil.RandN(r, n, 1), testutil.RandN(r, n, 1), km, B, T, NH, HS}
}

// The attention kernels with drop.Offset = lo·NH·T·T on rows lo… of a
// batch give those rows of the whole batch's output and gradients: the
// saved-probability, fused and relative kernels, each row's probabilities
// dropped as in the whole batch.
func TestDropoutOffsetAttention(t *testing.T) {
	const lo, K = 1, 2
	for _, T := range []int{7, 130} {
		for _, causal := range []bool{false, true} {
			t.Run(fmt.Sprintf("T%d_causal%v", T, causal), func(t *testing.T) {
				a := newAttnRows(uint64(70+T), T, 2, 16)
				relK := testutil.RandN(testutil.Rand(71), (2*K+1)*a.HS, 1)
				d := Dropout{P: 0.3, Seed: 42}
				sd := d
				sd.Offset = lo * a.NH * T * T
				type grads struct{ out, dq, dk, dv, drel []float32 }
				// run returns the output and gradients of one kernel family on a.
				run := func(kind string, a attnRows, drop Dropout) grads {
					n := a.B * T * a.NH * a.HS
					g := grads{make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, len(relK))}
					probs := make([]float32, a.B*a.NH*T*T)
					switch kind {
					case "saved":
						AttentionForward(g.out, probs, a.q, a.k, a.v, a.km, causal, drop, a.B, T, a.NH, a.HS)
						AttentionBackward(g.dq, g.dk, g.dv, a.dout, a.q, a.k, a.v, probs, a.km, causal, drop, a.B, T, a.NH, a.HS)
					case "fused":
						lse := make([]float32, a.B*a.NH*T)
						FlashAttentionForward(g.out, lse, a.q, a.k, a.v, a.km, causal, drop, a.B, T, a.NH, a.HS)
						FlashAttentionBackward(g.dq, g.dk, g.dv, a.dout, a.q, a.k, a.v, g.out, lse, a.km, causal, drop, a.B, T, a.NH, a.HS)
					case "relative":
						RelativeAttentionForward(g.out, probs, a.q, a.k, a.v, relK, a.km, causal, drop, K, a.B, T, a.NH, a.HS)
						RelativeAttentionBackward(g.dq, g.dk, g.dv, g.drel, a.dout, a.q, a.k, a.v, relK, probs, a.km, causal, drop, K, a.B, T, a.NH, a.HS)
					}
					return g
				}
				C := a.NH * a.HS
				for _, kind := range []string{"saved", "fused", "relative"} {
					whole := run(kind, a, d)
					sub := run(kind, a.rows(lo, a.B), sd)
					for _, c := range []struct {
						name      string
						got, want []float32
					}{{"out", sub.out, whole.out}, {"dq", sub.dq, whole.dq}, {"dk", sub.dk, whole.dk}, {"dv", sub.dv, whole.dv}} {
						testutil.AssertClose(t, kind+" "+c.name, c.got, c.want[lo*T*C:], 1e-6, 1e-6)
					}
					if kind == "relative" {
						// drelK sums over rows: the first row's plus the others'.
						head := run(kind, a.rows(0, lo), d)
						for i := range head.drel {
							head.drel[i] += sub.drel[i]
						}
						testutil.AssertClose(t, "relative drelK", head.drel, whole.drel, 1e-5, 1e-5)
					}
					// Without the offset the rows draw other masks.
					if other := run(kind, a.rows(lo, a.B), d); fmt.Sprint(other.out) == fmt.Sprint(whole.out[lo*T*C:]) {
						t.Errorf("%s: rows %d… draw the whole batch's masks without the offset: is dropout on?", kind, lo)
					}
				}
			})
		}
	}
}
