package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/finetune"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pretrain"
	"github.com/roformer-go/roformer/tasks"
	"github.com/roformer-go/roformer/tokenizer"
)

// FinetuneCompareOptions configure the paper's §4.3 comparison (RoFormer
// against BERT fine-tuned on GLUE) at our scale: for each position encoding
// (rotary, and BERT's learned absolute table) and each seed, a model is
// pretrained with masked LM on the built-in corpus, the same way and for the
// same steps, and then fine-tuned on each built-in task (package tasks) with
// package finetune's loop; the bag-of-words baseline is trained on the same
// splits with the same seeds.
//
// Seed s fixes the pretraining (initialisation, batch order, masks, dropout)
// and the fine-tuning (head initialisation, example order, dropout) of run s:
// both vary between seeds, and for a given seed every encoding sees the same
// pretraining batches and masks and the same fine-tuning order. With
// Pretrained, the models are instead the finished runs of an mlm-pe work
// folder (UsePretrained), and Seeds pick its runs.
//
// Runs are paired by (task, pretraining seed). With FinetuneSeeds, each
// pretraining is fine-tuned once per fine-tuning seed; those runs share
// their pretraining and are not independent, so a model's figure for a
// pretraining seed is the mean over its fine-tuning seeds, and spreads and
// paired tests are over pretraining seeds. No test pools tasks: each has its
// own metric.
type FinetuneCompareOptions struct {
	Encodings []roformer.PositionEncoding `json:"encodings"`
	// Scratch adds a control: the rotary model fine-tuned from its random
	// initialisation, without pretraining ("rotary-scratch").
	Scratch bool     `json:"scratch"`
	Seeds   []uint64 `json:"seeds"`
	// FinetuneSeeds, when not empty, are the fine-tuning seeds run on
	// every pretraining seed (head, example order, dropout); empty: one
	// fine-tuning per pretraining, with its seed. The baseline's run
	// (p, f) then has seed 1000·p + f.
	FinetuneSeeds []uint64 `json:"finetune_seeds,omitempty"`
	// Pretrained is an mlm-pe work folder whose finished runs
	// <encoding>-seed<N> are fine-tuned (Model, Pretrain and the check
	// against Pretrain.SeqLen then come from the runs; Corpus and VocabSize
	// must be mlm-pe's, and are checked by scoring each run's held-out
	// batches again). Empty: every model is pretrained here.
	Pretrained string `json:"pretrained,omitempty"`
	// FinetuneDropout, when set, replaces the pretrained runs' dropout
	// (hidden and attention) while fine-tuning (with Pretrained only).
	FinetuneDropout *float64 `json:"finetune_dropout,omitempty"`
	Tasks           []string `json:"tasks"`
	// Model is the architecture (its position_embedding_type is set per
	// run; max_position_embeddings is the pretraining length, so the learned
	// table has one row per pretrained position).
	Model roformer.Config `json:"model"`
	// Corpus is the pretraining text (a file or folder); empty means the
	// built-in corpus (Moby-Dick and the State of the Union addresses
	// 1934–2021).
	Corpus    string                `json:"corpus"`
	VocabSize int                   `json:"vocab_size"` // WordPiece trained on the corpus
	Pretrain  pretrain.TrainOptions `json:"pretrain"`   // MLM steps, batch, lr (Seed and OutDir are set per run)
	// Finetune are the fine-tuning settings of every task; Epochs (per task)
	// replace its Epochs. MaxLength is at most Pretrain.SeqLen.
	Finetune finetune.Options `json:"finetune"`
	Epochs   map[string]int   `json:"epochs"`
	// MaxTrain, when > 0, keeps MaxTrain training examples of each task;
	// MaxEval keeps MaxEval of dev and of test (the quick form; see firstN).
	// The baseline is trained on the same examples.
	MaxTrain int                      `json:"max_train"`
	MaxEval  int                      `json:"max_eval"`
	Baseline finetune.BaselineOptions `json:"baseline"`

	Out      string    `json:"-"` // results folder
	Cache    string    `json:"-"` // the built-in tasks' cache (package tasks)
	Work     string    `json:"-"` // pretrained model folders; empty: a temporary folder, removed
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"`

	// load replaces tasks.Load (tests).
	load func(ctx context.Context, name string) (labelled.Spec, *tasks.Splits, error)
}

// DefaultFinetuneCompare returns the settings of the recorded run, sized to
// about 20 CPU-minutes on one core: rotary and learned, seeds 1–3, the small
// model (2 layers, hidden 128, 4 heads; 1.4M parameters with the 8000-piece
// vocabulary) pretrained for 400 steps of 16 × 128 tokens (peak rate 1e-3,
// 40 warm-up steps, linear decay: about 0.85 passes over the corpus), then
// fine-tuned with batch 32, peak rate 1e-3 (6% warm-up, linear decay),
// inputs cut at 128 tokens, for 3 (sentiment), 1 (spam), 4
// (paraphrase-matched; 2 for the plain paraphrase task of the recorded run)
// and 3 (topics) epochs, keeping the best dev epoch, on 2,000 training
// examples per task (a fixed sample; see firstN)
// and the whole dev and test splits. The rates and epochs were set once for
// this small model, not searched per encoding. UsePretrained replaces the
// pretraining with mlm-pe's runs.
func DefaultFinetuneCompare(out string) FinetuneCompareOptions {
	t := pretrain.DefaultTrainOptions(400, "")
	t.BatchSize, t.SeqLen, t.LR, t.Warmup = 16, 128, 1e-3, 40
	t.SaveEvery, t.EvalEvery, t.EvalBatches, t.LogEvery, t.Keep = 0, 100, 8, 50, 1
	f := finetune.DefaultOptions()
	f.LR, f.MaxLength, f.LogEvery = 1e-3, 128, 0
	return FinetuneCompareOptions{
		Encodings: []roformer.PositionEncoding{roformer.PosRotary, roformer.PosLearned},
		Seeds:     []uint64{1, 2, 3}, Tasks: []string{"sentiment", "spam", "paraphrase-matched", "topics"},
		Model: smallModel(), VocabSize: 8000, Pretrain: t, Finetune: f,
		Epochs:   map[string]int{"sentiment": 3, "spam": 1, "paraphrase": 2, "paraphrase-matched": 4, "topics": 3},
		MaxTrain: 2000, Out: out,
	}
}

