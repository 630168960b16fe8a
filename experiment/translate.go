package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/metrics"
	"github.com/roformer-go/roformer/model/seq2seq"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tasks"
	"github.com/roformer-go/roformer/tokenizer"
	"github.com/roformer-go/roformer/tokenizer/bpe"
	"github.com/roformer-go/roformer/train"
)

// TranslateOptions configure the machine-translation experiment (the
// paper's §4.1: Transformer-base on WMT14 English→German, BLEU 27.3 with
// sinusoids and 27.5 with RoPE). Here: English→Spanish on the Bible
// (tasks.BibleParallel: KJV ↔ Reina-Valera 1909 aligned by verse, whole books
// held out for dev and test), a shared subword vocabulary trained on the
// training verses of both languages, a small encoder-decoder
// (seq2seq.Model) with RoPE or Vaswani's sinusoids, the same data, steps
// and seeds for both. Dev BLEU (greedy) is measured during training; at the
// end the test set is decoded with beam search from the average of the
// last AverageLast checkpoints (the dev subset greedily from both the last
// and the averaged weights, to show what averaging does).
type TranslateOptions struct {
	Positions []string       `json:"positions"`
	Seeds     []uint64       `json:"seeds"`
	Model     seq2seq.Config `json:"model"` // Position, VocabSize and the special ids are set per run
	VocabSize int            `json:"vocab_size"`
	// MaxTokens drops training pairs with a side longer than this many
	// subword tokens (dev and test are kept whole).
	MaxTokens int `json:"max_tokens"`
	// TrainPairs, when > 0, keeps only that many training pairs (the first
	// after a fixed shuffle).
	TrainPairs int `json:"train_pairs,omitempty"`
	Schedule
	BatchTokens int `json:"batch_tokens"` // source + target tokens per step (Vaswani et al.: 25,000 + 25,000)
	EvalEvery   int `json:"eval_every"`   // steps between dev evaluations (and at the end)
	DevSubset   int `json:"dev_subset"`   // dev verses decoded for the curve; 0: all
	// AverageLast checkpoints, saved every AverageEvery steps up to the
	// last, are averaged (Vaswani et al.: the last 5, every 10 minutes).
	AverageLast  int                   `json:"average_last"`
	AverageEvery int                   `json:"average_every"`
	Decode       seq2seq.DecodeOptions `json:"decode"`
	Bootstrap    int                   `json:"bootstrap_samples"` // resamples of the confidence intervals and paired tests
	// TestSubset, when > 0, decodes only the first TestSubset test verses
	// (the quick form; the summary says so).
	TestSubset int `json:"test_subset,omitempty"`
	// Arms are the training recipes, each run for every position and seed:
	// TranslatePreLN and TranslatePostLN. Empty means TranslatePreLN alone
	// (every results.json written before arms existed).
	Arms []string `json:"arms,omitempty"`
	// PostLN is the recipe of the TranslatePostLN arm.
	PostLN TranslatePostLNRecipe `json:"post_ln,omitzero"`
	// AlphaGrid, when set, tunes the length penalty α of each run on dev:
	// the averaged checkpoints decode the dev subset with Decode's beam at
	// every α of the grid, the α of the highest dev BLEU (the first of
	// equal ones) decodes the test set, and the test set is also decoded
	// at Decode.Alpha for comparison. Empty: Decode.Alpha alone (the
	// results written before tuning existed).
	AlphaGrid []float64 `json:"alpha_grid,omitempty"`

	// Pairs, when set, replaces the Bible (tests).
	Pairs *tasks.Parallel `json:"-"`

	Out      string    `json:"-"`
	Cache    string    `json:"-"` // the fetched Debian packages
	Work     string    `json:"-"` // run folders (one per position and seed, reused when complete); empty: Out/runs
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"`
}

// DefaultTranslate returns the settings of the recorded run: RoPE and
// sinusoidal, seeds 1, 2, 3; 2 + 2 layers of width 128 (4 heads, FFN 512,
// dropout 0.1, label smoothing 0.1); a 4,000-token shared vocabulary;
// training pairs up to 48 tokens a side; 300 steps of 2,500 tokens at a
// peak rate of 2e-3 (30 warm-up steps, cosine decay), weight decay 0.01,
// clipping at 1; dev BLEU every 100 steps on 200 dev verses; the last 5
// checkpoints, 10 steps apart, averaged; beam 4, α 0.6, at most source
// length + 20 tokens (Vaswani et al.: + 50; the verses are short and an
// undertrained model that repeats itself would make +50 the cost of the
// run). The size is what about 3 CPU-minutes a run buy on the 2-core
// machine shared with seven other jobs: a quarter of an epoch.
func DefaultTranslate(out string) TranslateOptions {
	return TranslateOptions{
		Positions: []string{seq2seq.Rotary, seq2seq.Sinusoidal}, Seeds: []uint64{1, 2, 3},
		Model: seq2seq.Config{DModel: 128, Heads: 4, FFN: 512, EncoderLayers: 2, DecoderLayers: 2,
			Dropout: 0.1, LabelSmooth: 0.1, LayerNormEps: 1e-5},
		VocabSize: 4000, MaxTokens: 48,
		Schedule:    Schedule{Steps: 300, Warmup: 30, LR: 2e-3, WeightDecay: 0.01, Clip: 1},
		BatchTokens: 2500, EvalEvery: 100, DevSubset: 200,
		AverageLast: 5, AverageEvery: 10,
		Decode: seq2seq.DecodeOptions{Beam: 4, Alpha: 0.6, MaxExtra: 20}, Bootstrap: 1000, Out: out,
		PostLN: PaperPostLN,
	}
}

