package train

import (
	"errors"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
)

// Stepper does optimizer updates, the one training step of the toolkit:
// package pretrain's MLM loop and finetune.Train (both through
// DataParallel), the char-lm, long-text and translation experiments and the
// bench's training mode all update their parameters through Step. What
// differs between them (data, evaluation, checkpoints, logging) stays with
// them, in the Micro function and around the call.
//
// An update reads top to bottom:
//
//  1. the learning rate of the update, Sched.LR(step);
//  2. every parameter's gradient set to zero;
//  3. forward and backward over Accum micro-batches (Micro), each adding
//     the gradient of its mean loss; a NaN or infinite loss stops the
//     update at once;
//  4. the average: the loss is the mean of the micro-batch losses and the
//     gradients are divided by Accum (as the Hugging Face Trainer does);
//  5. Reduce, when set (see there);
//  6. the global gradient norm, stopping the update when it is not finite,
//     and clipping at Clip;
//  7. the AdamW update at the rate of step 1.
//
// On any error the parameters and the optimizer's state are left as they
// were (the gradients are not).
type Stepper struct {
	Params []*tensor.Param // in the optimizer's order
	Opt    *optim.AdamW
	Sched  optim.Schedule
	Accum  int     // micro-batches per update; below 1 counts as 1
	Clip   float64 // global gradient-norm clip; 0: none (the norm is still measured and checked)
	// NoGradNorm leaves out step 6 entirely (Clip is then ignored and
	// Update.GradNorm is NaN): the bench times the bare update that its
	// PyTorch twin times.
	NoGradNorm bool
	// Reduce, when set, runs between the backward passes and the gradient
	// norm, on gradients already averaged over the micro-batches: the one
	// place where data-parallel training combines the gradients of its
	// ranks. An allreduce there (the sum over the ranks divided by their
	// number) makes every rank measure, clip and apply the same gradients,
	// so the parameters stay identical on all ranks with no other
	// communication; the loss Step returns stays the rank's own. Its error
	// is returned as it is and nothing is updated.
	Reduce func(params []*tensor.Param) error
}

// NewStepper returns a Stepper over params with a new AdamW optimizer of
// configuration adam and the schedule sched, one micro-batch per update
// and no clipping; set Accum, Clip and Reduce on the result as needed.
func NewStepper(params []*tensor.Param, adam optim.AdamWConfig, sched optim.Schedule) (*Stepper, error) {
	opt, err := optim.NewAdamW(params, adam)
	if err != nil {
		return nil, err
	}
	return &Stepper{Params: params, Opt: opt, Sched: sched, Accum: 1}, nil
}

// Micro runs the forward and backward pass of micro-batch k (0-based) of
// an update, ADDING the gradient of its mean loss into Param.Grad, and
// returns that loss.
type Micro func(k int) (loss float64, err error)

// Update is what one update measured.
type Update struct {
	Loss     float64 // mean of the micro-batch losses
	GradNorm float64 // global gradient norm before clipping; NaN with NoGradNorm
	LR       float64 // learning rate of the update
}

// ErrNonFinite is wrapped when a loss or the gradient norm is NaN or
// infinite (NonFiniteError). The training loops stop on it without
// saving; package pretrain's previous checkpoint is left as it was.
var ErrNonFinite = errors.New("train: non-finite value")

// NonFiniteError reports an update stopped by a NaN or infinite loss or
// gradient norm. It wraps ErrNonFinite.
type NonFiniteError struct {
	Step  int // the update, 1-based
	Micro int // 1-based micro-batch whose loss is not finite; 0 when the loss is finite and the gradient norm is not
	Accum int // micro-batches per update
	// Loss is that micro-batch's loss, or the update's mean loss when
	// Micro is 0.
	Loss float64
	// GradNorm is the gradient norm: of the gradients added so far when
	// Micro > 0 (NaN with NoGradNorm).
	GradNorm float64
}

func (e *NonFiniteError) Error() string {
	if e.Micro > 0 {
		return fmt.Sprintf("%v: step %d: loss is %v on micro-batch %d of %d", ErrNonFinite, e.Step, e.Loss, e.Micro, e.Accum)
	}
	return fmt.Sprintf("%v: step %d: gradient norm is %v (loss %.4f)", ErrNonFinite, e.Step, e.GradNorm, e.Loss)
}

// Unwrap returns ErrNonFinite.
func (e *NonFiniteError) Unwrap() error { return ErrNonFinite }

// Step does update number step+1 (step updates are done), calling micro
// for each micro-batch. It returns micro's and Reduce's errors as they
// are, and a *NonFiniteError for a NaN or infinite loss or gradient norm.
func (s *Stepper) Step(step int, micro Micro) (Update, error) {
	accum := max(1, s.Accum)
	u := Update{LR: s.Sched.LR(step), GradNorm: math.NaN()}
	for _, p := range s.Params {
		p.ZeroGrad()
	}
	var loss float64
	for k := 0; k < accum; k++ {
		l, err := micro(k)
		if err != nil {
			return Update{}, err
		}
		if !finite(l) {
			norm := math.NaN()
			if !s.NoGradNorm {
				norm = optim.GradNorm(s.Params)
			}
			return Update{}, &NonFiniteError{Step: step + 1, Micro: k + 1, Accum: accum, Loss: l, GradNorm: norm}
		}
		loss += l
	}
	u.Loss = loss / float64(accum)
	if accum > 1 {
		scale := float32(1 / float64(accum))
		for _, p := range s.Params {
			for i := range p.Grad {
				p.Grad[i] *= scale
			}
		}
	}
	if s.Reduce != nil {
		if err := s.Reduce(s.Params); err != nil {
			return Update{}, err
		}
	}
	if !s.NoGradNorm {
		u.GradNorm = optim.ClipGradNorm(s.Params, s.Clip)
		if !finite(u.GradNorm) {
			return Update{}, &NonFiniteError{Step: step + 1, Accum: accum, Loss: u.Loss, GradNorm: u.GradNorm}
		}
	}
	s.Opt.Step(u.LR)
	return u, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