// QuickFinetuneCompare is DefaultFinetuneCompare shrunk to a few minutes on
// two cores: a 1-layer model of width 64 with a 2000-piece vocabulary,
// pretrained for 150 steps of 8 × 64 tokens; seeds 1 and 2; fine-tuned for 3
// epochs at 64 tokens on 1,000 training examples of each task, scored on 300
// of dev and of test (a fixed pseudo-random choice).
func QuickFinetuneCompare(out string) FinetuneCompareOptions {
	o := DefaultFinetuneCompare(out)
	o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.EmbeddingSize, o.Model.NumAttentionHeads, o.Model.IntermediateSize = 1, 64, 64, 2, 256
	o.VocabSize = 2000
	o.Seeds = []uint64{1, 2}
	o.Pretrain.Steps, o.Pretrain.BatchSize, o.Pretrain.SeqLen, o.Pretrain.Warmup = 150, 8, 64, 15
	o.Pretrain.EvalEvery, o.Pretrain.EvalBatches, o.Pretrain.LogEvery = 50, 4, 25
	o.Finetune.MaxLength = 64
	o.Epochs = map[string]int{"sentiment": 3, "spam": 3, "paraphrase": 3, "paraphrase-matched": 3, "topics": 3}
	o.MaxTrain, o.MaxEval = 1000, 300
	return o
}

// Apply sets the results, cache and work folders, threads and progress, and
// replaces the seeds and the pretraining steps when c says so.
func (o *FinetuneCompareOptions) Apply(c Common) {
	o.Out, o.Cache, o.Work, o.Threads, o.Progress = c.Out, c.Cache, c.Work, c.Threads, c.Progress
	c.replace(&o.Seeds, &o.Pretrain.Steps, &o.Pretrain.Warmup)
}

// BagOfWords is the name of the baseline in the results.
const BagOfWords = "bag-of-words"

// PretrainRun is one masked-LM pretraining.
type PretrainRun struct {
	Encoding     roformer.PositionEncoding `json:"encoding"`
	Seed         uint64                    `json:"seed"`
	Params       int                       `json:"params"`
	EvalLoss     Number                    `json:"eval_loss"` // held-out MLM loss at the end
	EvalAccuracy Number                    `json:"eval_accuracy"`
	Seconds      float64                   `json:"seconds"`
	// Checkpoint is the mlm-pe run fine-tuned from (Pretrained).
	Checkpoint *PretrainedCheckpoint `json:"checkpoint,omitempty"`
}

// FinetuneRun is one fine-tuning (or baseline) run on one task.
type FinetuneRun struct {
	Model string `json:"model"` // an encoding, "rotary-scratch" or BagOfWords
	Task  string `json:"task"`
	Seed  uint64 `json:"seed"` // of the fine-tuning
	// PretrainSeed is the seed of the pretraining fine-tuned (for the
	// baseline, the one it is paired with); without FinetuneSeeds it is
	// Seed.
	PretrainSeed uint64             `json:"pretrain_seed"`
	Metric       string             `json:"metric"`
	Dev          Number             `json:"dev"`  // the main metric of the kept epoch on dev
	Test         Number             `json:"test"` // the main metric on test
	TestMetrics  map[string]float64 `json:"test_metrics"`
	BestEpoch    int                `json:"best_epoch"`
	Epochs       int                `json:"epochs"`
	Truncated    int                `json:"truncated"` // training inputs cut to the maximum length
	Seconds      float64            `json:"seconds"`
}

// FinetuneSummary aggregates the seeds of one model on one task: the mean,
// sd and 95% interval over pretraining seeds of the dev and test metrics
// (each the mean over the fine-tuning seeds of that pretraining).
type FinetuneSummary struct {
	Model  string `json:"model"`
	Task   string `json:"task"`
	Metric string `json:"metric"`
	Dev    Spread `json:"dev"`
	Test   Spread `json:"test"`
}

// PairedComparison compares model A with model B on the test metric of one
// task, paired by pretraining seed (each side the mean over its fine-tuning
// seeds): the differences A − B, their spread, the paired t-test and the
// exact sign-flip permutation test (PairedDiff). Test is the zero value
// when fewer than 2 pairs exist. (Results written before this rule also
// held a comparison over all tasks, "all"; it is not made any more.)
type PairedComparison struct {
	A     string     `json:"a"`
	B     string     `json:"b"`
	Task  string     `json:"task"`
	Pairs int        `json:"pairs"`
	Test  PairedTest `json:"test"`
}

