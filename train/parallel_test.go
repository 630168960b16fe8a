package train

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
)

// microGrad is micro-batch k's gradient, added into p, and its loss k+1.
func microGrad(p *tensor.Param, k int) float64 {
	p.Grad[0] += float32(k + 1)
	p.Grad[1] += float32(2*k - 3)
	return float64(k + 1)
}

// newTestStepper returns a Stepper over a fresh two-element parameter.
func newTestStepper(t *testing.T) (*Stepper, *tensor.Param) {
	t.Helper()
	p := tensor.NewParam("w", 2)
	p.Data[0], p.Data[1] = 1, -1
	s, err := NewStepper([]*tensor.Param{p}, optim.DefaultAdamWConfig(0), optim.Schedule{Kind: optim.Constant, PeakLR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

// Two ranks with accumulation 2 do the update of one process with
// accumulation all, for a full step (4 micro-batches), a short one (3:
// rank 1 has one, weighted 2·1/3) and one that leaves rank 1 none (2);
// the loss is the mean over the step's micro-batches, on both ranks.
func TestDataParallelEqualsOneProcess(t *testing.T) {
	for _, all := range []int{4, 3, 2} {
		one, p1 := newTestStepper(t)
		d1 := NewDataParallel(nil, one)
		want, stop, err := d1.Step(context.Background(), 0, all, all, func(_ context.Context, k int) (float64, error) { return microGrad(p1, k), nil })
		if err != nil || stop {
			t.Fatalf("all %d: one process: stop %v, %v", all, stop, err)
		}
		gs := distributed.Loopback(2)
		params := make([]*tensor.Param, 2)
		ups := make([]Update, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := range gs {
			s, p := newTestStepper(t)
			params[r] = p
			d := NewDataParallel(gs[r], s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				first, mine := d.Share(2, all)
				ups[r], _, errs[r] = d.Step(context.Background(), 0, mine, all, func(_ context.Context, k int) (float64, error) { return microGrad(p, first+k), nil })
			}()
		}
		wg.Wait()
		for r := range gs {
			if errs[r] != nil {
				t.Fatalf("all %d: rank %d: %v", all, r, errs[r])
			}
			if math.Abs(ups[r].Loss-want.Loss) > 1e-12 || ups[r].GradNorm != ups[0].GradNorm {
				t.Errorf("all %d: rank %d: update %+v, one process %+v", all, r, ups[r], want)
			}
			for i, x := range params[r].Data {
				if math.Abs(float64(x-p1.Data[i])) > 1e-6 || x != params[0].Data[i] {
					t.Errorf("all %d: rank %d: parameter %d is %v, one process %v, rank 0 %v", all, r, i, x, p1.Data[i], params[0].Data[i])
				}
			}
		}
		if wantLoss := float64(all+1) / 2; math.Abs(want.Loss-wantLoss) > 1e-12 {
			t.Errorf("all %d: loss %v, want the mean %v", all, want.Loss, wantLoss)
		}
	}
}

// A rank whose context is cancelled finishes the step (its micro-batches
// see a live context) and both ranks learn to stop; CheckParams then finds
// the parameters equal, and a drift is an error.
func TestDataParallelStopVote(t *testing.T) {
	gs := distributed.Loopback(2)
	stops := make([]bool, 2)
	errs := make([]error, 2)
	checks := make([]error, 2)
	drift := make([]error, 2)
	var wg sync.WaitGroup
	for r := range gs {
		s, p := newTestStepper(t)
		d := NewDataParallel(gs[r], s)
		ctx, cancel := context.WithCancel(context.Background())
		if r == 1 {
			cancel()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			_, stops[r], errs[r] = d.Step(ctx, 0, 1, 2, func(mctx context.Context, k int) (float64, error) {
				if mctx.Err() != nil {
					t.Errorf("rank %d: the micro-batch's context is cancelled", r)
				}
				return microGrad(p, r), nil
			})
			checks[r] = d.CheckParams("after the step")
			if r == 1 {
				p.Data[0] += 1e-3
			}
			drift[r] = d.CheckParams("after a drift")
		}()
	}
	wg.Wait()
	for r := range gs {
		if errs[r] != nil || !stops[r] || checks[r] != nil {
			t.Errorf("rank %d: stop %v, step error %v, check %v; want a stop and no error", r, stops[r], errs[r], checks[r])
		}
	}
	if drift[1] == nil {
		t.Error("rank 1's drifted parameters passed CheckParams")
	}
}
