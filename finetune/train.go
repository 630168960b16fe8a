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

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tensor"
	"github.com/roformer-go/roformer/tokenizer"
	"github.com/roformer-go/roformer/train"
)

// Job is a fine-tuning run over loaded data.
type Job struct {
	Model     *roformer.Model
	Tokenizer *tokenizer.Tokenizer
	Spec      labelled.Spec
	Train     *labelled.Dataset
	Eval      *labelled.Dataset // nil: no evaluation; the parameters of the last epoch are kept
	Options   Options
	// Progress receives one line per LogEvery steps and per evaluation.
	Progress io.Writer
	// Metrics receives metrics.jsonl records (one JSON object per line).
	Metrics io.Writer
	// Group, when it has more than one rank, makes this process one rank of
	// a data-parallel run: every rank calls Train with the same Job but its
	// own Group; each computes its share of a step's micro-batches (the
	// ones one process with accumulation Accum × ranks computes, masks and
	// dropout included), the gradients are averaged with an allreduce, and
	// rank 0 alone evaluates (broadcasting which epoch is best and whether
	// to stop) and should alone be given Progress and Metrics. Nil: alone.
	Group distributed.Comm
}

// EpochResult is what one epoch measured.
type EpochResult struct {
	Epoch     int     `json:"epoch"`
	Step      int     `json:"step"`
	TrainLoss float64 `json:"train_loss"` // mean training loss (with dropout) over the epoch
	Eval      *Report `json:"eval,omitempty"`
	Best      bool    `json:"best"`
	Seconds   float64 `json:"seconds"`
}

// Result is the outcome of Train.
type Result struct {
	Steps        int           `json:"steps"`
	Epochs       []EpochResult `json:"epochs"`
	BestEpoch    int           `json:"best_epoch"`
	Best         *Report       `json:"best,omitempty"` // evaluation of the kept parameters
	EarlyStopped bool          `json:"early_stopped"`
	Truncated    int           `json:"truncated"` // training inputs cut to the maximum length
	Seconds      float64       `json:"seconds"`
}

// ErrNonFinite is wrapped when the loss or the gradients stop being finite.
var ErrNonFinite = errors.New("finetune: the loss or the gradient norm is not finite")

// MetricsRecord is one line of metrics.jsonl: a training log every LogEvery
// steps (Loss, LR, GradNorm), or the end of an epoch (Loss over the whole
// epoch, Eval when there is evaluation data, Best).
type MetricsRecord struct {
	Epoch    int      `json:"epoch"`
	Step     int      `json:"step"`
	Loss     *float64 `json:"loss,omitempty"`      // mean training loss since the last log line, or over the epoch
	LR       *float64 `json:"lr,omitempty"`        // learning rate of the step's update
	GradNorm *float64 `json:"grad_norm,omitempty"` // before clipping
	Eval     *Report  `json:"eval,omitempty"`
	Best     *bool    `json:"best,omitempty"`
	// WorldSize is the number of data-parallel ranks (1: one process).
	WorldSize int `json:"world_size,omitempty"`
}

// stepSeed derives the dropout seed of an optimizer step from the run seed.
func stepSeed(seed uint64, step int) uint64 {
	x := seed*0x9e3779b97f4a7c15 + uint64(step)*0xbf58476d1ce4e5b9 + 0x94d049bb133111eb
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	return x ^ x>>29
}

// microSeed is the dropout seed of micro-batch k of an optimizer step: the
// step's seed for k = 0 (so runs without accumulation keep their numbers),
// a seed of its own for the others.
func microSeed(seed uint64, step, k int) uint64 {
	if k == 0 {
		return stepSeed(seed, step)
	}
	return stepSeed(seed^(uint64(k)*0xd1b54a32d192ed03), step)
}

// stateCache keeps the training workspaces of the two most recent batch
// shapes (a full batch and the last, shorter one, of a few lengths).
type stateCache struct {
	m    *roformer.Model
	keys [2][2]int
	st   [2]*roformer.State
}

