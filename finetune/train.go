package finetune

import (
	"context"
	"encoding/json"
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
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
	"github.com/roformer-go/roformer/tokenizer"
	"github.com/roformer-go/roformer/train"
)

// Options are the hyper-parameters of a fine-tuning run. Start from
// DefaultOptions.
type Options struct {
	MaxLength int `json:"max_length"` // tokens per input with [CLS] and [SEP]
	BatchSize int `json:"batch_size"` // inputs per micro-batch (per rank)
	// Accum is the number of micro-batches of BatchSize inputs per
	// optimizer step (gradients averaged); 0 counts as 1. A step takes
	// BatchSize × Accum × ranks inputs.
	Accum         int     `json:"accum,omitempty"`
	EvalBatchSize int     `json:"eval_batch_size"` // inputs per evaluation forward pass
	Epochs        int     `json:"epochs"`
	LR            float64 `json:"lr"`           // peak learning rate
	Schedule      string  `json:"schedule"`     // linear, cosine or constant after the warm-up
	WarmupRatio   float64 `json:"warmup_ratio"` // warm-up as a share of all steps
	WarmupSteps   int     `json:"warmup_steps"` // when > 0, wins over WarmupRatio
	WeightDecay   float64 `json:"weight_decay"` // AdamW decoupled decay (not on biases and LayerNorm)
	Clip          float64 `json:"clip"`         // global gradient-norm clip; 0 off
	Seed          uint64  `json:"seed"`         // head initialisation, data order and dropout
	// Patience stops training after this many evaluations in a row without
	// a new best (0: never stop early).
	Patience   int    `json:"patience"`
	Truncation string `json:"truncation"` // longest_first, only_first, only_second or none (over-long input is an error)
	LogEvery   int    `json:"log_every"`  // optimizer steps between progress lines
}

// DefaultOptions returns Hugging Face Trainer-like settings: 3 epochs,
// batch 32, learning rate 5e-5 with linear decay and 6% warm-up, weight
// decay 0.01, clipping at 1, inputs cut at 128 tokens, seed 42.
func DefaultOptions() Options {
	return Options{MaxLength: 128, BatchSize: 32, EvalBatchSize: 64, Epochs: 3, LR: 5e-5, Schedule: "linear",
		WarmupRatio: 0.06, WeightDecay: 0.01, Clip: 1, Seed: 42, Truncation: "longest_first", LogEvery: 50}
}

// Validate checks the options; errors carry the numbers.
func (o *Options) Validate() error {
	var errs []error
	if o.MaxLength < 3 {
		errs = append(errs, fmt.Errorf("max length %d must be at least 3 ([CLS], a token, [SEP])", o.MaxLength))
	}
	if o.BatchSize < 1 || o.EvalBatchSize < 1 || o.Accum < 0 {
		errs = append(errs, fmt.Errorf("batch sizes %d and %d must be at least 1, accumulation %d at least 0", o.BatchSize, o.EvalBatchSize, o.Accum))
	}
	if o.Epochs < 1 {
		errs = append(errs, fmt.Errorf("epochs %d must be at least 1", o.Epochs))
	}
	if !(o.LR > 0) || math.IsInf(o.LR, 0) {
		errs = append(errs, fmt.Errorf("learning rate %v must be a positive number", o.LR))
	}
	if _, err := optim.ParseSchedule(o.Schedule); err != nil {
		errs = append(errs, err)
	}
	if !(o.WarmupRatio >= 0 && o.WarmupRatio <= 1) || o.WarmupSteps < 0 {
		errs = append(errs, fmt.Errorf("warm-up ratio %v must lie in [0, 1] and warm-up steps %d must be >= 0", o.WarmupRatio, o.WarmupSteps))
	}
	if !(o.WeightDecay >= 0) || !(o.Clip >= 0) {
		errs = append(errs, fmt.Errorf("weight decay %v and clip %v must be >= 0", o.WeightDecay, o.Clip))
	}
	if o.Patience < 0 {
		errs = append(errs, fmt.Errorf("patience %d must be >= 0", o.Patience))
	}
	if _, err := o.truncation(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("finetune: %w", err)
	}
	return nil
}

func (o *Options) truncation() (tokenizer.Truncation, error) {
	if o.Truncation == "" {
		return tokenizer.TruncateLongestFirst, nil
	}
	return tokenizer.ParseTruncation(o.Truncation)
}

