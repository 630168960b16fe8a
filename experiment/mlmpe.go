package experiment

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pretrain"
)

// MLMPEOptions configure the masked-LM comparison of position encodings
// (the paper's Fig. 3 left: RoFormer against BERT's learned absolute
// positions; here also sinusoidal, Shaw et al.'s relative and none).
type MLMPEOptions struct {
	// Encodings to compare; every one trains on the same packed data with
	// the same steps, batches, masks and dropout for a given seed.
	Encodings []roformer.PositionEncoding `json:"encodings"`
	Seeds     []uint64                    `json:"seeds"`
	// Model is the architecture (its position_embedding_type is set per
	// run; max_position_embeddings is set to the sequence length so that the
	// learned table has exactly one row per position).
	Model roformer.Config `json:"model"`
	// Corpus is a text file or folder; empty means the built-in corpus
	// (Moby-Dick and the State of the Union addresses 1934–2021).
	Corpus    string                `json:"corpus"`
	VocabSize int                   `json:"vocab_size"` // WordPiece vocabulary trained on the corpus
	Train     pretrain.TrainOptions `json:"train"`      // steps, batch, lr, eval cadence (Seed and OutDir are set per run)
	// TargetLosses are fixed held-out MLM losses (nats) whose first
	// crossing each run reports, interpolated between evaluations.
	TargetLosses []float64 `json:"target_losses"`
	// SinusoidVaswani gives the sinusoidal arm Vaswani et al.'s word table:
	// drawn from N(0, 1/E) (VaswaniWordInit) and multiplied by √E
	// (scale_embedding), so that tokens and sinusoids are of one size.
	// False is the arm of the recorded 500-step run (mlm-pe-500): HF's
	// N(0, 0.02²) table, unscaled, which the sinusoids swamp.
	SinusoidVaswani bool `json:"sinusoid_vaswani,omitempty"`

	Out      string    `json:"-"` // results folder
	Work     string    `json:"-"` // run folders (checkpoints, metrics); empty: a temporary folder, removed
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"`
}

// smallModel is the architecture of the experiments: 2 layers, hidden 128,
// 4 heads of 32, feed-forward 512, GELU, dropout 0.1.
func smallModel() roformer.Config {
	c := roformer.DefaultConfig()
	c.NumHiddenLayers, c.HiddenSize, c.EmbeddingSize, c.NumAttentionHeads, c.IntermediateSize = 2, 128, 128, 4, 512
	return c
}

// DefaultMLMPE returns the settings of the recorded run: rotary, learned
// (BERT) and no positions, seeds 1–5, the small model without dropout on
// the built-in corpus with a 2000-piece vocabulary, 2000 steps of 8 × 128
// tokens, peak rate 1e-3 (200 warm-up steps, linear decay), weight decay
// 0.01, clipping at 1, an evaluation on 16 held-out batches every 100
// steps. (The first recorded run, docs/experiments/mlm-pe-500, had all five
// encodings, seeds 1–3, dropout 0.1, an 8000-piece vocabulary and 500 steps
// of 16 × 128: too short for word order to matter.)
func DefaultMLMPE(out string) MLMPEOptions {
	t := pretrain.DefaultTrainOptions(2000, "")
	t.BatchSize, t.SeqLen, t.LR, t.Warmup = 8, 128, 1e-3, 200
	t.SaveEvery, t.EvalEvery, t.EvalBatches, t.LogEvery, t.Keep = 0, 100, 16, 20, 1
	m := smallModel()
	m.HiddenDropoutProb, m.AttentionProbsDropoutProb = 0, 0
	return MLMPEOptions{
		Encodings: []roformer.PositionEncoding{roformer.PosRotary, roformer.PosLearned, roformer.PosNone},
		Seeds:     []uint64{1, 2, 3, 4, 5}, Model: m,
		VocabSize: 2000, Train: t, TargetLosses: []float64{6, 5.5, 5, 4.5}, SinusoidVaswani: true, Out: out,
	}
}