// The arms of TranslateOptions.Arms.
const (
	// TranslatePreLN is the recipe of the recorded runs: pre-LN layers,
	// AdamW (β 0.9, 0.999) at Schedule's peak rate with its linear warm-up
	// and cosine decay.
	TranslatePreLN = "pre-ln"
	// TranslatePostLN is the paper's recipe (Vaswani et al.'s §5.3, which
	// the RoFormer paper's §4.1 follows): post-LN layers (seq2seq.PostLN),
	// Adam β₂ 0.98, linear warm-up to PostLN's peak rate and
	// inverse-square-root decay (optim.InverseSqrt). Weight decay and
	// clipping are Schedule's, as in the pre-LN arm, so that the arms
	// differ in the layer order and the optimizer's schedule only.
	TranslatePostLN = "post-ln"
)

// TranslateArms lists the valid arms.
var TranslateArms = []string{TranslatePreLN, TranslatePostLN}

// TranslatePostLNRecipe is the optimisation of the post-LN arm.
type TranslatePostLNRecipe struct {
	LR    float64 `json:"lr"`    // peak rate; 5e-4 (fairseq's transformer_wmt_en_de recipe)
	Beta2 float64 `json:"beta2"` // Adam's β₂; 0.98 (Vaswani et al. §5.3)
	// WarmupFraction is the share of the steps spent warming up: the
	// paper's 4,000 warm-up steps of 100,000, 0.04. Scaling the warm-up
	// with the step budget keeps the schedule's shape over the run: the
	// rate ends at √0.04 = 1/5 of the peak, as the paper's does at step
	// 100,000.
	WarmupFraction float64 `json:"warmup_fraction"`
}

// PaperPostLN is the post-LN arm's recipe: peak 5e-4, β₂ 0.98, a warm-up of
// 4% of the steps (60 of 1,500; 12 of 300).
var PaperPostLN = TranslatePostLNRecipe{LR: 5e-4, Beta2: 0.98, WarmupFraction: 0.04}

// Warmup is the recipe's warm-up for a run of steps: WarmupFraction·steps,
// rounded, at least 1.
func (r TranslatePostLNRecipe) Warmup(steps int) int {
	return max(1, int(math.Round(r.WarmupFraction*float64(steps))))
}

// DefaultAlphaGrid is the length penalties tried on dev: 0, 0.2, …, 1.4.
var DefaultAlphaGrid = []float64{0, 0.2, 0.4, 0.6, 0.8, 1, 1.2, 1.4}

// arms returns the arms to run (TranslatePreLN when none are named).
func (o TranslateOptions) arms() []string {
	if len(o.Arms) == 0 {
		return []string{TranslatePreLN}
	}
	return o.Arms
}

// QuickTranslate is DefaultTranslate shrunk to a few minutes on two cores:
// 1 + 1 layers of width 64, a 2,000-token vocabulary, 4,000 training pairs
// of up to 32 tokens, one seed, 150 steps of 2,000 tokens, 100 dev and 200
// test verses (the test set is cut only here, and the summary says so),
// outputs of at most source length + 10 tokens.
func QuickTranslate(out string) TranslateOptions {
	o := DefaultTranslate(out)
	o.Seeds = []uint64{1}
	o.Model.DModel, o.Model.FFN, o.Model.EncoderLayers, o.Model.DecoderLayers, o.Model.Heads = 64, 256, 1, 1, 2
	o.VocabSize, o.MaxTokens, o.TrainPairs = 2000, 32, 4000
	o.Steps, o.Warmup, o.BatchTokens, o.EvalEvery, o.DevSubset = 150, 15, 2000, 50, 100
	o.Bootstrap, o.TestSubset, o.Decode.MaxExtra = 200, 200, 10
	return o
}

// TranslateCurve is one dev evaluation of a run.
type TranslateCurve struct {
	Step      int    `json:"step"`
	TrainLoss Number `json:"train_loss"` // mean label-smoothed loss of the steps since the last evaluation
	DevNLL    Number `json:"dev_nll"`    // per target token, teacher-forced, all dev verses
	DevBLEU   Number `json:"dev_bleu"`   // greedy, the dev subset
}

// TranslateScore is the test score of one decoded set.
type TranslateScore struct {
	BLEU   Number    `json:"bleu"`
	BLEUCI [2]Number `json:"bleu_ci95"` // percentile bootstrap over test verses
	ChrF   Number    `json:"chrf"`
	ChrFCI [2]Number `json:"chrf_ci95"`
	// Output is the translations' length and repetition (absent from
	// results written before they were measured).
	Output *TranslateOutput `json:"output,omitempty"`
}

// TranslateOutput describes a set of translations against the references.
// Tokens are those BLEU counts (sacreBLEU's 13a tokenization).
type TranslateOutput struct {
	// LengthRatio is the translations' tokens over the references' (BLEU's
	// sys_len/ref_len; below 1 the brevity penalty applies).
	LengthRatio Number `json:"length_ratio"`
	SysTokens   int    `json:"sys_tokens"`
	RefTokens   int    `json:"ref_tokens"`
	// Repeat is the share of translations in which some 4-gram of tokens
	// occurs twice or more: the mark of a decoder looping on a phrase.
	// RefRepeat is the same share of the references (the Bible's own
	// repetition: "y los hijos de …").
	Repeat    Number `json:"repeat_4gram"`
	RefRepeat Number `json:"ref_repeat_4gram"`
	Empty     int    `json:"empty"` // translations without a token
}

// TranslateAlpha is a run's length penalty tuned on dev.
type TranslateAlpha struct {
	Grid []float64 `json:"grid"`
	// DevBLEU is the dev subset's BLEU at each α of Grid (beam search,
	// averaged checkpoints).
	DevBLEU []Number `json:"dev_bleu"`
	Chosen  float64  `json:"chosen"` // the α that decoded the test set
}

