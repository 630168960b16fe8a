package experiment

import (
	"errors"
	"fmt"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
	"github.com/roformer-go/roformer/train"
)

// Schedule is the optimisation of the char-lm and long-text runs: AdamW
// (β 0.9, 0.999, ε 1e-8) with linear warm-up, then cosine decay to 0 at
// Steps, and global-norm clipping.
type Schedule struct {
	Steps       int     `json:"steps"`
	Warmup      int     `json:"warmup"`
	LR          float64 `json:"lr"`
	WeightDecay float64 `json:"weight_decay"`
	Clip        float64 `json:"clip"`
}

// stepper applies Schedule to one model through the toolkit's training
// step (train.Stepper).
type stepper struct{ *train.Stepper }

func newStepper(m *roformer.Model, s Schedule) (*stepper, error) {
	return newParamStepper(m.Params(), s)
}

// newParamStepper applies Schedule to params.
func newParamStepper(params []*tensor.Param, s Schedule) (*stepper, error) {
	if s.Steps < 1 {
		return nil, fmt.Errorf("experiment: %d steps; need at least 1", s.Steps)
	}
	sched := optim.Schedule{Kind: optim.Cosine, PeakLR: s.LR, Warmup: s.Warmup, Total: s.Steps}
	if err := sched.Validate(); err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	st, err := train.NewStepper(params, optim.DefaultAdamWConfig(s.WeightDecay), sched)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	st.Clip = s.Clip
	return &stepper{st}, nil
}

// step does update number step+1: zero the gradients, run fb (forward and
// backward, adding the gradients), clip, and take an AdamW step at the
// scheduled rate. It returns fb's loss.
func (s *stepper) step(step int, fb func() (float64, error)) (float64, error) {
	u, err := s.Step(step, func(int) (float64, error) { return fb() })
	if nf := (*train.NonFiniteError)(nil); errors.As(err, &nf) {
		return nf.Loss, fmt.Errorf("experiment: step %d: loss %v, gradient norm %v", nf.Step, nf.Loss, nf.GradNorm)
	}
	return u.Loss, err
}