// QuickMLMPE is DefaultMLMPE shrunk to a few minutes on two cores: a
// 1-layer model of width 64, a 2000-piece vocabulary, 150 steps of 8 × 64.
func QuickMLMPE(out string) MLMPEOptions {
	o := DefaultMLMPE(out)
	o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.EmbeddingSize, o.Model.NumAttentionHeads, o.Model.IntermediateSize = 1, 64, 64, 2, 256
	o.VocabSize = 2000
	o.Train.Steps, o.Train.BatchSize, o.Train.SeqLen, o.Train.Warmup = 150, 8, 64, 15
	o.Train.EvalEvery, o.Train.EvalBatches, o.Train.LogEvery = 10, 4, 10
	o.TargetLosses = []float64{7, 6.5, 6}
	return o
}

// MLMRun is one training run.
type MLMRun struct {
	Encoding     roformer.PositionEncoding `json:"encoding"`
	Seed         uint64                    `json:"seed"`
	Params       int                       `json:"params"`
	EvalSteps    []int                     `json:"eval_steps"`
	EvalLoss     []float64                 `json:"eval_loss"`
	EvalAccuracy []Number                  `json:"eval_accuracy"`
	TrainSteps   []int                     `json:"train_steps"`
	TrainLoss    []float64                 `json:"train_loss"`     // mean over each log interval
	StepToTarget []Number                  `json:"step_to_target"` // per target loss; null: never reached
	Seconds      float64                   `json:"seconds"`
}

// MLMSummary aggregates the seeds of one encoding.
type MLMSummary struct {
	Encoding          roformer.PositionEncoding `json:"encoding"`
	Params            int                       `json:"params"`
	FinalEvalLoss     Number                    `json:"final_eval_loss"`
	FinalEvalLossStd  Number                    `json:"final_eval_loss_std"`
	FinalAccuracy     Number                    `json:"final_accuracy"`
	FinalAccuracyStd  Number                    `json:"final_accuracy_std"`
	StepToTarget      []Number                  `json:"step_to_target"` // per target loss: mean over the seeds that reach it; null when none does
	StepToTargetStd   []Number                  `json:"step_to_target_std"`
	ReachedTarget     []int                     `json:"reached_target"` // per target loss: seeds that reach it
	MeanSecondsPerRun float64                   `json:"mean_seconds_per_run"`
}

// MLMPEResult is results.json.
type MLMPEResult struct {
	Options     MLMPEOptions `json:"options"`
	Corpus      string       `json:"corpus"`
	Tokens      int          `json:"tokens"`
	TrainSeqs   int          `json:"train_sequences"`
	EvalSeqs    int          `json:"eval_sequences"`
	Runs        []MLMRun     `json:"runs"`
	Summary     []MLMSummary `json:"summary"`
	Paired      []MLMPair    `json:"paired"` // every pair of encodings, by seed
	WallSeconds float64      `json:"wall_seconds"`
	ReadRuns    int          `json:"read_runs,omitempty"` // runs read from the work folder, trained earlier (not in WallSeconds)
}

// MLMPair compares two encodings trained on the same seeds (same
// initialisation stream, batches, masks and held-out batches): the paired
// differences a − b of the final held-out loss and accuracy.
type MLMPair struct {
	A        roformer.PositionEncoding `json:"a"`
	B        roformer.PositionEncoding `json:"b"`
	Loss     PairedTest                `json:"final_eval_loss"`
	Accuracy PairedTest                `json:"final_accuracy"`
}

