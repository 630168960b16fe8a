package finetune

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/sentence"
	"github.com/roformer-go/roformer/tensor"
	"github.com/roformer-go/roformer/tokenizer"
	"github.com/roformer-go/roformer/train"
)

// EmbedPooling is how contrastive training reads a vector from the last
// hidden state: "mean" (over the attention mask) or "cls".
type EmbedPooling string

const (
	PoolMean EmbedPooling = "mean"
	PoolCLS  EmbedPooling = "cls"
)

// PoolingOf returns the training pooling of a sentence-transformers
// Pooling module: mean or cls alone, with include_prompt (the others, and
// several modes at once, are refused by name).
func PoolingOf(p sentence.Pooling) (EmbedPooling, error) {
	switch {
	case p.Count() == 1 && p.Mean && p.IncludePrompt:
		return PoolMean, nil
	case p.Count() == 1 && p.CLS:
		return PoolCLS, nil
	case p.Count() == 1 && p.Mean:
		return "", errors.New("finetune: contrastive training pools the prompt too; the folder's mean pooling has include_prompt false")
	}
	return "", fmt.Errorf("finetune: contrastive training supports mean or cls pooling; the folder's Pooling module is %q", p.Modes())
}

// EmbedJob is a contrastive fine-tuning run of a sentence encoder over
// loaded data: the encoder's last hidden state is pooled into one vector
// per text and Objective's loss is back-propagated through the pooling
// and the encoder (roformer.Model.TrainEncode and BackwardHidden), with
// the toolkit's step (train.DataParallel: AdamW, schedule, clipping) as
// Train uses it.
//
// Each column of a micro-batch (anchors, positives, each column of hard
// negatives; or the two sentences of scored pairs) runs as a batch of its
// own, padded to its longest text, with dropout in training mode (its own
// seed per column). In-batch negatives are those of the micro-batch: with
// Options.Accum > 1 or under mpirun each micro-batch of BatchSize rows is
// its own set of candidates (the vectors are not gathered across
// micro-batches or ranks); the gradients are averaged over micro-batches
// and ranks as in Train.
//
// With Options.MiniBatchSize below BatchSize the step caches gradients
// (GradCache, as sentence-transformers' Cached losses): each column is
// encoded MiniBatchSize rows at a time, once for the vectors and once
// more for the backward, each mini-batch drawing the dropout masks its
// rows have in the whole column, so the activations held are those of a
// mini-batch while the loss, its in-batch negatives and the gradient stay
// the micro-batch's, dropout included (see cachedStep).
type EmbedJob struct {
	Model     *roformer.Model
	Tokenizer *tokenizer.Tokenizer
	Pooling   EmbedPooling
	Objective contrastive.Objective
	// Lower lowercases the texts (sentence.Lower) before tokenizing, as a
	// folder's do_lower_case asks.
	Lower   bool
	Train   *labelled.PairSet
	Eval    *labelled.PairSet // nil: no evaluation, the last epoch is kept
	Options Options           // MaxLength, BatchSize, Accum, Epochs, LR, schedule, weight decay, clip, seed, LogEvery
	// Progress receives the progress lines, Metrics the metrics.jsonl records.
	Progress, Metrics io.Writer
	// Group makes this process one rank of a data-parallel run, as
	// Job.Group.
	Group distributed.Comm
}

// EmbedResult is the outcome of TrainEmbed.
type EmbedResult struct {
	Steps     int          `json:"steps"`
	Epochs    []EmbedEpoch `json:"epochs"`
	BestEpoch int          `json:"best_epoch"`
	Truncated int          `json:"truncated"` // training texts cut to the maximum length
	Seconds   float64      `json:"seconds"`
}

// EmbedEpoch is what one epoch of TrainEmbed measured.
type EmbedEpoch struct {
	Epoch     int      `json:"epoch"`
	Step      int      `json:"step"`
	TrainLoss float64  `json:"train_loss"`          // mean training loss (with dropout)
	EvalLoss  *float64 `json:"eval_loss,omitempty"` // the loss on Eval without dropout, in batches of BatchSize
	Best      bool     `json:"best"`
	Seconds   float64  `json:"seconds"`
}

