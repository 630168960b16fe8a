package finetune

import (
	"context"
	"fmt"
	"github.com/roformer-go/roformer/data/labelled"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tensor"
)

// varied lengthens the texts of ps by a different number of words per row
// and column, so that the mini-batches of a column have different longest
// texts (and the padded tails differ).
func varied(ps *labelled.PairSet) *labelled.PairSet {
	words := testWords[5:29]
	for i := range ps.Rows {
		for c := range ps.Rows[i].Texts {
			n := (i*5 + c*3) % 9
			for k := range n {
				ps.Rows[i].Texts[c] += " " + words[(i+k+c)%len(words)]
			}
		}
	}
	return ps
}

type cachedCase struct {
	name string
	obj  contrastive.Objective
	data func() *labelled.PairSet
	pool EmbedPooling
}

func cachedCases() []cachedCase {
	return []cachedCase{
		{"mnrl", contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, func() *labelled.PairSet { return varied(toyPairs(8, 8, false)) }, PoolMean},
		{"mnrl_negatives_symmetric_cls", contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20, Symmetric: true}, func() *labelled.PairSet { return varied(toyPairs(8, 8, true)) }, PoolCLS},
		{"cosent", contrastive.Objective{Kind: contrastive.KindCoSENT, Scale: 20}, func() *labelled.PairSet { return varied(toyScored(8, 8)) }, PoolMean},
		{"matryoshka_mnrl_negatives", contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20, Dims: []int{16, 8, 4}}, func() *labelled.PairSet { return varied(toyPairs(8, 8, true)) }, PoolMean},
	}
}

// closeTo reports the first value of got farther from want than tol times
// the largest |want| of the tensor (float32 rounding of sums in another
// order), or "" when all are close.
func closeTo(name string, got, want []float32, tol float64) string {
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol*scale || math.IsNaN(d) {
			return fmt.Sprintf("%s[%d] = %.9g, want %.9g (|diff| %.3g, largest |value| %.3g)", name, i, got[i], want[i], d, scale)
		}
	}
	return ""
}

// adamClose compares the parameters after one AdamW step from the same
// start, q's gradient against p's. The first update is lr·g/(|g|+ε) (with
// the same decay), so a gradient that differs by δ moves a parameter by
// up to lr·ε·|δ|/(min |g| + ε)², which is large next to float32's ulp
// where |g| is near ε = 1e-8: the bound allows that and 1e-6 of the
// largest |θ| (the rounding of the update itself).
func adamClose(name string, q, p *tensor.Param, lr float64) string {
	const eps = 1e-8
	scale := 0.0
	for _, w := range p.Data {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range p.Data {
		g, h := math.Abs(float64(p.Grad[i])), math.Abs(float64(q.Grad[i]))
		d := math.Abs(float64(q.Grad[i]) - float64(p.Grad[i]))
		m := min(g, h) + eps
		tol := 1e-6*scale + 1.01*lr*eps*d/(m*m)
		if diff := math.Abs(float64(q.Data[i]) - float64(p.Data[i])); diff > tol || math.IsNaN(diff) {
			return fmt.Sprintf("%s[%d] = %.9g, want %.9g (|diff| %.3g > %.3g; gradient %.6g and %.6g)", name, i, q.Data[i], p.Data[i], diff, tol, q.Grad[i], p.Grad[i])
		}
	}
	return ""
}

func noDropout(m *roformer.Model) {
	m.Config.HiddenDropoutProb, m.Config.AttentionProbsDropoutProb = 0, 0
}

// One optimizer step (TrainEmbed over one batch of 8 rows) with gradient
// caching in mini-batches of 3 (two full and a last of 2) gives the
// gradient and the parameters of the step without it, for every
// objective, without dropout and with it (each row draws its masks in the
// whole column: roformer.StepOptions.RowOffset).
func TestCachedStepEqualsPlain(t *testing.T) {
	dir := testmodel.Tiny{Words: testWords, Seed: 7, MaxPositions: 64, Scale: 3}.Folder(t)
	for _, c := range cachedCases() {
		for _, dropout := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s_dropout%v", c.name, dropout), func(t *testing.T) { testCachedEqualsPlain(t, dir, c, dropout) })
		}
	}
}