// FinetuneCompareResult is results.json.
type FinetuneCompareResult struct {
	Options     FinetuneCompareOptions `json:"options"`
	CPU         string                 `json:"cpu"`
	TaskSizes   map[string][3]int      `json:"task_sizes"` // train, dev, test examples used
	Metrics     map[string]string      `json:"metrics"`    // each task's main metric
	Pretrain    []PretrainRun          `json:"pretrain"`
	Runs        []FinetuneRun          `json:"runs"`
	Summary     []FinetuneSummary      `json:"summary"`
	Paired      []PairedComparison     `json:"paired"`
	WallSeconds float64                `json:"wall_seconds"`
	// MergedFrom lists the results folders MergeFinetuneCompare joined
	// (runs of the same settings on different seeds, run side by side), and
	// PartSeconds the wall time of each; WallSeconds is then the longest.
	MergedFrom []string `json:"merged_from,omitempty"`
	// TaskStats: what the models see of each task (lengths, truncation) and
	// how far word overlap alone goes on the pair tasks.
	TaskStats   map[string]TaskStat `json:"task_stats,omitempty"`
	PartSeconds []float64           `json:"part_seconds,omitempty"`
}

// models lists the compared models in table order.
func (o *FinetuneCompareOptions) models() []string {
	var ms []string
	for _, pe := range o.Encodings {
		ms = append(ms, string(pe))
	}
	if o.Scratch {
		ms = append(ms, "rotary-scratch")
	}
	return append(ms, BagOfWords)
}

// FinetuneCompare runs the comparison and writes results.json, runs.csv
// (one line per run), pretrain.csv, summary.md and test.png/svg (each
// task's test metric, mean ± std over the seeds, per model).
func FinetuneCompare(ctx context.Context, opts FinetuneCompareOptions) (*FinetuneCompareResult, error) {
	start := time.Now()
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: finetune-compare: no output folder")
	}
	if len(opts.Encodings) == 0 || len(opts.Seeds) == 0 || len(opts.Tasks) == 0 {
		return nil, fmt.Errorf("experiment: finetune-compare: %d encodings, %d seeds and %d tasks; need at least one of each", len(opts.Encodings), len(opts.Seeds), len(opts.Tasks))
	}
	if opts.Pretrained == "" && opts.Finetune.MaxLength > opts.Pretrain.SeqLen {
		return nil, fmt.Errorf("experiment: finetune-compare: fine-tuning length %d exceeds the pretraining length %d (the learned table's rows)", opts.Finetune.MaxLength, opts.Pretrain.SeqLen)
	}
	var pretrained map[string]*pretrainedRun
	if opts.Pretrained != "" {
		// The runs first: a missing or unfinished one fails at once.
		var err error
		if pretrained, err = loadPretrained(opts); err != nil {
			return nil, err
		}
		// The architecture and pretraining are the runs'.
		r := pretrained[fmt.Sprintf("%s-seed%d", opts.Encodings[0], opts.Seeds[0])]
		opts.Model, opts.Pretrain = r.cfg, r.state.Options
		opts.Model.PositionEmbeddingType, opts.Model.Architectures = roformer.PosRotary, nil
	}
	res := &FinetuneCompareResult{Options: opts, CPU: blas.CPU().String()}
	// The tasks first: a missing one fails before any training.
	specs, splits, err := loadCompareTasks(ctx, opts, res)
	if err != nil {
		return nil, err
	}

	work, cleanup, err := workDir(opts.Work, "finetune-compare")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	job, base, err := prepareMLM(opts.Model, opts.Corpus, opts.VocabSize, opts.Pretrain, filepath.Join(work, "prepare"), opts.Threads, opts.Progress)
	if err != nil {
		return nil, fmt.Errorf("experiment: finetune-compare: %w", err)
	}
	if opts.Pretrained != "" {
		base = opts.Model
		base.VocabSize = job.Model.Config.VocabSize
		if d := opts.FinetuneDropout; d != nil { // the scratch control's
			base.HiddenDropoutProb, base.AttentionProbsDropoutProb = *d, *d
		}
	}
	if res.TaskStats, err = taskStats(job.Tokenizer, specs, splits, opts.Tasks, opts.Finetune.MaxLength); err != nil {
		return nil, err
	}

	for _, pseed := range opts.Seeds {
		fseeds := opts.FinetuneSeeds
		if len(fseeds) == 0 {
			fseeds = []uint64{pseed}
		}
		// The baseline: seconds per task.
		for _, fseed := range fseeds {
			bseed := fseed
			if len(opts.FinetuneSeeds) > 0 {
				bseed = 1000*pseed + fseed
			}
			for _, name := range opts.Tasks {
				run, err := baselineRun(ctx, specs[name], splits[name], opts.Baseline, bseed)
				if err != nil {
					return nil, fmt.Errorf("experiment: finetune-compare: %s seed %d: %w", name, bseed, err)
				}
				run.Task, run.PretrainSeed = name, pseed
				say(opts.Progress, "finetune-compare: %s %s seed %d: dev %.4f test %.4f (%s)", BagOfWords, name, bseed, float64(run.Dev), float64(run.Test), run.Metric)
				res.Runs = append(res.Runs, *run)
			}
		}
		arms := append([]string(nil), opts.models()...)
		arms = arms[:len(arms)-1] // the baseline is done
		for _, arm := range arms {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			dir := filepath.Join(work, fmt.Sprintf("%s-seed%d", arm, pseed))
			var pr *PretrainRun
			if r, ok := pretrained[fmt.Sprintf("%s-seed%d", arm, pseed)]; ok {
				pr, err = stagePretrained(ctx, job, r, dir, opts)
			} else {
				pr, err = pretrainArm(ctx, job, base, arm, pseed, dir, opts)
			}
			if err != nil {
				return nil, err
			}
			if pr != nil {
				res.Pretrain = append(res.Pretrain, *pr)
			}
			for _, fseed := range fseeds {
				for _, name := range opts.Tasks {
					run, err := finetuneArm(ctx, dir, specs[name], splits[name], opts, name, fseed)
					if err != nil {
						return nil, fmt.Errorf("experiment: finetune-compare: %s on %s, seed %d: %w", arm, name, fseed, err)
					}
					run.Model, run.PretrainSeed = arm, pseed
					say(opts.Progress, "finetune-compare: %s %s pretraining seed %d, seed %d: dev %.4f test %.4f (%s), %.0f s", arm, name, pseed, fseed, float64(run.Dev), float64(run.Test), run.Metric, run.Seconds)
					res.Runs = append(res.Runs, *run)
				}
			}
		}
	}
	res.Summary, res.Paired = summariseFinetune(res.Runs, opts)
	res.WallSeconds = time.Since(start).Seconds()
	return res, writeFinetuneCompare(opts.Out, res)
}