// pairFeature is a labelled.PairRow encoded: one token sequence per column.
type pairFeature struct {
	ids   [][]int32
	score float64
}

// embedTrainer is a run of TrainEmbed in progress.
type embedTrainer struct {
	j          EmbedJob
	o          Options
	cols       int
	feats      []pairFeature
	evalFeats  []pairFeature
	params     []*tensor.Param
	dp         *train.DataParallel
	accum      int
	stepInputs int
	total      int
	padID      int32
	states     []*stateCache // one per column
	step       int
	res        *EmbedResult
	start      time.Time
	say        func(format string, a ...any)

	// mini > 0 is the mini-batch of gradient caching (Options.MiniBatchSize
	// below BatchSize), whose one state cache serves every column; 0 off.
	mini      int
	miniState *shapeStates
	dx        []float32 // the hidden-state gradient of a mini-batch, reused
}

// TrainEmbed fine-tunes j.Model's encoder in place. After each epoch with
// j.Eval it computes the evaluation loss and keeps the parameters of the
// epoch with the lowest; at the end the model holds them.
func TrainEmbed(ctx context.Context, j EmbedJob) (*EmbedResult, error) {
	t, err := newEmbedTrainer(j)
	if err != nil {
		return nil, err
	}
	var best []float32
	bestLoss := math.Inf(1)
	for epoch := 1; epoch <= t.o.Epochs; epoch++ {
		t0 := time.Now()
		ep, err := t.epoch(ctx, epoch)
		if err != nil {
			return t.res, err
		}
		if t.evalFeats != nil {
			l, err := t.evaluate(ctx)
			if err != nil {
				return t.res, err
			}
			ep.EvalLoss = &l
			if l < bestLoss {
				bestLoss, ep.Best = l, true
				best = snapshot(t.params, best)
				t.res.BestEpoch = epoch
			}
			mark := ""
			if ep.Best {
				mark = " (best)"
			}
			t.say("epoch %d: train loss %.4f | eval loss %.4f%s", epoch, ep.TrainLoss, l, mark)
		} else {
			ep.Best, t.res.BestEpoch = true, epoch
			t.say("epoch %d: train loss %.4f", epoch, ep.TrainLoss)
		}
		ep.Seconds = time.Since(t0).Seconds()
		t.res.Epochs = append(t.res.Epochs, ep)
		t.res.Steps = t.step
		isBest := ep.Best
		if err := t.record(MetricsRecord{Epoch: epoch, Step: t.step, Loss: &ep.TrainLoss, Best: &isBest, WorldSize: t.dp.Group.Size()}, ep.EvalLoss); err != nil {
			return t.res, err
		}
	}
	if best != nil {
		restore(t.params, best)
	}
	t.res.Seconds = time.Since(t.start).Seconds()
	return t.res, nil
}

