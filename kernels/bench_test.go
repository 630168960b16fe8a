package kernels

import (
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

// Per-kernel benchmarks at the shapes of the speed jobs (issue #5): base
// inference 8×128 (C 768, I 3072, NH 12) and small training 16×128 (C 384,
// I 1536, NH 6). Each reports allocations, and GFLOP/s for the matrix
// products or M elements/s for the element-wise kernels.

type benchShape struct {
	name           string
	B, T, C, NH, I int
}

var benchShapes = []benchShape{
	{"B8_T128_C768", 8, 128, 768, 12, 3072},
	{"B16_T128_C384", 16, 128, 384, 6, 1536},
	{"B1_T512_C768", 1, 512, 768, 12, 3072},
}

func gflops(b *testing.B, flop float64) {
	b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func melems(b *testing.B, n int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
}

func BenchmarkMatmul(b *testing.B) {
	r := testutil.Rand(1)
	for _, s := range benchShapes {
		BT := s.B * s.T
		for _, d := range [][2]int{{s.C, s.C}, {s.C, s.I}, {s.I, s.C}} {
			C, OC := d[0], d[1]
			inp, w, bias := testutil.RandN(r, BT*C, 1), testutil.RandN(r, OC*C, 0.02), testutil.RandN(r, OC, 0.02)
			out := make([]float32, BT*OC)
			name := fmt.Sprintf("%s/%dx%d", s.name, C, OC)
			b.Run(name+"/forward", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					MatmulForward(out, inp, w, bias, BT, C, OC)
				}
				gflops(b, 2*float64(BT*C*OC))
			})
			dinp, dw, db := make([]float32, BT*C), make([]float32, OC*C), make([]float32, OC)
			b.Run(name+"/backward", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					MatmulBackward(dinp, dw, db, out, inp, w, BT, C, OC)
				}
				gflops(b, 4*float64(BT*C*OC))
			})
			if blas.BF16Supported() != nil {
				continue
			}
			b.Run(name+"/forward_bf16", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					MatmulForwardBF16(out, inp, w, bias, BT, C, OC)
				}
				gflops(b, 2*float64(BT*C*OC))
			})
			b.Run(name+"/backward_bf16", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					MatmulBackwardBF16(dinp, dw, db, out, inp, w, BT, C, OC)
				}
				gflops(b, 4*float64(BT*C*OC))
			})
		}
	}
}

func BenchmarkAttention(b *testing.B) {
	r := testutil.Rand(2)
	for _, s := range benchShapes {
		B, T, C, NH := s.B, s.T, s.C, s.NH
		HS := C / NH
		q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
		out := make([]float32, B*T*C)
		probs := make([]float32, B*NH*T*T)
		flop := 4 * float64(B*NH*T*T*HS)
		b.Run(s.name+"/forward", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				AttentionForward(out, nil, q, k, v, nil, false, Dropout{}, B, T, NH, HS)
			}
			gflops(b, flop)
		})
		b.Run(s.name+"/forward_saved", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				AttentionForward(out, probs, q, k, v, nil, false, Dropout{P: 0.1, Seed: 1}, B, T, NH, HS)
			}
			gflops(b, flop)
		})
		dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
		b.Run(s.name+"/backward", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				AttentionBackward(dq, dk, dv, out, q, k, v, probs, nil, false, Dropout{P: 0.1, Seed: 1}, B, T, NH, HS)
			}
			gflops(b, 2*flop)
		})
		if blas.BF16Supported() != nil {
			continue
		}
		b.Run(s.name+"/forward_saved_bf16", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				AttentionForwardBF16(out, probs, q, k, v, nil, false, Dropout{P: 0.1, Seed: 1}, B, T, NH, HS)
			}
			gflops(b, flop)
		})
		b.Run(s.name+"/backward_bf16", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				AttentionBackwardBF16(dq, dk, dv, out, q, k, v, probs, nil, false, Dropout{P: 0.1, Seed: 1}, B, T, NH, HS)
			}
			gflops(b, 2*flop)
		})
	}
}

