package seq2seq

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
)

// tinyConfig is small enough for finite differences over every weight.
func tinyConfig(position string) Config {
	return Config{VocabSize: 11, DModel: 8, Heads: 2, FFN: 12, EncoderLayers: 2, DecoderLayers: 2,
		Position: position, Dropout: 0, LabelSmooth: 0.1, PadID: 0, BOSID: 1, EOSID: 2, LayerNormEps: 1e-5}
}

// tinyBatch has rows of different lengths on both sides, so padding, the
// source mask and ignored labels all take part.
func tinyBatch(t testing.TB, cfg Config) *Batch {
	b, err := NewBatch(cfg, [][]int32{{3, 4, 5, 6}, {7, 8}}, [][]int32{{9, 10}, {3, 5, 7}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGradients checks every parameter's gradient (embedding, each linear
// and LayerNorm of both stacks, the final norms) against float64 central
// differences, for both position encodings, with and without dropout.
func TestGradients(t *testing.T) {
	for _, pos := range []string{Rotary, Sinusoidal} {
		for _, drop := range []float64{0, 0.2} {
			t.Run(fmt.Sprintf("%s_drop%v", pos, drop), func(t *testing.T) {
				cfg := tinyConfig(pos)
				cfg.Dropout = drop
				// GELU: ReLU's kink at 0 breaks central differences when a
				// pre-activation lies within h of it (its derivative is
				// checked in package kernels).
				cfg.Activation = "gelu"
				m, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				m.Init(1)
				// Non-trivial norms and biases, so their gradients are exercised too.
				r := testutil.Rand(2)
				for _, p := range m.Params() {
					if len(p.Shape) == 1 {
						for i, v := range testutil.RandN(r, len(p.Data), 0.1) {
							p.Data[i] += v
						}
					}
				}
				b := tinyBatch(t, cfg)
				const scale = 10 // gradients of order 1, for the absolute tolerance
				loss := func() float64 {
					p, err := m.Forward(context.Background(), b, Options{Train: true, Seed: 5})
					if err != nil {
						t.Fatal(err)
					}
					return scale * p.Loss
				}
				m.ZeroGrad()
				p, err := m.Forward(context.Background(), b, Options{Train: true, Seed: 5})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Backward(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, prm := range m.Params() {
					g := make([]float32, len(prm.Grad))
					nz := 0.0
					for i, v := range prm.Grad {
						g[i] = scale * v
						nz = math.Max(nz, math.Abs(float64(v)))
					}
					if nz == 0 {
						t.Errorf("%s: gradient is all zero", prm.Name)
					}
					testutil.GradCheck(t, prm.Name, prm.Data, g, loss, 1e-3, 2e-3)
				}
			})
		}
	}
}

// TestGradientAccumulates: two backward passes give doubled gradients.
func TestGradientAccumulates(t *testing.T) {
	cfg := tinyConfig(Rotary)
	m, _ := New(cfg)
	m.Init(3)
	b := tinyBatch(t, cfg)
	p, _ := m.Forward(context.Background(), b, Options{Train: true, Seed: 1})
	p.Backward(context.Background())
	once := append([]float32(nil), m.Embed.Grad...)
	p, _ = m.Forward(context.Background(), b, Options{Train: true, Seed: 1})
	p.Backward(context.Background())
	for i, v := range m.Embed.Grad {
		if math.Abs(float64(v-2*once[i])) > 1e-6 {
			t.Fatalf("embedding grad[%d]: after two passes %v, want 2×%v", i, v, once[i])
		}
	}
}

func TestSmoothedCrossEntropy(t *testing.T) {
	r := testutil.Rand(4)
	N, V := 5, 7
	logits := testutil.RandN(r, N*V, 2)
	labels := []int32{3, -1, 0, 6, 2}
	for _, eps := range []float64{0, 0.1} {
		// The loss by its definition, in float64: −Σ q_v log p_v.
		want, n := 0.0, 0
		for i, y := range labels {
			if y < 0 {
				continue
			}
			n++
			z := logits[i*V : i*V+V]
			s := 0.0
			for _, v := range z {
				s += math.Exp(float64(v))
			}
			for v := range z {
				q := eps / float64(V)
				if int32(v) == y {
					q += 1 - eps
				}
				want -= q * (float64(z[v]) - math.Log(s))
			}
		}
		want /= float64(n)
		grad := make([]float32, N*V)
		got, _, cnt := smoothedCrossEntropy(grad, logits, labels, eps, N, V)
		if math.Abs(got-want) > 1e-9 || cnt != 4 {
			t.Errorf("eps %v: loss %v over %d rows, want %v over 4", eps, got, cnt, want)
		}
		testutil.GradCheck(t, fmt.Sprintf("eps %v", eps), logits, grad, func() float64 {
			l, _, _ := smoothedCrossEntropy(nil, logits, labels, eps, N, V)
			return l
		}, 1e-3, 1e-4)
	}
}

// TestReLUPath: the model's direct ReLU gives the kernel's numbers (the
// GELU gradient check above runs the kernel's path).
func TestReLUPath(t *testing.T) {
	cfg := tinyConfig(Rotary)
	m, _ := New(cfg)
	m.Init(6)
	BT, C, I := 5, cfg.DModel, cfg.FFN
	x := testutil.RandN(testutil.Rand(1), BT*C, 1)
	L := &m.Enc[0]
	for i := range L.FC1.B.Data {
		L.FC1.B.Data[i] = float32(i%3) - 1
	}
	var a ffnAct
	m.ffnForward(&a, make([]float32, BT*C), x, L.FFNNorm, L.FC1, L.FC2, kernels.Dropout{}, BT)
	h := make([]float32, BT*I)
	kernels.MatmulForward(h, a.ln.out, L.FC1.W.Data, L.FC1.B.Data, BT, C, I)
	want, wantD := make([]float32, BT*I), make([]float32, BT*I)
	kernels.ActivationForwardSaveGrad(want, wantD, h, kernels.ReLU, BT*I)
	testutil.AssertClose(t, "relu", a.act, want, 0, 0)
	testutil.AssertClose(t, "relu'", a.dact, wantD, 0, 0)
}
