package finetune

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/distributed"
)

// Two ranks equal one process with --accum 2 (and two ranks with
// accumulation 2 one with 4), including an epoch's last, short step that
// leaves rank 1 without a micro-batch: the same micro-batches and dropout,
// the gradients summed in another order.
func TestParallelEqualsAccum(t *testing.T) {
	dir := tinyModel(t)
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"negative", "positive"}}
	run := func(ranks, accum int) ([]float32, *Result) {
		cs := distributed.Loopback(ranks)
		params := make([][]float32, ranks)
		results := make([]*Result, ranks)
		errs := make([]error, ranks)
		var wg sync.WaitGroup
		for r := range cs {
			_, j := loadTiny(t, dir, &spec, 3)
			j.Train, j.Eval = synth(1, 68, "train"), synth(2, 32, "dev") // the last step of an epoch has 4 inputs: one micro-batch
			j.Options.BatchSize, j.Options.Accum, j.Options.Epochs, j.Group = 4, accum, 2, cs[r]
			wg.Go(func() {
				results[r], errs[r] = Train(context.Background(), *j)
				params[r] = snapshot(j.Model.Params(), nil)
			})
		}
		wg.Wait()
		for r, err := range errs {
			mustf(t, err, "rank %d", r)
		}
		for r := 1; r < ranks; r++ {
			for i := range params[0] {
				if params[r][i] != params[0][i] {
					t.Fatalf("rank %d's parameter %d is %v, rank 0's %v", r, i, params[r][i], params[0][i])
				}
			}
		}
		return params[0], results[0]
	}
	for _, tc := range []struct{ ranks, accum int }{{2, 1}, {2, 2}} {
		many, rm := run(tc.ranks, tc.accum)
		one, r1 := run(1, tc.ranks*tc.accum)
		if rm.Steps != r1.Steps || len(rm.Epochs) != len(r1.Epochs) {
			t.Fatalf("%d ranks: %d steps, one process %d", tc.ranks, rm.Steps, r1.Steps)
		}
		for e := range r1.Epochs {
			a, b := r1.Epochs[e], rm.Epochs[e]
			if math.Abs(a.TrainLoss-b.TrainLoss) > 1e-6*math.Abs(a.TrainLoss) || math.Abs(a.Eval.Loss-b.Eval.Loss) > 1e-5 {
				t.Errorf("%d ranks × %d: epoch %d: train loss %v, eval loss %v; one process %v, %v", tc.ranks, tc.accum, e+1, b.TrainLoss, b.Eval.Loss, a.TrainLoss, a.Eval.Loss)
			}
		}
		worst := 0.0
		for i := range one {
			worst = max(worst, math.Abs(float64(one[i]-many[i])))
		}
		if worst > 1e-5 {
			t.Errorf("%d ranks × %d: weights differ from one process's by up to %.3g", tc.ranks, tc.accum, worst)
		}
		t.Logf("%d ranks × accumulation %d: weights within %.2g of one process's", tc.ranks, tc.accum, worst)
	}
}
