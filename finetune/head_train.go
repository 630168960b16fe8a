package finetune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/model/roformer"
)

// The training loop of the question-answering and multiple-choice heads,
// whose inputs are not labelled.Dataset rows: the same optimizer step as
// Train (schedule, AdamW, clipping, dropout seeds per micro-batch), the
// same metrics.jsonl records, and the best epoch by the task's main metric.

// HeadEpoch is what one epoch of question-answering or multiple-choice
// training measured.
type HeadEpoch struct {
	Epoch     int                `json:"epoch"`
	Step      int                `json:"step"`
	TrainLoss float64            `json:"train_loss"`
	Eval      map[string]float64 `json:"eval,omitempty"`
	Best      bool               `json:"best"`
	Seconds   float64            `json:"seconds"`
}

// HeadResult is the outcome of question-answering or multiple-choice training.
type HeadResult struct {
	Steps      int                `json:"steps"`
	Features   int                `json:"features"` // training inputs: windows (QA) or examples (multiple choice)
	Epochs     []HeadEpoch        `json:"epochs"`
	BestEpoch  int                `json:"best_epoch"`
	MainMetric string             `json:"main_metric"`
	Best       map[string]float64 `json:"best,omitempty"` // evaluation of the kept parameters
	Seconds    float64            `json:"seconds"`
}

// headTask is the data side of a run: n training items, a training
// micro-batch of some of them, and an evaluation of the model.
type headTask struct {
	n     int
	batch func(items []int) (*roformer.Batch, *roformer.Labels, roformer.StepOptions)
	// eval scores the model on the evaluation data; nil without any.
	eval func(ctx context.Context, m *roformer.Model) (map[string]float64, error)
	main string // the metric eval's maps must hold, which picks the best epoch
}