func newEmbedTrainer(j EmbedJob) (*embedTrainer, error) {
	t := &embedTrainer{j: j, o: j.Options}
	t.say = func(format string, a ...any) {
		if j.Progress != nil {
			fmt.Fprintf(j.Progress, format+"\n", a...)
		}
	}
	o := &t.o
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if j.Pooling != PoolMean && j.Pooling != PoolCLS {
		return nil, fmt.Errorf("finetune: contrastive pooling %q: want mean or cls", j.Pooling)
	}
	H := j.Model.Config.HiddenSize
	if err := j.Objective.Validate(H); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	if j.Train == nil {
		return nil, errors.New("finetune: no training data")
	}
	want := labelled.Pairs
	if j.Objective.Kind == contrastive.KindCoSENT {
		want = labelled.ScoredPairs
	}
	for _, ps := range []*labelled.PairSet{j.Train, j.Eval} {
		if ps != nil && ps.Kind != want {
			return nil, fmt.Errorf("finetune: %s holds %s; the %s loss needs %s", ps.File, ps.Kind, j.Objective.Kind, want)
		}
	}
	if j.Eval != nil && j.Eval.Negatives != j.Train.Negatives {
		return nil, fmt.Errorf("finetune: %s has %d hard negatives per row, %s %d", j.Eval.File, j.Eval.Negatives, j.Train.File, j.Train.Negatives)
	}
	t.cols = 2 + j.Train.Negatives
	var nTrunc int
	var err error
	if t.feats, nTrunc, err = t.encode(j.Train); err != nil {
		return nil, err
	}
	if j.Eval != nil {
		if t.evalFeats, _, err = t.encode(j.Eval); err != nil {
			return nil, err
		}
	}
	g := j.Group
	if g == nil {
		g = distributed.Local()
	}
	t.params, t.accum = j.Model.Params(), max(o.Accum, 1)
	t.stepInputs = o.BatchSize * t.accum * g.Size()
	rs, err := newRunSteps(g, j.Model, t.params, o, len(t.feats), t.stepInputs)
	if err != nil {
		return nil, err
	}
	t.dp, t.total = rs.dp, rs.total
	perEpoch, warm := rs.perEpoch, rs.warm
	if err := t.dp.CheckParams("at the start"); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	loss := string(j.Objective.Kind)
	if j.Objective.Symmetric {
		loss += " (symmetric)"
	}
	if len(j.Objective.Dims) > 0 {
		loss = fmt.Sprintf("matryoshka %v of %s", j.Objective.Dims, loss)
	}
	t.say("finetune: contrastive %s, scale %g, %s pooling; %d training rows of %d texts (%d texts truncated to %d tokens), %d for evaluation; %d epochs of %d steps, batch %d, lr %.2e (%s, warm-up %d), seed %d",
		loss, j.Objective.Scale, j.Pooling, len(t.feats), t.cols, nTrunc, o.MaxLength, len(t.evalFeats), o.Epochs, perEpoch, o.BatchSize, o.LR, o.Schedule, warm, o.Seed)
	if j.Objective.Kind == contrastive.KindMNRL && (t.accum > 1 || g.Size() > 1) {
		t.say("finetune: in-batch negatives are per micro-batch of %d rows (per rank under mpirun: %d ranks × accumulation %d), not gathered across them; gradients are averaged over all", o.BatchSize, g.Size(), t.accum)
	}
	t.res = &EmbedResult{Truncated: nTrunc}
	t.start = time.Now()
	t.padID = int32(j.Tokenizer.PadID())
	if o.MiniBatchSize > 0 && o.MiniBatchSize < o.BatchSize {
		t.mini = o.MiniBatchSize
		t.say("finetune: gradient caching: each column is encoded %d rows at a time (of %d), twice (the vectors, then the backward); the loss and its gradient are the whole batch's", t.mini, o.BatchSize)
		return t, nil
	}
	t.states = make([]*stateCache, t.cols)
	for c := range t.states {
		t.states[c] = &stateCache{m: j.Model}
	}
	return t, nil
}

// encode tokenizes every text of ps (cut to MaxLength, keeping the start)
// and returns the features and how many texts were cut.
func (t *embedTrainer) encode(ps *labelled.PairSet) ([]pairFeature, int, error) {
	var inputs []tokenizer.Input
	for _, r := range ps.Rows {
		for _, s := range r.Texts {
			if t.j.Lower {
				s = sentence.Lower(s)
			}
			inputs = append(inputs, tokenizer.Input{Text: s})
		}
	}
	// Cut as the embedding route cuts (HF's longest_first: the start kept).
	L := t.o.MaxLength
	encs, err := t.j.Tokenizer.EncodeBatch(inputs, tokenizer.EncodeOptions{MaxLength: L, Truncation: tokenizer.TruncateLongestFirst})
	if err != nil {
		var be *tokenizer.BatchError
		if errors.As(err, &be) {
			return nil, 0, &labelled.InputError{File: ps.File, Line: ps.Rows[be.Index/t.cols].Line, Err: be.Err}
		}
		return nil, 0, fmt.Errorf("finetune: %s: %w", ps.File, err)
	}
	feats := make([]pairFeature, len(ps.Rows))
	cut := 0
	for i, r := range ps.Rows {
		f := pairFeature{score: r.Score, ids: make([][]int32, t.cols)}
		for c := range t.cols {
			enc := encs[i*t.cols+c]
			if enc.Truncated {
				cut++
			}
			f.ids[c] = make([]int32, enc.Len())
			for k, id := range enc.IDs {
				f.ids[c][k] = int32(id)
			}
		}
		feats[i] = f
	}
	return feats, cut, nil
}