func testCachedEqualsPlain(t *testing.T, dir string, c cachedCase, dropout bool) {
	var params [2][]*tensor.Param
	var losses [2]float64
	o := embedOptions()
	o.Epochs = 1
	for run, mini := range []int{0, 3} {
		pm := openTiny(t, dir)
		if !dropout {
			noDropout(pm.Model)
		} else if pm.Model.Config.HiddenDropoutProb == 0 || pm.Model.Config.AttentionProbsDropoutProb == 0 {
			t.Fatal("the test model has no dropout")
		}
		o.MiniBatchSize = mini
		res, err := TrainEmbed(context.Background(), EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: c.pool, Objective: c.obj, Train: c.data(), Options: o})
		mustf(t, err, "TrainEmbed with mini-batch %d", mini)
		if res.Steps != 1 {
			t.Fatalf("%d steps, want 1", res.Steps)
		}
		params[run], losses[run] = pm.Model.Params(), res.Epochs[0].TrainLoss
	}
	if math.Abs(losses[1]-losses[0]) > 1e-6*math.Abs(losses[0]) {
		t.Errorf("loss %.9g with gradient caching, %.9g without", losses[1], losses[0])
	}
	worst := 0.0
	for i, p := range params[0] {
		q := params[1][i]
		// A gradient is a sum over the 2·8·T tokens, here in other
		// groups; where they cancel, float32's rounding is a larger
		// share of the result than its ulp (seen: up to 2e-5 of the
		// tensor's largest value, in tensors of small gradients).
		if msg := closeTo(p.Name+" gradient", q.Grad, p.Grad, 1e-4); msg != "" {
			t.Error(msg)
		}
		if msg := adamClose(p.Name, q, p, o.LR); msg != "" {
			t.Error(msg)
		}
		worst = max(worst, relDiff(q.Grad, p.Grad))
	}
	t.Logf("loss %.9g cached, %.9g plain (relative difference %.3g); gradients within %.3g of each tensor's largest value",
		losses[1], losses[0], math.Abs(losses[1]-losses[0])/math.Abs(losses[0]), worst)
}

// relDiff is the largest |got − want| over the largest |want|.
func relDiff(got, want []float32) float64 {
	d, scale := 0.0, 0.0
	for i, w := range want {
		d, scale = max(d, math.Abs(float64(got[i])-float64(w))), max(scale, math.Abs(float64(w)))
	}
	if scale == 0 {
		return d
	}
	return d / scale
}

// heldStep is the reference of cachedStep with dropout: the same
// mini-batches with the same seeds, row offsets and padding, each encoded
// in a training state of its own that is kept, the loss computed, and
// every state back-propagated; no vector is recomputed.
func heldStep(ctx context.Context, t *embedTrainer, rows []*pairFeature, seed uint64, mini int) (float64, error) {
	m, H, B := t.j.Model, t.j.Model.Config.HiddenSize, len(rows)
	type enc struct {
		b  *roformer.Batch
		s  *roformer.State
		lo int
	}
	var encs [][]enc
	cols, dcols := make([][]float32, t.cols), make([][]float32, t.cols)
	for c := range t.cols {
		cols[c], dcols[c] = make([]float32, B*H), make([]float32, B*H)
		T := columnLen(rows, c)
		var es []enc
		for lo := 0; lo < B; lo += mini {
			b := t.padColumn(rows[lo:min(lo+mini, B)], c, T)
			s := m.NewState(b.B, b.T, true)
			x, err := m.TrainEncode(ctx, s, b, roformer.StepOptions{Dropout: true, Seed: columnSeed(seed, c), RowOffset: lo})
			if err != nil {
				return 0, err
			}
			t.pool(cols[c][lo*H:(lo+b.B)*H], x, b)
			es = append(es, enc{b, s, lo})
		}
		encs = append(encs, es)
	}
	loss := t.j.Objective.Backward(dcols, cols, t.labels(rows), B, H)
	for c := len(encs) - 1; c >= 0; c-- { // cachedStep's order
		for i := len(encs[c]) - 1; i >= 0; i-- {
			e := encs[c][i]
			dx := make([]float32, e.b.B*e.b.T*H)
			g := dcols[c][e.lo*H : (e.lo+e.b.B)*H]
			if t.j.Pooling == PoolCLS {
				contrastive.CLSPoolBackward(dx, g, e.b.B, e.b.T, H)
			} else {
				contrastive.MeanPoolBackward(dx, g, e.b.AttentionMask, e.b.B, e.b.T, H)
			}
			if err := m.BackwardHidden(ctx, e.s, dx); err != nil {
				return 0, err
			}
		}
	}
	return loss, nil
}