// EvalOptions returns the evaluation settings that match the training ones.
func (o *Options) EvalOptions() EvalOptions {
	tr, _ := o.truncation()
	return EvalOptions{MaxLength: o.MaxLength, BatchSize: o.EvalBatchSize, Truncation: tr}
}

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
// toolkit's train.Stepper: learning rate from the schedule, zero the
// gradients, forward and backward with dropout, clip, AdamW update.
func Train(ctx context.Context, j Job) (*Result, error) {
	o := j.Options
	if err := o.Validate(); err != nil {
		return nil, err
	}
	spec := j.Spec
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if j.Model.Head != Head(&spec) || j.Model.Config.NumLabels != spec.NumOutputs() {
		return nil, fmt.Errorf("finetune: the model has the %s head with %d outputs; the task needs %s with %d", j.Model.Head, j.Model.Config.NumLabels, Head(&spec), spec.NumOutputs())
	}
	say := func(format string, a ...any) {
		if j.Progress != nil {
			fmt.Fprintf(j.Progress, format+"\n", a...)
		}
	}
	record := func(r MetricsRecord) error {
		if j.Metrics == nil {
			return nil
		}
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("finetune: metrics record: %w", err)
		}
		_, err = j.Metrics.Write(append(b, '\n'))
		return err
	}
	tr, _ := o.truncation()
	eo := encodeOptions{maxLen: o.MaxLength, truncation: tr}
	for i := range j.Train.Examples {
		if !j.Train.Examples[i].HasLabel {
			return nil, &labelled.InputError{File: j.Train.File, Line: j.Train.Examples[i].Line, Err: errors.New("no label")}
		}
	}
	feats, nTrunc, err := encodeAll(j.Tokenizer, &spec, j.Train, eo)
	if err != nil {
		return nil, err
	}
	var evalFeats []*feature
	if j.Eval != nil {
		if evalFeats, _, err = encodeAll(j.Tokenizer, &spec, j.Eval, eo); err != nil {
			return nil, err
		}
	}
	m := j.Model
	params := m.Params()
	g := j.Group
	if g == nil {
		g = distributed.Local()
	}
	ranks, accum := g.Size(), max(o.Accum, 1)
	stepInputs := o.BatchSize * accum * ranks // inputs per optimizer step
	perEpoch := (len(feats) + stepInputs - 1) / stepInputs
	total := perEpoch * o.Epochs
	warm := o.WarmupSteps
	if warm == 0 {
		warm = int(math.Ceil(o.WarmupRatio * float64(total)))
	}
	kind, _ := optim.ParseSchedule(o.Schedule)
	stepper, err := train.NewStepper(params, optim.DefaultAdamWConfig(o.WeightDecay), optim.Schedule{Kind: kind, PeakLR: o.LR, Warmup: warm, Total: total})
	if err != nil {
		return nil, err
	}
	stepper.Clip = o.Clip
	dp := train.NewDataParallel(g, stepper)
	if err := dp.CheckParams("at the start"); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	batchDesc := fmt.Sprint(o.BatchSize)
	if accum > 1 || ranks > 1 {
		batchDesc = fmt.Sprintf("%d × accumulation %d × %d ranks", o.BatchSize, accum, ranks)
	}
	say("finetune: %d training examples (%d truncated to %d tokens), %d for evaluation; %d epochs of %d steps, batch %s, lr %.2e (%s, warm-up %d), weight decay %g, seed %d",
		len(feats), nTrunc, o.MaxLength, len(evalFeats), o.Epochs, perEpoch, batchDesc, o.LR, o.Schedule, warm, o.WeightDecay, o.Seed)
	res := &Result{Truncated: nTrunc}
	start := time.Now()
	padID := int32(j.Tokenizer.PadID())
	states := &stateCache{m: m}
	var best []float32 // flat copy of the best parameters
	bestScore := math.Inf(-1)
	sinceBest := 0
	step := 0
	for epoch := 1; epoch <= o.Epochs; epoch++ {
		t0 := time.Now()
		order := rand.New(rand.NewPCG(o.Seed, uint64(epoch))).Perm(len(feats))
		var epLoss, logLoss float64
		var epN, logN int
		batch := make([]*feature, 0, o.BatchSize)
		for lo := 0; lo < len(order); lo += stepInputs {
			if ranks == 1 {
				// With several ranks the interruption is voted on after
				// the step, so that all stop at the same one.
				if err := ctx.Err(); err != nil {
					return res, err
				}
			}
			// The step's inputs order[lo:hi] form micro-batches of
			// BatchSize; rank r computes numbers r·accum … r·accum+accum−1.
			hi := min(lo+stepInputs, len(order))
			all := (hi - lo + o.BatchSize - 1) / o.BatchSize
			first, mine := dp.Share(accum, all)
			u, stop, err := dp.Step(ctx, step, mine, all, func(mctx context.Context, j int) (float64, error) {
				k := first + j
				batch = batch[:0]
				for _, i := range order[lo+k*o.BatchSize : min(lo+(k+1)*o.BatchSize, hi)] {
					batch = append(batch, feats[i])
				}
				b, lab := makeBatch(batch, &spec, padID, true)
				sr, err := m.ForwardBackward(mctx, states.get(b.B, b.T), b, lab, roformer.StepOptions{Dropout: true, Seed: microSeed(o.Seed, step, k)})
				if err != nil {
					return 0, err
				}
				return sr.Loss, nil
			})
			if nf := (*train.NonFiniteError)(nil); errors.As(err, &nf) {
				return res, fmt.Errorf("%w: step %d, loss %v, gradient norm %v; try a lower learning rate", ErrNonFinite, nf.Step, nf.Loss, nf.GradNorm)
			} else if err != nil {
				return res, err
			}
			if stop {
				return res, fmt.Errorf("finetune: stopped after step %d (a rank was interrupted): %w", step+1, context.Canceled)
			}
			lr, norm := u.LR, u.GradNorm
			step++
			epLoss += u.Loss
			epN++
			logLoss += u.Loss
			logN++
			if o.LogEvery > 0 && step%o.LogEvery == 0 {
				l := logLoss / float64(logN)
				say("epoch %d step %d/%d | loss %.4f | lr %.3e | grad norm %.3f | %.1f ex/s", epoch, step, total, l, lr, norm,
					float64(step*stepInputs)/time.Since(start).Seconds())
				if err := record(MetricsRecord{Epoch: epoch, Step: step, Loss: &l, LR: &lr, GradNorm: &norm, WorldSize: ranks}); err != nil {
					return res, err
				}
				logLoss, logN = 0, 0
			}
		}
		ep := EpochResult{Epoch: epoch, Step: step, TrainLoss: epLoss / float64(epN)}
		if evalFeats != nil {
			// Rank 0 evaluates and tells the others whether the epoch is
			// the best so far (the parameters are the same on every rank).
			var rep *Report
			isBest := false
			var err error
			if g.Rank() == 0 {
				if rep, _, err = evaluateFeatures(ctx, m, padID, &spec, evalFeats, o.EvalBatchSize); err == nil {
					rep.File = j.Eval.File
					isBest = rep.Main() > bestScore
				}
			}
			if err := distributed.Agree(g, err); err != nil {
				return res, err
			}
			if ranks > 1 {
				flag := []byte{0}
				if isBest {
					flag[0] = 1
				}
				if err := g.Bcast(flag, 0); err != nil {
					return res, fmt.Errorf("finetune: epoch %d: broadcasting the evaluation: %w", epoch, err)
				}
				isBest = flag[0] == 1
			}
			ep.Eval = rep
			if isBest {
				ep.Best = true
				if rep != nil {
					bestScore = rep.Main()
				}
				best = snapshot(params, best)
				res.BestEpoch, res.Best = epoch, rep
				sinceBest = 0
			} else {
				sinceBest++
			}
			mark := ""
			if ep.Best {
				mark = " (best)"
			}
			if rep != nil {
				say("epoch %d: train loss %.4f | eval loss %.4f | %s %.4f%s | %s", epoch, ep.TrainLoss, rep.Loss, spec.Metric, rep.Metrics[spec.Metric], mark, rep.OtherMetrics(" "))
			}
		} else {
			res.BestEpoch = epoch
			say("epoch %d: train loss %.4f", epoch, ep.TrainLoss)
		}
		ep.Seconds = time.Since(t0).Seconds()
		res.Epochs = append(res.Epochs, ep)
		res.Steps = step
		isBest := ep.Best
		if err := record(MetricsRecord{Epoch: epoch, Step: step, Loss: &ep.TrainLoss, Eval: ep.Eval, Best: &isBest, WorldSize: ranks}); err != nil {
			return res, err
		}
		if o.Patience > 0 && sinceBest >= o.Patience && epoch < o.Epochs {
			res.EarlyStopped = true
			say("early stop: %d evaluations without a better %s (best %.4f at epoch %d)", sinceBest, spec.Metric, bestScore, res.BestEpoch)
			break
		}
	}
	if best != nil {
		restore(params, best)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
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
