package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

// roundBF16 rounds every entry of x to bfloat16 (to nearest, ties to even).
func roundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		u := math.Float32bits(v)
		u += 0x7fff + (u>>16)&1
		out[i] = math.Float32frombits(u &^ 0xffff)
	}
	return out
}

// On operands that bfloat16 holds exactly, the bf16 layer is the float32
// one up to the order of float32 accumulation; on others it differs by
// the rounding of the operands, no more.
func TestMatmulBF16AgainstFP32(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	r := testutil.Rand(11)
	for _, s := range [][3]int{{1, 1, 1}, {7, 13, 5}, {37, 33, 65}, {130, 17, 9}, {64, 96, 160}} {
		BT, C, OC := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("BT%d_C%d_OC%d", BT, C, OC), func(t *testing.T) {
			inp, w, b := testutil.RandN(r, BT*C, 1), testutil.RandN(r, OC*C, 1), testutil.RandN(r, OC, 1)
			res, dout := testutil.RandN(r, BT*OC, 1), testutil.RandN(r, BT*OC, 1)
			ri, rw, rd := roundBF16(inp), roundBF16(w), roundBF16(dout)
			got, want := make([]float32, BT*OC), make([]float32, BT*OC)
			MatmulForwardBF16(got, ri, rw, b, BT, C, OC)
			MatmulForward(want, ri, rw, b, BT, C, OC)
			testutil.AssertClose(t, "forward, exact operands", got, want, 1e-5, 1e-5)
			MatmulResidualForwardBF16(got, ri, rw, b, res, BT, C, OC)
			MatmulResidualForward(want, ri, rw, b, res, BT, C, OC)
			testutil.AssertClose(t, "residual, exact operands", got, want, 1e-5, 1e-5)

			// Backward, with dweight and dbias accumulating onto what is there.
			dw0, db0 := testutil.RandN(r, OC*C, 1), testutil.RandN(r, OC, 1)
			gi, gw, gb := make([]float32, BT*C), append([]float32(nil), dw0...), append([]float32(nil), db0...)
			wi, ww, wb := make([]float32, BT*C), append([]float32(nil), dw0...), append([]float32(nil), db0...)
			MatmulBackwardBF16(gi, gw, gb, rd, ri, rw, BT, C, OC)
			MatmulBackward(wi, ww, wb, rd, ri, rw, BT, C, OC)
			testutil.AssertClose(t, "dinp, exact operands", gi, wi, 1e-5, 1e-5)
			testutil.AssertClose(t, "dweight, exact operands", gw, ww, 1e-5, 1e-5)
			testutil.AssertClose(t, "dbias", gb, wb, 1e-6, 1e-6)

			// General operands: within the rounding of each to 8 bits,
			// |Δ| ≤ 2·2⁻⁸·Σ|a||b| (loosely: 2⁻⁷·√C·4 for unit normals).
			MatmulForwardBF16(got, inp, w, nil, BT, C, OC)
			MatmulForward(want, inp, w, nil, BT, C, OC)
			bound := 4 * math.Sqrt(float64(C)) / 128
			differ := false
			for i := range got {
				d := math.Abs(float64(got[i] - want[i]))
				if d > bound {
					t.Fatalf("forward entry %d: bf16 %g, fp32 %g: |diff| %.3g > %.3g", i, got[i], want[i], d, bound)
				}
				differ = differ || d > 0
			}
			if !differ && BT*C > 1 {
				t.Fatal("bf16 forward equals fp32 on operands bfloat16 does not hold: nothing was rounded")
			}
		})
	}
}
