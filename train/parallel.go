package train

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/tensor"
)

// DataParallel is the data-parallel step of every training loop (package
// pretrain's MLM loop and finetune.Train): the Stepper's update done by
// each rank of a group on its share of the step's micro-batches, with
// everything the ranks must exchange for their parameters to stay
// identical without ever being sent.
//
// A step of a run with N ranks and accumulation A takes up to A·N
// micro-batches, the ones one process with accumulation A·N takes; rank r
// computes numbers r·A … r·A+A−1 of them (Share). Each rank averages the
// gradients of its own micro-batches (Stepper), and Stepper.Reduce, which
// NewDataParallel sets, makes them the average over all the step's
// micro-batches: a barrier, each rank's gradients weighted by
// mine·N/all (1 when every rank has A; a step short of micro-batches,
// the last of an epoch, gives some ranks fewer or none), then the
// bucketed allreduce mean (distributed.Reducer). Every rank then clips and
// applies the same AdamW update. One more (float64) allreduce averages the
// loss over the ranks and carries each rank's vote to stop, so that an
// interruption stops every rank at the same step boundary.
//
// With one rank (a nil group, or distributed.Local) Step is Stepper.Step
// and nothing is exchanged.
type DataParallel struct {
	Group   distributed.Comm // never nil
	Stepper *Stepper
	// WaitSec counts the seconds spent at the barrier before the gradient
	// allreduce, waiting for the slowest rank (load imbalance, a busy
	// machine), and CommSec those moving and summing the gradients; they
	// grow with every step and the caller resets them.
	WaitSec, CommSec float64

	grads  [][]float32 // the parameters' gradients, in order
	weight float32     // this rank's gradient weight in the current step
	step   int         // the update in progress, 1-based
}

// NewDataParallel returns the data-parallel step of group g (nil: this
// process alone) over s; with more than one rank it sets s.Reduce.
func NewDataParallel(g distributed.Comm, s *Stepper) *DataParallel {
	if g == nil {
		g = distributed.Local()
	}
	d := &DataParallel{Group: g, Stepper: s, weight: 1}
	if d.Parallel() {
		d.grads = make([][]float32, len(s.Params))
		for i, p := range s.Params {
			d.grads[i] = p.Grad
		}
		s.Reduce = d.reduce(distributed.NewReducer(g, 0))
	}
	return d
}

// Parallel reports whether the group has more than one rank.
func (d *DataParallel) Parallel() bool { return d.Group.Size() > 1 }

// Share returns this rank's micro-batches of a step that has all of them,
// with accumulation accum: numbers first … first+mine−1 (mine may be 0 in
// a short step).
func (d *DataParallel) Share(accum, all int) (first, mine int) {
	accum = max(accum, 1)
	first = min(d.Group.Rank()*accum, all)
	return first, min(accum, all-first)
}

// Step does update number step+1 over this rank's mine micro-batches of the
// step's all (see Share), calling micro(k) for k = 0 … mine−1 with a
// context that, with several ranks, is not cancelled (a step cut short on
// one rank would leave the others waiting in the allreduce). It returns the
// update with Loss the mean over all the step's micro-batches, and stop
// true when any rank's ctx was cancelled: the step is then done anyway, on
// every rank. Errors are Stepper.Step's; those of the exchanges name the
// step.
func (d *DataParallel) Step(ctx context.Context, step, mine, all int, micro func(ctx context.Context, k int) (float64, error)) (u Update, stop bool, err error) {
	mctx := ctx
	if d.Parallel() {
		mctx = context.WithoutCancel(ctx)
	}
	d.step, d.weight = step+1, 1
	if all > 0 && mine*d.Group.Size() != all {
		d.weight = float32(float64(mine*d.Group.Size()) / float64(all))
	}
	d.Stepper.Accum = max(mine, 1)
	u, err = d.Stepper.Step(step, func(k int) (float64, error) {
		if k >= mine {
			return 0, nil // this rank has no micro-batch left in the step
		}
		return micro(mctx, k)
	})
	if err != nil || !d.Parallel() {
		return u, false, err
	}
	// The mean loss over the step's micro-batches, and the vote to stop.
	// With equal shares it is the mean over the ranks of their means.
	sums := []float64{u.Loss, 0}
	if d.weight != 1 {
		sums[0] = u.Loss * float64(mine)
	}
	if ctx.Err() != nil {
		sums[1] = 1
	}
	if err := d.Group.AllreduceSum64(sums); err != nil {
		return Update{}, false, fmt.Errorf("train: step %d: loss allreduce: %w", step+1, err)
	}
	if d.weight != 1 {
		u.Loss = sums[0] / float64(all)
	} else {
		u.Loss = sums[0] / float64(d.Group.Size())
	}
	return u, sums[1] > 0, nil
}

// reduce returns the Stepper.Reduce of the group: a barrier (microseconds,
// and it splits the time into WaitSec and CommSec), this rank's weight,
// then the bucketed gradient average.
func (d *DataParallel) reduce(red *distributed.Reducer) func([]*tensor.Param) error {
	return func([]*tensor.Param) error {
		start := time.Now()
		err := d.Group.Barrier()
		lined := time.Now()
		if err == nil {
			if d.weight != 1 {
				for _, g := range d.grads {
					for i := range g {
						g[i] *= d.weight
					}
				}
			}
			err = red.AllreduceMean32(d.grads)
		}
		d.WaitSec += lined.Sub(start).Seconds()
		d.CommSec += time.Since(lined).Seconds()
		if err != nil {
			return fmt.Errorf("train: step %d: gradient allreduce: %w", d.step, err)
		}
		return nil
	}
}

// CheckSame checks that every rank holds rank 0's b (what names it in the
// error); it is distributed.CheckSame, with this package's prefix, and
// costs nothing alone.
func (d *DataParallel) CheckSame(what string, b []byte) error {
	if !d.Parallel() {
		return nil
	}
	if err := distributed.CheckSame(d.Group, what, b); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

// CheckParams checks that every rank holds rank 0's parameters, bit for
// bit; what says when ("at step 20").
func (d *DataParallel) CheckParams(when string) error {
	if !d.Parallel() {
		return nil
	}
	return d.CheckSame("parameters "+when, ParamBytes(d.Stepper.Params))
}

// ParamBytes returns the bits of every parameter, in order (little-endian
// float32).
func ParamBytes(params []*tensor.Param) []byte {
	n := 0
	for _, p := range params {
		n += 4 * len(p.Data)
	}
	b := make([]byte, 0, n)
	for _, p := range params {
		for _, x := range p.Data {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return b
}