// columnBatch pads column c of rows to their longest, rounded up to
// padMultiple.
func (t *embedTrainer) columnBatch(rows []*pairFeature, c int) *roformer.Batch {
	return t.padColumn(rows, c, columnLen(rows, c))
}

// columnLen is the longest text of column c of rows, rounded up to
// padMultiple.
func columnLen(rows []*pairFeature, c int) int {
	T := 0
	for _, f := range rows {
		T = max(T, len(f.ids[c]))
	}
	return (T + padMultiple - 1) / padMultiple * padMultiple
}

// padColumn pads column c of rows to T tokens (at least the longest).
func (t *embedTrainer) padColumn(rows []*pairFeature, c, T int) *roformer.Batch {
	return roformer.PadBatch(len(rows), T, t.padID, func(r int) ([]int32, []int32) { return rows[r].ids[c], nil })
}

// pool writes the vectors of a column's hidden state x [B·T, H] into e [B, H].
func (t *embedTrainer) pool(e, x []float32, b *roformer.Batch) {
	H := t.j.Model.Config.HiddenSize
	if t.j.Pooling == PoolCLS {
		contrastive.CLSPoolForward(e, x, b.B, b.T, H)
	} else {
		contrastive.MeanPoolForward(e, x, b.AttentionMask, b.B, b.T, H)
	}
}

// microStep runs forward, the loss and backward on rows, adding the
// gradient of the loss into the parameters, and returns the loss: all at
// once, or by gradient caching (cachedStep) when t.mini > 0.
func (t *embedTrainer) microStep(ctx context.Context, rows []*pairFeature, seed uint64) (float64, error) {
	if t.mini > 0 {
		return t.cachedStep(ctx, rows, seed, t.mini)
	}
	m, H, B := t.j.Model, t.j.Model.Config.HiddenSize, len(rows)
	batches := make([]*roformer.Batch, t.cols)
	states := make([]*roformer.State, t.cols)
	cols, dcols := make([][]float32, t.cols), make([][]float32, t.cols)
	for c := range t.cols {
		b := t.columnBatch(rows, c)
		s := t.states[c].get(b.B, b.T)
		x, err := m.TrainEncode(ctx, s, b, roformer.StepOptions{Dropout: true, Seed: columnSeed(seed, c)})
		if err != nil {
			return 0, err
		}
		batches[c], states[c] = b, s
		cols[c], dcols[c] = make([]float32, B*H), make([]float32, B*H)
		t.pool(cols[c], x, b)
	}
	labels := t.labels(rows)
	loss := t.j.Objective.Backward(dcols, cols, labels, B, H)
	for c := t.cols - 1; c >= 0; c-- { // the order of cachedStep's sums
		b := batches[c]
		dx := make([]float32, b.B*b.T*H)
		if t.j.Pooling == PoolCLS {
			contrastive.CLSPoolBackward(dx, dcols[c], b.B, b.T, H)
		} else {
			contrastive.MeanPoolBackward(dx, dcols[c], b.AttentionMask, b.B, b.T, H)
		}
		if err := m.BackwardHidden(ctx, states[c], dx); err != nil {
			return 0, err
		}
	}
	return loss, nil
}

