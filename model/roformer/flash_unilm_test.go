package roformer

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/tensor"
)

// uniLMCase is a RoFormer-Sim model and a batch with a type-1 part: the
// sim_a fixture on uniLMBatch, and a random Sim model on two rows of 601
// tokens (type 0 for 200, then 1; the second row 250 of type 0, 150 of
// type 1 and 201 of padding), past the fused kernel's 192×512 forward and
// 128×128 backward tiles.
type uniLMCase struct {
	name string
	m    *Model
	b    *Batch
}

func uniLMCases(t *testing.T) []uniLMCase {
	l, err := Load(filepath.Join(testutil.Shared(t, "fixtures", "roformer-family", "sim_a"), "model"), HeadCausalLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	small, _ := uniLMBatch()
	m := randomModel(t, tinyConfig(func(c *Config) {
		c.HiddenSize, c.EmbeddingSize, c.MaxPositionEmbeddings = 16, 16, 700
		c.IsDecoder = true
		c.AttentionProbsDropoutProb, c.HiddenDropoutProb = 0.3, 0.1
	}), HeadCausalLM, 81)
	m.EnablePooler()
	if !m.IsSim() {
		t.Fatal("the random model is not a Sim model")
	}
	T := 601
	b := &Batch{B: 2, T: T, InputIDs: make([]int32, 2*T), TokenTypeIDs: make([]int32, 2*T), AttentionMask: make([]int32, 2*T)}
	r := testutil.Rand(82)
	for j := 0; j < T; j++ {
		b.InputIDs[j], b.AttentionMask[j] = int32(1+r.IntN(9)), 1
		if j >= 200 {
			b.TokenTypeIDs[j] = 1
		}
		if j < 400 {
			b.InputIDs[T+j], b.AttentionMask[T+j] = int32(1+r.IntN(9)), 1
		}
		if j >= 250 && j < 400 {
			b.TokenTypeIDs[T+j] = 1
		}
	}
	return []uniLMCase{{"sim_a", l.Model, small}, {"random_T601", m, b}}
}

// TestFusedUniLMInference: under the UniLM mask a plain Forward takes the
// fused kernel (FlashSegmentAttentionForward) and gives the logits and
// hidden states of unilmAttention, the kernel a pass that returns the
// attentions takes, within float32 rounding.
func TestFusedUniLMInference(t *testing.T) {
	ctx := context.Background()
	for _, c := range uniLMCases(t) {
		t.Run(c.name, func(t *testing.T) {
			plain, err := c.m.Forward(ctx, c.b, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := c.m.Forward(ctx, c.b, nil, Options{OutputAttentions: true})
			if err != nil {
				t.Fatal(err)
			}
			// Measured: the largest |diff| is 3.4e-7 (sim_a) and 4.7e-6
			// (random_T601, whose N(0, 0.5) weights amplify rounding through
			// the layers) of the largest entry; unilmAttention adds its
			// scores in float32, the fused kernel its sums in float64.
			for _, o := range []struct {
				name      string
				got, want []float32
			}{{"hidden states", plain.LastHiddenState.Data, ref.LastHiddenState.Data}, {"logits", plain.Logits.Data, ref.Logits.Data}} {
				d, at := tensor.MaxAbsDiff(o.got, o.want)
				if scale := tensor.MaxAbs(o.want); d > 2e-5*scale {
					t.Errorf("%s: max |diff| %.3g at %d (fused %v, unilmAttention %v) = %.3g of the largest entry", o.name, d, at, o.got[at], o.want[at], d/scale)
				}
			}
		})
	}
}

// TestFusedUniLMTraining: a training pass under the UniLM mask through the
// fused kernels (fusedTrainMinT 0) gives the loss and gradients of
// unilmAttention's saved-probability pass, keeping a log-sum-exp and no
// probabilities.
func TestFusedUniLMTraining(t *testing.T) {
	defer func(v int) { fusedTrainMinT = v }(fusedTrainMinT)
	ctx := context.Background()
	for _, c := range uniLMCases(t) {
		labels := make([]int32, len(c.b.InputIDs))
		for i, ty := range c.b.TokenTypeIDs {
			labels[i] = -100
			if ty == 1 {
				labels[i] = c.b.InputIDs[i]
			}
		}
		for _, opts := range []StepOptions{{UniLM: true}, {UniLM: true, Dropout: true, Seed: 9}} {
			t.Run(fmt.Sprintf("%s_dropout%v", c.name, opts.Dropout), func(t *testing.T) {
				run := func(minT int) (float64, [][]float32, *State) {
					fusedTrainMinT = minT
					c.m.ZeroGrad()
					s := c.m.NewState(c.b.B, c.b.T, true)
					res, err := c.m.ForwardBackward(ctx, s, c.b, &Labels{IDs: labels}, opts)
					if err != nil {
						t.Fatal(err)
					}
					var g [][]float32
					for _, p := range c.m.Params() {
						g = append(g, append([]float32(nil), p.Grad...))
					}
					return res.Loss, g, s
				}
				l0, want, s0 := run(math.MaxInt)
				l1, got, s1 := run(0)
				if s0.unilm == nil || s1.unilm == nil {
					t.Fatal("the pass is not under the UniLM mask")
				}
				if la := s1.layers[0]; la.lse == nil || la.probs != nil {
					t.Fatalf("fused pass: lse %d, probs %d floats; want lse only", len(la.lse), len(la.probs))
				}
				if la := s0.layers[0]; la.probs == nil {
					t.Fatal("the reference pass kept no probabilities")
				}
				if math.Abs(l1-l0) > 1e-5*math.Max(1, l0) {
					t.Errorf("loss %v, reference %v", l1, l0)
				}
				for i, p := range c.m.Params() {
					d, at := tensor.MaxAbsDiff(got[i], want[i])
					if scale := math.Max(tensor.MaxAbs(want[i]), 1e-6); d/scale > tolGradRel {
						t.Errorf("%s: max |diff| %.3g at %d (fused %v, saved %v) = %.3g of the largest entry", p.Name, d, at, got[i][at], want[i][at], d/scale)
					}
				}
			})
		}
	}
}

// BenchmarkUniLMAttention times inference attention under the UniLM mask
// on the small model's heads (NH 6, HS 64), one row of T tokens, the first
// half of type 0: unilmAttention (the path before the fused kernel took
// it) against kernels.FlashSegmentAttentionForward.
func BenchmarkUniLMAttention(b *testing.B) {
	NH, HS := 6, 64
	C := NH * HS
	r := testutil.Rand(83)
	for _, T := range []int{512, 2048} {
		q, k, v := testutil.RandN(r, T*C, 1), testutil.RandN(r, T*C, 1), testutil.RandN(r, T*C, 1)
		seg := make([]int32, T)
		for j := T / 2; j < T; j++ {
			seg[j] = int32(j - T/2 + 1)
		}
		out := make([]float32, T*C)
		b.Run(fmt.Sprintf("T%d/unilmAttention", T), func(b *testing.B) {
			for b.Loop() {
				unilmAttention(out, nil, q, k, v, nil, seg, 1, T, NH, HS)
			}
		})
		b.Run(fmt.Sprintf("T%d/fused", T), func(b *testing.B) {
			for b.Loop() {
				kernels.FlashSegmentAttentionForward(out, nil, q, k, v, nil, seg, kernels.Dropout{}, 1, T, NH, HS)
			}
		})
	}
}