func (c *stateCache) get(B, T int) *roformer.State {
	for i := range c.st {
		if c.st[i] != nil && c.keys[i] == [2]int{B, T} {
			if i == 1 {
				c.st[0], c.st[1], c.keys[0], c.keys[1] = c.st[1], c.st[0], c.keys[1], c.keys[0]
			}
			return c.st[0]
		}
	}
	c.st[1], c.keys[1] = c.st[0], c.keys[0]
	c.st[0], c.keys[0] = c.m.NewState(B, T, true), [2]int{B, T}
	return c.st[0]
}

// Train fine-tunes j.Model in place. After each epoch it evaluates on
// j.Eval and keeps a copy of the parameters with the best main metric;
// at the end the model holds that copy. Each optimizer step is the
// toolkit's train.DataParallel step (train.Stepper alone on one process):
// learning rate from the schedule, zero the gradients, forward and
// backward with dropout, average over the micro-batches (and the ranks),
// clip, AdamW update.
func Train(ctx context.Context, j Job) (*Result, error) {
	t, err := newTrainer(j)
	if err != nil {
		return nil, err
	}
	for epoch := 1; epoch <= t.o.Epochs; epoch++ {
		t0 := time.Now()
		ep, err := t.trainEpoch(ctx, epoch)
		if err != nil {
			return t.res, err
		}
		if err := t.endEpoch(ctx, &ep, t0); err != nil {
			return t.res, err
		}
		if t.o.Patience > 0 && t.sinceBest >= t.o.Patience && epoch < t.o.Epochs {
			t.res.EarlyStopped = true
			t.say("early stop: %d evaluations without a better %s (best %.4f at epoch %d)", t.sinceBest, t.spec.Metric, t.bestScore, t.res.BestEpoch)
			break
		}
	}
	if t.best != nil {
		restore(t.params, t.best)
	}
	t.res.Seconds = time.Since(t.start).Seconds()
	return t.res, nil
}

// trainer is a run of Train in progress.
type trainer struct {
	j          Job
	o          Options
	spec       labelled.Spec
	params     []*tensor.Param
	feats      []*feature // the training inputs, encoded
	evalFeats  []*feature // the evaluation inputs; nil without j.Eval
	dp         *train.DataParallel
	accum      int // micro-batches per rank and step
	stepInputs int // inputs per optimizer step, over all ranks
	total      int // optimizer steps of the run
	padID      int32
	states     *stateCache
	batch      []*feature // the micro-batch being assembled

	res       *Result
	start     time.Time
	step      int       // optimizer steps done
	best      []float32 // flat copy of the best parameters
	bestScore float64
	sinceBest int // evaluations since the best
}

// newTrainer checks the job, encodes its data, sets up the step and prints
// the run's first line.
func newTrainer(j Job) (*trainer, error) {
	t := &trainer{j: j, o: j.Options, spec: j.Spec, bestScore: math.Inf(-1)}
	o := &t.o
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := t.spec.Validate(); err != nil {
		return nil, err
	}
	if j.Model.Head != Head(&t.spec) || j.Model.Config.NumLabels != t.spec.NumOutputs() {
		return nil, fmt.Errorf("finetune: the model has the %s head with %d outputs; the task needs %s with %d", j.Model.Head, j.Model.Config.NumLabels, Head(&t.spec), t.spec.NumOutputs())
	}
	nTrunc, err := t.encode()
	if err != nil {
		return nil, err
	}
	g := j.Group
	if g == nil {
		g = distributed.Local()
	}
	ranks := g.Size()
	t.params, t.accum = j.Model.Params(), max(o.Accum, 1)
	t.stepInputs = o.BatchSize * t.accum * ranks
	rs, err := newRunSteps(g, j.Model, t.params, o, len(t.feats), t.stepInputs)
	if err != nil {
		return nil, err
	}
	t.dp, t.total = rs.dp, rs.total
	perEpoch, warm := rs.perEpoch, rs.warm
	if err := t.dp.CheckParams("at the start"); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	batchDesc := fmt.Sprint(o.BatchSize)
	if t.accum > 1 || ranks > 1 {
		batchDesc = fmt.Sprintf("%d × accumulation %d × %d ranks", o.BatchSize, t.accum, ranks)
	}
	t.say("finetune: %d training examples (%d truncated to %d tokens), %d for evaluation; %d epochs of %d steps, batch %s, lr %.2e (%s, warm-up %d), weight decay %g, seed %d",
		len(t.feats), nTrunc, o.MaxLength, len(t.evalFeats), o.Epochs, perEpoch, batchDesc, o.LR, o.Schedule, warm, o.WeightDecay, o.Seed)
	t.res = &Result{Truncated: nTrunc}
	t.start = time.Now()
	t.padID = int32(j.Tokenizer.PadID())
	t.states = &stateCache{m: j.Model}
	t.batch = make([]*feature, 0, o.BatchSize)
	return t, nil
}