// mlmPairs compares every pair of encodings (in the order of encs) over
// the seeds both ran; pairs with fewer than 2 common seeds are left out.
func mlmPairs(runs []MLMRun, encs []roformer.PositionEncoding, seeds []uint64) []MLMPair {
	type key struct {
		pe   roformer.PositionEncoding
		seed uint64
	}
	at := map[key]*MLMRun{}
	for i := range runs {
		at[key{runs[i].Encoding, runs[i].Seed}] = &runs[i]
	}
	var out []MLMPair
	for i, a := range encs {
		for _, b := range encs[i+1:] {
			var la, lb, aa, ab []float64
			for _, seed := range seeds {
				ra, rb := at[key{a, seed}], at[key{b, seed}]
				if ra == nil || rb == nil {
					continue
				}
				la, lb = append(la, ra.EvalLoss[len(ra.EvalLoss)-1]), append(lb, rb.EvalLoss[len(rb.EvalLoss)-1])
				aa, ab = append(aa, float64(ra.EvalAccuracy[len(ra.EvalAccuracy)-1])), append(ab, float64(rb.EvalAccuracy[len(rb.EvalAccuracy)-1]))
			}
			pl, err := PairedDiff(la, lb)
			if err != nil {
				continue
			}
			pa, _ := PairedDiff(aa, ab)
			out = append(out, MLMPair{A: a, B: b, Loss: pl, Accuracy: pa})
		}
	}
	return out
}

// MLMPE pretrains one masked-LM model per (encoding, seed) with package
// train's loop on data packed once, and writes results.json, curves.csv
// (every evaluation of every run), eval_loss.png/svg (mean ± one standard
// deviation over seeds), train_loss.png/svg and summary.md.
func MLMPE(ctx context.Context, opts MLMPEOptions) (*MLMPEResult, error) {
	start := time.Now()
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: mlm-pe: no output folder")
	}
	if len(opts.Encodings) == 0 || len(opts.Seeds) == 0 {
		return nil, fmt.Errorf("experiment: mlm-pe: %d encodings and %d seeds; need at least one of each", len(opts.Encodings), len(opts.Seeds))
	}
	work, cleanup, err := workDir(opts.Work, "mlm-pe")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	job, base, err := prepareMLM(opts.Model, opts.Corpus, opts.VocabSize, opts.Train, filepath.Join(work, "prepare"), opts.Threads, opts.Progress)
	if err != nil {
		return nil, fmt.Errorf("experiment: mlm-pe: %w", err)
	}
	corpusName := opts.Corpus
	if corpusName == "" {
		corpusName = "built-in (Moby-Dick + State of the Union 1934–2021)"
	}
	res := &MLMPEResult{Options: opts, Corpus: corpusName, Tokens: job.Tokens, TrainSeqs: len(job.Loop.Train), EvalSeqs: len(job.Loop.Eval)}
	for _, pe := range opts.Encodings {
		for _, seed := range opts.Seeds {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			cfg := base
			cfg.PositionEmbeddingType = pe
			cfg.VocabSize = job.Model.Config.VocabSize
			vaswani := pe == roformer.PosSinusoidal && opts.SinusoidVaswani
			cfg.ScaleEmbedding = cfg.ScaleEmbedding || vaswani
			m, err := roformer.New(cfg, roformer.HeadMaskedLM)
			if err != nil {
				return nil, fmt.Errorf("experiment: mlm-pe %s: %w", pe, err)
			}
			m.Init(seed)
			if vaswani {
				VaswaniWordInit(m, seed)
			}
			to := opts.Train
			to.Seed, to.Threads = seed, max(opts.Threads, 1)
			to.OutDir = filepath.Join(work, fmt.Sprintf("%s-seed%d", pe, seed))
			t0 := time.Now()
			run, secs, done := finishedMLMRun(to.OutDir, cfg, to.Steps)
			if done {
				res.ReadRuns++
				say(opts.Progress, "mlm-pe: %s seed %d: read the finished run in %s", pe, seed, to.OutDir)
			} else {
				say(opts.Progress, "mlm-pe: %s seed %d (%d parameters)", pe, seed, m.NumParams())
				tj := job.Loop
				tj.Model, tj.Options, tj.Out, tj.SaveExtra = pretrain.NewMLMModel(m), to, opts.Progress, nil
				if _, err := tj.Run(ctx); err != nil {
					return nil, fmt.Errorf("experiment: mlm-pe %s seed %d: %w", pe, seed, err)
				}
				if run, err = readMLMRun(to.OutDir); err != nil {
					return nil, err
				}
				secs = time.Since(t0).Seconds()
			}
			run.Encoding, run.Seed, run.Params, run.Seconds = pe, seed, m.NumParams(), secs
			for _, target := range opts.TargetLosses {
				run.StepToTarget = append(run.StepToTarget, Number(stepToTarget(run.EvalSteps, run.EvalLoss, target)))
			}
			say(opts.Progress, "mlm-pe: %s seed %d: eval loss %.4f, steps to %v: %v, %.0f s", pe, seed,
				run.EvalLoss[len(run.EvalLoss)-1], opts.TargetLosses, run.StepToTarget, run.Seconds)
			res.Runs = append(res.Runs, *run)
		}
	}
	res.Summary = summariseMLM(res.Runs, opts.Encodings, len(opts.TargetLosses))
	res.Paired = mlmPairs(res.Runs, opts.Encodings, opts.Seeds)
	res.WallSeconds = time.Since(start).Seconds()
	return res, writeMLMPE(opts.Out, res)
}

