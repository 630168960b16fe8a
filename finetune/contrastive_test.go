package finetune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

// toyPairs returns n rows whose anchor and positive share their words (the
// positive reordered), with a hard negative of other words when neg.
func toyPairs(seed uint64, n int, neg bool) *labelled.PairSet {
	r := rand.New(rand.NewPCG(seed, 2))
	words := testWords[5:29]
	ps := &labelled.PairSet{File: "toy.jsonl", Kind: labelled.Pairs}
	if neg {
		ps.Negatives = 1
	}
	pick := func() []string {
		w := make([]string, 3)
		for i := range w {
			w[i] = words[r.IntN(len(words))]
		}
		return w
	}
	for i := range n {
		a := pick()
		p := []string{a[2], a[0], a[1]}
		row := labelled.PairRow{Line: i + 1, Texts: []string{strings.Join(a, " "), strings.Join(p, " ")}}
		if neg {
			row.Texts = append(row.Texts, strings.Join(pick(), " "))
		}
		ps.Rows = append(ps.Rows, row)
	}
	return ps
}

func toyScored(seed uint64, n int) *labelled.PairSet {
	r := rand.New(rand.NewPCG(seed, 3))
	words := testWords[5:29]
	ps := &labelled.PairSet{File: "toy.jsonl", Kind: labelled.ScoredPairs}
	for i := range n {
		a := []string{words[r.IntN(24)], words[r.IntN(24)], words[r.IntN(24)]}
		b := append([]string(nil), a...)
		k := r.IntN(4) // words replaced: score 1 − k/3
		for j := range min(k, 3) {
			b[j] = words[r.IntN(24)]
		}
		ps.Rows = append(ps.Rows, labelled.PairRow{Line: i + 1, Texts: []string{strings.Join(a, " "), strings.Join(b, " ")}, Score: 1 - float64(min(k, 3))/3})
	}
	return ps
}

func embedOptions() Options {
	o := DefaultOptions()
	o.MaxLength, o.BatchSize, o.Epochs, o.LR, o.WarmupRatio, o.LogEvery = 16, 8, 3, 3e-3, 0, 0
	return o
}

func openTiny(t *testing.T, dir string) *pipeline.Model {
	t.Helper()
	pm, err := pipeline.Open(dir, pipeline.OpenOptions{Head: roformer.HeadBase})
	mustf(t, err, "pipeline.Open(%s)", dir)
	return pm
}

// The loss on a toy set falls with training, for every objective, and the
// same seed gives the same run bit for bit.
func TestTrainEmbedLearns(t *testing.T) {
	// Scaled weights: at the initialisation's N(0, 0.02²) the [CLS] vectors
	// of a one-layer model barely depend on the other tokens.
	dir := testmodel.Tiny{Words: testWords, Seed: 7, MaxPositions: 64, Scale: 10}.Folder(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		obj  contrastive.Objective
		data func() *labelled.PairSet
		pool EmbedPooling
	}{
		{"mnrl", contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, func() *labelled.PairSet { return toyPairs(1, 64, false) }, PoolMean},
		{"mnrl_symmetric_negatives_cls", contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20, Symmetric: true}, func() *labelled.PairSet { return toyPairs(1, 64, true) }, PoolCLS},
		{"cosent", contrastive.Objective{Kind: contrastive.KindCoSENT, Scale: 20}, func() *labelled.PairSet { return toyScored(1, 64) }, PoolMean},
		{"matryoshka_mnrl", contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20, Dims: []int{16, 8, 4}}, func() *labelled.PairSet { return toyPairs(1, 64, false) }, PoolMean},
	} {
		t.Run(c.name, func(t *testing.T) {
			var losses [2][]float64
			for run := range 2 {
				pm := openTiny(t, dir)
				ds := c.data()
				j := EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: c.pool, Objective: c.obj, Train: ds, Eval: ds, Options: embedOptions()}
				tr, err := newEmbedTrainer(j)
				mustf(t, err, "newEmbedTrainer")
				before, err := tr.evalLoss(ctx)
				mustf(t, err, "evalLoss")
				res, err := TrainEmbed(ctx, j)
				mustf(t, err, "TrainEmbed")
				after := *res.Epochs[res.BestEpoch-1].EvalLoss
				if !(after < 0.85*before) {
					t.Errorf("loss before training %.4f, after %.4f: not 15%% lower", before, after)
				}
				losses[run] = append(losses[run], before)
				for _, ep := range res.Epochs {
					losses[run] = append(losses[run], ep.TrainLoss, *ep.EvalLoss)
				}
			}
			t.Logf("before, then train and eval loss per epoch: %.4f", losses[0])
			if fmt.Sprint(losses[0]) != fmt.Sprint(losses[1]) {
				t.Errorf("two runs with the same seed differ: %v and %v", losses[0], losses[1])
			}
		})
	}
}