// TranslateRun is one (arm, position, seed) run: run.json in its folder.
type TranslateRun struct {
	Arm        string           `json:"arm,omitempty"` // empty: TranslatePreLN (results written before arms existed)
	Position   string           `json:"position"`
	Seed       uint64           `json:"seed"`
	Params     int              `json:"params"`
	Curve      []TranslateCurve `json:"curve"`
	Averaged   TranslateScore   `json:"test_averaged"`     // beam search, the averaged checkpoints (at the tuned α when Alpha is set)
	DevBLEUAvg Number           `json:"dev_bleu_averaged"` // greedy, the dev subset, the averaged checkpoints (the curve's last point has the last weights)
	Seconds    float64          `json:"seconds"`
	CPU        string           `json:"cpu"`
	Threads    int              `json:"threads"`
	// Alpha is the length penalty tuned on dev and FixedAlpha the test
	// score at Options.Decode.Alpha, with AlphaGrid only.
	Alpha      *TranslateAlpha `json:"alpha,omitempty"`
	FixedAlpha *TranslateScore `json:"test_averaged_fixed_alpha,omitempty"`
}

// TranslatePaired is RoPE minus sinusoidal on one seed, with the p-value of
// sacreBLEU's paired bootstrap test over the same test verses (Koehn 2004):
// the null hypothesis is that both score the same.
type TranslatePaired struct {
	Arm        string `json:"arm,omitempty"` // empty: TranslatePreLN
	Seed       uint64 `json:"seed"`
	Delta      Number `json:"bleu_delta"` // test, averaged checkpoints
	PBootstrap Number `json:"p_bootstrap"`
	DeltaNLL   Number `json:"dev_nll_delta"` // dev NLL per token at the last step
	// ChrF is the same comparison on chrF (absent from results written
	// before it was made).
	ChrF *TranslatePairedScore `json:"chrf,omitempty"`
}

// TranslatePairedScore is one metric's paired comparison: the difference
// and the p-value of the paired bootstrap test.
type TranslatePairedScore struct {
	Delta      Number `json:"delta"`
	PBootstrap Number `json:"p_bootstrap"`
}

// TranslateArmSeeds is one arm's RoPE − sinusoidal over the seeds (paired
// by seed): test BLEU, test chrF and last dev NLL; each absent with fewer
// than 2 seeds of both.
type TranslateArmSeeds struct {
	Arm  string      `json:"arm"`
	BLEU *PairedTest `json:"bleu,omitempty"`
	ChrF *PairedTest `json:"chrf,omitempty"`
	NLL  *PairedTest `json:"dev_nll,omitempty"`
}

// TranslateArmDiff is an arm minus TranslatePreLN for one position over the
// seeds (paired by seed).
type TranslateArmDiff struct {
	Arm      string      `json:"arm"`
	Position string      `json:"position"`
	BLEU     *PairedTest `json:"bleu,omitempty"`
	ChrF     *PairedTest `json:"chrf,omitempty"`
	NLL      *PairedTest `json:"dev_nll,omitempty"`
}

// TranslateResult is results.json.
type TranslateResult struct {
	Options TranslateOptions  `json:"options"`
	Source  string            `json:"source"`
	Split   [3]int            `json:"split_pairs"` // train (after filtering), dev, test
	Vocab   int               `json:"vocab"`
	Runs    []TranslateRun    `json:"runs"`
	Paired  []TranslatePaired `json:"paired"`
	// Per arm and position (keyed by translateLabel: the position alone for
	// TranslatePreLN): the test BLEU and chrF (averaged checkpoints) and
	// the last dev NLL over the seeds.
	TestBLEU map[string]Spread `json:"test_bleu"`
	TestChrF map[string]Spread `json:"test_chrf"`
	DevNLL   map[string]Spread `json:"dev_nll"`
	// RoPE − sinusoidal over the seeds (paired by seed) in the
	// TranslatePreLN arm: test BLEU and last dev NLL; absent with fewer
	// than 2 seeds. ArmSeeds has every arm's, with chrF.
	SeedsBLEU *PairedTest         `json:"paired_seeds_bleu,omitempty"`
	SeedsNLL  *PairedTest         `json:"paired_seeds_dev_nll,omitempty"`
	ArmSeeds  []TranslateArmSeeds `json:"paired_seeds_by_arm,omitempty"`
	// ArmDiffs are each other arm minus TranslatePreLN, per position.
	ArmDiffs    []TranslateArmDiff `json:"arm_differences,omitempty"`
	WallSeconds float64            `json:"wall_seconds"`
	CPU         string             `json:"cpu"`
}

// mtData is the tokenized corpus.
type mtData struct {
	codec            *bpe.Model
	train            [][2][]int32
	dev, test        [][2][]int32
	devRefs, testRef []string
}