// prepareMLM runs pretrain.Prepare once for the masked-LM runs that an
// experiment compares: the corpus, its vocabulary of vocab words and its
// sequences of t.SeqLen tokens, written under dir. It returns the job and
// the configuration the runs start from: m with t.SeqLen positions and the
// rotary encoding.
func prepareMLM(m roformer.Config, corpus string, vocab int, t pretrain.TrainOptions, dir string, threads int, progress io.Writer) (*pretrain.Job, roformer.Config, error) {
	base := m
	base.MaxPositionEmbeddings = t.SeqLen
	base.PositionEmbeddingType = roformer.PosRotary
	popts := pretrain.Options{Corpus: corpus, VocabSize: vocab, Model: &base, EvalEvery1In: 20, Train: t}
	popts.Train.OutDir, popts.Train.Threads = dir, max(threads, 1)
	job, err := pretrain.Prepare(popts, progress)
	return job, base, err
}

// workDir returns dir (created), or a new temporary folder that cleanup removes.
func workDir(dir, name string) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("experiment: %w", err)
		}
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", "roformer-"+name+"-")
	if err != nil {
		return "", nil, fmt.Errorf("experiment: %w", err)
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// finishedMLMRun reads the run folder dir when it already holds a finished
// run of the model cfg (config.json with the same encoding and sizes, and an
// evaluation at step steps), so that the --work folder of an interrupted
// experiment, or runs trained by another process into the same folder, are
// not trained again. The seconds are the training time metrics.jsonl
// recorded. The folder's training options are not checked: a work folder
// must come from the same experiment options.
func finishedMLMRun(dir string, cfg roformer.Config, steps int) (*MLMRun, float64, bool) {
	got, err := roformer.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil || got.PosEnc() != cfg.PosEnc() || got.NumHiddenLayers != cfg.NumHiddenLayers || got.HiddenSize != cfg.HiddenSize ||
		got.NumAttentionHeads != cfg.NumAttentionHeads || got.IntermediateSize != cfg.IntermediateSize || got.VocabSize != cfg.VocabSize {
		return nil, 0, false
	}
	run, err := readMLMRun(dir)
	if err != nil || run.EvalSteps[len(run.EvalSteps)-1] != steps {
		return nil, 0, false
	}
	raw, err := os.ReadFile(filepath.Join(dir, pretrain.MetricsFile))
	if err != nil {
		return nil, 0, false
	}
	secs := 0.0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r pretrain.Record
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Elapsed != nil {
			secs = *r.Elapsed
		}
	}
	return run, secs, true
}