// loadCompareTasks loads the tasks of opts (cut to MaxTrain and MaxEval)
// and records their sizes and metrics in res.
func loadCompareTasks(ctx context.Context, opts FinetuneCompareOptions, res *FinetuneCompareResult) (map[string]labelled.Spec, map[string]*tasks.Splits, error) {
	load := opts.load
	if load == nil {
		load = func(ctx context.Context, name string) (labelled.Spec, *tasks.Splits, error) {
			t, err := tasks.Get(name)
			if err != nil {
				return labelled.Spec{}, nil, err
			}
			say(opts.Progress, "%s", t.About())
			sp, err := tasks.Load(ctx, t, opts.Cache, opts.Progress)
			return t.Spec, sp, err
		}
	}
	specs := map[string]labelled.Spec{}
	splits := map[string]*tasks.Splits{}
	res.TaskSizes, res.Metrics = map[string][3]int{}, map[string]string{}
	for _, name := range opts.Tasks {
		spec, sp, err := load(ctx, name)
		if err != nil {
			return nil, nil, fmt.Errorf("experiment: finetune-compare: task %s: %w", name, err)
		}
		sp = &tasks.Splits{Train: firstN(sp.Train, opts.MaxTrain), Dev: firstN(sp.Dev, opts.MaxEval), Test: firstN(sp.Test, opts.MaxEval)}
		spec.Labels = append([]string(nil), spec.Labels...)
		if err := spec.Validate(); err != nil {
			return nil, nil, err
		}
		specs[name], splits[name] = spec, sp
		res.TaskSizes[name] = [3]int{len(sp.Train.Examples), len(sp.Dev.Examples), len(sp.Test.Examples)}
		res.Metrics[name] = spec.Metric
	}
	return specs, splits, nil
}

// firstN returns n examples of ds drawn without replacement in a fixed
// pseudo-random order (the same for every run), in their original order;
// all of them when n ≤ 0. (The first n would not do: a task's files may be
// read class by class.)
func firstN(ds *labelled.Dataset, n int) *labelled.Dataset {
	if n <= 0 || len(ds.Examples) <= n {
		return ds
	}
	keep := rand.New(rand.NewPCG(0x5eed, uint64(len(ds.Examples)))).Perm(len(ds.Examples))[:n]
	sort.Ints(keep)
	out := &labelled.Dataset{File: ds.File, Examples: make([]labelled.Example, n)}
	for i, k := range keep {
		out.Examples[i] = ds.Examples[k]
	}
	return out
}

// pretrainArm writes the model of one arm into dir: the MLM-pretrained
// encoding, or for "rotary-scratch" the rotary model as initialised.
func pretrainArm(ctx context.Context, job *pretrain.Job, base roformer.Config, arm string, seed uint64, dir string, opts FinetuneCompareOptions) (*PretrainRun, error) {
	cfg := base
	cfg.VocabSize = job.Model.Config.VocabSize
	scratch := arm == "rotary-scratch"
	if !scratch {
		pe, err := roformer.ParsePositionEncoding(arm)
		if err != nil {
			return nil, fmt.Errorf("experiment: finetune-compare: %w", err)
		}
		cfg.PositionEmbeddingType = pe
	}
	m, err := roformer.New(cfg, roformer.HeadMaskedLM)
	if err != nil {
		return nil, fmt.Errorf("experiment: finetune-compare %s: %w", arm, err)
	}
	m.Init(seed)
	if scratch {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
		if err := m.Save(dir); err != nil {
			return nil, err
		}
		return nil, job.Tokenizer.Save(dir)
	}
	to := opts.Pretrain
	to.Seed, to.Threads, to.OutDir = seed, max(opts.Threads, 1), dir
	say(opts.Progress, "finetune-compare: pretraining %s seed %d (%d parameters, %d steps)", arm, seed, m.NumParams(), to.Steps)
	t0 := time.Now()
	tj := job.Loop
	tj.Model, tj.Options, tj.Out, tj.SaveExtra = pretrain.NewMLMModel(m), to, opts.Progress, job.Tokenizer.Save
	r, err := tj.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("experiment: finetune-compare: pretraining %s seed %d: %w", arm, seed, err)
	}
	pr := &PretrainRun{Encoding: cfg.PositionEmbeddingType, Seed: seed, Params: m.NumParams(), EvalLoss: Number(r.EvalLoss), EvalAccuracy: Number(r.EvalAccuracy), Seconds: time.Since(t0).Seconds()}
	say(opts.Progress, "finetune-compare: pretrained %s seed %d: held-out MLM loss %.4f, accuracy %.4f, %.0f s", arm, seed, r.EvalLoss, r.EvalAccuracy, pr.Seconds)
	return pr, nil
}

