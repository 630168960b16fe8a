package rope

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

func mustNew(t testing.TB, cfg Config) *Rotary {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// HF's unit test (tests/models/roformer/test_modeling_roformer.py) values for
// the sinusoid table, quoted to 4 decimals there.
func TestTableMatchesHFGolden(t *testing.T) {
	r := mustNew(t, Config{HeadSize: 6})
	tab := r.Table(6)
	want := [][]float64{{0, 0, 0, 1, 1, 1}, {0.8415, 0.0464, 0.0022, 0.5403, 0.9989, 1.0000}}
	for p, row := range want {
		for i, w := range row {
			if got := float64(tab[p*6+i]); math.Abs(got-w) > 1e-4 {
				t.Errorf("table(6,6)[%d][%d] = %v, want %v", p, i, got, w)
			}
		}
	}
	r = mustNew(t, Config{HeadSize: 512})
	tab = r.Table(3)
	for p, row := range map[int][]float64{1: {0.8415, 0.8219, 0.8020, 0.7819, 0.7617}, 2: {0.9093, 0.9364, 0.9581, 0.9749, 0.9870}} {
		for i, w := range row {
			if got := float64(tab[p*512+i]); math.Abs(got-w) > 1e-4 {
				t.Errorf("table(512,512)[%d][%d] = %v, want %v", p, i, got, w)
			}
		}
	}
}

// HF's test_apply_rotary_position_embeddings: q = arange(2·12·16·64)/100 laid
// out [2, 12, 16, 64], k = −q; row 1 of head 0 after rotation.
func TestRotationMatchesHFGolden(t *testing.T) {
	r := mustNew(t, Config{HeadSize: 64})
	T := 16
	x := make([]float32, T*64) // batch 0, head 0: [T, 64]
	for i := range x {
		x[i] = float32(i) / 100
	}
	sin, cos := make([]float32, T*32), make([]float32, T*32)
	r.SinCos(sin, cos, Positions(T, 0))
	r.Forward(x, sin, cos, 1, T, 1)
	want := []float64{-0.2012, 0.8897, 0.0263, 0.9401, 0.2074, 0.9463, 0.3481, 0.9343}
	for i, w := range want {
		if got := float64(x[64+i]); math.Abs(got-w) > 1e-4 {
			t.Errorf("q[0,0,1,%d] = %v, want %v", i, got, w)
		}
	}
	// Position 0 is the identity.
	for i := 0; i < 64; i++ {
		if x[i] != float32(i)/100 {
			t.Fatalf("position 0 changed element %d", i)
		}
	}
}

func TestForwardAgainstNaive(t *testing.T) {
	rng := testutil.Rand(1)
	for _, layout := range []Layout{Interleaved, Halves} {
		for _, c := range []struct{ HS, d, NH int }{{8, 8, 2}, {16, 8, 3}, {6, 6, 1}, {12, 4, 2}} {
			t.Run(fmt.Sprintf("%v_HS%d_d%d", layout, c.HS, c.d), func(t *testing.T) {
				r := mustNew(t, Config{HeadSize: c.HS, RotaryDims: c.d, Layout: layout, Base: 500})
				B, T := 2, 7
				x := testutil.RandN(rng, B*T*c.NH*c.HS, 1)
				want := append([]float32(nil), x...)
				pos := Positions(T, 3)
				sin, cos := make([]float32, T*c.d/2), make([]float32, T*c.d/2)
				r.SinCos(sin, cos, pos)
				r.Forward(x, sin, cos, B, T, c.NH)
				r.forwardNaive(want, pos, B, T, c.NH)
				testutil.AssertClose(t, "rotated", x, want, 1e-6, 1e-6)
			})
		}
	}
}

func TestNormPreservedAndInverse(t *testing.T) {
	rng := testutil.Rand(2)
	r := mustNew(t, Config{HeadSize: 32})
	B, T, NH := 1, 50, 2
	x := testutil.RandN(rng, B*T*NH*32, 1)
	orig := append([]float32(nil), x...)
	sin, cos := make([]float32, T*16), make([]float32, T*16)
	r.SinCos(sin, cos, Positions(T, 1000))
	r.Forward(x, sin, cos, B, T, NH)
	for h := 0; h < B*T*NH; h++ {
		n0, n1 := 0.0, 0.0
		for i := 0; i < 32; i++ {
			n0 += float64(orig[h*32+i]) * float64(orig[h*32+i])
			n1 += float64(x[h*32+i]) * float64(x[h*32+i])
		}
		if math.Abs(math.Sqrt(n0)-math.Sqrt(n1)) > 1e-5*math.Sqrt(n0) {
			t.Fatalf("head vector %d: norm %v became %v", h, math.Sqrt(n0), math.Sqrt(n1))
		}
	}
	// Backward is the inverse rotation (the transpose of an orthogonal map).
	r.Backward(x, sin, cos, B, T, NH)
	testutil.AssertClose(t, "R^T R x", x, orig, 2e-6, 1e-6)
}

// The paper's eq. (16): (R_m q)·(R_n k) depends on m and n only through n−m.
func TestRelativePosition(t *testing.T) {
	rng := testutil.Rand(3)
	for _, layout := range []Layout{Interleaved, Halves} {
		r := mustNew(t, Config{HeadSize: 16, Layout: layout})
		q, k := testutil.RandN(rng, 16, 1), testutil.RandN(rng, 16, 1)
		score := func(m, n int) float64 {
			qq, kk := append([]float32(nil), q...), append([]float32(nil), k...)
			s, c := make([]float32, 8), make([]float32, 8)
			r.SinCos(s, c, []int{m})
			r.Forward(qq, s, c, 1, 1, 1)
			r.SinCos(s, c, []int{n})
			r.Forward(kk, s, c, 1, 1, 1)
			return testutil.Dot(qq, kk)
		}
		for _, off := range []int{0, 1, 5, 37} {
			ref := score(0, off)
			for _, m := range []int{3, 100, 2000} {
				if got := score(m, m+off); math.Abs(got-ref) > 2e-4 {
					t.Errorf("%v: score(%d,%d) = %v, score(0,%d) = %v", layout, m, m+off, got, off, ref)
				}
			}
		}
	}
}

func TestGradient(t *testing.T) {
	rng := testutil.Rand(4)
	r := mustNew(t, Config{HeadSize: 4})
	B, T, NH := 2, 3, 2
	x := testutil.RandN(rng, B*T*NH*4, 1)
	proj := testutil.RandN(rng, len(x), 1)
	sin, cos := make([]float32, T*2), make([]float32, T*2)
	r.SinCos(sin, cos, Positions(T, 5))
	y := make([]float32, len(x))
	loss := func() float64 { copy(y, x); r.Forward(y, sin, cos, B, T, NH); return testutil.Dot(y, proj) }
	dx := append([]float32(nil), proj...)
	r.Backward(dx, sin, cos, B, T, NH)
	testutil.GradCheck(t, "dx", x, dx, loss, 1e-2, 1e-4)
}

func TestPerTokenPositions(t *testing.T) {
	rng := testutil.Rand(5)
	r := mustNew(t, Config{HeadSize: 8})
	B, T := 2, 3
	x := testutil.RandN(rng, B*T*8, 1)
	y := append([]float32(nil), x...)
	// Row 1 uses positions 10, 11, 12 (explicit position ids).
	pos := []int{0, 1, 2, 10, 11, 12}
	sin, cos := make([]float32, B*T*4), make([]float32, B*T*4)
	r.SinCos(sin, cos, pos)
	r.Forward(x, sin, cos, B, T, 1)
	r.forwardNaive(y[:T*8], pos[:3], 1, T, 1)
	r.forwardNaive(y[T*8:], pos[3:], 1, T, 1)
	testutil.AssertClose(t, "per-token", x, y, 1e-6, 1e-6)
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{HeadSize: 0}, {HeadSize: 8, RotaryDims: 3}, {HeadSize: 8, RotaryDims: 10}, {HeadSize: 8, Base: 1}, {HeadSize: 8, Base: math.NaN()}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	if _, err := ParseLayout("sideways"); err == nil {
		t.Error("unknown layout accepted")
	}
}

func ExampleRotary_Forward() {
	r, _ := New(Config{HeadSize: 4}) // RoFormer's interleaved layout, base 10000
	x := []float32{1, 0, 1, 0}       // one token, one head
	sin, cos := make([]float32, 2), make([]float32, 2)
	r.SinCos(sin, cos, []int{1}) // position 1
	r.Forward(x, sin, cos, 1, 1, 1)
	fmt.Printf("%.4f\n", x)
	// Output: [0.5403 0.8415 0.9999 0.0100]
}
