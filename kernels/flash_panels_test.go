package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

// Packing a head's operands once changes no bit: with every product on
// go-asm, the fused forward and backward passes with their panels
// (headPanels, backPanels) and without them agree exactly, across the
// tiles' edges (T 200: one short key tile; 600: a full and a short one,
// four query tiles; 1,100: three key tiles), every mask, with dropout and
// without, and in cross-attention (Tq ≠ Tk).
func TestFlashPanelsChangeNoBit(t *testing.T) {
	testutil.UseBackend(t, blas.KindGoAsm)
	defer func() { packHeads = true }()
	r := testutil.Rand(71)
	B, NH, HS := 2, 2, 64
	C := NH * HS
	same := func(t *testing.T, what string, a, b []float32) {
		t.Helper()
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s[%d]: %v with the panels, %v without", what, i, a[i], b[i])
			}
		}
	}
	for _, T := range []int{200, 600, 1100} {
		q, k, v, dout := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
		for name, m := range flashMasks(T) {
			for _, drop := range flashDrops {
				t.Run(fmt.Sprintf("T%d_%s_drop%v", T, name, drop.P), func(t *testing.T) {
					var res [2][5][]float32
					for i, pack := range []bool{true, false} {
						packHeads = pack
						out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
						dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
						FlashAttentionForward(out, lse, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
						FlashAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, m.km, m.causal, drop, B, T, NH, HS)
						res[i] = [5][]float32{out, lse, dq, dk, dv}
					}
					for j, what := range []string{"out", "lse", "dq", "dk", "dv"} {
						same(t, what, res[0][j], res[1][j])
					}
				})
			}
		}
	}
	// Cross-attention: 300 queries over the last 700 keys' sequence, causal.
	Tq, Tk := 300, 700
	q, dout := testutil.RandN(r, B*Tq*C, 1), testutil.RandN(r, B*Tq*C, 1)
	k, v := testutil.RandN(r, B*Tk*C, 1), testutil.RandN(r, B*Tk*C, 1)
	var res [2][5][]float32
	for i, pack := range []bool{true, false} {
		packHeads = pack
		out, lse := make([]float32, B*Tq*C), make([]float32, B*NH*Tq)
		dq, dk, dv := make([]float32, B*Tq*C), make([]float32, B*Tk*C), make([]float32, B*Tk*C)
		FlashCrossAttentionForward(out, lse, q, k, v, nil, true, B, Tq, Tk, NH, HS)
		FlashCrossAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, nil, true, B, Tq, Tk, NH, HS)
		res[i] = [5][]float32{out, lse, dq, dk, dv}
	}
	for j, what := range []string{"cross out", "cross lse", "cross dq", "cross dk", "cross dv"} {
		same(t, what, res[0][j], res[1][j])
	}
}