// readMLMRun reads a run folder's metrics.jsonl.
func readMLMRun(dir string) (*MLMRun, error) {
	raw, err := os.ReadFile(filepath.Join(dir, pretrain.MetricsFile))
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	run := &MLMRun{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r pretrain.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("experiment: %s: %w", filepath.Join(dir, pretrain.MetricsFile), err)
		}
		if r.Loss != nil {
			run.TrainSteps = append(run.TrainSteps, r.Step)
			run.TrainLoss = append(run.TrainLoss, *r.Loss)
		}
		if r.EvalLoss != nil {
			run.EvalSteps = append(run.EvalSteps, r.Step)
			run.EvalLoss = append(run.EvalLoss, *r.EvalLoss)
			acc := math.NaN()
			if r.EvalAccuracy != nil {
				acc = *r.EvalAccuracy
			}
			run.EvalAccuracy = append(run.EvalAccuracy, Number(acc))
		}
	}
	if len(run.EvalLoss) == 0 {
		return nil, fmt.Errorf("experiment: %s has no evaluation", filepath.Join(dir, pretrain.MetricsFile))
	}
	return run, nil
}

// stepToTarget returns the first step at which the curve reaches target,
// interpolated linearly between the evaluations around the crossing; NaN
// when it never does.
func stepToTarget(steps []int, loss []float64, target float64) float64 {
	for i, l := range loss {
		if l <= target {
			if i == 0 {
				return float64(steps[0])
			}
			s0, s1, l0 := float64(steps[i-1]), float64(steps[i]), loss[i-1]
			return s0 + (l0-target)/(l0-l)*(s1-s0)
		}
	}
	return math.NaN()
}

func summariseMLM(runs []MLMRun, encs []roformer.PositionEncoding, targets int) []MLMSummary {
	var out []MLMSummary
	for _, pe := range encs {
		var final, acc, secs []float64
		steps := make([][]float64, targets)
		s := MLMSummary{Encoding: pe, ReachedTarget: make([]int, targets)}
		for _, r := range runs {
			if r.Encoding != pe {
				continue
			}
			s.Params = r.Params
			final = append(final, r.EvalLoss[len(r.EvalLoss)-1])
			acc = append(acc, float64(r.EvalAccuracy[len(r.EvalAccuracy)-1]))
			secs = append(secs, r.Seconds)
			for k, st := range r.StepToTarget {
				steps[k] = append(steps[k], float64(st))
				if !math.IsNaN(float64(st)) {
					s.ReachedTarget[k]++
				}
			}
		}
		s.FinalEvalLoss, s.FinalEvalLossStd = meanStdN(final)
		s.FinalAccuracy, s.FinalAccuracyStd = meanStdN(acc)
		for _, st := range steps {
			m, sd := meanStdN(st)
			s.StepToTarget, s.StepToTargetStd = append(s.StepToTarget, m), append(s.StepToTargetStd, sd)
		}
		s.MeanSecondsPerRun, _ = meanStd(secs)
		out = append(out, s)
	}
	return out
}

// bandOf aggregates curves sharing their x values: mean and mean ± std.
func bandOf(name string, xs []int, curves [][]float64) series {
	s := series{name: name}
	for j, x := range xs {
		var col []float64
		for _, c := range curves {
			if j < len(c) {
				col = append(col, c[j])
			}
		}
		m, sd := meanStd(col)
		s.x = append(s.x, float64(x))
		s.y = append(s.y, m)
		s.lo = append(s.lo, m-sd)
		s.hi = append(s.hi, m+sd)
	}
	return s
}

// writeMLMPE writes results.json, the curves (curves.csv,
// train_curves.csv), their plots and summary.md to dir.
func writeMLMPE(dir string, res *MLMPEResult) error {
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	if err := writeMLMPECurves(dir, res); err != nil {
		return err
	}
	if err := plotMLMPE(dir, res); err != nil {
		return err
	}
	return writeFile(dir, "summary.md", []byte(mlmpeSummary(res)))
}