// columnSeed is the dropout seed of column c of a micro-batch whose seed
// is seed, with or without gradient caching (whose mini-batches draw their
// rows' masks by roformer.StepOptions.RowOffset).
func columnSeed(seed uint64, c int) uint64 {
	return seed ^ uint64(c)*0x9e3779b97f4a7c15
}

// cachedStep is microStep by gradient caching (Gao et al. 2021, "Scaling
// Deep Contrastive Learning Batch Size under Memory Limited Setup"; the
// scheme of sentence-transformers' CachedMultipleNegativesRankingLoss),
// holding the activations of mini rows of one column at a time:
//
//  1. each column is encoded mini rows at a time in training mode, with
//     the column's dropout seed columnSeed(seed, c) and the mini-batch's
//     first row as the row offset, so each row draws the masks it has when
//     the column is encoded whole, and only the pooled vectors e_c [B, H]
//     are kept;
//  2. the loss of the whole micro-batch and its gradient g_c = ∂L/∂e_c
//     are computed from the vectors (the same in-batch negatives);
//  3. each mini-batch is encoded again with the same seed and offset,
//     which replays its dropout masks and gives the same vectors (the
//     same shape, the same masks: bit for bit), and g_c's rows are
//     back-propagated through the pooling and the encoder (BackwardHidden),
//     adding ∂L/∂θ = Σ_k (∂e_k/∂θ)ᵀ g_k into the parameters' gradients.
//     Step 3 runs from the last mini-batch, whose state (and that of the
//     last of each other shape) still holds step 1's activations and is
//     not encoded again.
//
// The gradient is that of the loss of step 1's vectors, exactly up to
// float32 rounding. It costs one more encoder forward per text (but those
// of the last mini-batch of each shape), and holds at most 2 × columns
// training states of at most mini rows. With dropout as without, it is the
// loss and the gradient of microStep without caching, up to the float32
// rounding of products over fewer rows (TestCachedStepDropout); a
// micro-batch that fits in one mini-batch is microStep bit for bit.
func (t *embedTrainer) cachedStep(ctx context.Context, rows []*pairFeature, seed uint64, mini int) (float64, error) {
	m, H, B := t.j.Model, t.j.Model.Config.HiddenSize, len(rows)
	if t.miniState == nil {
		t.miniState = &shapeStates{m: m, n: 2 * t.cols}
	}
	clear(t.miniState.tags) // what the states hold is the last micro-batch's
	cols, dcols := make([][]float32, t.cols), make([][]float32, t.cols)
	lens := make([]int, t.cols)
	for c := range t.cols {
		cols[c], dcols[c] = make([]float32, B*H), make([]float32, B*H)
		lens[c] = columnLen(rows, c)
	}
	chunks := (B + mini - 1) / mini
	// batch pads mini-batch k of column c as the whole column (as
	// sentence-transformers' cached losses slice the column's padded
	// batch), so that a column has at most two shapes.
	batch := func(c, k int) *roformer.Batch {
		return t.padColumn(rows[k*mini:min((k+1)*mini, B)], c, lens[c])
	}
	// encode runs mini-batch k of column c in training mode, unless its
	// state still holds it (held); the state is tagged with (c, k).
	encode := func(c, k int) (b *roformer.Batch, s *roformer.State, x []float32, held bool, err error) {
		b = batch(c, k)
		tag := 1 + c*chunks + k
		s, prev := t.miniState.get(b.B, b.T, tag)
		if prev == tag {
			return b, s, nil, true, nil
		}
		x, err = m.TrainEncode(ctx, s, b, roformer.StepOptions{Dropout: true, Seed: columnSeed(seed, c), RowOffset: k * mini})
		return b, s, x, false, err
	}
	backward := func(c, k int, b *roformer.Batch, s *roformer.State) error {
		n := b.B * b.T * H
		if cap(t.dx) < n {
			t.dx = make([]float32, n)
		}
		dx, g := t.dx[:n], dcols[c][k*mini*H:(k*mini+b.B)*H]
		if t.j.Pooling == PoolCLS {
			contrastive.CLSPoolBackward(dx, g, b.B, b.T, H)
		} else {
			contrastive.MeanPoolBackward(dx, g, b.AttentionMask, b.B, b.T, H)
		}
		return m.BackwardHidden(ctx, s, dx)
	}
	// 1. The vectors.
	for c := range t.cols {
		for k := range chunks {
			b, _, x, _, err := encode(c, k)
			if err != nil {
				return 0, err
			}
			t.pool(cols[c][k*mini*H:(k*mini+b.B)*H], x, b)
		}
	}
	// 2. The loss and its gradient with respect to the vectors.
	loss := t.j.Objective.Backward(dcols, cols, t.labels(rows), B, H)
	// 3. The backward, from the last mini-batch: the states of the last of
	// each shape still hold step 1's activations.
	for c := t.cols - 1; c >= 0; c-- {
		for k := chunks - 1; k >= 0; k-- {
			b, s, _, _, err := encode(c, k)
			if err != nil {
				return 0, err
			}
			if err := backward(c, k, b, s); err != nil {
				return 0, err
			}
		}
	}
	return loss, nil
}

