package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/roformer-go/roformer/blas"
)

func int8Backends(t *testing.T) []blas.Int8Backend {
	bs := []blas.Int8Backend{blas.GoInt8{}}
	if g, err := blas.Int8(); err == nil {
		bs = append(bs, g)
	} else {
		t.Logf("oneDNN's int8 products not tested: %v", err)
	}
	return bs
}

// The int8 layer computes exactly the float64 product of its quantized
// operands (its own rounding aside), and stays close to the float32 layer.
func TestInt8LinearAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, g := range int8Backends(t) {
		for _, sh := range [][3]int{{1, 5, 7}, {3, 33, 64}, {17, 64, 130}, {40, 48, 768}} {
			BT, OC, C := sh[0], sh[1], sh[2]
			for _, qmax := range []int{127, 63} {
				if _, ref := g.(blas.GoInt8); !ref && qmax > blas.Int8WeightMax() {
					continue // without VNNI the library's pair sums saturate past ±63 (NewInt8Linear keeps to 63)
				}
				inp := randVec(r, BT*C)
				for i := 0; i < C; i += 3 {
					inp[i] = max(inp[i], -0.17) // GELU-like skew in some columns
				}
				w, bias, res := randVec(r, OC*C), randVec(r, OC), randVec(r, BT*OC)
				q := newInt8Linear(w, OC, C, qmax, g)
				out := make([]float32, BT*OC)
				copy(out, res) // out may alias res
				q.Forward(out, inp, bias, out, BT)

				wq := q.Dequantized()
				aq := make([]uint8, C)
				exact, f32 := make([]float32, BT*OC), make([]float32, BT*OC)
				for row := 0; row < BT; row++ {
					s, zs := quantizeRowU8(aq, inp[row*C:row*C+C])
					for o := 0; o < OC; o++ {
						e, f := float64(bias[o])+float64(res[row*OC+o]), float64(bias[o])+float64(res[row*OC+o])
						for c := 0; c < C; c++ {
							e += (float64(s)*float64(aq[c]) - float64(zs)) * float64(wq[o*C+c])
							f += float64(inp[row*C+c]) * float64(w[o*C+c])
						}
						exact[row*OC+o], f32[row*OC+o] = float32(e), float32(f)
					}
				}
				for i := range out {
					if d := math.Abs(float64(out[i] - exact[i])); d > 2e-5*math.Sqrt(float64(C))*(1+math.Abs(float64(exact[i]))) {
						t.Fatalf("%s %v qmax %d: element %d is %v, exact product of the quantized operands %v", g.Name(), sh, qmax, i, out[i], exact[i])
					}
				}
				// Against float32: the quantization error, relative to the
				// size of the product's terms.
				for row := 0; row < BT; row++ {
					cs := Cosine(out[row*OC:row*OC+OC], f32[row*OC:row*OC+OC])
					if cs < 0.999 {
						t.Errorf("%s %v qmax %d: row %d cosine %.5f to float32", g.Name(), sh, qmax, row, cs)
					}
				}
			}
		}
	}
}

// NewInt8Linear's layer (int8 weights packed for go-asm's int8 panels
// where they run and the outputs are a multiple of 32, else for oneDNN's
// matmul) gives exactly what the layer with the plain reference product
// gives, in both splits over the workers: all sum the same quantized
// operands in int32, and the rescaling is the same code.
func TestInt8LinearPacked(t *testing.T) {
	if _, err := blas.Int8(); err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	defer SetThreads(Threads())
	for _, sh := range [][3]int{{1, 5, 7}, {3, 33, 64}, {17, 64, 130}, {40, 48, 768}, {200, 96, 256}, {1, 768, 768}, {16, 512, 100}, {130, 256, 64}} {
		BT, OC, C := sh[0], sh[1], sh[2]
		w, bias, res := randVec(r, OC*C), randVec(r, OC), randVec(r, BT*OC)
		inp := randVec(r, BT*C)
		ref := newInt8Linear(w, OC, C, blas.Int8WeightMax(), blas.GoInt8{})
		want := make([]float32, BT*OC)
		ref.Forward(want, inp, bias, res, BT)
		q, err := NewInt8Linear(w, OC, C)
		if err != nil {
			t.Fatal(err)
		}
		if q.packed == nil && q.panels == nil {
			t.Skipf("oneDNN runs the int8 matmul with its reference code here: %s", q)
		}
		if blas.Int8PanelsOK() && OC%32 == 0 && q.panels == nil {
			t.Errorf("%v: not on the int8 panels: %s", sh, q)
		}
		if q.Dequantized() != nil {
			t.Errorf("%v: a packed layer still holds its plain weights", sh)
		}
		for _, th := range []int{1, 2, 3} {
			SetThreads(th)
			got := make([]float32, BT*OC)
			q.Forward(got, inp, bias, res, BT)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%v, %d threads (%s): element %d is %v, the reference product gives %v", sh, th, q, i, got[i], want[i])
				}
			}
		}
	}
}