// Translate runs every (arm, position, seed) whose run folder under Work is
// not complete, then summarizes every run of the options: results.json,
// curves.csv, runs.csv, bleu.png/svg and nll.png/svg (dev BLEU and NLL
// against the step, mean and spread over seeds), summary.md, and the test
// translations of every run under translations/ in Out.
func Translate(ctx context.Context, opts TranslateOptions) (*TranslateResult, error) {
	start := time.Now()
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: translate: no output folder")
	}
	if opts.Work == "" {
		opts.Work = filepath.Join(opts.Out, "runs")
	}
	for _, p := range opts.Positions {
		if p != seq2seq.Rotary && p != seq2seq.Sinusoidal {
			return nil, fmt.Errorf("experiment: translate: position %q is not %s or %s", p, seq2seq.Rotary, seq2seq.Sinusoidal)
		}
	}
	for _, a := range opts.arms() {
		if !slices.Contains(TranslateArms, a) {
			return nil, fmt.Errorf("experiment: translate: arm %q is not %s", a, strings.Join(TranslateArms, " or "))
		}
		if r := opts.PostLN; a == TranslatePostLN && !(r.LR > 0 && r.Beta2 >= 0 && r.Beta2 < 1 && r.WarmupFraction >= 0) {
			return nil, fmt.Errorf("experiment: translate: the post-LN recipe (rate %g, β₂ %g, warm-up fraction %g) needs a positive rate, β₂ in [0, 1) and a warm-up fraction ≥ 0 (PaperPostLN)", r.LR, r.Beta2, r.WarmupFraction)
		}
	}
	for _, a := range opts.AlphaGrid {
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return nil, fmt.Errorf("experiment: translate: length penalty %g of the α grid is not a finite number", a)
		}
	}
	if opts.Steps < 1 || opts.BatchTokens < 1 || opts.EvalEvery < 1 || opts.AverageLast < 1 || opts.AverageEvery < 1 || opts.MaxTokens < 1 {
		return nil, fmt.Errorf("experiment: translate: steps %d, batch tokens %d, eval every %d, average last %d every %d and max tokens %d must all be positive",
			opts.Steps, opts.BatchTokens, opts.EvalEvery, opts.AverageLast, opts.AverageEvery, opts.MaxTokens)
	}
	par, source := opts.Pairs, "test pairs"
	if par == nil {
		var err error
		if par, err = tasks.BibleParallel(ctx, opts.Cache, opts.Progress); err != nil {
			return nil, fmt.Errorf("experiment: translate: %w", err)
		}
		source = fmt.Sprintf("Bible, English (KJV, Debian sword-text-kjv) → Spanish (Reina-Valera 1909, Debian sword-text-sparv), verses aligned by reference; dev books %s, test books %s",
			strings.Join(par.DevBooks, ", "), strings.Join(par.TestBooks, ", "))
	}
	data, err := prepareMT(par, opts)
	if err != nil {
		return nil, err
	}
	say(opts.Progress, "translate: %s; %d/%d/%d train/dev/test pairs; vocabulary %d", source, len(data.train), len(data.dev), len(data.test), data.codec.VocabSize())
	opts.Pairs = nil
	res := &TranslateResult{Options: opts, Source: source, Split: [3]int{len(data.train), len(data.dev), len(data.test)}, Vocab: data.codec.VocabSize(), CPU: blas.CPU().String()}
	for _, arm := range opts.arms() {
		for _, pos := range opts.Positions {
			for _, seed := range opts.Seeds {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				run, err := translateRun(ctx, opts, data, arm, pos, seed)
				if err != nil {
					return nil, fmt.Errorf("experiment: translate %s seed %d: %w", translateLabel(arm, pos), seed, err)
				}
				res.Runs = append(res.Runs, *run)
			}
		}
	}
	if err := scoreRuns(opts, data, res); err != nil {
		return nil, err
	}
	if err := copyTranslations(opts, res); err != nil {
		return nil, err
	}
	res.WallSeconds = time.Since(start).Seconds()
	return res, writeTranslate(opts.Out, res)
}

// prepareMT trains the shared vocabulary on the training pairs (both
// sides), encodes every split, and filters and subsamples the training
// pairs.
func prepareMT(par *tasks.Parallel, o TranslateOptions) (*mtData, error) {
	if len(par.Train) == 0 || len(par.Dev) == 0 || len(par.Test) == 0 {
		return nil, fmt.Errorf("experiment: translate: %d/%d/%d train/dev/test pairs; each split needs some", len(par.Train), len(par.Dev), len(par.Test))
	}
	trainPairs := slices.Clone(par.Train)
	if o.TrainPairs > 0 && o.TrainPairs < len(trainPairs) {
		r := rand.New(rand.NewPCG(0x62696265, 0x6c65))
		r.Shuffle(len(trainPairs), func(i, j int) { trainPairs[i], trainPairs[j] = trainPairs[j], trainPairs[i] })
		trainPairs = trainPairs[:o.TrainPairs]
	}
	var texts []string
	for _, p := range trainPairs {
		texts = append(texts, p.Src, p.Tgt)
	}
	codec, err := bpe.Train(texts, o.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("experiment: translate: vocabulary: %w", err)
	}
	d := &mtData{codec: codec}
	enc := func(ps []tasks.Pair) [][2][]int32 {
		out := make([][2][]int32, len(ps))
		for i, p := range ps {
			out[i] = [2][]int32{tokenizer.Int32s(codec.Encode(p.Src)), tokenizer.Int32s(codec.Encode(p.Tgt))}
		}
		return out
	}
	for _, p := range enc(trainPairs) {
		if len(p[0]) > 0 && len(p[1]) > 0 && len(p[0]) <= o.MaxTokens && len(p[1]) <= o.MaxTokens {
			d.train = append(d.train, p)
		}
	}
	test := par.Test
	if o.TestSubset > 0 && o.TestSubset < len(test) {
		test = test[:o.TestSubset]
	}
	d.dev, d.test = enc(par.Dev), enc(test)
	for _, p := range par.Dev {
		d.devRefs = append(d.devRefs, p.Tgt)
	}
	for _, p := range test {
		d.testRef = append(d.testRef, p.Tgt)
	}
	if len(d.train) == 0 {
		return nil, fmt.Errorf("experiment: translate: no training pair has both sides within %d tokens", o.MaxTokens)
	}
	return d, nil
}

func (d *mtData) text(ids []int32) string {
	sub := make([]int, len(ids))
	for i, id := range ids {
		sub[i] = int(id)
	}
	return d.codec.Decode(sub)
}

