package finetune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
	"github.com/roformer-go/roformer/train"
)

// runSteps is the optimizer side of a run shared by Train, TrainEmbed and
// the head runs: steps per epoch and in all, the warm-up, and the step.
type runSteps struct {
	dp       *train.DataParallel
	perEpoch int // optimizer steps per epoch
	total    int // optimizer steps of the run
	warm     int // warm-up steps
}

// newRunSteps sets up the step of a run over n training inputs, stepInputs
// of them a step (over all ranks of g): o's schedule peaking at o.LR with
// its warm-up (WarmupSteps, or WarmupRatio of all steps), AdamW with o's
// weight decay, and o.Clip.
func newRunSteps(g distributed.Comm, m *roformer.Model, params []*tensor.Param, o *Options, n, stepInputs int) (runSteps, error) {
	var r runSteps
	if err := m.SetTrainingPrecision(roformer.Precision(o.Precision)); err != nil {
		return r, fmt.Errorf("finetune: --precision %s: %w", o.Precision, err)
	}
	r.perEpoch = (n + stepInputs - 1) / stepInputs
	r.total = r.perEpoch * o.Epochs
	r.warm = o.WarmupSteps
	if r.warm == 0 {
		r.warm = int(math.Ceil(o.WarmupRatio * float64(r.total)))
	}
	kind, _ := optim.ParseSchedule(o.Schedule)
	stepper, err := train.NewStepper(params, optim.DefaultAdamWConfig(o.WeightDecay), optim.Schedule{Kind: kind, PeakLR: o.LR, Warmup: r.warm, Total: r.total})
	if err != nil {
		return r, err
	}
	stepper.Clip = o.Clip
	r.dp = train.NewDataParallel(g, stepper)
	return r, nil
}

// stepError wraps a step's train.NonFiniteError as ErrNonFinite, naming
// the step, loss and gradient norm; other errors (and nil) pass as they are.
func stepError(err error) error {
	if nf := (*train.NonFiniteError)(nil); errors.As(err, &nf) {
		return fmt.Errorf("%w: step %d, loss %v, gradient norm %v; try a lower learning rate", ErrNonFinite, nf.Step, nf.Loss, nf.GradNorm)
	}
	return err
}

// writeJSONLine writes v as one JSON line to w.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("finetune: metrics record: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