// finetuneArm fine-tunes the model in dir on one task (package finetune's
// loop: a new head, the best dev epoch kept) and scores it on test.
func finetuneArm(ctx context.Context, dir string, spec labelled.Spec, sp *tasks.Splits, opts FinetuneCompareOptions, name string, seed uint64) (*FinetuneRun, error) {
	fo := opts.Finetune
	fo.Seed = seed
	if e := opts.Epochs[name]; e > 0 {
		fo.Epochs = e
	}
	m, _, err := finetune.LoadModel(dir, &spec, finetune.ModelOptions{NewHead: true, Seed: seed})
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	r, err := finetune.Train(ctx, finetune.Job{Model: m, Tokenizer: tok, Spec: spec, Train: sp.Train, Eval: sp.Dev, Options: fo})
	if err != nil {
		return nil, err
	}
	rep, _, err := finetune.Evaluate(ctx, m, tok, spec, sp.Test, fo.EvalOptions())
	if err != nil {
		return nil, err
	}
	return &FinetuneRun{Task: name, Seed: seed, Metric: spec.Metric, Dev: Number(r.Best.Main()), Test: Number(rep.Main()),
		TestMetrics: rep.Metrics, BestEpoch: r.BestEpoch, Epochs: len(r.Epochs), Truncated: r.Truncated, Seconds: time.Since(t0).Seconds()}, nil
}

// baselineRun trains the bag-of-words baseline on one task.
func baselineRun(ctx context.Context, spec labelled.Spec, sp *tasks.Splits, bo finetune.BaselineOptions, seed uint64) (*FinetuneRun, error) {
	bo.Seed = seed
	t0 := time.Now()
	b, dev, err := finetune.TrainBaseline(ctx, spec, sp.Train, sp.Dev, bo, nil)
	if err != nil {
		return nil, err
	}
	rep := b.Evaluate(sp.Test)
	return &FinetuneRun{Model: BagOfWords, Seed: seed, Metric: spec.Metric, Dev: Number(dev.Main()), Test: Number(rep.Main()),
		TestMetrics: rep.Metrics, Epochs: b.Options.Epochs, Seconds: time.Since(t0).Seconds()}, nil
}

// summariseFinetune aggregates the runs per (model, task) and compares the
// first encoding with every other model on each task, paired by
// pretraining seed: each model's figure for a pretraining seed is the mean
// over its fine-tuning seeds, since those share the pretraining. No
// comparison pools tasks (their metrics differ).
func summariseFinetune(runs []FinetuneRun, opts FinetuneCompareOptions) ([]FinetuneSummary, []PairedComparison) {
	pseedOf := func(r FinetuneRun) uint64 {
		if len(opts.FinetuneSeeds) == 0 {
			return r.Seed // one fine-tuning per pretraining, as in results before pretrain_seed
		}
		return r.PretrainSeed
	}
	// perSeed returns, in the order of opts.Seeds, the pretraining seeds of
	// model on task and its mean dev and test metrics on each.
	perSeed := func(model, task string) (seeds []uint64, dev, test []float64) {
		for _, p := range opts.Seeds {
			var d, t []float64
			for _, r := range runs {
				if r.Model == model && r.Task == task && pseedOf(r) == p {
					d, t = append(d, float64(r.Dev)), append(t, float64(r.Test))
				}
			}
			if len(t) > 0 {
				md, _ := meanStd(d)
				mt, _ := meanStd(t)
				seeds, dev, test = append(seeds, p), append(dev, md), append(test, mt)
			}
		}
		return seeds, dev, test
	}
	var sum []FinetuneSummary
	models := opts.models()
	for _, model := range models {
		for _, task := range opts.Tasks {
			s := FinetuneSummary{Model: model, Task: task}
			for _, r := range runs {
				if r.Model == model && r.Task == task {
					s.Metric = r.Metric
				}
			}
			_, dev, test := perSeed(model, task)
			s.Dev, s.Test = SeedSpread(dev), SeedSpread(test)
			sum = append(sum, s)
		}
	}
	var paired []PairedComparison
	a := models[0]
	for _, b := range models[1:] {
		for _, task := range opts.Tasks {
			sa, _, ta := perSeed(a, task)
			sb, _, tb := perSeed(b, task)
			var xs, ys []float64
			for i, p := range sa {
				if j := slices.Index(sb, p); j >= 0 {
					xs, ys = append(xs, ta[i]), append(ys, tb[j])
				}
			}
			paired = append(paired, comparePaired(a, b, task, xs, ys))
		}
	}
	return sum, paired
}

// comparePaired runs PairedDiff on xs (model a) and ys (model b).
func comparePaired(a, b, task string, xs, ys []float64) PairedComparison {
	c := PairedComparison{A: a, B: b, Task: task, Pairs: len(xs)}
	if t, err := PairedDiff(xs, ys); err == nil {
		c.Test = t
	}
	return c
}

func writeFinetuneCompare(dir string, res *FinetuneCompareResult) error {
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	var rows [][]string
	for _, r := range res.Runs {
		rows = append(rows, []string{r.Model, r.Task, strconv.FormatUint(r.PretrainSeed, 10), strconv.FormatUint(r.Seed, 10), r.Metric, ftoa(float64(r.Dev)), ftoa(float64(r.Test)),
			strconv.Itoa(r.BestEpoch), strconv.Itoa(r.Epochs), strconv.Itoa(r.Truncated), strconv.FormatFloat(r.Seconds, 'f', 1, 64)})
	}
	if err := writeCSV(dir, "runs.csv", []string{"model", "task", "pretrain_seed", "seed", "metric", "dev", "test", "best_epoch", "epochs", "truncated_train", "seconds"}, rows); err != nil {
		return err
	}
	rows = nil
	for _, p := range res.Pretrain {
		rows = append(rows, []string{string(p.Encoding), strconv.FormatUint(p.Seed, 10), strconv.Itoa(p.Params), ftoa(float64(p.EvalLoss)), ftoa(float64(p.EvalAccuracy)), strconv.FormatFloat(p.Seconds, 'f', 1, 64)})
	}
	if err := writeCSV(dir, "pretrain.csv", []string{"encoding", "seed", "params", "eval_loss", "eval_accuracy", "seconds"}, rows); err != nil {
		return err
	}
	if err := plotFinetuneCompare(dir, res); err != nil {
		return err
	}
	return writeFile(dir, "summary.md", []byte(finetuneCompareMarkdown(res)))
}