// batches cuts the training pairs into batches of about BatchTokens source
// + target tokens: each epoch shuffles, sorts chunks of 100 batches' worth
// by length (so a batch pads little) and shuffles the batches.
func (d *mtData) batches(r *rand.Rand, budget int) [][]int {
	idx := r.Perm(len(d.train))
	size := func(i int) int { return len(d.train[i][0]) + len(d.train[i][1]) + 2 }
	var out [][]int
	chunk := 0
	for lo := 0; lo < len(idx); lo = chunk {
		tok := 0
		for chunk = lo; chunk < len(idx) && tok < 100*budget; chunk++ {
			tok += size(idx[chunk])
		}
		part := idx[lo:chunk]
		sort.SliceStable(part, func(a, b int) bool { return size(part[a]) < size(part[b]) })
		var cur []int
		maxLen := 0
		for _, i := range part {
			ml := max(maxLen, len(d.train[i][0])+1, len(d.train[i][1])+1)
			if len(cur) > 0 && 2*ml*(len(cur)+1) > budget {
				out = append(out, cur)
				cur, ml = nil, max(len(d.train[i][0])+1, len(d.train[i][1])+1)
			}
			cur, maxLen = append(cur, i), ml
		}
		if len(cur) > 0 {
			out = append(out, cur)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (d *mtData) batch(cfg seq2seq.Config, pairs [][2][]int32, idx []int) (*seq2seq.Batch, error) {
	src, tgt := make([][]int32, len(idx)), make([][]int32, len(idx))
	for k, i := range idx {
		src[k], tgt[k] = pairs[i][0], pairs[i][1]
	}
	return seq2seq.NewBatch(cfg, src, tgt)
}

// runDir is the folder of one run: POSITION-seedN for TranslatePreLN (as
// before arms existed), ARM-POSITION-seedN for the others.
func runDir(o TranslateOptions, arm, pos string, seed uint64) string {
	return filepath.Join(o.Work, fmt.Sprintf("%s-seed%d", strings.ReplaceAll(translateLabel(arm, pos), "/", "-"), seed))
}

// translateLabel names an arm's position in tables and results.json's
// maps: the position alone for TranslatePreLN (and the empty arm of older
// results), ARM/POSITION for the others.
func translateLabel(arm, pos string) string {
	if arm == "" || arm == TranslatePreLN {
		return pos
	}
	return arm + "/" + pos
}

// arm is the run's arm, TranslatePreLN when unnamed.
func (r TranslateRun) arm() string {
	if r.Arm == "" {
		return TranslatePreLN
	}
	return r.Arm
}

// runKey fingerprints the options that shape a run of arm, so that a run
// folder made with other settings is not reused. The post-LN recipe is
// left out of the pre-LN arm's key, which is then the key of the runs made
// before arms existed.
func runKey(o TranslateOptions, arm string) string {
	k := o
	k.Positions, k.Seeds, k.Pairs, k.Out, k.Cache, k.Work, k.Threads, k.Progress = nil, nil, nil, "", "", "", 0, nil
	k.Arms = nil
	if arm != TranslatePostLN {
		k.PostLN = TranslatePostLNRecipe{}
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// savedRun is a run folder's run.json: the settings' fingerprint (runKey)
// and the run.
type savedRun struct {
	Key string       `json:"settings"`
	Run TranslateRun `json:"run"`
}

// translateRun trains one model, or reads its run.json when the folder
// holds a complete run of the same settings.
func translateRun(ctx context.Context, o TranslateOptions, d *mtData, arm, pos string, seed uint64) (*TranslateRun, error) {
	dir := runDir(o, arm, pos, seed)
	label := translateLabel(arm, pos)
	if run, err := reusedRun(o, arm, dir); run != nil || err != nil {
		if run != nil {
			say(o.Progress, "translate: %s seed %d: reusing %s", label, seed, dir)
			run.Arm = arm
		}
		return run, err
	}
	start := time.Now()
	cfg := o.Model
	cfg.Position, cfg.VocabSize = pos, d.codec.VocabSize()
	cfg.PadID, cfg.BOSID, cfg.EOSID = bpe.PadID, bpe.BosID, bpe.EosID
	if arm == TranslatePostLN {
		cfg.LayerNorm = seq2seq.PostLN
	}
	m, err := seq2seq.New(cfg)
	if err != nil {
		return nil, err
	}
	m.Init(seed)
	run := &TranslateRun{Arm: arm, Position: pos, Seed: seed, Params: m.NumParams(), CPU: blas.CPU().String(), Threads: o.Threads}
	snaps, err := trainTranslate(ctx, o, d, m, run, dir, start)
	if err != nil {
		return nil, err
	}
	if err := decodeAveraged(ctx, o, d, snaps, dir, run); err != nil {
		return nil, err
	}
	run.Seconds = time.Since(start).Seconds()
	say(o.Progress, "translate: %s seed %d: trained and decoded in %.0f s", label, seed, run.Seconds)
	return run, writeJSON(dir, "run.json", savedRun{Key: runKey(o, arm), Run: *run})
}

// reusedRun returns the run saved in dir's run.json when its settings are
// o's, or nil (no error) when there is none or it was made with others.
// A run.json larger than a run of o's settings writes (runJSONLimit) is
// refused unread.
func reusedRun(o TranslateOptions, arm, dir string) (*TranslateRun, error) {
	path := filepath.Join(dir, "run.json")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	defer f.Close()
	key := runKey(o, arm)
	limit := runJSONLimit(o, key)
	tooLarge := func(size string) error {
		return fmt.Errorf("experiment: translate: %s holds %s bytes, more than the %d a run of these settings writes (%d steps, a dev evaluation every %d); remove it to train the run again",
			path, size, limit, o.Steps, o.EvalEvery)
	}
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	} else if st.Size() > limit {
		return nil, tooLarge(fmt.Sprint(st.Size()))
	}
	raw, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("experiment: %s: %w", path, err)
	}
	if int64(len(raw)) > limit { // not a regular file, or it grew
		return nil, tooLarge(fmt.Sprintf("more than %d", limit))
	}
	var saved savedRun
	if json.Unmarshal(raw, &saved) == nil && saved.Key == key {
		return &saved.Run, nil
	}
	return nil, nil
}

// runJSONLimit is the most bytes the run.json of a run of o's settings,
// fingerprinted by key, is owed: 64 KiB for the fields of fixed size, 6
// bytes for each byte of key (escaped in a JSON string, at most \u00XX),
// 256 for each of the at most Steps/EvalEvery + 1 points of the curve
// (an indented point of four of the longest numbers takes 150) and 128 for
// each α of the grid (its value and dev BLEU, indented). The sum saturates
// at math.MaxInt64/2.
func runJSONLimit(o TranslateOptions, key string) int64 {
	const ceiling = math.MaxInt64 / 2
	lim := int64(64 << 10)
	add := func(n, each int64) {
		if n = max(n, 0); n > (ceiling-lim)/each {
			lim = ceiling
		} else {
			lim += n * each
		}
	}
	add(int64(len(key)), 6)
	add(int64(o.Steps/max(o.EvalEvery, 1)), 256)
	add(1, 256)
	add(int64(len(o.AlphaGrid)), 128)
	return lim
}

// trainTranslate trains m for o.Steps steps (the arm's optimizer and
// schedule, translateOptimizer; batches of about o.BatchTokens tokens drawn
// from run.Seed), appending
// to run.Curve the train loss and dev NLL every o.EvalEvery steps and
// writing the dev translations into dir. It returns the snapshots of the
// last o.AverageLast checkpoints, o.AverageEvery steps apart, to average.
func trainTranslate(ctx context.Context, o TranslateOptions, d *mtData, m *seq2seq.Model, run *TranslateRun, dir string, start time.Time) ([]*seq2seq.Model, error) {
	label, seed := translateLabel(run.Arm, run.Position), run.Seed
	adam, sched := translateOptimizer(o, run.Arm)
	st, err := train.NewStepper(m.Params(), adam, sched)
	if err != nil {
		return nil, err
	}
	st.Clip = o.Clip
	r := rand.New(rand.NewPCG(seed, 0x7472616e736c))
	var queue [][]int
	var snaps []*seq2seq.Model
	lossSum, lossN := 0.0, 0
	for step := 0; step < o.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(queue) == 0 {
			queue = d.batches(r, o.BatchTokens)
		}
		b, err := d.batch(m.Config, d.train, queue[0])
		if err != nil {
			return nil, err
		}
		queue = queue[1:]
		u, err := st.Step(step, func(int) (float64, error) {
			p, err := m.Forward(ctx, b, seq2seq.Options{Train: true, Seed: seed<<32 | uint64(step)})
			if err != nil {
				return 0, err
			}
			return p.Loss, p.Backward(ctx)
		})
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", step+1, err)
		}
		lossSum, lossN = lossSum+u.Loss, lossN+1
		done := step + 1
		if back := o.Steps - done; back%o.AverageEvery == 0 && back/o.AverageEvery < o.AverageLast {
			snaps = append(snaps, m.Clone())
		}
		if done%o.EvalEvery == 0 || done == o.Steps {
			c := TranslateCurve{Step: done, TrainLoss: Number(lossSum / float64(lossN))}
			lossSum, lossN = 0, 0
			nll, hyps, err := d.devEval(ctx, m, o)
			if err != nil {
				return nil, err
			}
			if err := writeLines(dir, fmt.Sprintf("dev-step%d.txt", done), hyps); err != nil {
				return nil, err
			}
			c.DevNLL = Number(nll)
			run.Curve = append(run.Curve, c)
			say(o.Progress, "translate: %s seed %d: step %d/%d, train loss %.3f, dev NLL %.3f (%.0f s)",
				label, seed, done, o.Steps, c.TrainLoss, nll, time.Since(start).Seconds())
		}
	}
	return snaps, nil
}

// translateOptimizer is arm's AdamW and schedule: for TranslatePreLN β₂
// 0.999 and Schedule's cosine; for TranslatePostLN the recipe's β₂, peak
// rate and warm-up with the inverse-square-root decay. Both take
// Schedule's weight decay (clipping is the caller's).
func translateOptimizer(o TranslateOptions, arm string) (optim.AdamWConfig, optim.Schedule) {
	adam := optim.DefaultAdamWConfig(o.WeightDecay)
	if arm == TranslatePostLN {
		r := o.PostLN
		adam.Beta2 = r.Beta2
		return adam, optim.Schedule{Kind: optim.InverseSqrt, PeakLR: r.LR, Warmup: r.Warmup(o.Steps), Total: o.Steps}
	}
	return adam, optim.Schedule{Kind: optim.Cosine, PeakLR: o.LR, Warmup: o.Warmup, Total: o.Steps}
}

// decodeAveraged averages the snapshots, writes its dev and test
// translations (dev-averaged.txt, test-averaged.txt) and saves it into
// dir's averaged folder. With o.AlphaGrid it first decodes the dev subset
// with beam search at each α (dev-beam-alphaA.txt), sets run.Alpha to the
// α of the highest dev BLEU, decodes the test set with it, and also at
// o.Decode.Alpha (test-averaged-fixed-alpha.txt).
func decodeAveraged(ctx context.Context, o TranslateOptions, d *mtData, snaps []*seq2seq.Model, dir string, run *TranslateRun) error {
	avg, err := seq2seq.Average(snaps...)
	if err != nil {
		return err
	}
	_, devAvg, err := d.devEval(ctx, avg, o)
	if err != nil {
		return err
	}
	if err := writeLines(dir, "dev-averaged.txt", devAvg); err != nil {
		return err
	}
	do := o.Decode
	if len(o.AlphaGrid) > 0 {
		a := &TranslateAlpha{Grid: slices.Clone(o.AlphaGrid)}
		best := math.Inf(-1)
		for _, alpha := range o.AlphaGrid {
			dv := o.Decode
			dv.Alpha = alpha
			hyps, err := d.translate(ctx, avg, d.dev[:d.devSubset(o)], dv)
			if err != nil {
				return err
			}
			if err := writeLines(dir, alphaFile(alpha), hyps); err != nil {
				return err
			}
			b, err := corpusBLEU(hyps, d.devRefs[:d.devSubset(o)])
			if err != nil {
				return err
			}
			a.DevBLEU = append(a.DevBLEU, Number(b))
			if b > best {
				best, a.Chosen = b, alpha
			}
		}
		run.Alpha, do.Alpha = a, a.Chosen
		say(o.Progress, "translate: %s seed %d: length penalty α %g chosen on dev (BLEU %.2f)", translateLabel(run.Arm, run.Position), run.Seed, a.Chosen, best)
	}
	hyps, err := d.translate(ctx, avg, d.test, do)
	if err != nil {
		return err
	}
	if err := writeLines(dir, "test-averaged.txt", hyps); err != nil {
		return err
	}
	if len(o.AlphaGrid) > 0 {
		if do.Alpha != o.Decode.Alpha {
			if hyps, err = d.translate(ctx, avg, d.test, o.Decode); err != nil {
				return err
			}
		}
		if err := writeLines(dir, fixedAlphaFile, hyps); err != nil {
			return err
		}
	}
	return avg.Save(filepath.Join(dir, "averaged"))
}

// fixedAlphaFile holds a run's test translations at Decode.Alpha when the
// length penalty is tuned.
const fixedAlphaFile = "test-averaged-fixed-alpha.txt"

// alphaFile is the name of the dev translations at length penalty alpha.
func alphaFile(alpha float64) string { return fmt.Sprintf("dev-beam-alpha%g.txt", alpha) }

// devEval returns the teacher-forced NLL per token over all dev pairs and
// the greedy translations of the dev subset.
func (d *mtData) devEval(ctx context.Context, m *seq2seq.Model, o TranslateOptions) (nll float64, hyps []string, err error) {
	tot, n := 0.0, 0
	for lo := 0; lo < len(d.dev); lo += 32 {
		idx := make([]int, 0, 32)
		for i := lo; i < min(lo+32, len(d.dev)); i++ {
			idx = append(idx, i)
		}
		b, err := d.batch(m.Config, d.dev, idx)
		if err != nil {
			return 0, nil, err
		}
		p, err := m.Forward(ctx, b, seq2seq.Options{})
		if err != nil {
			return 0, nil, err
		}
		tot += p.NLL * float64(p.Tokens)
		n += p.Tokens
	}
	hyps, err = d.translate(ctx, m, d.dev[:d.devSubset(o)], seq2seq.DecodeOptions{Beam: 1, MaxExtra: o.Decode.MaxExtra})
	if err != nil {
		return 0, nil, err
	}
	return tot / float64(n), hyps, nil
}

// devSubset is the number of dev verses of the curve.
func (d *mtData) devSubset(o TranslateOptions) int {
	if o.DevSubset > 0 && o.DevSubset < len(d.dev) {
		return o.DevSubset
	}
	return len(d.dev)
}

// translate decodes the source sides of pairs into text.
func (d *mtData) translate(ctx context.Context, m *seq2seq.Model, pairs [][2][]int32, do seq2seq.DecodeOptions) ([]string, error) {
	src := make([][]int32, len(pairs))
	for i, p := range pairs {
		src[i] = p[0]
	}
	out, err := m.Translate(ctx, src, do)
	if err != nil {
		return nil, err
	}
	hyps := make([]string, len(out))
	for i, ids := range out {
		hyps[i] = d.text(ids)
	}
	return hyps, nil
}

func writeLines(dir, name string, lines []string) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.ReplaceAll(l, "\n", " "))
		b.WriteByte('\n')
	}
	return writeFile(dir, name, []byte(b.String()))
}

