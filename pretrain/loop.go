package pretrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/internal/saving"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
	"github.com/roformer-go/roformer/train"
)

// Loop is everything a run needs besides the context.
type Loop struct {
	Model Model
	Train [][]int32 // packed training sequences (data.Pack, data.SplitEval)
	Eval  [][]int32 // held-out sequences; may be empty (no evaluation)
	Vocab data.Vocab
	// Options of the run. Resume takes them from the checkpoint instead and
	// uses only OutDir and, when non-zero, Steps (to train longer) and
	// Threads (compared with the saved count: a warning when they differ).
	Options TrainOptions
	// Out receives progress: a bar when IsTerminal, else one line every
	// LogEvery steps. Nil discards it.
	Out        io.Writer
	IsTerminal bool
	// SaveExtra, if set, writes the caller's files (vocab.txt, tokenizer
	// configuration) into a model folder; it runs for every checkpoint, and
	// the final model folder gets them too.
	SaveExtra func(dir string) error
	// LossName names the loss in the plot's title ("MLM loss" when empty).
	LossName string
	// Group, when it has more than one rank, makes the run one rank of a
	// data-parallel job (see ranks.go): every rank calls Run (or Resume)
	// with the same Loop but its own Group, each computes its share of the
	// micro-batches of a step, and the result equals one process with
	// accumulation TrainOptions.Accum × Group.Size() up to the order of the
	// gradient sums. Rank 0 writes the run folder and alone prints to Out;
	// the others need read access to it for Resume. An error in setup is
	// returned on every rank; one in the middle of a step (a failed forward
	// pass, a NaN loss) is returned on its rank while the others wait in the
	// next collective, so the caller must then end the job (Comm.Abort), as
	// cmd/roformer does. Nil: this process alone.
	Group distributed.Comm
}

// Result summarises a run.
type Result struct {
	Step           int     // optimizer updates done
	Loss           float64 // last logged training loss
	EvalLoss       float64 // last evaluation (NaN when none)
	EvalAccuracy   float64
	EvalPerplexity float64
	Checkpoint     string // newest checkpoint folder
	Interrupted    bool   // stopped by ctx; a checkpoint was saved at Step
}

// ErrInterrupted is wrapped by the error returned when ctx was cancelled: a
// checkpoint at the current step boundary has been saved.
var ErrInterrupted = errors.New("pretrain: interrupted")