func finetuneCompareMarkdown(res *FinetuneCompareResult) string {
	o := res.Options
	var md strings.Builder
	corpus := o.Corpus
	if corpus == "" {
		corpus = "the built-in corpus"
	}
	if o.Pretrained != "" {
		drop := "the runs' dropout"
		if d := o.FinetuneDropout; d != nil {
			drop = fmt.Sprintf("dropout %g", *d)
		}
		fmt.Fprintf(&md, "Fine-tuning comparison (§4.3): %d layers × hidden %d (%d heads), fine-tuned from the finished mlm-pe runs in %s (masked LM, %d steps of %d × %d tokens on %s, vocabulary of %d), with %s while fine-tuning (batch %d, peak rate %g, at most %d tokens) on each task; pretraining seeds %v. CPU: %s, %d thread(s). Wall time %.0f s (fine-tuning only).\n\n",
			o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.NumAttentionHeads, o.Pretrained, o.Pretrain.Steps, o.Pretrain.BatchSize, o.Pretrain.SeqLen, corpus, o.VocabSize,
			drop, o.Finetune.BatchSize, o.Finetune.LR, o.Finetune.MaxLength, o.Seeds, res.CPU, max(o.Threads, 1), res.WallSeconds)
	} else {
		fmt.Fprintf(&md, "Fine-tuning comparison (§4.3): %d layers × hidden %d (%d heads), pretrained with masked LM for %d steps of %d × %d tokens on %s, then fine-tuned (batch %d, peak rate %g, at most %d tokens) on each task; pretraining seeds %v. CPU: %s, %d thread(s). Wall time %.0f s.\n\n",
			o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.NumAttentionHeads, o.Pretrain.Steps, o.Pretrain.BatchSize, o.Pretrain.SeqLen, corpus,
			o.Finetune.BatchSize, o.Finetune.LR, o.Finetune.MaxLength, o.Seeds, res.CPU, max(o.Threads, 1), res.WallSeconds)
	}
	if len(o.FinetuneSeeds) > 0 {
		fmt.Fprintf(&md, "Each pretraining is fine-tuned with seeds %v (head, example order, dropout). Fine-tuning runs on one pretraining share it and are not independent observations: a model's figure for a pretraining seed is the mean over its fine-tuning seeds, and every spread, interval and paired test below is over the %d pretraining seeds. ", o.FinetuneSeeds, len(o.Seeds))
	} else if len(o.Seeds) > 1 {
		fmt.Fprintf(&md, "Seed s fixes both the pretraining and its one fine-tuning, so every spread, interval and paired test below is over the %d pretraining seeds (fine-tuning seeds on one pretraining would not be independent observations). ", len(o.Seeds))
	} else {
		md.WriteString("One pretraining seed, fine-tuned once: no spread, interval or paired test can be made (fine-tuning seeds on one pretraining would not be independent observations). ")
	}
	md.WriteString("Each task is scored with its own metric only, and no test pools tasks.\n\n")
	if len(res.MergedFrom) > 1 {
		fmt.Fprintf(&md, "Merged from %d runs made side by side (%s), wall times %v s; the wall time above is the longest.\n\n", len(res.MergedFrom), strings.Join(res.MergedFrom, ", "), res.PartSeconds)
	}
	if len(res.Pretrain) > 0 && res.Pretrain[0].Checkpoint != nil {
		md.WriteString("Checkpoints fine-tuned, held-out MLM loss at their step as the run recorded it and as computed again here on the same held-out batches with the rebuilt vocabulary:\n\n| encoding | seed | checkpoint | step | held-out loss | recomputed |\n|---|---|---|---|---|---|\n")
		for _, p := range res.Pretrain {
			if c := p.Checkpoint; c != nil {
				fmt.Fprintf(&md, "| %s | %d | %s | %d of %d | %.4f | %.4f |\n", p.Encoding, p.Seed, c.Path, c.Step, c.Steps, float64(c.EvalLoss), float64(c.RecomputedLoss))
			}
		}
		md.WriteString("\n")
	}
	if len(res.Pretrain) > 0 {
		md.WriteString("Pretraining, held-out MLM loss (accuracy) per seed:\n\n| encoding | per seed | mean |\n|---|---|---|\n")
		for _, pe := range o.Encodings {
			var losses []float64
			var parts []string
			for _, p := range res.Pretrain {
				if p.Encoding == pe {
					losses = append(losses, float64(p.EvalLoss))
					parts = append(parts, fmt.Sprintf("%.3f (%.3f)", float64(p.EvalLoss), float64(p.EvalAccuracy)))
				}
			}
			fmt.Fprintf(&md, "| %s | %s | %s |\n", pe, strings.Join(parts, ", "), SeedSpread(losses).Format(3))
		}
		md.WriteString("\n")
	}
	if len(res.TaskStats) > 0 {
		md.WriteString("What the models see (training inputs, tokens with [CLS] and [SEP], nothing cut), and for pair tasks (whose metric is F1 of the positive class) a one-feature classifier (positive when the Jaccard overlap of the two texts' word sets reaches the threshold of best F1 on train) and the constant answer \"positive\":\n\n")
		md.WriteString("| task | median tokens | 90th percentile | longest | cut at the maximum length | overlap-only classifier on test | always positive |\n|---|---|---|---|---|---|---|\n")
		for _, t := range o.Tasks {
			st, ok := res.TaskStats[t]
			if !ok {
				continue
			}
			ov, always := "–", "–"
			if st.OverlapTestF1 != nil {
				ov = fmt.Sprintf("F1 %.4f (Jaccard ≥ %.2f)", float64(*st.OverlapTestF1), float64(*st.OverlapThresh))
			}
			if st.AllPositiveTestF1 != nil {
				always = fmt.Sprintf("F1 %.4f", float64(*st.AllPositiveTestF1))
			}
			fmt.Fprintf(&md, "| %s | %d | %d | %d | %d of %d (%.0f%%) at %d | %s | %s |\n", t, st.MedianTokens, st.P90Tokens, st.MaxTokens,
				st.TruncatedTrain, st.TrainExamples, 100*float64(st.TruncatedTrain)/float64(max(st.TrainExamples, 1)), st.MaxLength, ov, always)
		}
		md.WriteString("\n")
	}
	if len(o.Seeds) == 1 {
		md.WriteString("Test metric (each task's own), one pretraining seed (dev in brackets):\n\n| model |")
	} else {
		fmt.Fprintf(&md, "Test metric (each task's own), mean ± sd over %d pretraining seeds [95%% CI] (dev mean in brackets):\n\n| model |", len(o.Seeds))
	}
	for _, t := range o.Tasks {
		sz := res.TaskSizes[t]
		fmt.Fprintf(&md, " %s (%s; %d/%d/%d) |", t, res.Metrics[t], sz[0], sz[1], sz[2])
	}
	md.WriteString("\n|---|" + strings.Repeat("---|", len(o.Tasks)) + "\n")
	for _, model := range o.models() {
		fmt.Fprintf(&md, "| %s |", model)
		for _, t := range o.Tasks {
			for _, s := range res.Summary {
				if s.Model == model && s.Task == t {
					if s.Test.N < 2 {
						fmt.Fprintf(&md, " %s (%.4f) |", fmtNumber(float64(s.Test.Mean), 4), float64(s.Dev.Mean))
					} else {
						fmt.Fprintf(&md, " %s %s (%.4f) |", s.Test.Format(4), s.Test.FormatCI(3), float64(s.Dev.Mean))
					}
				}
			}
		}
		md.WriteString("\n")
	}
	md.WriteString("\nPaired by pretraining seed within each task (the tasks' metrics differ, so none is pooled); test metric, d = A − B: mean ± sd, 95% CI (Student's t), paired t-test and exact sign-flip permutation test (two-sided):\n\n")
	md.WriteString("| A − B | task | pairs | d | 95% CI | A ahead / behind | t-test p | sign-flip p |\n|---|---|---|---|---|---|---|---|\n")
	for _, p := range res.Paired {
		if p.Task == "all" {
			continue // pooled over tasks in results written before that was withdrawn
		}
		t := p.Test
		if t.Diff.N == 0 {
			fmt.Fprintf(&md, "| %s − %s | %s | %d | – | – | – | – | – |\n", p.A, p.B, p.Task, p.Pairs)
			continue
		}
		fmt.Fprintf(&md, "| %s − %s | %s | %d | %s | %s | %d / %d | %s | %s |\n", p.A, p.B, p.Task, p.Pairs,
			t.Diff.Format(4), t.Diff.FormatCI(4), t.Positive, t.Negative, fmtP(float64(t.PT)), fmtP(float64(t.PSignFlip)))
	}
	return md.String()
}