func readLines(dir, name string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"), nil
}

// scoreRuns scores every run's saved translations (dev curve, dev and
// test of the last and averaged weights, the dev translations of the α
// grid and the test at the fixed α) and compares RoPE with sinusoidal per
// arm and seed by the paired bootstrap of the averaged checkpoints' test
// translations, on BLEU and chrF; then aggregateTranslate.
func scoreRuns(o TranslateOptions, d *mtData, res *TranslateResult) error {
	devRefs := d.devRefs[:d.devSubset(o)]
	for i := range res.Runs {
		r := &res.Runs[i]
		dir := runDir(o, r.arm(), r.Position, r.Seed)
		for j := range r.Curve {
			hyps, err := readLines(dir, fmt.Sprintf("dev-step%d.txt", r.Curve[j].Step))
			if err != nil {
				return err
			}
			b, err := corpusBLEU(hyps, devRefs)
			if err != nil {
				return err
			}
			r.Curve[j].DevBLEU = Number(b)
		}
		hyps, err := readLines(dir, "dev-averaged.txt")
		if err != nil {
			return err
		}
		b, err := corpusBLEU(hyps, devRefs)
		if err != nil {
			return err
		}
		r.DevBLEUAvg = Number(b)
		if hyps, err = readLines(dir, "test-averaged.txt"); err != nil {
			return err
		}
		if r.Averaged, err = scoreTest(hyps, d.testRef, o.Bootstrap, r.Seed); err != nil {
			return err
		}
		if r.Alpha == nil {
			continue
		}
		for j, alpha := range r.Alpha.Grid {
			hyps, err := readLines(dir, alphaFile(alpha))
			if err != nil {
				return err
			}
			b, err := corpusBLEU(hyps, devRefs)
			if err != nil {
				return err
			}
			r.Alpha.DevBLEU[j] = Number(b)
		}
		if hyps, err = readLines(dir, fixedAlphaFile); err != nil {
			return err
		}
		fixed, err := scoreTest(hyps, d.testRef, o.Bootstrap, r.Seed)
		if err != nil {
			return err
		}
		r.FixedAlpha = &fixed
	}
	res.Paired = nil
	for _, arm := range o.arms() {
		for _, seed := range o.Seeds {
			rot, sin := findRun(res, arm, seq2seq.Rotary, seed), findRun(res, arm, seq2seq.Sinusoidal, seed)
			if rot == nil || sin == nil {
				continue
			}
			a, err := readLines(runDir(o, arm, rot.Position, seed), "test-averaged.txt")
			if err != nil {
				return err
			}
			b, err := readLines(runDir(o, arm, sin.Position, seed), "test-averaged.txt")
			if err != nil {
				return err
			}
			p, err := pairedBootstrap(metrics.BLEU{}, a, b, d.testRef, o.Bootstrap, seed)
			if err != nil {
				return err
			}
			pc, err := pairedBootstrap(metrics.CHRF{}, a, b, d.testRef, o.Bootstrap, seed)
			if err != nil {
				return err
			}
			tp := TranslatePaired{Arm: arm, Seed: seed, Delta: rot.Averaged.BLEU - sin.Averaged.BLEU, PBootstrap: Number(p), DeltaNLL: Number(lastNLL(*rot) - lastNLL(*sin)),
				ChrF: &TranslatePairedScore{Delta: rot.Averaged.ChrF - sin.Averaged.ChrF, PBootstrap: Number(pc)}}
			if arm == TranslatePreLN {
				tp.Arm = "" // as before arms existed
			}
			res.Paired = append(res.Paired, tp)
		}
	}
	aggregateTranslate(res)
	return nil
}

