package finetune

import (
	"context"
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
)

// BenchmarkEmbedStep compares a contrastive micro-step (forward, loss and
// backward of B (anchor, positive) pairs of T tokens: 2B texts) with a
// classification micro-step (ForwardBackward of the sequence-classification
// head) on B and on 2B rows of T tokens, on the tiny preset (4 layers,
// hidden 256) with dropout, and the MNRL step by gradient caching in
// mini-batches of 4; the AdamW update after any is the same.
//
//	go test ./finetune -run '^$' -bench EmbedStep -benchtime 3x
func BenchmarkEmbedStep(b *testing.B) {
	const B, T, V = 16, 64, 8000
	cfg, err := roformer.Preset("tiny", V)
	if err != nil {
		b.Fatal(err)
	}
	cfg.NumLabels = 2
	r := testutil.Rand(1)
	ids := func() []int32 {
		x := make([]int32, T)
		for i := range x {
			x[i] = int32(5 + r.IntN(V-5))
		}
		return x
	}
	ctx := context.Background()
	for _, rows := range []int{B, 2 * B} {
		b.Run(fmt.Sprintf("classification_%dx%d", rows, T), func(b *testing.B) {
			m, err := roformer.New(cfg, roformer.HeadSequenceCls)
			if err != nil {
				b.Fatal(err)
			}
			m.Init(1)
			batch := roformer.PadBatch(rows, T, 0, func(int) ([]int32, []int32) { return ids(), nil })
			lab := &roformer.Labels{IDs: make([]int32, rows)}
			s := m.NewState(rows, T, true)
			b.ResetTimer()
			for i := range b.N {
				if _, err := m.ForwardBackward(ctx, s, batch, lab, roformer.StepOptions{Dropout: true, Seed: uint64(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, c := range []struct {
		obj  contrastive.Objective
		mini int
	}{{contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, 0}, {contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20, Dims: []int{256, 128, 64}}, 0},
		{contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, 4}} {
		obj := c.obj
		name := fmt.Sprintf("mnrl_%dpairs_x%d", B, T)
		if obj.Dims != nil {
			name = fmt.Sprintf("matryoshka_mnrl_%dpairs_x%d", B, T)
		}
		if c.mini > 0 {
			name += fmt.Sprintf("_mini%d", c.mini) // gradient caching
		}
		b.Run(name, func(b *testing.B) {
			m, err := roformer.New(cfg, roformer.HeadBase)
			if err != nil {
				b.Fatal(err)
			}
			m.Init(1)
			t := &embedTrainer{j: EmbedJob{Model: m, Pooling: PoolMean, Objective: obj}, cols: 2, states: []*stateCache{{m: m}, {m: m}}, mini: c.mini}
			feats := make([]pairFeature, B)
			rows := make([]*pairFeature, B)
			for i := range feats {
				feats[i] = pairFeature{ids: [][]int32{ids(), ids()}}
				rows[i] = &feats[i]
			}
			if _, err := t.microStep(ctx, rows, 0); err != nil { // allocates the training states, as NewState above
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := t.microStep(ctx, rows, uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