// Run starts a new run in job.Options.OutDir, which must be missing, empty,
// or hold only what a run started there wrote before its first checkpoint
// (its options, tokenizer folder, metrics and plot): a folder holding a
// run, a model (config.json, weights) or any other file is refused before
// anything is written, so that nothing in it is overwritten.
func (job Loop) Run(ctx context.Context) (*Result, error) {
	o := job.Options.Defaults()
	g := job.Group
	if g == nil {
		g = distributed.Local()
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var err error
	if g.Rank() == 0 {
		err = newRunFolder(o.OutDir)
	}
	if err := agree(g, err); err != nil {
		return nil, err
	}
	t, err := newTrainer(job, o)
	if err := agree(g, err); err != nil {
		return nil, err
	}
	if t.leader() {
		t.metrics, t.records, err = openMetrics(o.OutDir, 0)
	}
	if err := agree(g, err); err != nil {
		return nil, err
	}
	defer t.metrics.close()
	return t.run(ctx)
}

// newRunFolder makes dir ready for a new run: created, holding nothing
// but what checkNewRunFolder allows, cleared of temporary files.
func newRunFolder(dir string) error {
	if err := checkNewRunFolder(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	return cleanTemp(dir)
}

// Resume continues the run in job.Options.OutDir from its latest
// checkpoint, which it validates (format, checksums, parameter names and
// shapes, data fingerprints). The options are those saved in the
// checkpoint, except Steps when job.Options.Steps is non-zero. job must
// carry the same model architecture and the same packed data as the
// original run (ReadLatestState gives the options to rebuild them).
func (job Loop) Resume(ctx context.Context) (*Result, error) {
	g := job.Group
	if g == nil {
		g = distributed.Local()
	}
	t, err := resumeTrainer(job, g)
	if err := agree(g, err); err != nil {
		return nil, err
	}
	if t.leader() {
		t.metrics, t.records, err = openMetrics(t.o.OutDir, t.step)
	}
	if err := agree(g, err); err != nil {
		return nil, err
	}
	defer t.metrics.close()
	for _, r := range t.records {
		if r.Loss != nil {
			t.last.Loss = *r.Loss
		}
		if r.EvalLoss != nil {
			t.last.EvalLoss, t.last.EvalAccuracy, t.last.EvalPerplexity = *r.EvalLoss, *r.EvalAccuracy, *r.EvalPPL
		}
	}
	t.prog = newProgress(t.out(), false, 0, 0)
	if th := job.Options.Threads; th != 0 && th != t.saved.Threads {
		t.prog.printf("warning: resuming with %d threads, the run used %d; the result may differ in the last bits from an uninterrupted run", th, t.saved.Threads)
	}
	if old := max(t.saved.WorldSize, 1); old != g.Size() {
		t.prog.printf("warning: resuming with %d ranks × accumulation %d, the run used %d × %d: the same micro-batches a step, but the gradients are summed in another order, so the result differs in the last bits from an uninterrupted run",
			g.Size(), t.o.Accum, old, t.saved.Accum)
	}
	t.prog.printf("resuming from %s (step %d of %d)", t.lastCkpt, t.step, t.o.Steps)
	return t.run(ctx)
}

// resumeTrainer builds the trainer of Resume from the latest checkpoint of
// job.Options.OutDir; rank 0 also clears what a killed run left behind.
func resumeTrainer(job Loop, g distributed.Comm) (*trainer, error) {
	dir := job.Options.OutDir
	st, ckpt, err := ReadLatestState(dir)
	if err != nil {
		return nil, err
	}
	o := st.Options
	o.OutDir = dir
	if job.Options.Steps != 0 {
		o.Steps = job.Options.Steps
	}
	if o.Accum, err = resumeAccum(ckpt, max(o.WorldSize, 1), max(o.Accum, 1), g.Size(), st.RankModelStates != nil); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if st.Step > o.Steps {
		return nil, fmt.Errorf("pretrain: checkpoint %s is at step %d, past the %d steps asked for", ckpt, st.Step, o.Steps)
	}
	if job.Vocab.Size != st.VocabSize {
		return nil, fmt.Errorf("pretrain: checkpoint %s was trained with a vocabulary of %d ids, this job has %d", ckpt, st.VocabSize, job.Vocab.Size)
	}
	if fp := data.Fingerprint(job.Train); fp != st.TrainData {
		return nil, fmt.Errorf("pretrain: the training data differ from those of checkpoint %s (fingerprint %.12s, saved %.12s): same corpus, tokenizer and sequence length are needed", ckpt, fp, st.TrainData)
	}
	if fp := data.Fingerprint(job.Eval); fp != st.EvalData {
		return nil, fmt.Errorf("pretrain: the evaluation data differ from those of checkpoint %s (fingerprint %.12s, saved %.12s)", ckpt, fp, st.EvalData)
	}
	if g.Rank() == 0 {
		if err := cleanTemp(dir); err != nil {
			return nil, err
		}
		if err := removeAfter(dir, st.Step); err != nil {
			return nil, err
		}
	}
	t, err := newTrainer(job, o)
	if err != nil {
		return nil, err
	}
	t.saved = st.Options
	if err := t.m.LoadModel(ckpt); err != nil {
		return nil, fmt.Errorf("pretrain: loading the model of %s: %w", ckpt, err)
	}
	ob, err := os.ReadFile(filepath.Join(ckpt, OptimizerFile))
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if err := t.stepper.Opt.UnmarshalBinary(ob); err != nil {
		return nil, fmt.Errorf("pretrain: %s: %w", filepath.Join(ckpt, OptimizerFile), err)
	}
	if t.stepper.Opt.StepCount() != int64(st.Step) {
		return nil, fmt.Errorf("pretrain: %s is at step %d, %s at step %d", OptimizerFile, t.stepper.Opt.StepCount(), StateFile, st.Step)
	}
	if err := t.loader.UnmarshalBinary(st.Loader); err != nil {
		return nil, fmt.Errorf("pretrain: %s: %w", filepath.Join(ckpt, StateFile), err)
	}
	modelState := st.ModelState
	if st.RankModelStates != nil {
		if len(st.RankModelStates) != g.Size() {
			return nil, fmt.Errorf("pretrain: %s holds the model state of %d ranks, this job has %d", filepath.Join(ckpt, StateFile), len(st.RankModelStates), g.Size())
		}
		modelState = st.RankModelStates[g.Rank()]
	}
	if sm, ok := t.m.(StatefulModel); ok && modelState != nil {
		if err := sm.SetTrainState(modelState); err != nil {
			return nil, fmt.Errorf("pretrain: restoring the model's state from %s: %w", ckpt, err)
		}
	}
	t.step, t.lastCkpt = st.Step, ckpt
	t.logLoss, t.logSteps, t.logTokens = st.LogLossSum, st.LogSteps, st.LogTokens
	t.elapsedBefore, t.tokens = st.ElapsedSec, st.TrainedToken
	return t, nil
}

// trainer holds a run in progress.
type trainer struct {
	job     Loop
	o       TrainOptions
	m       Model
	params  []*tensor.Param
	stepper *train.Stepper // the optimizer update: AdamW, schedule, accumulation, clipping
	loader  *data.Loader
	eval    []*data.Batch
	saved   TrainOptions // a resumed run's options as saved

	dp *train.DataParallel // the step on this rank's share, and the exchanges between ranks
	g  distributed.Comm    // dp.Group: the data-parallel group; distributed.Local() alone

	metrics *metricsLog
	records []Record // metrics so far, for the plot
	plotted int      // len(records) at the last drawing
	prog    *progress

	step     int    // optimizer updates done
	lastCkpt string // newest checkpoint folder, "" before the first
	// Log interval in progress: loss sum, steps and tokens since the last record.
	logLoss   float64
	logSteps  int
	logTokens int64
	tokens    int64 // non-padding tokens trained on, over all sessions

	elapsedBefore float64   // seconds trained in earlier sessions
	start         time.Time // this session's start
	startStep     int
	logStart      time.Time
	last          Result
}

func newTrainer(job Loop, o TrainOptions) (*trainer, error) {
	if job.Model == nil {
		return nil, fmt.Errorf("pretrain: no model")
	}
	params := job.Model.Params()
	stepper, err := train.NewStepper(params, optim.AdamWConfig{Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay}, o.schedule())
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	stepper.Clip = o.Clip
	mask := data.MaskOptions{Prob: o.MaskProb, WholeWord: o.WholeWord}
	loader, err := data.NewLoader(job.Train, job.Vocab, data.LoaderOptions{BatchSize: o.BatchSize, SeqLen: o.SeqLen, Seed: o.Seed, Mask: mask})
	if err != nil {
		return nil, fmt.Errorf("pretrain: training data: %w", err)
	}
	var eval []*data.Batch
	if len(job.Eval) > 0 {
		if eval, err = data.EvalBatches(job.Eval, job.Vocab, o.BatchSize, o.SeqLen, o.EvalBatches, o.Seed, mask); err != nil {
			return nil, fmt.Errorf("pretrain: evaluation data: %w", err)
		}
	}
	t := &trainer{job: job, o: o, m: job.Model, params: params, stepper: stepper,
		loader: loader, eval: eval, last: Result{EvalLoss: math.NaN(), EvalAccuracy: math.NaN(), EvalPerplexity: math.NaN()}}
	t.dp = train.NewDataParallel(job.Group, stepper)
	t.g = t.dp.Group
	t.o.WorldSize = t.g.Size()
	return t, nil
}

// out is where this rank prints progress: Loop.Out on rank 0, nowhere on
// the others.
func (t *trainer) out() io.Writer {
	if t.g.Rank() != 0 {
		return nil
	}
	return t.job.Out
}

// run trains from t.step to o.Steps, then saves and publishes the final
// model.
func (t *trainer) run(ctx context.Context) (*Result, error) {
	o := t.o
	t.prog = newProgress(t.out(), t.job.IsTerminal, t.step, o.Steps)
	defer t.prog.finish()
	n := 0
	for _, p := range t.params {
		n += len(p.Data)
	}
	ranks := ""
	if t.parallel() {
		ranks = fmt.Sprintf(" × %d ranks (%d sequences a step)", t.g.Size(), o.BatchSize*o.Accum*t.g.Size())
	}
	t.prog.printf("train: %d steps of %d×%d tokens (accumulation %d)%s, %s lr %.2e warm-up %d, weight decay %g, clip %g, seed %d, threads %d, %d parameters, %d/%d train/eval sequences, out %s",
		o.Steps, o.BatchSize, o.SeqLen, o.Accum, ranks, o.Schedule, o.LR, o.Warmup, o.WeightDecay, o.Clip, o.Seed, o.Threads,
		n, len(t.job.Train), len(t.job.Eval), o.OutDir)
	if t.parallel() {
		if err := t.dp.CheckSame("training data", []byte(data.Fingerprint(t.job.Train))); err != nil {
			return nil, err
		}
		lb, err := t.loader.MarshalBinary()
		if err := agree(t.g, err); err != nil {
			return nil, err
		}
		if err := t.checkRanks(lb); err != nil {
			return nil, err
		}
	}
	t.start, t.startStep, t.logStart = time.Now(), t.step, time.Now()

	for t.step < o.Steps {
		// With several ranks, an interruption is voted on at the end of
		// each step (update), so that every rank stops at the same one.
		if !t.parallel() && ctx.Err() != nil {
			return t.interrupt(ctx)
		}
		boundary, err := t.snapshot()
		if err != nil {
			return nil, err
		}
		u, tokens, stop, err := t.update(ctx)
		if err != nil {
			if !t.parallel() && ctx.Err() != nil && !errors.Is(err, train.ErrNonFinite) {
				// Abandon the half-done step: the parameters are untouched,
				// rewind the data and random state to the step boundary.
				if rerr := t.restore(boundary); rerr != nil {
					return nil, rerr
				}
				return t.interrupt(ctx)
			}
			return nil, t.failed(err)
		}
		if err := t.after(ctx, u, tokens); err != nil {
			return nil, err
		}
		if stop {
			return t.interrupt(ctx)
		}
	}
	if t.lastCkpt != filepath.Join(o.OutDir, checkpointName(t.step)) {
		if err := t.save(); err != nil {
			return nil, err
		}
	}
	var err error
	if t.leader() {
		end := saving.Begin()
		err = publishModel(t.lastCkpt, o.OutDir)
		end()
		if err == nil {
			err = t.plot()
		}
	}
	if err := agree(t.g, err); err != nil {
		return nil, err
	}
	t.prog.finish()
	t.prog.printf("done: step %d, model in %s", t.step, o.OutDir)
	t.last.Step, t.last.Checkpoint = t.step, t.lastCkpt
	return &t.last, nil
}

// update does optimizer update number t.step+1 through t.dp (see
// DataParallel and Stepper for the order of its parts), drawing the
// micro-batches from the loader, and returns it with the number of tokens
// trained on (by every rank). With several ranks, each draws all Accum ×
// ranks micro-batches of the step and computes its own Accum of them (see
// ranks.go); stop is then true when any rank's ctx was cancelled, and the
// step is finished anyway.
func (t *trainer) update(ctx context.Context) (u train.Update, tokens int, stop bool, err error) {
	n := t.step + 1
	all := max(1, t.o.Accum) * t.g.Size()
	first, mine := t.dp.Share(t.o.Accum, all)
	batches := make([]*data.Batch, 0, mine)
	for k := 0; k < all; k++ {
		b := t.loader.Next()
		tokens += b.Tokens()
		if k >= first && k < first+mine {
			batches = append(batches, b)
		}
	}
	u, stop, err = t.dp.Step(ctx, t.step, mine, all, func(ctx context.Context, k int) (float64, error) {
		l, err := t.m.ForwardBackward(ctx, batches[k])
		if err != nil {
			return 0, fmt.Errorf("pretrain: step %d: %w", n, err)
		}
		return l, nil
	})
	if err != nil {
		return train.Update{}, 0, false, err
	}
	t.step = n
	return u, tokens, stop, nil
}

// after does the bookkeeping of a finished step: log line and metrics,
// evaluation and plot, periodic checkpoint.
func (t *trainer) after(ctx context.Context, u train.Update, tokens int) error {
	o, n := t.o, t.step
	loss, norm, lr := u.Loss, u.GradNorm, u.LR
	t.logLoss += loss
	t.logSteps++
	t.logTokens += int64(tokens)
	t.tokens += int64(tokens)
	now := time.Now()
	session := now.Sub(t.start).Seconds()
	tokPerSec := float64(t.logTokens) / math.Max(now.Sub(t.logStart).Seconds(), 1e-9)
	t.prog.stepDone(n, o.Steps, loss, lr, tokPerSec)
	if n%o.LogEvery == 0 || n == o.Steps {
		mean := t.logLoss / float64(t.logSteps)
		elapsed := t.elapsedBefore + session
		eta := time.Duration(session / float64(n-t.startStep) * float64(o.Steps-n) * float64(time.Second))
		t.prog.logLine(fmt.Sprintf("step %*d/%d | loss %.4f | lr %.3e | grad norm %.3f | %.0f tok/s | elapsed %s | eta %s",
			len(fmt.Sprint(o.Steps)), n, o.Steps, mean, lr, norm, tokPerSec,
			formatDuration(time.Duration(elapsed*float64(time.Second))), formatDuration(eta)))
		r := Record{Step: n, Loss: f64(mean), LR: f64(lr), GradNorm: f64(norm),
			TokensPerSec: f64(tokPerSec), Elapsed: f64(elapsed), WorldSize: t.g.Size()}
		if t.parallel() {
			// Seconds per step in the gradient allreduce, over this
			// session's part of the interval.
			steps := float64(min(t.logSteps, n-t.startStep))
			r.AllreduceSec, r.AllreduceWaitSec = f64(t.dp.CommSec/steps), f64(t.dp.WaitSec/steps)
		}
		if err := t.record(r); err != nil {
			return err
		}
		t.last.Loss = mean
		t.logLoss, t.logSteps, t.logTokens, t.logStart, t.dp.CommSec, t.dp.WaitSec = 0, 0, 0, now, 0, 0
	}
	if len(t.eval) > 0 && ((o.EvalEvery > 0 && n%o.EvalEvery == 0) || n == o.Steps) {
		if err := t.evaluate(ctx); err != nil {
			return err
		}
	}
	if o.SaveEvery > 0 && n%o.SaveEvery == 0 && n != o.Steps {
		return t.save()
	}
	return nil
}

// evaluate scores the held-out batches, records and prints the result and
// redraws the plot. It is not cut short by ctx, so that the metrics of an
// interrupted run match those of an uninterrupted one.
func (t *trainer) evaluate(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var sum float64
	var n, correct int
	// With several ranks, rank r scores batches r, r+ranks, … and the sums
	// are added up.
	for i := t.g.Rank(); i < len(t.eval); i += t.g.Size() {
		s, k, c, err := t.m.Evaluate(ctx, t.eval[i])
		if err != nil {
			return fmt.Errorf("pretrain: step %d: evaluating batch %d: %w", t.step, i, err)
		}
		sum += s
		n += k
		correct += c
	}
	if t.parallel() {
		sums := []float64{sum, float64(n), float64(correct)}
		if err := t.g.AllreduceSum64(sums); err != nil {
			return fmt.Errorf("pretrain: step %d: evaluation allreduce: %w", t.step, err)
		}
		sum, n, correct = sums[0], int(sums[1]), int(sums[2])
	}
	if n == 0 {
		return nil
	}
	loss, acc := sum/float64(n), float64(correct)/float64(n)
	ppl := math.Exp(loss)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return t.failed(fmt.Errorf("%w: step %d: evaluation loss is %v", train.ErrNonFinite, t.step, loss))
	}
	t.prog.printf("eval step %d | loss %.4f | accuracy %.4f | perplexity %.2f | %d tokens", t.step, loss, acc, ppl, n)
	t.last.EvalLoss, t.last.EvalAccuracy, t.last.EvalPerplexity = loss, acc, ppl
	if err := t.record(Record{Step: t.step, EvalLoss: f64(loss), EvalAccuracy: f64(acc), EvalPPL: f64(ppl), EvalTokens: &n, WorldSize: t.g.Size()}); err != nil {
		return err
	}
	return t.plot()
}

// record appends r to metrics.jsonl (rank 0) and to the plot's history.
func (t *trainer) record(r Record) error {
	if t.metrics != nil {
		if err := t.metrics.write(r); err != nil {
			return err
		}
	}
	t.records = append(t.records, r)
	return nil
}

// plot redraws loss.png atomically when records were added since the last
// drawing.
func (t *trainer) plot() error {
	if !t.leader() || len(t.records) == t.plotted {
		return nil
	}
	t.plotted = len(t.records)
	what := t.job.LossName
	if what == "" {
		what = "MLM loss"
	}
	png, err := lossPlot(t.records, fmt.Sprintf("%s, %s", what, filepath.Base(t.o.OutDir)))
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(t.o.OutDir, PlotFile), png)
}