// findRun returns the run of arm, position and seed in res, or nil.
func findRun(res *TranslateResult, arm, pos string, seed uint64) *TranslateRun {
	for i := range res.Runs {
		if r := &res.Runs[i]; r.arm() == arm && r.Position == pos && r.Seed == seed {
			return r
		}
	}
	return nil
}

// aggregateTranslate sets res's statistics over seeds from its runs:
// TestBLEU, TestChrF and DevNLL per arm and position, RoPE − sinusoidal per
// arm (ArmSeeds; SeedsBLEU and SeedsNLL for TranslatePreLN, as before arms
// existed) and each arm − TranslatePreLN per position (ArmDiffs). It needs
// only the runs' scores, so that ResummarizeTranslate recomputes them for
// results written before some existed.
func aggregateTranslate(res *TranslateResult) {
	o := res.Options
	res.TestBLEU, res.TestChrF, res.DevNLL = map[string]Spread{}, map[string]Spread{}, map[string]Spread{}
	for _, arm := range o.arms() {
		for _, pos := range o.Positions {
			var b, c, n []float64
			for _, r := range res.Runs {
				if r.arm() == arm && r.Position == pos {
					b, c, n = append(b, float64(r.Averaged.BLEU)), append(c, float64(r.Averaged.ChrF)), append(n, lastNLL(r))
				}
			}
			l := translateLabel(arm, pos)
			res.TestBLEU[l], res.TestChrF[l], res.DevNLL[l] = SeedSpread(b), SeedSpread(c), SeedSpread(n)
		}
	}
	// paired returns the tests of a − b over the seeds both have, for
	// test BLEU, test chrF and last dev NLL.
	paired := func(armA, posA, armB, posB string) (bleu, chrf, nll *PairedTest) {
		var ab, bb, ac, bc, an, bn []float64
		for _, seed := range o.Seeds {
			a, b := findRun(res, armA, posA, seed), findRun(res, armB, posB, seed)
			if a == nil || b == nil {
				continue
			}
			ab, bb = append(ab, float64(a.Averaged.BLEU)), append(bb, float64(b.Averaged.BLEU))
			ac, bc = append(ac, float64(a.Averaged.ChrF)), append(bc, float64(b.Averaged.ChrF))
			an, bn = append(an, lastNLL(*a)), append(bn, lastNLL(*b))
		}
		test := func(x, y []float64) *PairedTest {
			if t, err := PairedDiff(x, y); err == nil {
				return &t
			}
			return nil
		}
		return test(ab, bb), test(ac, bc), test(an, bn)
	}
	res.SeedsBLEU, res.SeedsNLL, res.ArmSeeds, res.ArmDiffs = nil, nil, nil, nil
	for _, arm := range o.arms() {
		s := TranslateArmSeeds{Arm: arm}
		s.BLEU, s.ChrF, s.NLL = paired(arm, seq2seq.Rotary, arm, seq2seq.Sinusoidal)
		if s.BLEU == nil && s.ChrF == nil && s.NLL == nil {
			continue
		}
		res.ArmSeeds = append(res.ArmSeeds, s)
		if arm == TranslatePreLN {
			res.SeedsBLEU, res.SeedsNLL = s.BLEU, s.NLL
		}
	}
	if !slices.Contains(o.arms(), TranslatePreLN) {
		return
	}
	for _, arm := range o.arms() {
		if arm == TranslatePreLN {
			continue
		}
		for _, pos := range o.Positions {
			d := TranslateArmDiff{Arm: arm, Position: pos}
			d.BLEU, d.ChrF, d.NLL = paired(arm, pos, TranslatePreLN, pos)
			if d.BLEU != nil || d.ChrF != nil || d.NLL != nil {
				res.ArmDiffs = append(res.ArmDiffs, d)
			}
		}
	}
}

