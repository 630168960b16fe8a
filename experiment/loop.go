package experiment

import (
	"fmt"
	"math"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
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

// stepper applies Schedule to one model.
type stepper struct {
	params []*tensor.Param
	opt    *optim.AdamW
	sched  optim.Schedule
	clip   float64
}

func newStepper(m *roformer.Model, s Schedule) (*stepper, error) {
	if s.Steps < 1 {
		return nil, fmt.Errorf("experiment: %d steps; need at least 1", s.Steps)
	}
	sched := optim.Schedule{Kind: optim.Cosine, PeakLR: s.LR, Warmup: s.Warmup, Total: s.Steps}
	if err := sched.Validate(); err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	params := m.Params()
	opt, err := optim.NewAdamW(params, optim.DefaultAdamWConfig(s.WeightDecay))
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return &stepper{params: params, opt: opt, sched: sched, clip: s.Clip}, nil
}

// step does update number step+1: zero the gradients, run fb (forward and
// backward, adding the gradients), clip, and take an AdamW step at the
// scheduled rate. It returns fb's loss.
func (s *stepper) step(step int, fb func() (float64, error)) (float64, error) {
	for _, p := range s.params {
		p.ZeroGrad()
	}
	loss, err := fb()
	if err != nil {
		return 0, err
	}
	norm := optim.ClipGradNorm(s.params, s.clip)
	if math.IsNaN(loss) || math.IsInf(loss, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return loss, fmt.Errorf("experiment: step %d: loss %v, gradient norm %v", step+1, loss, norm)
	}
	s.opt.Step(s.sched.LR(step))
	return loss, nil
}