// Fine-tune 2 steps, save, reopen with pipeline.Open: the folder is a
// sentence-transformers folder whose vectors equal the in-memory model's.
func TestEmbedRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := tinyModel(t)
	pm := openTiny(t, dir)
	o := embedOptions()
	o.Epochs, o.BatchSize = 1, 4
	ds := toyPairs(3, 8, false) // 2 steps
	res, err := TrainEmbed(ctx, EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: PoolMean, Objective: contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, Train: ds, Options: o})
	mustf(t, err, "TrainEmbed")
	if res.Steps != 2 {
		t.Fatalf("%d steps, want 2", res.Steps)
	}
	var inputs []pipeline.EmbedInput
	for _, r := range ds.Rows {
		inputs = append(inputs, pipeline.EmbedInput{Text: r.Texts[0]}, pipeline.EmbedInput{Text: r.Texts[1]})
	}
	want, _, err := pipeline.Embed(ctx, pm.Model, pm.Tokenizer, inputs, pipeline.EmbedOptions{Pooling: pipeline.PoolMean})
	mustf(t, err, "Embed in memory")
	out := filepath.Join(t.TempDir(), "st")
	mustf(t, SaveEmbed(out, pm, nil, PoolMean, o.MaxLength), "SaveEmbed")
	for _, f := range []string{"config.json", "model.safetensors", "vocab.txt", "modules.json", "1_Pooling/config.json", "sentence_bert_config.json", "config_sentence_transformers.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the folder lacks %s: %v", f, err)
		}
	}
	back := openTiny(t, out)
	st := back.Sentence
	if st == nil || !st.Pooling.Mean || st.Pooling.Count() != 1 || st.Pooling.Dim != 16 || !st.Pooling.IncludePrompt || st.MaxSeqLength != o.MaxLength || st.SimilarityFn != "cosine" {
		t.Fatalf("sentence-transformers configuration read back: %+v", st)
	}
	if back.Model.Head != roformer.HeadBase {
		t.Errorf("reopened with the %s head", back.Model.Head)
	}
	got, _, err := pipeline.Embed(ctx, back.Model, back.Tokenizer, inputs, pipeline.EmbedOptions{Pooling: pipeline.PoolMean})
	mustf(t, err, "Embed reopened")
	for i := range want {
		testutil.AssertClose(t, fmt.Sprintf("vector %d", i), got[i], want[i], 1e-5, 0)
	}
}