// shapeStates keeps the training states of the n most recently used batch
// shapes (gradient caching: a full and a last mini-batch of each column),
// each with a tag saying what its activations hold (0: nothing known).
type shapeStates struct {
	m    *roformer.Model
	n    int
	keys [][2]int
	st   []*roformer.State // most recently used first
	tags []int
}

// get returns the state of shape B × T, allocated or the least recently
// used one replaced when there is none, tags it and returns its previous
// tag (0 for a new state).
func (c *shapeStates) get(B, T, tag int) (*roformer.State, int) {
	k := [2]int{B, T}
	i := slices.Index(c.keys, k)
	if i < 0 {
		if len(c.st) < c.n {
			c.keys, c.st, c.tags = append(c.keys, k), append(c.st, nil), append(c.tags, 0)
		}
		i = len(c.st) - 1
		c.st[i] = nil // the least recently used goes before its successor is allocated
		c.st[i], c.keys[i], c.tags[i] = c.m.NewState(B, T, true), k, 0
	}
	s, prev := c.st[i], c.tags[i]
	copy(c.keys[1:i+1], c.keys[:i])
	copy(c.st[1:i+1], c.st[:i])
	copy(c.tags[1:i+1], c.tags[:i])
	c.keys[0], c.st[0], c.tags[0] = k, s, tag
	return s, prev
}

func (t *embedTrainer) labels(rows []*pairFeature) []float64 {
	if t.j.Objective.Kind != contrastive.KindCoSENT {
		return nil
	}
	l := make([]float64, len(rows))
	for i, f := range rows {
		l[i] = f.score
	}
	return l
}

