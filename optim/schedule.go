package optim

import (
	"fmt"
	"math"
)

// ScheduleKind names a learning-rate schedule.
type ScheduleKind string

// The schedules, named as in the Hugging Face Trainer's lr_scheduler_type.
const (
	Constant ScheduleKind = "constant" // linear warm-up, then the peak rate
	Linear   ScheduleKind = "linear"   // linear warm-up, then linear decay to 0 at Total
	Cosine   ScheduleKind = "cosine"   // linear warm-up, then half a cosine down to 0 at Total
	// InverseSqrt is linear warm-up, then the rate falls as 1/√step
	// (Vaswani et al. §5.3; ignores Total).
	InverseSqrt ScheduleKind = "inverse_sqrt"
)

// ScheduleKinds lists the valid schedule names.
var ScheduleKinds = []ScheduleKind{Constant, Linear, Cosine, InverseSqrt}

// ParseSchedule returns the schedule kind named s.
func ParseSchedule(s string) (ScheduleKind, error) {
	for _, k := range ScheduleKinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("optim: unknown schedule %q (valid: constant, linear, cosine, inverse_sqrt)", s)
}

// Schedule maps a step to a learning rate: PeakLR times the factor of Kind.
// It is a pure function of the step.
//
// Step numbering follows Hugging Face, where scheduler.step() runs after
// optimizer.step(): the step argument is the number of updates already
// done, so update number t (1-based) uses LR(t−1), and with a warm-up the
// first update uses a rate of 0.
type Schedule struct {
	Kind   ScheduleKind
	PeakLR float64
	Warmup int // warm-up steps
	Total  int // total training steps (ignored by Constant and InverseSqrt)
}

// Validate checks the schedule's numbers.
func (s Schedule) Validate() error {
	if _, err := ParseSchedule(string(s.Kind)); err != nil {
		return err
	}
	if !(s.PeakLR >= 0) || math.IsInf(s.PeakLR, 0) {
		return fmt.Errorf("optim: learning rate %g must be finite and >= 0", s.PeakLR)
	}
	if s.Warmup < 0 || s.Total < 0 {
		return fmt.Errorf("optim: warm-up %d and total %d steps must be >= 0", s.Warmup, s.Total)
	}
	return nil
}

// LR returns the learning rate after step updates.
func (s Schedule) LR(step int) float64 {
	switch s.Kind {
	case Linear:
		return s.PeakLR * LinearFactor(step, s.Warmup, s.Total)
	case Cosine:
		return s.PeakLR * CosineFactor(step, s.Warmup, s.Total)
	case InverseSqrt:
		return s.PeakLR * InverseSqrtFactor(step, s.Warmup)
	default:
		return s.PeakLR * ConstantFactor(step, s.Warmup)
	}
}

// warm is the warm-up ramp step/max(1, warmup), shared by every schedule.
func warm(step, warmup int) (float64, bool) {
	if step < warmup {
		return float64(step) / float64(max(1, warmup)), true
	}
	return 0, false
}

// ConstantFactor is transformers' get_constant_schedule_with_warmup:
// step/max(1, warmup) during warm-up, 1 after.
func ConstantFactor(step, warmup int) float64 {
	if f, ok := warm(step, warmup); ok {
		return f
	}
	return 1
}

// LinearFactor is transformers' get_linear_schedule_with_warmup:
// step/max(1, warmup) during warm-up, then
// max(0, (total − step)/max(1, total − warmup)).
func LinearFactor(step, warmup, total int) float64 {
	if f, ok := warm(step, warmup); ok {
		return f
	}
	return math.Max(0, float64(total-step)/float64(max(1, total-warmup)))
}

// CosineFactor is transformers' get_cosine_schedule_with_warmup with
// num_cycles = 0.5: step/max(1, warmup) during warm-up, then with
// progress = (step − warmup)/max(1, total − warmup),
// max(0, ½(1 + cos(π·progress))).
func CosineFactor(step, warmup, total int) float64 {
	if f, ok := warm(step, warmup); ok {
		return f
	}
	progress := float64(step-warmup) / float64(max(1, total-warmup))
	return math.Max(0, 0.5*(1+math.Cos(math.Pi*2*0.5*progress)))
}

// InverseSqrtFactor is Vaswani et al.'s schedule (§5.3,
// lrate = d^−½·min(step^−½, step·warmup^−³ᐟ²)) divided by its peak
// d^−½·warmup^−½, which it reaches at step = warmup:
//
//	min(step/warmup, √(warmup/step))
//
// fairseq's inverse_sqrt with warmup_init_lr 0, and transformers'
// get_inverse_sqrt_schedule with timescale = warmup. Without a warm-up
// (warmup ≤ 0) it is 1/√max(1, step).
func InverseSqrtFactor(step, warmup int) float64 {
	if f, ok := warm(step, warmup); ok {
		return f
	}
	return math.Sqrt(float64(max(1, warmup)) / float64(max(1, step)))
}