// fmtNumber writes x with dec decimals, "–" for NaN.
func fmtNumber(x float64, dec int) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.*f", dec, x)
}

// plotFinetuneCompare draws test.png/svg: per task, each model's test metric
// on every seed as a small dot and the mean as a short bar. Dots rather
// than ± sd bars: runs that collapse to a constant answer make some tasks
// bimodal, where a mean ± sd leaves [0, 1] and hides the two groups.
func plotFinetuneCompare(dir string, res *FinetuneCompareResult) error {
	o := res.Options
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Fine-tuned test metric by task: dots every run, bar the mean over %d pretraining seeds", len(o.Seeds))
	p.Y.Label.Text = "test metric, each task's own (named under it)"
	p.Add(plotter.NewGrid())
	models := o.models()
	names := make([]string, len(o.Tasks))
	for i, t := range o.Tasks {
		names[i] = t + " (" + res.Metrics[t] + ")"
	}
	p.NominalX(names...)
	w := 0.5 / float64(max(len(models), 1))
	for k, model := range models {
		var dots plotter.XYs
		var means [][2]plotter.XY
		for i, t := range o.Tasks {
			x := float64(i) + w*(float64(k)-float64(len(models)-1)/2)
			var ys []float64
			for _, r := range res.Runs {
				if r.Model == model && r.Task == t && !math.IsNaN(float64(r.Test)) {
					ys = append(ys, float64(r.Test))
				}
			}
			if len(ys) == 0 {
				continue
			}
			// Equal values (collapsed runs) are spread a little sideways.
			sort.Float64s(ys)
			for j, y := range ys {
				dx := 0.0
				if j > 0 && math.Abs(y-ys[j-1]) < 0.01 {
					dx = 0.3 * w * float64((j%2)*2-1)
				}
				dots = append(dots, plotter.XY{X: x + dx, Y: y})
			}
			m, _ := meanStd(ys)
			for _, s := range res.Summary {
				if s.Model == model && s.Task == t && s.Test.N > 0 {
					m = float64(s.Test.Mean) // the mean over pretraining seeds
				}
			}
			means = append(means, [2]plotter.XY{{X: x - 0.4*w, Y: m}, {X: x + 0.4*w, Y: m}})
		}
		if len(dots) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			return fmt.Errorf("experiment: plotting %s: %w", model, err)
		}
		sc.Color = palette[k%len(palette)]
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(3)
		p.Add(sc)
		for _, seg := range means {
			l, err := plotter.NewLine(plotter.XYs{seg[0], seg[1]})
			if err != nil {
				return fmt.Errorf("experiment: plotting %s: %w", model, err)
			}
			l.Color, l.Width = palette[k%len(palette)], vg.Points(2.5)
			p.Add(l)
		}
		p.Legend.Add(model, sc)
	}
	p.Y.Min, p.Y.Max, p.Y.Tick.Marker = -0.03, 1.03, niceTicks{}
	return savePlot(p, dir, "test")
}