// copyTranslations writes the test translations of every run into Out's
// translations folder: LABEL-seedN.txt (the averaged checkpoints, at the
// tuned α when there is one) and, with an α grid,
// LABEL-seedN-fixed-alpha.txt (at Decode.Alpha); one verse a line, in the
// test set's order.
func copyTranslations(o TranslateOptions, res *TranslateResult) error {
	dir := filepath.Join(o.Out, "translations")
	for _, r := range res.Runs {
		base := fmt.Sprintf("%s-seed%d", strings.ReplaceAll(translateLabel(r.arm(), r.Position), "/", "-"), r.Seed)
		files := [][2]string{{"test-averaged.txt", base + ".txt"}}
		if r.Alpha != nil {
			files = append(files, [2]string{fixedAlphaFile, base + "-fixed-alpha.txt"})
		}
		for _, f := range files {
			lines, err := readLines(runDir(o, r.arm(), r.Position, r.Seed), f[0])
			if err != nil {
				return err
			}
			if err := writeLines(dir, f[1], lines); err != nil {
				return err
			}
		}
	}
	return nil
}

// lastNLL is a run's dev NLL at its last evaluation.
func lastNLL(r TranslateRun) float64 {
	if n := len(r.Curve); n > 0 {
		return float64(r.Curve[n-1].DevNLL)
	}
	return math.NaN()
}