// writeMLMPECurves writes every run's held-out curve (curves.csv) and
// training curve (train_curves.csv).
func writeMLMPECurves(dir string, res *MLMPEResult) error {
	var rows [][]string
	for _, r := range res.Runs {
		for i, s := range r.EvalSteps {
			rows = append(rows, []string{string(r.Encoding), strconv.FormatUint(r.Seed, 10), strconv.Itoa(s), ftoa(r.EvalLoss[i]), ftoa(float64(r.EvalAccuracy[i]))})
		}
	}
	if err := writeCSV(dir, "curves.csv", []string{"encoding", "seed", "step", "eval_loss", "eval_accuracy"}, rows); err != nil {
		return err
	}
	rows = nil
	for _, r := range res.Runs {
		for i, s := range r.TrainSteps {
			rows = append(rows, []string{string(r.Encoding), strconv.FormatUint(r.Seed, 10), strconv.Itoa(s), ftoa(r.TrainLoss[i])})
		}
	}
	return writeCSV(dir, "train_curves.csv", []string{"encoding", "seed", "step", "train_loss"}, rows)
}

// plotMLMPE plots the held-out and training losses by encoding, mean ± std
// over the seeds (eval_loss and train_loss, .png and .svg).
func plotMLMPE(dir string, res *MLMPEResult) error {
	o := res.Options
	for _, kind := range []string{"eval", "train"} {
		var ss []series
		for _, pe := range o.Encodings {
			var xs []int
			var curves [][]float64
			for _, r := range res.Runs {
				if r.Encoding != pe {
					continue
				}
				if kind == "eval" {
					xs, curves = r.EvalSteps, append(curves, r.EvalLoss)
				} else {
					xs, curves = r.TrainSteps, append(curves, r.TrainLoss)
				}
			}
			ss = append(ss, bandOf(string(pe), xs, curves))
		}
		p, err := linePlot(fmt.Sprintf("MLM %s loss by position encoding (mean ± std over %d seeds)", kind, len(o.Seeds)), "step", kind+" MLM loss (nats)", ss)
		if err != nil {
			return err
		}
		p.X.Min = 0
		if err := savePlot(p, dir, kind+"_loss"); err != nil {
			return err
		}
	}
	return nil
}