// boundaryState is the data and model random state at a step boundary.
type boundaryState struct{ loader, model []byte }

func (t *trainer) snapshot() (boundaryState, error) {
	var s boundaryState
	var err error
	if s.loader, err = t.loader.MarshalBinary(); err != nil {
		return s, fmt.Errorf("pretrain: %w", err)
	}
	if sm, ok := t.m.(StatefulModel); ok {
		if s.model, err = sm.TrainState(); err != nil {
			return s, fmt.Errorf("pretrain: model state: %w", err)
		}
	}
	return s, nil
}

func (t *trainer) restore(s boundaryState) error {
	if err := t.loader.UnmarshalBinary(s.loader); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if sm, ok := t.m.(StatefulModel); ok && s.model != nil {
		if err := sm.SetTrainState(s.model); err != nil {
			return fmt.Errorf("pretrain: model state: %w", err)
		}
	}
	return nil
}

// save writes checkpoint-<step> with the state at the current step
// boundary. With several ranks it is a collective: the ranks first check
// that they agree (checkRanks), each rank's model state is gathered, and
// rank 0 writes. It is marked as a save in progress (internal/saving) on
// every rank, so that the CLI's exit after a signal waits for it.
func (t *trainer) save() error {
	defer saving.Begin()()
	b, err := t.snapshot()
	if err := agree(t.g, err); err != nil {
		return err
	}
	if err := t.checkRanks(b.loader); err != nil {
		return err
	}
	var rankStates [][]byte
	if _, ok := t.m.(StatefulModel); ok && t.parallel() {
		if rankStates, err = t.g.Gather(b.model, 0); err != nil {
			return fmt.Errorf("pretrain: gathering the ranks' model states: %w", err)
		}
		b.model = nil
	}
	if t.leader() {
		err = t.write(b, rankStates)
	}
	if err := agree(t.g, err); err != nil {
		return err
	}
	t.lastCkpt = filepath.Join(t.o.OutDir, checkpointName(t.step))
	t.prog.printf("saved %s", t.lastCkpt)
	return nil
}