// RunEmbed publishes the whole folder, with the run's files; the pooling
// comes from a sentence-transformers source folder, and an unsupported
// one is refused by name.
func TestRunEmbed(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "cls")
	pm := openTiny(t, tinyModel(t))
	mustf(t, SaveEmbed(src, pm, nil, PoolCLS, 32), "SaveEmbed")
	o := embedOptions()
	o.Epochs = 1
	out := filepath.Join(t.TempDir(), "out")
	var log bytes.Buffer
	_, info, err := RunEmbed(ctx, EmbedRunOptions{Model: src, Objective: contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, Train: toyPairs(4, 16, false), Options: o, Out: out, Progress: &log})
	mustf(t, err, "RunEmbed")
	if info.Pooling != PoolCLS {
		t.Errorf("pooling %q, want the source folder's cls", info.Pooling)
	}
	for _, f := range []string{EmbedRunFile, MetricsFile, "modules.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if back := openTiny(t, out); !back.Sentence.Pooling.CLS {
		t.Errorf("the output folder pools %s", back.Sentence.Pooling.Modes())
	}
	// A max pooling source is refused, naming it; nothing is written.
	raw, err := os.ReadFile(filepath.Join(src, "1_Pooling", "config.json"))
	mustf(t, err, "read pooling")
	mustf(t, os.WriteFile(filepath.Join(src, "1_Pooling", "config.json"), bytes.Replace(raw, []byte(`"pooling_mode_max_tokens": false`), []byte(`"pooling_mode_max_tokens": true`), 1), 0o644), "write")
	out2 := filepath.Join(t.TempDir(), "out2")
	_, _, err = RunEmbed(ctx, EmbedRunOptions{Model: src, Objective: contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, Train: toyPairs(4, 16, false), Options: o, Out: out2})
	if err == nil || !strings.Contains(err.Error(), `"cls+max"`) {
		t.Errorf("a cls+max source: %v", err)
	}
	if _, err := os.Stat(out2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run left %s: %v", out2, err)
	}
}

func TestReadPairs(t *testing.T) {
	ps, err := labelled.ReadPairsFrom(strings.NewReader(`{"anchor": "a", "positive": "b", "negative": "c"}`+"\n\n"+`{"anchor": "d", "positive": "e", "negative": "f", "id": 3}`), "x.jsonl", 0)
	mustf(t, err, "triplets")
	if ps.Kind != labelled.Pairs || ps.Negatives != 1 || len(ps.Rows) != 2 || ps.Rows[1].Line != 3 || ps.Rows[1].Texts[2] != "f" {
		t.Errorf("triplets read as %+v", ps)
	}
	ps, err = labelled.ReadPairsFrom(strings.NewReader(`{"sentence1": "a", "sentence2": "b", "score": 0.5}`), "s.jsonl", 0)
	mustf(t, err, "scored")
	if ps.Kind != labelled.ScoredPairs || ps.Rows[0].Score != 0.5 {
		t.Errorf("scored pairs read as %+v", ps)
	}
	for _, c := range []struct{ in, want string }{
		{`{"anchor": "a"}`, `x.jsonl:1: no field "positive"`},
		{`{"anchor": "a", "positive": "b"}` + "\n" + `{"anchor": "a", "positive": 3}`, `x.jsonl:2: field "positive" must be a string, not 3`},
		{`{"anchor": "a", "positive": "b"}` + "\n" + `{"anchor": "a", "positive": "b", "negative_1": "c"}`, `x.jsonl:2: 1 hard negatives; the rows before have 0`},
		{`{"sentence1": "a", "sentence2": "b"}`, `x.jsonl:1: no field "score"`},
		{`{"sentence1": "a", "sentence2": "b", "score": "high"}`, `x.jsonl:1: field "score" must be a finite number, not "high"`},
		{`{"sentence1": "a", "sentence2": "b", "score": 1}` + "\n" + `[1]`, `x.jsonl:2: not a JSON object`},
		{`{"anchor": "a", "positive": "` + strings.Repeat("b", 100) + `"}`, `x.jsonl:1: the line has more than 64 bytes`},
		{"\n\n", "x.jsonl: no examples"},
	} {
		_, err := labelled.ReadPairsFrom(strings.NewReader(c.in), "x.jsonl", 64)
		var ie *labelled.InputError
		if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one with %q", c.in, err, c.want)
		}
	}
}

