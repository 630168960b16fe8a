package finetune

import (
	"context"
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
)

// BenchmarkHeadStep compares a training micro-step (ForwardBackward with
// dropout) of the question-answering head (B windows of T tokens) and of
// the multiple-choice head (B/4 questions × 4 choices of T tokens) with the
// sequence-classification head's on B rows, on the tiny preset (4 layers,
// hidden 256).
//
//	go test ./finetune -run '^$' -bench HeadStep -benchtime 3x
func BenchmarkHeadStep(b *testing.B) {
	const B, T, V = 32, 128, 8000
	cfg, err := roformer.Preset("tiny", V)
	if err != nil {
		b.Fatal(err)
	}
	cfg.NumLabels = 2
	r := testutil.Rand(1)
	ids := func(int) ([]int32, []int32) {
		x := make([]int32, T)
		for i := range x {
			x[i] = int32(5 + r.IntN(V-5))
		}
		return x, nil
	}
	ctx := context.Background()
	pos := make([]int32, B)
	for i := range pos {
		pos[i] = int32(i % T)
	}
	for _, c := range []struct {
		head roformer.Head
		lab  *roformer.Labels
		opts roformer.StepOptions
	}{
		{roformer.HeadSequenceCls, &roformer.Labels{IDs: make([]int32, B)}, roformer.StepOptions{}},
		{roformer.HeadQA, &roformer.Labels{StartPositions: pos, EndPositions: pos}, roformer.StepOptions{}},
		{roformer.HeadMultipleChoice, &roformer.Labels{IDs: make([]int32, B/4)}, roformer.StepOptions{NumChoices: 4}},
	} {
		b.Run(fmt.Sprintf("%s_%dx%d", c.head, B, T), func(b *testing.B) {
			m, err := roformer.New(cfg, c.head)
			if err != nil {
				b.Fatal(err)
			}
			m.Init(1)
			batch := roformer.PadBatch(B, T, 0, ids)
			s := m.NewState(B, T, true)
			b.ResetTimer()
			for i := range b.N {
				c.opts.Dropout, c.opts.Seed = true, uint64(i)
				if _, err := m.ForwardBackward(ctx, s, batch, c.lab, c.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