// epoch runs the optimizer steps of an epoch over a shuffled order.
func (t *embedTrainer) epoch(ctx context.Context, epoch int) (EmbedEpoch, error) {
	o := &t.o
	order := rand.New(rand.NewPCG(o.Seed, uint64(epoch))).Perm(len(t.feats))
	var epLoss, logLoss float64
	var epN, logN int
	bs := o.BatchSize
	rows := make([]*pairFeature, 0, bs)
	for lo := 0; lo < len(order); lo += t.stepInputs {
		if !t.dp.Parallel() {
			if err := ctx.Err(); err != nil {
				return EmbedEpoch{}, err
			}
		}
		inputs := order[lo:min(lo+t.stepInputs, len(order))]
		all := (len(inputs) + bs - 1) / bs
		first, mine := t.dp.Share(t.accum, all)
		step := t.step
		u, stop, err := t.dp.Step(ctx, step, mine, all, func(mctx context.Context, j int) (float64, error) {
			k := first + j
			rows = rows[:0]
			for _, i := range inputs[k*bs : min((k+1)*bs, len(inputs))] {
				rows = append(rows, &t.feats[i])
			}
			return t.microStep(mctx, rows, microSeed(o.Seed, step, k))
		})
		if err := stepError(err); err != nil {
			return EmbedEpoch{}, err
		}
		if stop {
			return EmbedEpoch{}, fmt.Errorf("finetune: stopped after step %d (a rank was interrupted): %w", step+1, context.Canceled)
		}
		t.step++
		epLoss, logLoss = epLoss+u.Loss, logLoss+u.Loss
		epN, logN = epN+1, logN+1
		if o.LogEvery > 0 && t.step%o.LogEvery == 0 {
			l, lr, norm := logLoss/float64(logN), u.LR, u.GradNorm
			t.say("epoch %d step %d/%d | loss %.4f | lr %.3e | grad norm %.3f | %.1f rows/s", epoch, t.step, t.total, l, lr, norm,
				float64(t.step*t.stepInputs)/time.Since(t.start).Seconds())
			if err := t.record(MetricsRecord{Epoch: epoch, Step: t.step, Loss: &l, LR: &lr, GradNorm: &norm, WorldSize: t.dp.Group.Size()}, nil); err != nil {
				return EmbedEpoch{}, err
			}
			logLoss, logN = 0, 0
		}
	}
	return EmbedEpoch{Epoch: epoch, Step: t.step, TrainLoss: epLoss / float64(epN)}, nil
}

// evaluate returns the loss on the evaluation rows in their order, in
// batches of BatchSize, without dropout (the mean over the batches),
// computed on rank 0 and broadcast.
func (t *embedTrainer) evaluate(ctx context.Context) (float64, error) {
	g := t.dp.Group
	var loss float64
	var err error
	if g.Rank() == 0 {
		loss, err = t.evalLoss(ctx)
	}
	if err := distributed.Agree(g, err); err != nil {
		return 0, err
	}
	if t.dp.Parallel() {
		buf := binary.LittleEndian.AppendUint64(nil, math.Float64bits(loss))
		if err := g.Bcast(buf, 0); err != nil {
			return 0, fmt.Errorf("finetune: broadcasting the evaluation loss: %w", err)
		}
		loss = math.Float64frombits(binary.LittleEndian.Uint64(buf))
	}
	return loss, nil
}

func (t *embedTrainer) evalLoss(ctx context.Context) (float64, error) {
	m, H, bs := t.j.Model, t.j.Model.Config.HiddenSize, t.o.BatchSize
	sum, n := 0.0, 0
	for lo := 0; lo < len(t.evalFeats); lo += bs {
		rows := make([]*pairFeature, 0, bs)
		for i := lo; i < min(lo+bs, len(t.evalFeats)); i++ {
			rows = append(rows, &t.evalFeats[i])
		}
		cols := make([][]float32, t.cols)
		enc := len(rows) // rows encoded at once: a mini-batch with gradient caching
		if t.mini > 0 {
			enc = t.mini
		}
		for c := range t.cols {
			cols[c] = make([]float32, len(rows)*H)
			for k := 0; k < len(rows); k += enc {
				b := t.columnBatch(rows[k:min(k+enc, len(rows))], c)
				out, err := m.Forward(ctx, b, nil, roformer.Options{SkipHead: true})
				if err != nil {
					return 0, err
				}
				t.pool(cols[c][k*H:(k+b.B)*H], out.LastHiddenState.Data, b)
			}
		}
		sum += t.j.Objective.Forward(cols, t.labels(rows), len(rows), H)
		n++
	}
	return sum / float64(n), nil
}

// record writes r, with the evaluation loss when given, as one line of
// j.Metrics.
func (t *embedTrainer) record(r MetricsRecord, evalLoss *float64) error {
	if t.j.Metrics == nil {
		return nil
	}
	rec := struct {
		MetricsRecord
		EvalLoss *float64 `json:"eval_loss,omitempty"`
	}{r, evalLoss}
	return writeJSONLine(t.j.Metrics, rec)
}
