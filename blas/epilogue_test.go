//go:build !windows

package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// eltwiseRef is the float64 twin of each Eltwise.
func eltwiseRef(e Eltwise, x float64) float64 {
	switch e {
	case EltwiseGELUErf:
		return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
	case EltwiseGELUTanh:
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case EltwiseReLU:
		return max(x, 0)
	case EltwiseSwish:
		return x / (1 + math.Exp(-x))
	case EltwiseTanh:
		return math.Tanh(x)
	}
	return x
}

// toBF16 returns the bfloat16 halves of x rounded to nearest even.
func toBF16(x []float32) []uint16 {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = uint16(math.Float32bits(bf16Round(v)) >> 16)
	}
	return h
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// TestRunEpilogue checks PackedMatmul.Run against a float64 twin for every
// combination of input and output type, bias, activation and residual
// (separate and in place), on bfloat16 and float32 layers, for row counts
// on both sides of oneDNN's blocks.
func TestRunEpilogue(t *testing.T) {
	if _, err := loadDNNLMatmul(); err != nil {
		t.Skip(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const n, k = 48, 72
	w := bf16RandSlice(rng, n*k)
	bias := bf16RandSlice(rng, n)
	layers := map[string]*PackedMatmul{}
	if f, err := NewF32Matmul(w, n, k); err != nil {
		t.Fatal(err)
	} else {
		layers["f32"] = f
	}
	if BF16Supported() == nil {
		b, err := NewBF16Matmul(w, n, k)
		if err != nil {
			t.Fatal(err)
		}
		layers["bf16"] = b
	}
	for name, l := range layers {
		bf := name == "bf16"
		for _, m := range []int{1, 5, 33} {
			in := bf16RandSlice(rng, m*k)
			res := bf16RandSlice(rng, m*n)
			for _, in16 := range []bool{false, true} {
				for _, out16 := range []bool{false, true} {
					if !bf && (in16 || out16) {
						continue
					}
					for _, withBias := range []bool{false, true} {
						for act := EltwiseNone; act <= EltwiseTanh; act++ {
							for _, resMode := range []string{"none", "separate", "in place"} {
								if resMode == "in place" && out16 {
									continue
								}
								what := fmt.Sprintf("%s m=%d in16=%v out16=%v bias=%v %v res=%s", name, m, in16, out16, withBias, act, resMode)
								a := MatmulArgs{Act: act}
								if in16 {
									a.In16 = toBF16(in)
								} else {
									a.In = in
								}
								if out16 {
									a.Out16 = make([]uint16, m*n)
								} else {
									a.Out = make([]float32, m*n)
									for i := range a.Out {
										a.Out[i] = float32(math.NaN())
									}
								}
								if withBias {
									a.Bias = bias
								}
								switch resMode {
								case "separate":
									a.Res = res
								case "in place":
									copy(a.Out, res)
									a.Res = a.Out
								}
								l.Run(m, &a)
								for i := 0; i < m; i++ {
									for j := 0; j < n; j++ {
										var sum, scale float64
										for c := 0; c < k; c++ {
											x, y := in[i*k+c], w[j*k+c]
											if bf {
												x, y = bf16Round(x), bf16Round(y)
											}
											sum += float64(x) * float64(y)
											scale += math.Abs(float64(x) * float64(y))
										}
										if withBias {
											sum += float64(bias[j])
											scale += math.Abs(float64(bias[j]))
										}
										want := eltwiseRef(act, sum)
										if resMode != "none" {
											want += float64(res[i*n+j])
											scale += math.Abs(float64(res[i*n+j]))
										}
										var got float64
										tol := 2e-6*scale + 1e-6
										if out16 {
											got = float64(fromBF16(a.Out16[i*n+j]))
											tol += math.Abs(want) / 256
										} else {
											got = float64(a.Out[i*n+j])
										}
										if !(math.Abs(got-want) <= tol) {
											t.Fatalf("%s: [%d, %d] = %g, want %g (±%.2g)", what, i, j, got, want, tol)
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestRunChecksArgs checks that Run refuses operands that do not fit.
func TestRunChecksArgs(t *testing.T) {
	if _, err := loadDNNLMatmul(); err != nil {
		t.Skip(err)
	}
	l, err := NewF32Matmul(make([]float32, 4*3), 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	in, out := make([]float32, 2*3), make([]float32, 2*4)
	for _, c := range []struct {
		what string
		a    MatmulArgs
	}{
		{"no input", MatmulArgs{Out: out}},
		{"two inputs", MatmulArgs{In: in, In16: make([]uint16, 6), Out: out}},
		{"no output", MatmulArgs{In: in}},
		{"bf16 on f32", MatmulArgs{In: in, Out16: make([]uint16, 8)}},
		{"short input", MatmulArgs{In: in[:5], Out: out}},
		{"short output", MatmulArgs{In: in, Out: out[:7]}},
		{"short bias", MatmulArgs{In: in, Out: out, Bias: make([]float32, 3)}},
		{"short residual", MatmulArgs{In: in, Out: out, Res: make([]float32, 7)}},
		{"unknown eltwise", MatmulArgs{In: in, Out: out, Act: 99}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.what)
				}
			}()
			l.Run(2, &c.a)
		}()
	}
}