// MergeFinetuneCompare joins results folders of runs that differ only in
// their seeds (e.g. one process per seed, run side by side) into one
// results folder out: the runs of every seed, summaries and paired tests
// over all of them. It is an error when the settings other than the seeds
// differ, or when a seed appears twice.
//
// Results folders without task statistics (TaskStats) get them here: the
// tasks are loaded from opts.Cache and the vocabulary is trained again from
// the recorded settings (a second or two). Only opts.Out, Cache, Threads
// and Progress are used.
func MergeFinetuneCompare(ctx context.Context, opts FinetuneCompareOptions, dirs []string) (*FinetuneCompareResult, error) {
	out := opts.Out
	if len(dirs) == 0 {
		return nil, fmt.Errorf("experiment: finetune-compare: no results folder to merge")
	}
	var res *FinetuneCompareResult
	var ref []byte
	seen := map[uint64]string{}
	for _, dir := range dirs {
		var part FinetuneCompareResult
		if err := readResults(dir, &part); err != nil {
			return nil, err
		}
		fillPretrainSeeds(&part)
		o := part.Options
		seeds := o.Seeds
		// The seeds differ between the parts, and so does the pretraining
		// seed that --pretrained records from the first checkpoint read.
		o.Seeds, o.Pretrain.Seed, o.Pretrain.OutDir = nil, 0, ""
		key, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
		for _, s := range seeds {
			if d, ok := seen[s]; ok {
				return nil, fmt.Errorf("experiment: finetune-compare: seed %d is in both %s and %s", s, d, dir)
			}
			seen[s] = dir
		}
		if res == nil {
			res, ref = &part, key
			res.Options.Seeds = append([]uint64(nil), seeds...)
		} else {
			if !bytes.Equal(key, ref) {
				return nil, fmt.Errorf("experiment: finetune-compare: %s was run with other settings than %s (only the seeds may differ)", dir, dirs[0])
			}
			res.Options.Seeds = append(res.Options.Seeds, seeds...)
			res.Pretrain = append(res.Pretrain, part.Pretrain...)
			res.Runs = append(res.Runs, part.Runs...)
			res.WallSeconds = max(res.WallSeconds, part.WallSeconds)
		}
		res.MergedFrom = append(res.MergedFrom, dir)
		res.PartSeconds = append(res.PartSeconds, part.WallSeconds)
	}
	slices.Sort(res.Options.Seeds)
	res.Summary, res.Paired = summariseFinetune(res.Runs, res.Options)
	if res.TaskStats == nil {
		o := res.Options
		o.Cache, o.Threads, o.Progress, o.load = opts.Cache, opts.Threads, opts.Progress, opts.load
		var tmp FinetuneCompareResult
		specs, splits, err := loadCompareTasks(ctx, o, &tmp)
		if err != nil {
			return nil, err
		}
		tok, err := compareTokenizer(o)
		if err != nil {
			return nil, err
		}
		if res.TaskStats, err = taskStats(tok, specs, splits, o.Tasks, o.Finetune.MaxLength); err != nil {
			return nil, err
		}
	}
	return res, writeFinetuneCompare(out, res)
}

// compareTokenizer trains the experiment's vocabulary again (as
// pretrain.Prepare does) and returns its tokenizer.
func compareTokenizer(o FinetuneCompareOptions) (*tokenizer.Tokenizer, error) {
	work, cleanup, err := workDir("", "finetune-compare-vocab")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// The model's position encoding (rotary here) does not touch the vocabulary.
	job, _, err := prepareMLM(o.Model, o.Corpus, o.VocabSize, o.Pretrain, work, o.Threads, nil)
	if err != nil {
		return nil, fmt.Errorf("experiment: finetune-compare: %w", err)
	}
	return job.Tokenizer, nil
}

// ResummarizeFinetuneCompare rewrites the summaries, CSV files and plot of
// the results folder dir from its results.json, without training.
func ResummarizeFinetuneCompare(dir string) (*FinetuneCompareResult, error) {
	var res FinetuneCompareResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	if len(res.Runs) == 0 {
		return nil, fmt.Errorf("experiment: %s holds no runs", filepath.Join(dir, "results.json"))
	}
	fillPretrainSeeds(&res)
	res.Summary, res.Paired = summariseFinetune(res.Runs, res.Options)
	return &res, writeFinetuneCompare(dir, &res)
}

// fillPretrainSeeds sets the pretraining seed of runs read from results
// written before FinetuneRun had one: one fine-tuning per pretraining, of
// the same seed.
func fillPretrainSeeds(res *FinetuneCompareResult) {
	if len(res.Options.FinetuneSeeds) > 0 {
		return
	}
	for i := range res.Runs {
		res.Runs[i].PretrainSeed = res.Runs[i].Seed
	}
}