// trainHead fine-tunes m in place on the task; with evaluation it keeps
// the parameters of the epoch with the best main metric.
func trainHead(ctx context.Context, m *roformer.Model, task headTask, o Options, progress, metrics io.Writer) (*HeadResult, error) {
	say := func(format string, a ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", a...)
		}
	}
	record := func(r any) error {
		if metrics == nil {
			return nil
		}
		return writeJSONLine(metrics, r)
	}
	if task.n == 0 {
		return nil, errors.New("finetune: no training inputs")
	}
	params := m.Params()
	accum := max(o.Accum, 1)
	stepInputs := o.BatchSize * accum
	rs, err := newRunSteps(distributed.Local(), m, params, &o, task.n, stepInputs)
	if err != nil {
		return nil, err
	}
	dp, perEpoch, total, warm := rs.dp, rs.perEpoch, rs.total, rs.warm
	say("finetune: %d training inputs; %d epochs of %d steps, batch %d × accumulation %d, lr %.2e (%s, warm-up %d), weight decay %g, seed %d",
		task.n, o.Epochs, perEpoch, o.BatchSize, accum, o.LR, o.Schedule, warm, o.WeightDecay, o.Seed)
	res := &HeadResult{Features: task.n, MainMetric: task.main}
	start := time.Now()
	states := &stateCache{m: m}
	bestScore := math.Inf(-1)
	var best []float32
	sinceBest, step := 0, 0
	for epoch := 1; epoch <= o.Epochs; epoch++ {
		t0 := time.Now()
		order := rand.New(rand.NewPCG(o.Seed, uint64(epoch))).Perm(task.n)
		var epLoss, logLoss float64
		var epN, logN int
		for lo := 0; lo < len(order); lo += stepInputs {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			inputs := order[lo:min(lo+stepInputs, len(order))]
			all := (len(inputs) + o.BatchSize - 1) / o.BatchSize
			s := step
			u, _, err := dp.Step(ctx, s, all, all, func(mctx context.Context, k int) (float64, error) {
				b, lab, so := task.batch(inputs[k*o.BatchSize : min((k+1)*o.BatchSize, len(inputs))])
				so.Dropout, so.Seed = true, microSeed(o.Seed, s, k)
				sr, err := m.ForwardBackward(mctx, states.get(b.B, b.T), b, lab, so)
				if err != nil {
					return 0, err
				}
				return sr.Loss, nil
			})
			if err := stepError(err); err != nil {
				return res, err
			}
			step++
			epLoss, epN, logLoss, logN = epLoss+u.Loss, epN+1, logLoss+u.Loss, logN+1
			if o.LogEvery > 0 && step%o.LogEvery == 0 {
				l, lr, norm := logLoss/float64(logN), u.LR, u.GradNorm
				say("epoch %d step %d/%d | loss %.4f | lr %.3e | grad norm %.3f", epoch, step, total, l, lr, norm)
				if err := record(MetricsRecord{Epoch: epoch, Step: step, Loss: &l, LR: &lr, GradNorm: &norm, WorldSize: 1}); err != nil {
					return res, err
				}
				logLoss, logN = 0, 0
			}
		}
		ep := HeadEpoch{Epoch: epoch, Step: step, TrainLoss: epLoss / float64(epN)}
		if task.eval != nil {
			rep, err := task.eval(ctx, m)
			if err != nil {
				return res, err
			}
			ep.Eval = rep
			if score := rep[task.main]; score > bestScore {
				bestScore, ep.Best, best, sinceBest = score, true, snapshot(params, best), 0
				res.BestEpoch, res.Best = epoch, rep
			} else {
				sinceBest++
			}
			mark := ""
			if ep.Best {
				mark = " (best)"
			}
			say("epoch %d: train loss %.4f | %s%s", epoch, ep.TrainLoss, describeMetrics(rep, task.main), mark)
		} else {
			res.BestEpoch = epoch
			say("epoch %d: train loss %.4f", epoch, ep.TrainLoss)
		}
		ep.Seconds = time.Since(t0).Seconds()
		res.Epochs, res.Steps = append(res.Epochs, ep), step
		isBest := ep.Best
		if err := record(struct {
			Epoch int                `json:"epoch"`
			Step  int                `json:"step"`
			Loss  float64            `json:"loss"`
			Eval  map[string]float64 `json:"eval,omitempty"`
			Best  bool               `json:"best"`
		}{epoch, step, ep.TrainLoss, ep.Eval, isBest}); err != nil {
			return res, err
		}
		if o.Patience > 0 && sinceBest >= o.Patience && epoch < o.Epochs {
			say("early stop: %d evaluations without a better %s (best %.4f at epoch %d)", sinceBest, task.main, bestScore, res.BestEpoch)
			break
		}
	}
	if best != nil {
		restore(params, best)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// describeMetrics writes "main 0.1234 | other 0.5 …", the main metric first.
func describeMetrics(rep map[string]float64, main string) string {
	parts := []string{fmt.Sprintf("%s %.4f", main, rep[main])}
	names := make([]string, 0, len(rep))
	for k := range rep {
		if k != main {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.4f", k, rep[k]))
	}
	return strings.Join(parts, " | ")
}

// padRows lays rows of token ids and types out as a batch padded to the
// longest with padID (attention mask 0 on the padding).
func padRows(ids, types [][]int32, padID int32) *roformer.Batch {
	T := 0
	for _, r := range ids {
		T = max(T, len(r))
	}
	B := len(ids)
	b := &roformer.Batch{B: B, T: T, InputIDs: make([]int32, B*T), TokenTypeIDs: make([]int32, B*T), AttentionMask: make([]int32, B*T)}
	for i, r := range ids {
		for t := 0; t < T; t++ {
			if t < len(r) {
				b.InputIDs[i*T+t], b.TokenTypeIDs[i*T+t], b.AttentionMask[i*T+t] = r[t], types[i][t], 1
			} else {
				b.InputIDs[i*T+t] = padID
			}
		}
	}
	return b
}