// mlmpeSummary is summary.md: the setup, a table of each encoding's final
// held-out loss and accuracy over the seeds, steps to the target losses and
// time, and the paired differences by seed.
func mlmpeSummary(res *MLMPEResult) string {
	o := res.Options
	var md strings.Builder
	fmt.Fprintf(&md, "MLM pretraining, %d layers × hidden %d (%d heads), %d steps of %d × %d tokens, seeds %v, corpus %s (%d tokens; %d/%d train/held-out sequences). Wall time %.0f s.\n\n",
		o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.NumAttentionHeads, o.Train.Steps, o.Train.BatchSize, o.Train.SeqLen, o.Seeds, res.Corpus, res.Tokens, res.TrainSeqs, res.EvalSeqs, res.WallSeconds)
	if res.ReadRuns > 0 {
		fmt.Fprintf(&md, "%d of the %d runs were read from the work folder, trained earlier or by another process; their training time is in \"s per run\", not in the wall time.\n\n", res.ReadRuns, len(res.Runs))
	}
	for _, pe := range o.Encodings {
		if pe == roformer.PosSinusoidal {
			if o.SinusoidVaswani {
				md.WriteString("The sinusoidal arm's word table is drawn from N(0, 1/E) and multiplied by √E before the sinusoids are added (Vaswani et al.).\n\n")
			} else if !o.Model.ScaleEmbedding {
				md.WriteString("The sinusoidal arm adds the sinusoids (entries of size 1) to HF's N(0, 0.02²) word table, unscaled: the positions swamp the tokens.\n\n")
			}
		}
	}
	md.WriteString("Final held-out loss and accuracy: mean ± sample sd over the seeds and the t-based 95% confidence interval of the mean; steps to a target: mean ± sd over the seeds that reach it (how many of them).\n\n")
	fmt.Fprintf(&md, "| encoding | parameters | final held-out loss | 95%% CI | final accuracy |")
	for _, t := range o.TargetLosses {
		fmt.Fprintf(&md, " step to loss %.2f (seeds) |", t)
	}
	fmt.Fprintf(&md, " s per run |\n|---|---|---|---|---|%s---|\n", strings.Repeat("---|", len(o.TargetLosses)))
	for _, pe := range o.Encodings {
		var final, acc []float64
		steps := make([][]float64, len(o.TargetLosses))
		params, secs := 0, []float64(nil)
		for _, r := range res.Runs {
			if r.Encoding != pe {
				continue
			}
			params, secs = r.Params, append(secs, r.Seconds)
			final, acc = append(final, r.EvalLoss[len(r.EvalLoss)-1]), append(acc, float64(r.EvalAccuracy[len(r.EvalAccuracy)-1]))
			for k := range steps {
				if k < len(r.StepToTarget) {
					steps[k] = append(steps[k], float64(r.StepToTarget[k]))
				}
			}
		}
		fl := SeedSpread(final)
		fmt.Fprintf(&md, "| %s | %d | %s | %s | %s |", pe, params, fl.Format(3), fl.FormatCI(3), SeedSpread(acc).Format(3))
		for k := range o.TargetLosses {
			st := SeedSpread(steps[k])
			switch st.N {
			case 0:
				fmt.Fprintf(&md, " never (0/%d) |", len(final))
			case 1:
				fmt.Fprintf(&md, " %.0f (1/%d) |", float64(st.Mean), len(final))
			default:
				fmt.Fprintf(&md, " %.0f ± %.0f (%d/%d) |", float64(st.Mean), float64(st.SD), st.N, len(final))
			}
		}
		sm, _ := meanStd(secs)
		fmt.Fprintf(&md, " %.0f |\n", sm)
	}
	if len(res.Paired) > 0 {
		md.WriteString("\nPaired by seed (the same batches, masks and held-out batches for every encoding of a seed): final held-out loss of a minus b (negative: a is lower), then final accuracy of a minus b.\n\n")
		for _, pr := range res.Paired {
			fmt.Fprintf(&md, "- %s − %s, loss: %s\n", pr.A, pr.B, pr.Loss.Format(3))
			fmt.Fprintf(&md, "- %s − %s, accuracy: %s\n", pr.A, pr.B, pr.Accuracy.Format(3))
		}
	}
	return md.String()
}

// ResummarizeMLMPE recomputes, without training, the steps at which each
// run of the results folder dir reaches targets (held-out losses) from the
// evaluation curves stored in dir/results.json, and rewrites dir's results
// files with them.
func ResummarizeMLMPE(dir string, targets []float64) (*MLMPEResult, error) {
	var res MLMPEResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	if len(res.Runs) == 0 {
		return nil, fmt.Errorf("experiment: %s holds no runs", filepath.Join(dir, "results.json"))
	}
	res.Options.TargetLosses = targets
	for i := range res.Runs {
		r := &res.Runs[i]
		r.StepToTarget = nil
		for _, target := range targets {
			r.StepToTarget = append(r.StepToTarget, Number(stepToTarget(r.EvalSteps, r.EvalLoss, target)))
		}
	}
	res.Summary = summariseMLM(res.Runs, res.Options.Encodings, len(targets))
	res.Paired = mlmPairs(res.Runs, res.Options.Encodings, res.Options.Seeds)
	return &res, writeMLMPE(dir, &res)
}