// encode encodes the training inputs, which must all be labelled, and the
// evaluation inputs, and returns how many training inputs were truncated.
func (t *trainer) encode() (truncated int, err error) {
	j := t.j
	tr, _ := t.o.truncation()
	eo := encodeOptions{maxLen: t.o.MaxLength, truncation: tr}
	for i := range j.Train.Examples {
		if !j.Train.Examples[i].HasLabel {
			return 0, &labelled.InputError{File: j.Train.File, Line: j.Train.Examples[i].Line, Err: errors.New("no label")}
		}
	}
	if t.feats, truncated, err = encodeAll(j.Tokenizer, &t.spec, j.Train, eo); err != nil {
		return 0, err
	}
	if j.Eval != nil {
		if t.evalFeats, _, err = encodeAll(j.Tokenizer, &t.spec, j.Eval, eo); err != nil {
			return 0, err
		}
	}
	return truncated, nil
}

// trainEpoch runs the optimizer steps of an epoch over a shuffled order of
// the training inputs, printing and recording a line every LogEvery steps,
// and returns the epoch's mean training loss.
func (t *trainer) trainEpoch(ctx context.Context, epoch int) (EpochResult, error) {
	o := &t.o
	order := rand.New(rand.NewPCG(o.Seed, uint64(epoch))).Perm(len(t.feats))
	var epLoss, logLoss float64
	var epN, logN int
	for lo := 0; lo < len(order); lo += t.stepInputs {
		if !t.dp.Parallel() {
			// With several ranks the interruption is voted on after
			// the step, so that all stop at the same one.
			if err := ctx.Err(); err != nil {
				return EpochResult{}, err
			}
		}
		u, err := t.update(ctx, order[lo:min(lo+t.stepInputs, len(order))])
		if err != nil {
			return EpochResult{}, err
		}
		lr, norm := u.LR, u.GradNorm
		t.step++
		epLoss += u.Loss
		epN++
		logLoss += u.Loss
		logN++
		if o.LogEvery > 0 && t.step%o.LogEvery == 0 {
			l := logLoss / float64(logN)
			t.say("epoch %d step %d/%d | loss %.4f | lr %.3e | grad norm %.3f | %.1f ex/s", epoch, t.step, t.total, l, lr, norm,
				float64(t.step*t.stepInputs)/time.Since(t.start).Seconds())
			if err := t.record(MetricsRecord{Epoch: epoch, Step: t.step, Loss: &l, LR: &lr, GradNorm: &norm, WorldSize: t.dp.Group.Size()}); err != nil {
				return EpochResult{}, err
			}
			logLoss, logN = 0, 0
		}
	}
	return EpochResult{Epoch: epoch, Step: t.step, TrainLoss: epLoss / float64(epN)}, nil
}

// update does optimizer step t.step+1 on the step's inputs (indices into
// t.feats), which form micro-batches of BatchSize; rank r computes numbers
// r·accum … r·accum+accum−1 of them.
func (t *trainer) update(ctx context.Context, inputs []int) (train.Update, error) {
	bs, step := t.o.BatchSize, t.step
	all := (len(inputs) + bs - 1) / bs
	first, mine := t.dp.Share(t.accum, all)
	u, stop, err := t.dp.Step(ctx, step, mine, all, func(mctx context.Context, j int) (float64, error) {
		k := first + j
		t.batch = t.batch[:0]
		for _, i := range inputs[k*bs : min((k+1)*bs, len(inputs))] {
			t.batch = append(t.batch, t.feats[i])
		}
		b, lab := makeBatch(t.batch, &t.spec, t.padID, true)
		sr, err := t.j.Model.ForwardBackward(mctx, t.states.get(b.B, b.T), b, lab, roformer.StepOptions{Dropout: true, Seed: microSeed(t.o.Seed, step, k)})
		if err != nil {
			return 0, err
		}
		return sr.Loss, nil
	})
	if err := stepError(err); err != nil {
		return u, err
	}
	if stop {
		return u, fmt.Errorf("finetune: stopped after step %d (a rank was interrupted): %w", step+1, context.Canceled)
	}
	return u, nil
}

