package train

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
)

// One update: gradients zeroed, micro-batch gradients and losses averaged,
// Reduce between the backward passes and the norm, clipping, then AdamW.
func TestStepperOrder(t *testing.T) {
	p := tensor.NewParam("w", 2)
	p.Grad[0] = 100 // stale: must be zeroed
	s, err := NewStepper([]*tensor.Param{p}, optim.DefaultAdamWConfig(0), optim.Schedule{Kind: optim.Constant, PeakLR: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	s.Accum, s.Clip = 2, 1
	var calls []string
	s.Reduce = func(ps []*tensor.Param) error {
		calls = append(calls, "reduce")
		if ps[0].Grad[0] != 3 || ps[0].Grad[1] != 4 { // (2+4)/2, (8+0)/2
			t.Errorf("Reduce sees gradients %v, want the micro-batch mean [3 4]", ps[0].Grad)
		}
		return nil
	}
	grads := [][2]float32{{2, 8}, {4, 0}}
	u, err := s.Step(0, func(k int) (float64, error) {
		calls = append(calls, "micro")
		p.Grad[0] += grads[k][0]
		p.Grad[1] += grads[k][1]
		return float64(k + 1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(calls, ",") != "micro,micro,reduce" {
		t.Errorf("calls %v", calls)
	}
	if u.Loss != 1.5 || u.GradNorm != 5 || u.LR != 0.5 {
		t.Errorf("update %+v, want loss 1.5, norm 5, lr 0.5", u)
	}
	if g := p.Grad[0]; math.Abs(float64(g)-0.6) > 1e-6 {
		t.Errorf("clipped gradient %v, want 0.6", g)
	}
	if s.Opt.StepCount() != 1 || p.Data[0] >= 0 || p.Data[1] >= 0 {
		t.Errorf("after one update: %d steps, parameters %v", s.Opt.StepCount(), p.Data)
	}
}

// A non-finite loss stops the update before any change; the error says
// where and wraps ErrNonFinite.
func TestStepperNonFinite(t *testing.T) {
	p := tensor.NewParam("w", 1)
	s, err := NewStepper([]*tensor.Param{p}, optim.DefaultAdamWConfig(0), optim.Schedule{Kind: optim.Constant, PeakLR: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.Accum = 3
	_, err = s.Step(4, func(k int) (float64, error) {
		p.Grad[0] += 2
		if k == 1 {
			return math.Inf(1), nil
		}
		return 1, nil
	})
	var nf *NonFiniteError
	if !errors.Is(err, ErrNonFinite) || !errors.As(err, &nf) || nf.Step != 5 || nf.Micro != 2 || nf.GradNorm != 4 {
		t.Fatalf("err %v (%+v)", err, nf)
	}
	if want := "step 5: loss is +Inf on micro-batch 2 of 3"; !strings.Contains(err.Error(), want) {
		t.Errorf("%q lacks %q", err, want)
	}
	if p.Data[0] != 0 || s.Opt.StepCount() != 0 {
		t.Errorf("a stopped update changed the parameters (%v) or the optimizer (%d steps)", p.Data, s.Opt.StepCount())
	}
}