// With dropout, the recomputation replays each mini-batch's masks: the
// loss is that of the same mini-batches held in memory (heldStep), bit for
// bit, and so is the gradient up to rounding; both are those of the step
// without caching, each row drawing its masks in the whole column; and a
// micro-batch that fits in one mini-batch is the step without caching,
// bit for bit (the same seed, padding and masks).
func TestCachedStepDropout(t *testing.T) {
	ctx := context.Background()
	dir := testmodel.Tiny{Words: testWords, Seed: 7, MaxPositions: 64, Scale: 3}.Folder(t)
	for _, c := range cachedCases() {
		t.Run(c.name, func(t *testing.T) {
			pm := openTiny(t, dir)
			if pm.Model.Config.HiddenDropoutProb == 0 || pm.Model.Config.AttentionProbsDropoutProb == 0 {
				t.Fatal("the test model has no dropout")
			}
			tr, err := newEmbedTrainer(EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: c.pool, Objective: c.obj, Train: c.data(), Options: embedOptions()})
			mustf(t, err, "newEmbedTrainer")
			rows := make([]*pairFeature, len(tr.feats))
			for i := range rows {
				rows[i] = &tr.feats[i]
			}
			grads := func(step func() (float64, error)) (float64, [][]float32) {
				pm.Model.ZeroGrad()
				l, err := step()
				mustf(t, err, "step")
				var g [][]float32
				for _, p := range pm.Model.Params() {
					g = append(g, append([]float32(nil), p.Grad...))
				}
				return l, g
			}
			const seed = 12345
			lHeld, gHeld := grads(func() (float64, error) { return heldStep(ctx, tr, rows, seed, 3) })
			lCached, gCached := grads(func() (float64, error) { return tr.cachedStep(ctx, rows, seed, 3) })
			lPlain, gPlain := grads(func() (float64, error) { return tr.microStep(ctx, rows, seed) })
			lOne, gOne := grads(func() (float64, error) { return tr.cachedStep(ctx, rows, seed, len(rows)) })
			lOther, _ := grads(func() (float64, error) { return tr.microStep(ctx, rows, seed+1) })
			if lCached != lHeld {
				t.Errorf("loss %.9g with recomputation, %.9g held", lCached, lHeld)
			}
			if lOne != lPlain {
				t.Errorf("one mini-batch: loss %.9g, without caching %.9g", lOne, lPlain)
			}
			if d := math.Abs(lCached-lPlain) / math.Abs(lPlain); d > 1e-6 {
				t.Errorf("mini-batches of 3: loss %.9g, without caching %.9g (relative difference %.3g)", lCached, lPlain, d)
			}
			if lOther == lPlain {
				t.Errorf("another seed gives the same loss %.9g: is dropout on?", lPlain)
			}
			worst := 0.0
			for i, p := range pm.Model.Params() {
				if msg := closeTo(p.Name+" gradient", gCached[i], gHeld[i], 1e-5); msg != "" {
					t.Error(msg)
				}
				// As TestCachedStepEqualsPlain: the sums run over other groups of rows.
				if msg := closeTo(p.Name+" gradient against no caching", gCached[i], gPlain[i], 1e-4); msg != "" {
					t.Error(msg)
				}
				worst = max(worst, relDiff(gCached[i], gPlain[i]))
				for j := range gPlain[i] {
					if gOne[i][j] != gPlain[i][j] {
						t.Errorf("one mini-batch: %s gradient[%d] = %.9g, without caching %.9g", p.Name, j, gOne[i][j], gPlain[i][j])
						break
					}
				}
			}
			t.Logf("mini-batches of 3 against no caching: loss %.9g and %.9g (relative difference %.3g), gradients within %.3g of each tensor's largest value",
				lCached, lPlain, math.Abs(lCached-lPlain)/math.Abs(lPlain), worst)
		})
	}
}

// The training states of a cached step are for mini-batch rows: at most
// two shapes a column, each of at most MiniBatchSize rows, and the step
// allocates a fraction of what the step without caching does.
func TestCachedStepMemory(t *testing.T) {
	ctx := context.Background()
	dir := testmodel.Tiny{Words: testWords, Seed: 7, MaxPositions: 64, Scale: 3}.Folder(t)
	const B, mini = 16, 2
	alloc := make(map[int]uint64)
	for _, mb := range []int{0, mini} {
		pm := openTiny(t, dir)
		o := embedOptions()
		o.BatchSize, o.MiniBatchSize = B, mb
		tr, err := newEmbedTrainer(EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: PoolMean, Objective: contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, Train: varied(toyPairs(9, B, true)), Options: o})
		mustf(t, err, "newEmbedTrainer")
		rows := make([]*pairFeature, B)
		for i := range rows {
			rows[i] = &tr.feats[i]
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err = tr.microStep(ctx, rows, 1)
		runtime.ReadMemStats(&after)
		mustf(t, err, "microStep")
		alloc[mb] = after.TotalAlloc - before.TotalAlloc
		if mb == 0 {
			if tr.miniState != nil {
				t.Fatal("a step without mini-batches made mini-batch states")
			}
			continue
		}
		if tr.states != nil {
			t.Error("a cached step keeps whole-batch state caches")
		}
		if n := len(tr.miniState.st); n == 0 || n > 2*tr.cols {
			t.Errorf("%d training states for %d columns", n, tr.cols)
		}
		var shapes []string
		for i, s := range tr.miniState.st {
			shapes = append(shapes, fmt.Sprintf("%d×%d", s.B, s.T))
			if s.B > mini || tr.miniState.keys[i] != [2]int{s.B, s.T} {
				t.Errorf("a training state for %d×%d (key %v) in mini-batches of %d", s.B, s.T, tr.miniState.keys[i], mini)
			}
		}
		t.Logf("mini-batch %d: training states %s", mini, strings.Join(shapes, ", "))
	}
	t.Logf("allocated by one step of %d rows × 3 columns: %d bytes without caching, %d in mini-batches of %d", B, alloc[0], alloc[mini], mini)
	if alloc[mini]*3 > alloc[0] {
		t.Errorf("the cached step allocated %d bytes, more than a third of the step without caching's %d", alloc[mini], alloc[0])
	}
}
