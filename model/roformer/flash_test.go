package roformer

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/tensor"
)

// TestFusedAttentionTraining: the fixtures' MLM gradients through the fused
// attention (fusedTrainMinT 0) equal those through the saved-probability
// kernels, with and without dropout (the same masks), and the fused pass
// keeps no probabilities.
func TestFusedAttentionTraining(t *testing.T) {
	defer func(v int) { fusedTrainMinT = v }(fusedTrainMinT)
	ctx := context.Background()
	for _, f := range loadFixtures(t) {
		if f.Gradients == nil {
			continue
		}
		for _, opts := range []StepOptions{{}, {Dropout: true, Seed: 7}} {
			t.Run(fmt.Sprintf("%s_dropout%v", f.Case, opts.Dropout), func(t *testing.T) {
				l, err := Load(f.dir, HeadMaskedLM, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				m := l.Model
				b := f.batch()
				labels := &Labels{IDs: flat(f.Outputs.RoFormerForMaskedLM.Labels)}
				run := func(minT int) ([]*tensor.Param, [][]float32, *State) {
					fusedTrainMinT = minT
					ps := m.Params()
					for _, p := range ps {
						clear(p.Grad)
					}
					s := m.NewState(b.B, b.T, true)
					if _, err := m.ForwardBackward(ctx, s, b, labels, opts); err != nil {
						t.Fatal(err)
					}
					g := make([][]float32, len(ps))
					for i, p := range ps {
						g[i] = append([]float32(nil), p.Grad...)
					}
					return ps, g, s
				}
				_, want, s0 := run(math.MaxInt)
				ps, got, s1 := run(0)
				softmax := m.Config.Attention() == AttnSoftmax && m.Config.PosEnc() != PosRelative
				if la := s1.layers[0]; softmax && (la.lse == nil || la.probs != nil) {
					t.Fatalf("fused pass: lse %d, probs %d floats; want lse only", len(la.lse), len(la.probs))
				}
				if la := s0.layers[0]; softmax && la.probs == nil {
					t.Fatal("saved-probability pass kept no probabilities")
				}
				for i, p := range ps {
					d, at := tensor.MaxAbsDiff(got[i], want[i])
					if scale := math.Max(tensor.MaxAbs(want[i]), 1e-6); d/scale > tolGradRel {
						t.Errorf("%s: max |diff| %.3g at %d (fused %v, saved %v) = %.3g of the largest entry", p.Name, d, at, got[i][at], want[i][at], d/scale)
					}
				}
			})
		}
	}
}

// TestFusedAttentionOutputAttentions: a pass that returns the attentions
// takes the kernels that keep them (every layer's [B, NH, T, T], rows
// summing to 1) and agrees with the fused inference pass.
func TestFusedAttentionOutputAttentions(t *testing.T) {
	defer func(v int) { fusedTrainMinT = v }(fusedTrainMinT)
	fusedTrainMinT = 0 // a debug pass runs on a training state: only wantProbs keeps it off the fused path
	ctx := context.Background()
	for _, f := range loadFixtures(t) {
		t.Run(f.Case, func(t *testing.T) {
			l, err := Load(f.dir, HeadMaskedLM, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m := l.Model
			b := f.batch()
			plain, err := m.Forward(ctx, b, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			debug, err := m.Forward(ctx, b, nil, Options{OutputAttentions: true})
			if err != nil {
				t.Fatal(err)
			}
			if m.Config.Attention() != AttnSoftmax {
				return
			}
			if len(debug.Attentions) != m.Config.NumHiddenLayers {
				t.Fatalf("%d attention tensors, want %d", len(debug.Attentions), m.Config.NumHiddenLayers)
			}
			T := b.T
			for l, a := range debug.Attentions {
				for r := 0; r < len(a.Data)/T; r++ {
					sum := 0.0
					for _, p := range a.Data[r*T : r*T+T] {
						sum += float64(p)
					}
					if math.Abs(sum-1) > 1e-5 {
						t.Fatalf("layer %d, row %d: the probabilities sum to %v", l, r, sum)
					}
				}
			}
			d, _ := tensor.MaxAbsDiff(debug.LastHiddenState.Data, plain.LastHiddenState.Data)
			if d > 1e-5 {
				t.Errorf("hidden states with and without OutputAttentions differ by %.3g", d)
			}
		})
	}
}
