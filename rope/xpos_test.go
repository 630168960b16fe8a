package rope

import (
	"math"
	"testing"
)

// refXPos is rotary-embedding-torch's get_scale written out per element:
// ζ_i = (2i + 0.4·dim)/(1.4·dim), power (p − seqLen//2)/B, through exp/log.
func refXPos(dim int, pos []int, seqLen int, base float64) []float64 {
	var out []float64
	centre := int(math.Floor(float64(seqLen) / 2))
	for _, p := range pos {
		for j := 0; j < dim; j += 2 {
			zeta := (float64(j) + 0.4*float64(dim)) / (1.4 * float64(dim))
			out = append(out, math.Exp(float64(p-centre)/base*math.Log(zeta)))
		}
	}
	return out
}

func TestXPosMatchesReference(t *testing.T) {
	for _, c := range []struct {
		x      XPos
		base   float64
		dim    int
		pos    []int
		seqLen int
	}{
		{XPos{}, 512, 64, Positions(17, 0), 17},
		{XPos{ScaleBase: 512}, 512, 8, Positions(4, 0), 4},
		{XPos{ScaleBase: 100}, 100, 16, []int{0, 5, 1000, 4095}, 4096},
		{XPos{}, 512, 32, Positions(3, 10), 13}, // cached keys: the last 3 of 13
		{XPos{}, 512, 4, []int{0, 1}, -3},       // Python floor division: centre −2
	} {
		got := c.x.Scales(c.dim, c.pos, c.seqLen)
		want := refXPos(c.dim, c.pos, c.seqLen, c.base)
		if len(got) != len(want) {
			t.Fatalf("len %d, want %d", len(got), len(want))
		}
		for i := range want {
			if e := relErr(got[i], want[i]); e > 1e-12 {
				t.Errorf("%+v dim %d seqLen %d: [%d] = %v, want %v", c.x, c.dim, c.seqLen, i, got[i], want[i])
			}
		}
	}
}

// The scales are 1 at the centre, below 1 after it, and the q·k product
// ζ^(m'/B)·ζ^(−n'/B) depends only on m − n.
func TestXPosProperties(t *testing.T) {
	const dim, T = 16, 9
	x := XPos{}
	s := x.Scales(dim, Positions(T, 0), T)
	h := dim / 2
	for i := 0; i < h; i++ {
		if s[(T/2)*h+i] != 1 {
			t.Errorf("centre scale[%d] = %v, want 1", i, s[(T/2)*h+i])
		}
		if !(s[(T-1)*h+i] < 1) {
			t.Errorf("last scale[%d] = %v, want < 1", i, s[(T-1)*h+i])
		}
	}
	for m := 0; m < T; m++ {
		for n := 0; n < T; n++ {
			for i := 0; i < h; i++ {
				prod := s[m*h+i] / s[n*h+i] // q's factor times k's (the reciprocal)
				zeta := (float64(2*i) + 0.4*dim) / (1.4 * dim)
				if e := relErr(prod, math.Pow(zeta, float64(m-n)/DefaultXPosScaleBase)); e > 1e-12 {
					t.Fatalf("m=%d n=%d i=%d: product %v not a function of m−n (rel err %v)", m, n, i, prod, e)
				}
			}
		}
	}
	if err := (XPos{ScaleBase: -1}).Validate(); err == nil {
		t.Error("negative scale_base accepted")
	}
	if err := (XPos{}).Validate(); err != nil {
		t.Error(err)
	}
}