// The whole step (pooling, loss, BackwardHidden through the encoder, with
// dropout replayed from its seed) against finite differences of its loss
// over some of the parameters, for MNRL with a hard negative (mean pooling)
// and CoSENT (cls).
func TestEmbedStepGradCheck(t *testing.T) {
	ctx := context.Background()
	dir := testmodel.Tiny{Words: testWords, Seed: 7, MaxPositions: 64, Scale: 3}.Folder(t)
	for _, c := range []struct {
		obj  contrastive.Objective
		ds   *labelled.PairSet
		pool EmbedPooling
	}{
		{contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 2, Symmetric: true, Dims: []int{16, 4}}, toyPairs(5, 3, true), PoolMean},
		{contrastive.Objective{Kind: contrastive.KindCoSENT, Scale: 2}, toyScored(5, 4), PoolCLS},
	} {
		pm := openTiny(t, dir)
		tr, err := newEmbedTrainer(EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: c.pool, Objective: c.obj, Train: c.ds, Options: embedOptions()})
		mustf(t, err, "newEmbedTrainer")
		rows := make([]*pairFeature, len(tr.feats))
		for i := range rows {
			rows[i] = &tr.feats[i]
		}
		loss := func() float64 {
			l, err := tr.microStep(ctx, rows, 11)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		pm.Model.ZeroGrad()
		loss()
		grads := map[string][]float32{} // before the finite differences add theirs
		for _, p := range pm.Model.Params() {
			grads[p.Name] = append([]float32(nil), p.Grad...)
		}
		checked := 0
		for _, p := range pm.Model.Params() {
			if !strings.Contains(p.Name, "layer.0.attention.self.query") && !strings.Contains(p.Name, "output.dense") && !strings.Contains(p.Name, "word_embeddings") {
				continue
			}
			checked++
			testutil.GradCheck(t, string(c.obj.Kind)+" "+p.Name, p.Data, grads[p.Name], loss, 3e-3, 2e-2)
		}
		if checked < 4 {
			t.Fatalf("checked %d parameters", checked)
		}
	}
}

// Two ranks (in-process Loopback) equal one process with --accum 2: each
// micro-batch ranks its own rows, the gradients are averaged the same way,
// the evaluation loss is rank 0's, broadcast; with gradient caching too.
func TestTrainEmbedParallelEqualsAccum(t *testing.T) {
	for _, mini := range []int{0, 3} {
		t.Run(fmt.Sprintf("mini_batch_%d", mini), func(t *testing.T) { testParallelEqualsAccum(t, mini) })
	}
}

func testParallelEqualsAccum(t *testing.T, mini int) {
	dir := tinyModel(t)
	run := func(ranks, accum int) ([]float32, *EmbedResult) {
		cs := distributed.Loopback(ranks)
		params := make([][]float32, ranks)
		results := make([]*EmbedResult, ranks)
		errs := make([]error, ranks)
		var wg sync.WaitGroup
		for r := range cs {
			pm := openTiny(t, dir)
			o := embedOptions()
			o.BatchSize, o.Accum, o.Epochs, o.MiniBatchSize = 4, accum, 2, mini
			ds := toyPairs(6, 20, true) // the last step has 4 rows: rank 1 has none
			j := EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: PoolMean, Objective: contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}, Train: ds, Eval: ds, Options: o, Group: cs[r]}
			wg.Go(func() {
				results[r], errs[r] = TrainEmbed(context.Background(), j)
				params[r] = snapshot(j.Model.Params(), nil)
			})
		}
		wg.Wait()
		for r, err := range errs {
			mustf(t, err, "rank %d", r)
		}
		for r := 1; r < ranks; r++ {
			if fmt.Sprint(params[r]) != fmt.Sprint(params[0]) {
				t.Fatalf("rank %d's parameters differ from rank 0's", r)
			}
		}
		return params[0], results[0]
	}
	many, rm := run(2, 1)
	one, r1 := run(1, 2)
	for e := range r1.Epochs {
		a, b := r1.Epochs[e], rm.Epochs[e]
		if math.Abs(a.TrainLoss-b.TrainLoss) > 1e-6*math.Abs(a.TrainLoss) || math.Abs(*a.EvalLoss-*b.EvalLoss) > 1e-5 {
			t.Errorf("epoch %d: 2 ranks train loss %v, eval %v; one process %v, %v", e+1, b.TrainLoss, *b.EvalLoss, a.TrainLoss, *a.EvalLoss)
		}
	}
	worst := 0.0
	for i := range one {
		worst = max(worst, math.Abs(float64(one[i]-many[i])))
	}
	if worst > 1e-5 {
		t.Errorf("2 ranks: weights differ from one process with accumulation 2 by up to %.3g", worst)
	}
}