func TestQuantizeRowU8(t *testing.T) {
	q := make([]uint8, 5)
	s, zs := quantizeRowU8(q, []float32{-1, 0, 0.5, 3, -0.17})
	if q[1] != uint8(math.Round(float64(zs/s))) || q[0] != 0 || q[3] != 255 {
		t.Errorf("codes %v (s %v, z %v): 0 must be exact, the ends 0 and 255", q, s, zs/s)
	}
	s, zs = quantizeRowU8(q, []float32{0, 0, 0, 0, 0})
	if s != 1 || zs != 0 || q[0] != 0 {
		t.Errorf("all-zero row: s %v zs %v codes %v", s, zs, q)
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// The AVX-512 quantize and rescale kernels against their scalar twins: the
// same codes (at most one step apart where x·inv + z lands on a rounding
// boundary: the vector path fuses the multiply-add) and the same outputs.
func TestQuantKernelsAgainstScalar(t *testing.T) {
	restore, ok := withLevel(2)
	defer restore()
	if !ok {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{16, 17, 100, 768, 3072} {
		x := randVec(r, n)
		qv, qs := make([]uint8, n), make([]uint8, n)
		sv, zv := quantizeRowU8(qv, x)
		r0, _ := withLevel(0)
		ss, zz := quantizeRowU8(qs, x)
		r0()
		if sv != ss || zv != zz {
			t.Fatalf("n %d: scale %v/%v zero %v/%v", n, sv, ss, zv, zz)
		}
		for i := range qv {
			if d := int(qv[i]) - int(qs[i]); d < -1 || d > 1 {
				t.Fatalf("n %d: code %d is %d, scalar %d", n, i, qv[i], qs[i])
			}
		}
		acc := make([]int32, n)
		for i := range acc {
			acc[i] = int32(r.IntN(1<<20) - 1<<19)
		}
		scale, wsum, bias, res := randVec(r, n), randVec(r, n), randVec(r, n), randVec(r, n)
		zeros := make([]float32, n)
		for _, c := range []struct{ b, rs []float32 }{{bias, res}, {bias, nil}, {nil, res}, {nil, nil}} {
			ov, os := make([]float32, n), make([]float32, n)
			dequantRow(ov, acc, scale, wsum, c.b, c.rs, 0.01, 0.3, zeros)
			r0, _ := withLevel(0)
			dequantRow(os, acc, scale, wsum, c.b, c.rs, 0.01, 0.3, zeros)
			r0()
			for i := range ov {
				if d := math.Abs(float64(ov[i] - os[i])); d > 1e-5*(1+math.Abs(float64(os[i]))) {
					t.Fatalf("n %d bias %v res %v: out %d is %v, scalar %v", n, c.b != nil, c.rs != nil, i, ov[i], os[i])
				}
			}
		}
	}
}

// The bf16 layer (where the CPU has bfloat16 products) against the float32
// layer, with and without bias and residual, out aliasing res: within the
// rounding of bfloat16 (8 significant bits) of the inputs and weights.
func TestBF16LinearAgainstFP32(t *testing.T) {
	if _, err := NewBF16Linear(make([]float32, 4), 2, 2); err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, sh := range [][3]int{{1, 5, 7}, {17, 33, 64}, {40, 96, 768}} {
		BT, OC, C := sh[0], sh[1], sh[2]
		inp, w, bias, res := randVec(r, BT*C), randVec(r, OC*C), randVec(r, OC), randVec(r, BT*OC)
		q, err := NewBF16Linear(w, OC, C)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ b, rs []float32 }{{bias, res}, {bias, nil}, {nil, res}, {nil, nil}} {
			want := make([]float32, BT*OC)
			if c.rs != nil {
				MatmulResidualForward(want, inp, w, c.b, c.rs, BT, C, OC)
			} else {
				MatmulForward(want, inp, w, c.b, BT, C, OC)
			}
			got := make([]float32, BT*OC)
			rs := c.rs
			if rs != nil {
				copy(got, rs)
				rs = got // out aliases res
			}
			q.Forward(got, inp, c.b, rs, BT)
			for i := range got {
				// Each product term errs by about 2⁻⁸ relative; their sum
				// grows like √C times a term's size (inputs are N(0, 1)).
				if d := math.Abs(float64(got[i] - want[i])); d > 3*math.Sqrt(float64(C))/128 {
					t.Fatalf("%v bias %v res %v: element %d is %v, float32 %v", sh, c.b != nil, c.rs != nil, i, got[i], want[i])
				}
			}
		}
	}
}