func BenchmarkElementwise(b *testing.B) {
	r := testutil.Rand(3)
	for _, s := range benchShapes {
		BT, C, I := s.B*s.T, s.C, s.I
		x := testutil.RandN(r, BT*I, 1)
		y, g := make([]float32, BT*I), make([]float32, BT*I)
		w, bias := testutil.RandN(r, C, 1), testutil.RandN(r, C, 1)
		mean, rstd := make([]float32, BT), make([]float32, BT)
		run := func(name string, n int, f func()) {
			b.Run(s.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					f()
				}
				melems(b, n)
			})
		}
		run("gelu", BT*I, func() { ActivationForward(y, x, GELU, BT*I) })
		run("gelu_save_grad", BT*I, func() { ActivationForwardSaveGrad(y, g, x, GELU, BT*I) })
		run("layernorm", BT*C, func() { LayerNormForward(y, mean, rstd, x, w, bias, 1e-12, BT, C) })
		run("layernorm_backward", BT*C, func() {
			LayerNormBackward(g, w, bias, x[BT*C:2*BT*C], x, w, mean, rstd, BT, C)
		})
		run("add", BT*C, func() { AddForward(y, x, x[BT*C:], BT*C) })
		run("dropout", BT*C, func() { DropoutForward(y[:BT*C], Dropout{P: 0.1, Seed: 7}, BT*C) })
	}
}

func BenchmarkCrossEntropy(b *testing.B) {
	r := testutil.Rand(4)
	for _, c := range []struct{ N, V int }{{308, 12000}, {1024, 12000}} {
		logits := testutil.RandN(r, c.N*c.V, 3)
		work := make([]float32, c.N*c.V)
		targets := make([]int32, c.N)
		for i := range targets {
			targets[i] = int32(r.IntN(c.V))
		}
		losses := make([]float32, c.N)
		b.Run(fmt.Sprintf("N%d_V%d/forward", c.N, c.V), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				CrossEntropyForward(losses, logits, targets, c.N, c.V)
			}
			melems(b, c.N*c.V)
		})
		b.Run(fmt.Sprintf("N%d_V%d/grad_in_place", c.N, c.V), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				copy(work, logits)
				CrossEntropyGradInPlace(work, targets, 1, c.N, c.V)
			}
			melems(b, c.N*c.V)
		})
	}
}

// BenchmarkFeedForward times a layer's feed-forward block on packed layers,
// res + FFOut(GELU(FFIn(x))): "unfused" as three passes (the first
// product, GELU, the second product with the residual), "fused" with GELU
// in the first product's kernel and, in bf16, a bfloat16 intermediate.
func BenchmarkFeedForward(b *testing.B) {
	r := testutil.Rand(1)
	for _, s := range benchShapes[:1] {
		BT, C, I := s.B*s.T, s.C, s.I
		x, res := testutil.RandN(r, BT*C, 1), testutil.RandN(r, BT*C, 1)
		w1, b1 := testutil.RandN(r, I*C, 0.02), testutil.RandN(r, I, 0.02)
		w2, b2 := testutil.RandN(r, C*I, 0.02), testutil.RandN(r, C, 0.02)
		pre, out := make([]float32, BT*I), make([]float32, BT*C)
		for _, mk := range []struct {
			name string
			new  func([]float32, int, int) (*PackedLinear, error)
		}{{"fp32", NewPackedLinear}, {"bf16", NewBF16Linear}} {
			in, err := mk.new(w1, I, C)
			if err != nil {
				continue
			}
			o, _ := mk.new(w2, C, I)
			flop := 2 * 2 * float64(BT) * float64(C) * float64(I)
			b.Run(fmt.Sprintf("%s/%s/unfused", s.name, mk.name), func(b *testing.B) {
				for b.Loop() {
					in.Forward(pre, x, b1, nil, BT)
					ActivationForward(pre, pre, GELU, BT*I)
					o.Forward(out, pre, b2, res, BT)
				}
				gflops(b, flop)
			})
			b.Run(fmt.Sprintf("%s/%s/fused", s.name, mk.name), func(b *testing.B) {
				for b.Loop() {
					if in.BF16() {
						pre16 := BF16Buffer(pre)[:BT*I]
						in.ForwardActBF16(pre16, x, b1, GELU, BT)
						o.ForwardBF16(out, pre16, b2, res, BT)
					} else {
						in.ForwardAct(pre, x, b1, GELU, BT)
						o.Forward(out, pre, b2, res, BT)
					}
				}
				gflops(b, flop)
			})
		}
	}
}