// endEpoch evaluates after an epoch (when there is evaluation data), keeps
// the parameters when they are the best so far, and prints and records the
// epoch.
func (t *trainer) endEpoch(ctx context.Context, ep *EpochResult, t0 time.Time) error {
	if t.evalFeats != nil {
		rep, isBest, err := t.evaluate(ctx, ep.Epoch)
		if err != nil {
			return err
		}
		ep.Eval = rep
		if isBest {
			ep.Best = true
			if rep != nil {
				t.bestScore = rep.Main()
			}
			t.best = snapshot(t.params, t.best)
			t.res.BestEpoch, t.res.Best = ep.Epoch, rep
			t.sinceBest = 0
		} else {
			t.sinceBest++
		}
		mark := ""
		if ep.Best {
			mark = " (best)"
		}
		if rep != nil {
			t.say("epoch %d: train loss %.4f | eval loss %.4f | %s %.4f%s | %s", ep.Epoch, ep.TrainLoss, rep.Loss, t.spec.Metric, rep.Metrics[t.spec.Metric], mark, rep.OtherMetrics(" "))
		}
	} else {
		t.res.BestEpoch = ep.Epoch
		t.say("epoch %d: train loss %.4f", ep.Epoch, ep.TrainLoss)
	}
	ep.Seconds = time.Since(t0).Seconds()
	t.res.Epochs = append(t.res.Epochs, *ep)
	t.res.Steps = t.step
	isBest := ep.Best
	return t.record(MetricsRecord{Epoch: ep.Epoch, Step: t.step, Loss: &ep.TrainLoss, Eval: ep.Eval, Best: &isBest, WorldSize: t.dp.Group.Size()})
}

// evaluate scores the evaluation inputs on rank 0, which tells the others
// whether the epoch is the best so far (the parameters are the same on
// every rank); rep is nil on the other ranks.
func (t *trainer) evaluate(ctx context.Context, epoch int) (rep *Report, isBest bool, err error) {
	g := t.dp.Group
	if g.Rank() == 0 {
		if rep, _, err = evaluateFeatures(ctx, t.j.Model, t.padID, &t.spec, t.evalFeats, t.o.EvalBatchSize); err == nil {
			rep.File = t.j.Eval.File
			isBest = rep.Main() > t.bestScore
		}
	}
	if err := distributed.Agree(g, err); err != nil {
		return nil, false, err
	}
	if t.dp.Parallel() {
		flag := []byte{0}
		if isBest {
			flag[0] = 1
		}
		if err := g.Bcast(flag, 0); err != nil {
			return nil, false, fmt.Errorf("finetune: epoch %d: broadcasting the evaluation: %w", epoch, err)
		}
		isBest = flag[0] == 1
	}
	return rep, isBest, nil
}

// say prints a progress line to j.Progress.
func (t *trainer) say(format string, a ...any) {
	if t.j.Progress != nil {
		fmt.Fprintf(t.j.Progress, format+"\n", a...)
	}
}

// record writes r as one line of j.Metrics.
func (t *trainer) record(r MetricsRecord) error {
	if t.j.Metrics == nil {
		return nil
	}
	return writeJSONLine(t.j.Metrics, r)
}

// OtherMetrics lists the report's metrics other than the main one, by
// name, as "name 0.1234" joined by sep.
func (r *Report) OtherMetrics(sep string) string {
	names := make([]string, 0, len(r.Metrics))
	for name := range r.Metrics {
		if name != r.MainMetric && name != "neg_mse" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.4f", name, r.Metrics[name])
	}
	return strings.Join(parts, sep)
}

func snapshot(params []*tensor.Param, dst []float32) []float32 {
	dst = dst[:0]
	for _, p := range params {
		dst = append(dst, p.Data...)
	}
	return dst
}

func restore(params []*tensor.Param, src []float32) {
	for _, p := range params {
		n := copy(p.Data, src)
		src = src[n:]
	}
}