// write writes the checkpoint of save.
func (t *trainer) write(b boundaryState, rankStates [][]byte) error {
	optState, err := t.stepper.Opt.MarshalBinary()
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	st := &State{
		Step: t.step, Options: t.o, Loader: b.loader, ModelState: b.model, RankModelStates: rankStates,
		TrainData: data.Fingerprint(t.job.Train), EvalData: data.Fingerprint(t.job.Eval), VocabSize: t.job.Vocab.Size,
		LogLossSum: t.logLoss, LogSteps: t.logSteps, LogTokens: t.logTokens,
		ElapsedSec: t.elapsedBefore + time.Since(t.start).Seconds(), TrainedToken: t.tokens,
	}
	return saveCheckpoint(t.o.OutDir, st, t.m, t.job.SaveExtra, optState, t.o.Keep)
}

// interrupt saves a checkpoint at the current step boundary and reports
// the interruption.
func (t *trainer) interrupt(ctx context.Context) (*Result, error) {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = errOtherRank
	}
	if err := t.save(); err != nil {
		return nil, fmt.Errorf("%w (%w), and saving failed: %w", ErrInterrupted, cause, err)
	}
	t.last.Step, t.last.Checkpoint, t.last.Interrupted = t.step, t.lastCkpt, true
	return &t.last, fmt.Errorf("%w (%w) at step %d of %d; checkpoint saved in %s, resume to continue",
		ErrInterrupted, cause, t.step, t.o.Steps, t.lastCkpt)
}

// failed adds to err where the last good checkpoint is.
func (t *trainer) failed(err error) error {
	if t.lastCkpt == "" {
		return fmt.Errorf("%w; stopped, no checkpoint had been saved yet", err)
	}
	return fmt.Errorf("%w; stopped without saving, the last good checkpoint is %s", err, t.lastCkpt)
}
