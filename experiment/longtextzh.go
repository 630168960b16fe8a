package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// ZhArm is one fine-tuning setting of the long-text-zh experiment: a
// position encoding, a maximum length and the windows per step. Two arms
// with MaxLen·Batch equal see the same number of training tokens in the
// same number of steps (the equal-token control).
type ZhArm struct {
	Name     string                    `json:"name"`
	Encoding roformer.PositionEncoding `json:"encoding"`
	MaxLen   int                       `json:"max_len"`
	Batch    int                       `json:"batch"` // windows of MaxLen tokens per step
}

// LongTextZhOptions configure the Chinese long-document experiment, the
// paper's §4.5 (CAIL2019-SCM, RoFormer-512 against RoFormer-1024) on a task
// that can be built here: is a document of classical Chinese shi by a Tang
// or by a Song poet? Documents are an author's poems concatenated to at
// least Docs.MinChars characters (PoetryDocOptions); the classes are
// balanced and split by author (TrainShare of the authors train, the rest
// test), so that the test authors are unseen (splitByGroup). The tokenizer is RoFormer's (jieba words +
// characters, tokenizer.TrainChineseWords on the training documents). For
// each encoding of the arms and each pretraining seed a small RoFormer is
// pretrained with masked LM on the training documents (windows of
// PretrainLen tokens), then fine-tuned once per arm and fine-tuning seed as
// a mean-pooled classifier (as LongText), and scored on the first MaxLen−2
// tokens of each held-out document.
type LongTextZhOptions struct {
	Docs PoetryDocOptions `json:"documents"`
	// TrainShare of each class's authors train; ValShare are held out for
	// validation (0: none; nothing is selected on it, so the default puts
	// every held-out author into the test set) and the rest test.
	TrainShare       float64         `json:"train_share"`
	ValShare         float64         `json:"val_share"`
	VocabSize        int             `json:"vocab_size"`
	MinCharFrequency int             `json:"min_char_frequency"` // rarer characters become [UNK]
	Model            roformer.Config `json:"model"`

	// PretrainLen is the length of the masked-LM windows, and the rows of
	// the learned encoding's table: a learned arm longer than it is
	// recorded as impossible, with the model's own error.
	PretrainLen   int      `json:"pretrain_len"`
	PretrainBatch int      `json:"pretrain_batch"`
	Pretrain      Schedule `json:"pretrain"`
	// PretrainSeeds: one pretraining per encoding and seed, each shared by
	// the fine-tuning seeds nested in it. Fine-tuning seed s under
	// pretraining seed p runs with FinetuneSeed(p, s): s itself under
	// pretraining seed 1, so the runs of the earlier results replay, and a
	// different draw (head, data order, dropout) under every other one.
	PretrainSeeds []uint64 `json:"pretrain_seeds"`
	// PretrainSeed is the single pretraining seed of results written before
	// PretrainSeeds; it is read into PretrainSeeds (and cleared) when the
	// results are summarised or the experiment runs.
	PretrainSeed uint64 `json:"pretrain_seed,omitempty"`

	Arms     []ZhArm  `json:"arms"`
	Finetune Schedule `json:"finetune"`
	Seeds    []uint64 `json:"seeds"` // fine-tuning seeds: head initialisation, data order, dropout
	// Bootstrap is the number of resamples behind the bootstrap intervals:
	// of the test authors alone (the seeds' runs held fixed), and of the
	// pretraining seeds, the fine-tuning seeds within them and the test
	// authors (hierBootstrap).
	Bootstrap int `json:"bootstrap"`

	// Corpus and Labels, when set, replace the poetry documents (tests);
	// Corpus documents need a Group.
	Corpus []LabelledDoc `json:"-"`
	Labels []string      `json:"labels"`

	Out      string    `json:"-"`
	Cache    string    `json:"-"`
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"`
}

// DefaultLongTextZh returns the settings of the recorded run: documents of
// at least 2,000 characters, at most 4 an author, 70% of the authors
// training and 30% test; an 8,000-token vocabulary; the small model (2
// layers, hidden 128, dropout 0.1); masked-LM pretraining of 120 steps of 8
// windows of 512 tokens (peak rate 1e-3, 12 warm-up steps, cosine decay);
// fine-tuning for 80 steps (peak 2e-3, 8 warm-up steps) in three arms —
// rotary at 512 with 8 windows a step, rotary at 1024 with 4 (the same
// tokens), rotary at 512 with 4 (the same windows as at 1024, half the
// tokens) — fine-tuning seeds 1–3 and pretraining seed 1. The learned-table baseline (its own
// pretraining and an arm of 8 × 512) was recorded as a run of its own,
// Arms = ParseZhArms("learned-512-8"), whose seeds draw the same windows.
func DefaultLongTextZh(out string) LongTextZhOptions {
	m := smallModel()
	m.NumLabels = 2
	return LongTextZhOptions{
		Docs: PoetryDocOptions{MinChars: 2000, PerAuthor: 4}, TrainShare: 0.7,
		VocabSize: 8000, MinCharFrequency: 3, Model: m,
		PretrainLen: 512, PretrainBatch: 8, PretrainSeeds: []uint64{1},
		Pretrain: Schedule{Steps: 120, Warmup: 12, LR: 1e-3, WeightDecay: 0.01, Clip: 1},
		Arms: []ZhArm{
			{"rotary-512-equal-tokens", roformer.PosRotary, 512, 8},
			{"rotary-1024", roformer.PosRotary, 1024, 4},
			{"rotary-512-equal-windows", roformer.PosRotary, 512, 4},
		},
		Finetune:  Schedule{Steps: 80, Warmup: 8, LR: 2e-3, WeightDecay: 0.01, Clip: 1},
		Seeds:     []uint64{1, 2, 3},
		Bootstrap: 2000, Out: out,
	}
}

// QuickLongTextZh is DefaultLongTextZh shrunk to a few minutes on two
// cores: documents of at least 600 characters, one layer of width 64,
// lengths 128 and 256 (the learned table 128 rows), 4,000 tokens, 100
// pretraining and 60 fine-tuning steps, one seed.
func QuickLongTextZh(out string) LongTextZhOptions {
	o := DefaultLongTextZh(out)
	o.Docs.MinChars = 600
	o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.EmbeddingSize, o.Model.NumAttentionHeads, o.Model.IntermediateSize = 1, 64, 64, 2, 256
	o.VocabSize, o.PretrainLen, o.PretrainBatch = 4000, 128, 8
	o.Pretrain.Steps, o.Pretrain.Warmup = 100, 10
	o.Finetune.Steps, o.Finetune.Warmup = 60, 6
	o.Arms = []ZhArm{
		{"rotary-128-equal-tokens", roformer.PosRotary, 128, 8},
		{"rotary-256", roformer.PosRotary, 256, 4},
		{"rotary-128-equal-windows", roformer.PosRotary, 128, 4},
		{"learned-128-equal-tokens", roformer.PosLearned, 128, 8},
	}
	o.Seeds = []uint64{1}
	return o
}

// Apply sets the results folder, cache, threads and progress, and replaces
// the fine-tuning seeds and steps when c says so (the pretraining keeps
// its own).
func (o *LongTextZhOptions) Apply(c Common) {
	o.Out, o.Cache, o.Threads, o.Progress = c.Out, c.Cache, c.Threads, c.Progress
	c.replace(&o.Seeds, &o.Finetune.Steps, &o.Finetune.Warmup)
}

// upgrade moves the single PretrainSeed of results written before
// PretrainSeeds into PretrainSeeds.
func (o *LongTextZhOptions) upgrade() {
	if len(o.PretrainSeeds) == 0 {
		o.PretrainSeeds = []uint64{o.PretrainSeed}
	}
	o.PretrainSeed = 0
}

// distinct reports a seed listed twice.
func distinct(lists ...[]uint64) error {
	for _, l := range lists {
		for i, x := range l {
			if slices.Contains(l[:i], x) {
				return fmt.Errorf("seed %d listed twice", x)
			}
		}
	}
	return nil
}

// ParseZhArms reads comma-separated arms ENCODING-LENGTH-WINDOWS, e.g.
// "learned-512-8,rotary-1024-4", named ENCODING-LENGTHxWINDOWS.
func ParseZhArms(s string) ([]ZhArm, error) {
	var out []ZhArm
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		parts := strings.Split(f, "-")
		if len(parts) != 3 {
			return nil, fmt.Errorf("experiment: arm %q is not ENCODING-LENGTH-WINDOWS (e.g. rotary-1024-4)", f)
		}
		pe, err := roformer.ParsePositionEncoding(parts[0])
		if err != nil {
			return nil, fmt.Errorf("experiment: arm %q: %w", f, err)
		}
		L, err1 := strconv.Atoi(parts[1])
		B, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil || L < 3 || B < 1 {
			return nil, fmt.Errorf("experiment: arm %q: want a length of at least 3 and at least 1 window a step", f)
		}
		out = append(out, ZhArm{Name: fmt.Sprintf("%s-%dx%d", pe, L, B), Encoding: pe, MaxLen: L, Batch: B})
	}
	return out, nil
}

// ZhPretrain is the masked-LM pretraining of one encoding with one seed.
type ZhPretrain struct {
	Encoding  roformer.PositionEncoding `json:"encoding"`
	Seed      uint64                    `json:"seed"`
	Params    int                       `json:"params"`
	LogSteps  []int                     `json:"log_steps"`
	TrainLoss []float64                 `json:"train_loss"` // mean since the previous entry
	// HeldOutLoss and HeldOutAccuracy: masked-LM cross-entropy and
	// accuracy on the first PretrainLen−2 tokens of every test document,
	// masked once.
	HeldOutLoss     Number  `json:"heldout_mlm_loss"`
	HeldOutAccuracy Number  `json:"heldout_mlm_accuracy"`
	Seconds         float64 `json:"seconds"`
}

// ZhRun is one (arm, pretraining seed, fine-tuning seed) fine-tuning.
type ZhRun struct {
	Arm          string                    `json:"arm"`
	Encoding     roformer.PositionEncoding `json:"encoding"`
	MaxLen       int                       `json:"max_len"`
	Batch        int                       `json:"batch"`
	PretrainSeed uint64                    `json:"pretrain_seed"`
	Seed         uint64                    `json:"seed"` // the fine-tuning seed s; it runs with zhFinetuneSeed(PretrainSeed, s)
	Skipped      string                    `json:"skipped,omitempty"`
	Tokens       int                       `json:"train_tokens,omitempty"` // Steps × Batch × MaxLen
	TrainLoss    Number                    `json:"train_loss"`             // mean over the last tenth of the steps
	ValAcc       Number                    `json:"val_accuracy"`
	TestAcc      Number                    `json:"test_accuracy"`
	// TestLo, TestHi: the Wilson 95% interval of TestAcc (binomial, the
	// test documents taken as independent).
	TestLo   Number  `json:"test_wilson_lo"`
	TestHi   Number  `json:"test_wilson_hi"`
	TestLoss Number  `json:"test_loss"`
	Coverage float64 `json:"test_token_coverage,omitempty"`
	Pred     []int32 `json:"test_predictions,omitempty"` // per test document, in ZhResult.Test order
	Seconds  float64 `json:"seconds,omitempty"`
}

// ZhArmSummary is an arm over its seeds.
type ZhArmSummary struct {
	Arm     string    `json:"arm"`
	Skipped string    `json:"skipped,omitempty"`
	Accs    []float64 `json:"test_accuracies"`
	Mean    Number    `json:"test_mean"`
	SD      Number    `json:"test_sd"`
	ValMean Number    `json:"val_mean"`
	ValSD   Number    `json:"val_sd"`
	// PretrainSeeds: each run's (each of Accs's) pretraining seed.
	PretrainSeeds []uint64 `json:"pretrain_seeds,omitempty"`
	// Lo, Hi: the 95% bootstrap over the test authors of the mean over the
	// runs, every run's predictions fixed (authors only).
	Lo Number `json:"test_ci_lo"`
	Hi Number `json:"test_ci_hi"`
	// TLo, THi: the Student-t 95% interval of the mean of Accs, the runs
	// taken as independent (the test set fixed).
	TLo Number `json:"test_t_lo"`
	THi Number `json:"test_t_hi"`
	// SeedsLo, SeedsHi: the 95% bootstrap over pretraining seeds, the
	// fine-tuning seeds within them and the test authors (hierBootstrap).
	SeedsLo  Number  `json:"test_ci_seeds_authors_lo"`
	SeedsHi  Number  `json:"test_ci_seeds_authors_hi"`
	Coverage float64 `json:"test_token_coverage"`
	Tokens   int     `json:"train_tokens"`
	Seconds  float64 `json:"seconds_per_run"`
}

// ZhComparison is arm A minus arm B, paired by run (pretraining and
// fine-tuning seed) and test document.
type ZhComparison struct {
	A             string    `json:"a"`
	B             string    `json:"b"`
	Diffs         []float64 `json:"diffs"`                    // per run
	PretrainSeeds []uint64  `json:"pretrain_seeds,omitempty"` // per run
	Mean          Number    `json:"mean"`
	SD            Number    `json:"sd"`
	// Lo, Hi: the 95% bootstrap over the test authors of the mean
	// difference, every run fixed (authors only).
	Lo Number `json:"ci_lo"`
	Hi Number `json:"ci_hi"`
	// SeedsLo, SeedsHi: the 95% bootstrap over pretraining seeds, the
	// fine-tuning seeds within them and the test authors, the two arms of a
	// run drawn together (hierBootstrap).
	SeedsLo Number `json:"ci_seeds_authors_lo"`
	SeedsHi Number `json:"ci_seeds_authors_hi"`
	Wins    int    `json:"seeds_a_ahead"` // runs
	// Paired is the paired t-test and the exact sign-flip test of the
	// per-run accuracies (two or more runs), the runs taken as
	// independent.
	Paired *PairedTest `json:"paired_by_seed,omitempty"`
}

// ZhResult is results.json.
type ZhResult struct {
	Options     LongTextZhOptions `json:"options"`
	Source      string            `json:"source"`
	Documents   int               `json:"documents"` // made, before balancing
	Split       [3][]int          `json:"split_documents_by_label"`
	Authors     [3]int            `json:"split_authors"`
	DocChars    [3]int            `json:"doc_chars"`  // min, median, max
	DocTokens   [3]int            `json:"doc_tokens"` // min, median, max
	Vocab       int               `json:"vocab"`
	WordShare   float64           `json:"word_token_share"` // tokens that are jieba words of 2+ characters
	UnkShare    float64           `json:"unk_share"`
	Majority    float64           `json:"test_majority_rate"`
	Test        []string          `json:"test_documents"`
	TestGroups  []string          `json:"test_authors"`
	TestLabels  []int32           `json:"test_labels"`
	Pretrain    []ZhPretrain      `json:"pretrain"`
	Runs        []ZhRun           `json:"runs"`
	Arms        []ZhArmSummary    `json:"arms_summary"`
	Comparisons []ZhComparison    `json:"comparisons"`
	WallSeconds float64           `json:"wall_seconds"`
	// MergedFrom and PartSeconds: the results folders a merge joined
	// (MergeLongTextZh) and their wall times; empty for a run.
	MergedFrom  []string  `json:"merged_from,omitempty"`
	PartSeconds []float64 `json:"part_wall_seconds,omitempty"`
}

// LongTextZh runs the experiment and writes results.json, runs.csv,
// accuracy.png/svg and summary.md to opts.Out.
func LongTextZh(ctx context.Context, opts LongTextZhOptions) (*ZhResult, error) {
	start := time.Now()
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: long-text-zh: no output folder")
	}
	opts.upgrade()
	if len(opts.Arms) == 0 || len(opts.Seeds) == 0 {
		return nil, fmt.Errorf("experiment: long-text-zh: %d arms and %d seeds; need at least one of each", len(opts.Arms), len(opts.Seeds))
	}
	if err := distinct(opts.PretrainSeeds, opts.Seeds); err != nil {
		return nil, fmt.Errorf("experiment: long-text-zh: %w", err)
	}
	for _, a := range append([]ZhArm{{Name: "pretraining", MaxLen: opts.PretrainLen, Batch: opts.PretrainBatch}}, opts.Arms...) {
		if a.MaxLen < 3 || a.Batch < 1 {
			return nil, fmt.Errorf("experiment: long-text-zh: %s: maximum length %d and %d windows a step; need at least 3 and 1", a.Name, a.MaxLen, a.Batch)
		}
	}
	d, res, err := zhData(ctx, &opts)
	if err != nil {
		return nil, err
	}
	for _, ps := range opts.PretrainSeeds {
		// One pretraining per encoding and pretraining seed, then the
		// fine-tuning seeds nested in it.
		pre := map[roformer.PositionEncoding]*roformer.Model{}
		for _, a := range opts.Arms {
			if pre[a.Encoding] != nil {
				continue
			}
			p, pm, err := zhPretrain(ctx, opts, d, a.Encoding, ps)
			if err != nil {
				return nil, fmt.Errorf("experiment: long-text-zh: pretraining %s seed %d: %w", a.Encoding, ps, err)
			}
			pre[a.Encoding] = pm
			res.Pretrain = append(res.Pretrain, *p)
		}
		for _, seed := range opts.Seeds {
			for _, a := range opts.Arms {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				run, err := zhFinetune(ctx, opts, d, a, pre[a.Encoding], ps, seed)
				if err != nil {
					return nil, fmt.Errorf("experiment: long-text-zh %s pretraining seed %d seed %d: %w", a.Name, ps, seed, err)
				}
				res.Runs = append(res.Runs, *run)
			}
		}
	}
	opts.Corpus = nil
	res.Options = opts
	res.WallSeconds = time.Since(start).Seconds()
	summarizeZh(res)
	return res, writeLongTextZh(opts.Out, res)
}

// zhData reads the documents (opts.Corpus, else the poetry corpus, whose
// labels it sets in opts), splits them by author, trains the vocabulary on
// the training split and tokenizes every split. The result holds the
// corpus's statistics, which it also reports on opts.Progress.
func zhData(ctx context.Context, opts *LongTextZhOptions) (*ltData, *ZhResult, error) {
	docs, source := opts.Corpus, "test documents"
	if docs == nil {
		var err error
		if docs, source, err = poetryDocs(ctx, opts.Cache, opts.Docs, opts.Progress); err != nil {
			return nil, nil, err
		}
		opts.Labels = PoetryLabels
	}
	if len(opts.Labels) < 2 {
		return nil, nil, fmt.Errorf("experiment: long-text-zh: %d labels; need at least 2", len(opts.Labels))
	}
	if !(opts.TrainShare > 0 && opts.ValShare >= 0 && opts.TrainShare+opts.ValShare < 1) {
		return nil, nil, fmt.Errorf("experiment: long-text-zh: train share %g and validation share %g of the authors leave no test set", opts.TrainShare, opts.ValShare)
	}
	trainD, valD, testD := splitByGroup(docs, len(opts.Labels), opts.TrainShare, opts.ValShare)
	if len(trainD) == 0 || len(testD) == 0 || (opts.ValShare > 0 && len(valD) == 0) {
		return nil, nil, fmt.Errorf("experiment: long-text-zh: split of %d documents by author gives %d/%d/%d", len(docs), len(trainD), len(valD), len(testD))
	}
	vocab, err := tokenizer.TrainChineseWords(func(yield func(string) bool) {
		for _, d := range trainD {
			if !yield(d.Text) {
				return
			}
		}
	}, tokenizer.ChineseVocabOptions{VocabSize: opts.VocabSize, MinCharFrequency: opts.MinCharFrequency, Workers: max(opts.Threads, 1)})
	if err != nil {
		return nil, nil, fmt.Errorf("experiment: long-text-zh: vocabulary: %w", err)
	}
	tok, err := tokenizer.New(vocab, tokenizer.DefaultConfig(tokenizer.RoFormer))
	if err != nil {
		return nil, nil, fmt.Errorf("experiment: long-text-zh: %w", err)
	}
	res := &ZhResult{Source: source, Documents: len(docs), Vocab: tok.VocabSize()}
	var words, unks, all int
	enc := func(ds []LabelledDoc) [][]int32 {
		out := make([][]int32, len(ds))
		for i, d := range ds {
			for _, id := range tok.EncodeIDs(d.Text) {
				out[i] = append(out[i], int32(id))
				s, _ := tok.IDToToken(id)
				if id == tok.UnkID() {
					unks++
				} else if len([]rune(s)) > 1 {
					words++
				}
				all++
			}
		}
		return out
	}
	d := &ltData{tok: tok, train: enc(trainD), val: enc(valD), test: enc(testD),
		trainY: labelsOf(trainD), valY: labelsOf(valD), testY: labelsOf(testD)}
	res.WordShare, res.UnkShare = float64(words)/float64(all), float64(unks)/float64(all)
	zhCorpusStats(res, d, [3][]LabelledDoc{trainD, valD, testD}, len(opts.Labels))
	say(opts.Progress, "long-text-zh: %s; %d documents; %v/%v/%v train/validation/test by label, %d/%d/%d authors; %d–%d characters, %d–%d tokens (medians %d, %d); vocabulary %d (%.1f%% of tokens are words, %.2f%% [UNK])",
		source, len(docs), res.Split[0], res.Split[1], res.Split[2], res.Authors[0], res.Authors[1], res.Authors[2],
		res.DocChars[0], res.DocChars[2], res.DocTokens[0], res.DocTokens[2], res.DocChars[1], res.DocTokens[1], res.Vocab, 100*res.WordShare, 100*res.UnkShare)
	return d, res, nil
}

// zhCorpusStats records the splits' documents by label and authors, the
// documents' lengths in characters and tokens (min, median, max), the test
// split's majority rate and its documents, authors and labels.
func zhCorpusStats(res *ZhResult, d *ltData, sets [3][]LabelledDoc, nLabels int) {
	var chars, toks []int
	for i, set := range sets {
		res.Split[i] = make([]int, nLabels)
		authors := map[string]bool{}
		for _, doc := range set {
			res.Split[i][doc.Label]++
			authors[doc.Group] = true
			chars = append(chars, len([]rune(doc.Text)))
		}
		res.Authors[i] = len(authors)
	}
	for _, s := range [][][]int32{d.train, d.val, d.test} {
		for _, ids := range s {
			toks = append(toks, len(ids))
		}
	}
	sort.Ints(chars)
	sort.Ints(toks)
	res.DocChars = [3]int{chars[0], chars[len(chars)/2], chars[len(chars)-1]}
	res.DocTokens = [3]int{toks[0], toks[len(toks)/2], toks[len(toks)-1]}
	testD := sets[2]
	res.Majority = float64(slices.Max(res.Split[2])) / float64(len(testD))
	for _, doc := range testD {
		res.Test, res.TestGroups = append(res.Test, doc.Name), append(res.TestGroups, doc.Group)
	}
	res.TestLabels = d.testY
}

// zhConfig is the model of an encoding: the rotary one takes any of the
// arms' lengths, the learned one has PretrainLen rows.
func zhConfig(o LongTextZhOptions, tok *tokenizer.Tokenizer, pe roformer.PositionEncoding) roformer.Config {
	cfg := o.Model
	cfg.VocabSize, cfg.PositionEmbeddingType, cfg.NumLabels = tok.VocabSize(), pe, len(o.Labels)
	cfg.ID2Label, cfg.Label2ID = nil, nil
	cfg.PadTokenID = new(int)
	*cfg.PadTokenID = tok.PadID()
	cfg.MaxPositionEmbeddings = o.PretrainLen
	if pe != roformer.PosLearned {
		for _, a := range o.Arms {
			cfg.MaxPositionEmbeddings = max(cfg.MaxPositionEmbeddings, a.MaxLen)
		}
	}
	return cfg
}

// zhPretrain trains a masked-LM model of encoding pe with the seed on random
// windows of PretrainLen−2 training tokens (15% masked, 80/10/10) and
// returns its model.
func zhPretrain(ctx context.Context, o LongTextZhOptions, d *ltData, pe roformer.PositionEncoding, seed uint64) (*ZhPretrain, *roformer.Model, error) {
	m, err := roformer.New(zhConfig(o, d.tok, pe), roformer.HeadMaskedLM)
	if err != nil {
		return nil, nil, err
	}
	m.Init(seed)
	p := &ZhPretrain{Encoding: pe, Seed: seed, Params: m.NumParams(), HeldOutLoss: Number(math.NaN()), HeldOutAccuracy: Number(math.NaN())}
	say(o.Progress, "long-text-zh: pretraining %s seed %d (%d parameters): %d steps of %d × %d tokens", pe, seed, p.Params, o.Pretrain.Steps, o.PretrainBatch, o.PretrainLen)
	st, err := newStepper(m, o.Pretrain)
	if err != nil {
		return nil, nil, err
	}
	B, L := o.PretrainBatch, o.PretrainLen
	dv := data.Vocab{Size: d.tok.VocabSize(), CLS: d.tok.ClsID(), SEP: d.tok.SepID(), MASK: d.tok.MaskID(), PAD: d.tok.PadID()}
	mk, err := data.NewMasker(dv, data.MaskOptions{}, seed, 0x7a686d6c6d)
	if err != nil {
		return nil, nil, err
	}
	plain, mask := make([]int32, B*L), make([]int32, B*L)
	ids, labels := make([]int32, B*L), make([]int32, B*L)
	batch := &roformer.Batch{InputIDs: ids, AttentionMask: mask, B: B, T: L}
	lab := &roformer.Labels{IDs: labels}
	s := m.NewState(B, L, true)
	rng := rand.New(rand.NewPCG(seed, 0x7a6870726574))
	t0 := time.Now()
	sum, cnt, every := 0.0, 0, max(1, o.Pretrain.Steps/10)
	for step := 0; step < o.Pretrain.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		for r := 0; r < B; r++ {
			doc := d.train[rng.IntN(len(d.train))]
			off := 0
			if n := len(doc) - (L - 2); n > 0 {
				off = rng.IntN(n + 1)
			}
			d.fill(plain, mask, r, L, doc, off)
			mk.Mask(ids[r*L:(r+1)*L], labels[r*L:(r+1)*L], plain[r*L:(r+1)*L])
		}
		if !anyLabel(labels) { // a batch without a masked token has no loss: mask one
			labels[1], ids[1] = plain[1], int32(dv.MASK)
		}
		loss, err := st.step(step, func() (float64, error) {
			r, err := m.ForwardBackward(ctx, s, batch, lab, roformer.StepOptions{Dropout: true, Seed: seed<<32 ^ uint64(step)})
			if err != nil {
				return 0, err
			}
			return r.Loss, nil
		})
		if err != nil {
			return nil, nil, err
		}
		sum += loss
		cnt++
		if (step+1)%every == 0 || step+1 == o.Pretrain.Steps {
			p.LogSteps, p.TrainLoss = append(p.LogSteps, step+1), append(p.TrainLoss, sum/float64(cnt))
			say(o.Progress, "long-text-zh: pretraining %s seed %d step %d: MLM loss %.3f", pe, seed, step+1, sum/float64(cnt))
			sum, cnt = 0, 0
		}
	}
	p.Seconds = time.Since(t0).Seconds()
	// Held-out MLM: the start of every test document, masked once (the
	// number is reported, nothing is chosen by it).
	vm, err := data.NewMasker(dv, data.MaskOptions{}, 0x76616c, 0x7a68)
	if err != nil {
		return nil, nil, err
	}
	var lossSum float64
	var n, correct int
	for lo := 0; lo < len(d.test); lo += B {
		rows := min(B, len(d.test)-lo)
		vb := &roformer.Batch{InputIDs: ids[:rows*L], AttentionMask: mask[:rows*L], B: rows, T: L}
		for r := 0; r < rows; r++ {
			d.fill(plain, mask, r, L, d.test[lo+r], 0)
			vm.Mask(ids[r*L:(r+1)*L], labels[r*L:(r+1)*L], plain[r*L:(r+1)*L])
		}
		l, c, k, err := m.EvaluateMLM(ctx, m.NewState(rows, L, false), vb, labels[:rows*L])
		if err != nil {
			return nil, nil, err
		}
		lossSum, n, correct = lossSum+l, n+c, correct+k
	}
	if n > 0 {
		p.HeldOutLoss, p.HeldOutAccuracy = Number(lossSum/float64(n)), Number(float64(correct)/float64(n))
	}
	say(o.Progress, "long-text-zh: pretraining %s seed %d: held-out MLM loss %.3f, accuracy %.3f, %.0f s", pe, seed, float64(p.HeldOutLoss), float64(p.HeldOutAccuracy), p.Seconds)
	return p, m, nil
}

// zhFinetuneSeed is the seed fine-tuning seed s runs with under pretraining
// seed p: s under p = 1, else s + (p−1)·0x9e3779b9, which changes the low
// 32 bits that the dropout seeds (seed<<32 ^ step) keep.
func zhFinetuneSeed(p, s uint64) uint64 { return s + (p-1)*0x9e3779b9 }

// zhFinetune fine-tunes the encoder of the model pm pretrained with seed
// pseed as a mean-pooled classifier in arm a with the fine-tuning seed
// (zhFinetuneSeed(pseed, seed)), and scores it.
func zhFinetune(ctx context.Context, o LongTextZhOptions, d *ltData, a ZhArm, pm *roformer.Model, pseed, seed uint64) (*ZhRun, error) {
	nan := Number(math.NaN())
	run := &ZhRun{Arm: a.Name, Encoding: a.Encoding, MaxLen: a.MaxLen, Batch: a.Batch, PretrainSeed: pseed, Seed: seed,
		TrainLoss: nan, ValAcc: nan, TestAcc: nan, TestLo: nan, TestHi: nan, TestLoss: nan}
	m, err := roformer.New(zhConfig(o, d.tok, a.Encoding), roformer.HeadTokenCls)
	if err != nil {
		return nil, err
	}
	B, L := a.Batch, a.MaxLen
	batch := &roformer.Batch{InputIDs: make([]int32, B*L), AttentionMask: make([]int32, B*L), B: B, T: L}
	if err := batch.Validate(&m.Config); err != nil {
		run.Skipped = err.Error()
		say(o.Progress, "long-text-zh: %s: impossible: %v", a.Name, err)
		return run, nil
	}
	m.Init(zhFinetuneSeed(pseed, seed))
	if _, err := m.Bind(pm.StateDict(), roformer.BindOptions{AllowMissingHead: true}); err != nil {
		return nil, err
	}
	st, err := newStepper(m, o.Finetune)
	if err != nil {
		return nil, err
	}
	run.Tokens = o.Finetune.Steps * B * L
	say(o.Progress, "long-text-zh: %s pretraining seed %d seed %d: %d steps of %d × %d tokens", a.Name, pseed, seed, o.Finetune.Steps, B, L)
	trainLoss, secs, err := zhTrainClassifier(ctx, o, d, a, m, st, batch, zhFinetuneSeed(pseed, seed))
	if err != nil {
		return nil, err
	}
	run.TrainLoss, run.Seconds = Number(trainLoss), secs
	if err := zhScore(ctx, o, d, m, run); err != nil {
		return nil, err
	}
	return run, nil
}

// zhTrainClassifier runs the fine-tuning steps of arm a on batch and
// returns the mean training loss of the last tenth of them and the seconds
// the steps took.
func zhTrainClassifier(ctx context.Context, o LongTextZhOptions, d *ltData, a ZhArm, m *roformer.Model, st *stepper, batch *roformer.Batch, seed uint64) (float64, float64, error) {
	B, L := batch.B, batch.T
	ids, mask := batch.InputIDs, batch.AttentionMask
	s := m.NewState(B, L, true)
	labels := &roformer.Labels{IDs: make([]int32, B*L)}
	// The documents and windows come from a stream of the seed alone, drawn
	// document by document: the arms of a seed see the same documents in the
	// same order, an arm with twice the windows twice as many of them. Row r
	// of a step takes a document of label r mod the number of labels, so
	// that every step is balanced (the pooled classifier's bias otherwise
	// drifts with the few documents of each step).
	byLabel := make([][]int, len(o.Labels))
	for i, y := range d.trainY {
		byLabel[y] = append(byLabel[y], i)
	}
	for l, idx := range byLabel {
		if len(idx) == 0 {
			return 0, 0, fmt.Errorf("no training document of label %d (%s)", l, o.Labels[l])
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x7a6866696e65))
	t0 := time.Now()
	sum, cnt, tail := 0.0, 0, max(1, o.Finetune.Steps/10)
	for step := 0; step < o.Finetune.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		for r := 0; r < B; r++ {
			pool := byLabel[r%len(byLabel)]
			i := pool[rng.IntN(len(pool))]
			doc := d.train[i]
			u := rng.Float64() // the window's place in the document, as a fraction
			off := 0
			if n := len(doc) - (L - 2); n > 0 {
				off = min(n, int(u*float64(n+1)))
			}
			d.fill(ids, mask, r, L, doc, off)
			for t := 0; t < L; t++ {
				labels.IDs[r*L+t] = -100
				if mask[r*L+t] != 0 {
					labels.IDs[r*L+t] = d.trainY[i]
				}
			}
		}
		loss, err := st.step(step, func() (float64, error) {
			r, err := m.ForwardBackward(ctx, s, batch, labels, roformer.StepOptions{Dropout: true, Seed: seed<<32 ^ uint64(step)})
			if err != nil {
				return 0, err
			}
			return r.Loss, nil
		})
		if err != nil {
			return 0, 0, err
		}
		if step >= o.Finetune.Steps-tail {
			sum += loss
			cnt++
		}
		if (step+1)%max(1, o.Finetune.Steps/5) == 0 {
			say(o.Progress, "long-text-zh: %s run seed %d step %d: loss %.3f", a.Name, seed, step+1, loss)
		}
	}
	return sum / float64(cnt), time.Since(t0).Seconds(), nil
}

// zhScore scores the fine-tuned model m of run on the validation split
// (window accuracy) and the test split (document predictions, their
// accuracy with its Wilson interval, loss and coverage).
func zhScore(ctx context.Context, o LongTextZhOptions, d *ltData, m *roformer.Model, run *ZhRun) error {
	B, L := run.Batch, run.MaxLen
	val := math.NaN()
	if len(d.val) > 0 {
		var err error
		if val, _, _, err = classify(ctx, m, d, d.val, d.valY, B, L); err != nil {
			return err
		}
	}
	preds, loss, cov, err := predictDocs(ctx, m, d, d.test, d.testY, B, L)
	if err != nil {
		return err
	}
	k := 0
	for i, p := range preds {
		if p == d.testY[i] {
			k++
		}
	}
	lo, hi := wilson(k, len(preds))
	run.ValAcc, run.TestAcc, run.TestLo, run.TestHi = Number(val), Number(float64(k)/float64(len(preds))), Number(lo), Number(hi)
	run.TestLoss, run.Coverage, run.Pred = Number(loss), cov, preds
	say(o.Progress, "long-text-zh: %s pretraining seed %d seed %d: train loss %.3f, validation %.3f, test %.3f [%.3f, %.3f], %.0f s", run.Arm, run.PretrainSeed, run.Seed, float64(run.TrainLoss), val, float64(run.TestAcc), lo, hi, run.Seconds)
	return nil
}

// wilson is the Wilson score 95% interval of k successes in n trials.
func wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	const z = 1.959963984540054
	p, nn := float64(k)/float64(n), float64(n)
	c := (p + z*z/(2*nn)) / (1 + z*z/nn)
	h := z / (1 + z*z/nn) * math.Sqrt(p*(1-p)/nn+z*z/(4*nn*nn))
	return c - h, c + h
}

// groupBootstrap returns the 2.5th and 97.5th percentiles of stat over
// nBoot resamples of the groups (with replacement): stat receives, per
// document, how many times its group was drawn.
func groupBootstrap(groups []string, nBoot int, stat func(weight []float64) float64) (lo, hi float64) {
	// One cluster of one run: hierBootstrap draws only the groups.
	return hierBootstrap([][]int{{0}}, groups, nBoot, 0x7a68, func(_, docW []float64) float64 { return stat(docW) })
}

// hierBootstrap returns the 2.5th and 97.5th percentiles of stat over nBoot
// resamples of a two-level design of runs crossed with grouped test
// documents. The runs are clustered (clusters[k] lists the indices of the
// runs of cluster k, e.g. the fine-tuning seeds of pretraining seed k);
// each resample draws len(clusters) clusters with replacement, then within
// every drawn cluster as many of its runs with replacement, and, once for
// all runs, the groups of the documents with replacement. stat receives
// per run how many times it was drawn and per document how many times its
// group was. A level with a single member is not drawn (it is certain), so
// one cluster of one run gives groupBootstrap's resamples (of two or more
// groups) when seed is 0x7a68. The resamples are a function of seed.
func hierBootstrap(clusters [][]int, groups []string, nBoot int, seed uint64, stat func(runW, docW []float64) float64) (lo, hi float64) {
	nRuns := 0
	for _, c := range clusters {
		for _, i := range c {
			nRuns = max(nRuns, i+1)
		}
	}
	if nBoot < 1 || len(groups) == 0 || nRuns == 0 {
		return math.NaN(), math.NaN()
	}
	var names []string
	members := map[string][]int{}
	for i, g := range groups {
		if members[g] == nil {
			names = append(names, g)
		}
		members[g] = append(members[g], i)
	}
	r := rand.New(rand.NewPCG(0x626f6f74, seed))
	draw := func(n int) int {
		if n == 1 {
			return 0
		}
		return r.IntN(n)
	}
	runW, docW := make([]float64, nRuns), make([]float64, len(groups))
	vals := make([]float64, 0, nBoot)
	for range nBoot {
		clear(runW)
		clear(docW)
		for range clusters {
			c := clusters[draw(len(clusters))]
			for range c {
				runW[c[draw(len(c))]]++
			}
		}
		for range names {
			for _, i := range members[names[draw(len(names))]] {
				docW[i]++
			}
		}
		if v := stat(runW, docW); !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return math.NaN(), math.NaN()
	}
	sort.Float64s(vals)
	q := func(p float64) float64 { return vals[min(len(vals)-1, int(p*float64(len(vals))))] }
	return q(0.025), q(0.975)
}

// meanAccuracy is the accuracy of each prediction set under the document
// weights w, averaged over the sets.
func meanAccuracy(preds [][]int32, ys []int32, w []float64) float64 {
	total := 0.0
	for _, p := range preds {
		k, n := 0.0, 0.0
		for i, y := range ys {
			n += w[i]
			if p[i] == y {
				k += w[i]
			}
		}
		total += k / n
	}
	return total / float64(len(preds))
}

// zhKey names a run of an arm: its pretraining and fine-tuning seeds.
type zhKey struct{ p, s uint64 }

// zhUpgrade brings results written before PretrainSeeds to the present
// form: the options' single pretraining seed moved into PretrainSeeds, and
// the pretrainings and runs without one given it.
func zhUpgrade(res *ZhResult) {
	res.Options.upgrade()
	if len(res.Options.PretrainSeeds) != 1 {
		return
	}
	p := res.Options.PretrainSeeds[0]
	for i := range res.Pretrain {
		if res.Pretrain[i].Seed == 0 {
			res.Pretrain[i].Seed = p
		}
	}
	for i := range res.Runs {
		if res.Runs[i].PretrainSeed == 0 {
			res.Runs[i].PretrainSeed = p
		}
	}
}

// zhClusters returns the indices of keys grouped by pretraining seed, in
// the order of the seeds' first appearance.
func zhClusters(keys []zhKey) [][]int {
	var out [][]int
	at := map[uint64]int{}
	for i, k := range keys {
		j, ok := at[k.p]
		if !ok {
			j = len(out)
			at[k.p] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], i)
	}
	return out
}

// zhBootSeed is the seed of the bootstrap over seeds and test authors, the
// authors-only bootstrap's, so that one run gives that one's interval.
const zhBootSeed = 0x7a68

// zhRunStat is the statistic of hierBootstrap over runs: the run-weighted
// mean of the runs' accuracies under the document weights, of a's
// predictions minus b's when b is not nil (b[i] the same run's other arm).
func zhRunStat(a, b [][]int32, ys []int32) func(runW, docW []float64) float64 {
	acc := func(p []int32, w []float64) float64 {
		k, n := 0.0, 0.0
		for i, y := range ys {
			n += w[i]
			if p[i] == y {
				k += w[i]
			}
		}
		return k / n
	}
	return func(runW, docW []float64) float64 {
		sum, n := 0.0, 0.0
		for r, wr := range runW {
			if wr == 0 {
				continue
			}
			v := acc(a[r], docW)
			if b != nil {
				v -= acc(b[r], docW)
			}
			sum, n = sum+wr*v, n+wr
		}
		return sum / n
	}
}

// summarizeZh fills res.Arms and res.Comparisons from res.Runs.
func summarizeZh(res *ZhResult) {
	zhUpgrade(res)
	o := res.Options
	nan := Number(math.NaN())
	preds := map[string]map[zhKey][]int32{}
	res.Arms, res.Comparisons = nil, nil
	for _, a := range o.Arms {
		s := ZhArmSummary{Arm: a.Name, Mean: nan, SD: nan, ValMean: nan, ValSD: nan, Lo: nan, Hi: nan, TLo: nan, THi: nan, SeedsLo: nan, SeedsHi: nan}
		var vals, covs, secs []float64
		var ps [][]int32
		var keys []zhKey
		preds[a.Name] = map[zhKey][]int32{}
		for _, r := range res.Runs {
			if r.Arm != a.Name {
				continue
			}
			if r.Skipped != "" {
				s.Skipped = r.Skipped
				continue
			}
			s.Accs, vals = append(s.Accs, float64(r.TestAcc)), append(vals, float64(r.ValAcc))
			covs, secs, s.Tokens = append(covs, r.Coverage), append(secs, r.Seconds), r.Tokens
			k := zhKey{r.PretrainSeed, r.Seed}
			ps, keys = append(ps, r.Pred), append(keys, k)
			s.PretrainSeeds = append(s.PretrainSeeds, r.PretrainSeed)
			preds[a.Name][k] = r.Pred
		}
		if len(ps) > 0 {
			s.Mean, s.SD = meanStdN(s.Accs)
			sp := SeedSpread(s.Accs)
			s.TLo, s.THi = sp.CILo, sp.CIHi
			s.ValMean, s.ValSD = meanStdN(vals)
			s.Coverage, _ = meanStd(covs)
			s.Seconds, _ = meanStd(secs)
			lo, hi := groupBootstrap(res.TestGroups, o.Bootstrap, func(w []float64) float64 { return meanAccuracy(ps, res.TestLabels, w) })
			s.Lo, s.Hi = Number(lo), Number(hi)
			lo, hi = hierBootstrap(zhClusters(keys), res.TestGroups, o.Bootstrap, zhBootSeed, zhRunStat(ps, nil, res.TestLabels))
			s.SeedsLo, s.SeedsHi = Number(lo), Number(hi)
		}
		res.Arms = append(res.Arms, s)
	}
	// Every pair of arms: the longer minus the shorter, at equal lengths
	// the one listed first minus the other.
	for i, a := range o.Arms {
		for _, b := range o.Arms[i+1:] {
			var pa, pb [][]int32
			var keys []zhKey
			c := ZhComparison{A: a.Name, B: b.Name, Mean: nan, SD: nan, Lo: nan, Hi: nan, SeedsLo: nan, SeedsHi: nan}
			if b.MaxLen > a.MaxLen {
				c.A, c.B = b.Name, a.Name
			}
			for _, p := range o.PretrainSeeds {
				for _, seed := range o.Seeds {
					k := zhKey{p, seed}
					x, y := preds[c.A][k], preds[c.B][k]
					if x == nil || y == nil {
						continue
					}
					pa, pb, keys = append(pa, x), append(pb, y), append(keys, k)
					diff := meanAccuracy([][]int32{x}, res.TestLabels, ones(len(x))) - meanAccuracy([][]int32{y}, res.TestLabels, ones(len(y)))
					c.Diffs, c.PretrainSeeds = append(c.Diffs, diff), append(c.PretrainSeeds, p)
					if diff > 0 {
						c.Wins++
					}
				}
			}
			if len(pa) == 0 {
				continue
			}
			c.Mean, c.SD = meanStdN(c.Diffs)
			lo, hi := groupBootstrap(res.TestGroups, o.Bootstrap, func(w []float64) float64 {
				return meanAccuracy(pa, res.TestLabels, w) - meanAccuracy(pb, res.TestLabels, w)
			})
			c.Lo, c.Hi = Number(lo), Number(hi)
			lo, hi = hierBootstrap(zhClusters(keys), res.TestGroups, o.Bootstrap, zhBootSeed, zhRunStat(pa, pb, res.TestLabels))
			c.SeedsLo, c.SeedsHi = Number(lo), Number(hi)
			if len(c.Diffs) >= 2 {
				zero := make([]float64, len(c.Diffs))
				if pt, err := PairedDiff(c.Diffs, zero); err == nil {
					c.Paired = &pt
				}
			}
			res.Comparisons = append(res.Comparisons, c)
		}
	}
}

func ones(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// writeLongTextZh writes the results folder dir; the plot also shows the
// arms of the results in also.
func writeLongTextZh(dir string, res *ZhResult, also ...*ZhResult) error {
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	var rows [][]string
	for _, r := range res.Runs {
		rows = append(rows, []string{r.Arm, string(r.Encoding), strconv.Itoa(r.MaxLen), strconv.Itoa(r.Batch), strconv.FormatUint(r.PretrainSeed, 10), strconv.FormatUint(r.Seed, 10),
			strconv.Itoa(r.Tokens), ftoa(float64(r.TrainLoss)), ftoa(float64(r.ValAcc)), ftoa(float64(r.TestAcc)), ftoa(float64(r.TestLo)), ftoa(float64(r.TestHi)),
			ftoa(float64(r.TestLoss)), ftoa(r.Coverage), ftoa(r.Seconds), r.Skipped})
	}
	if err := writeCSV(dir, "runs.csv", []string{"arm", "encoding", "max_len", "batch", "pretrain_seed", "seed", "train_tokens", "train_loss", "val_accuracy",
		"test_accuracy", "test_wilson_lo", "test_wilson_hi", "test_loss", "test_token_coverage", "seconds", "skipped"}, rows); err != nil {
		return err
	}
	// The plot: test accuracy against the maximum length, one series per
	// (encoding, training tokens) family, of this folder's arms and of the
	// arms of the folders in also (a baseline run on its own, with its own
	// pretraining); error bars the bootstrap interval over seeds and test
	// authors, small dots the runs. The families are drawn side by side, a little
	// apart in x, so that bars at one length do not hide each other.
	var ss []series
	var seeds [][][]float64 // per family, per point: the seeds' accuracies
	fam := map[string]int{}
	for _, r := range append([]*ZhResult{res}, also...) {
		for i, a := range r.Options.Arms {
			if i >= len(r.Arms) {
				break
			}
			s := r.Arms[i]
			if s.Skipped != "" || math.IsNaN(float64(s.Mean)) {
				continue
			}
			name := fmt.Sprintf("%s, %d training tokens", a.Encoding, s.Tokens)
			k, ok := fam[name]
			if !ok {
				k = len(ss)
				fam[name] = k
				ss = append(ss, series{name: name, points: true})
				seeds = append(seeds, nil)
			}
			ss[k].x, ss[k].y = append(ss[k].x, float64(a.MaxLen)), append(ss[k].y, float64(s.Mean))
			ss[k].lo, ss[k].hi = append(ss[k].lo, float64(s.SeedsLo)), append(ss[k].hi, float64(s.SeedsHi))
			seeds[k] = append(seeds[k], s.Accs)
		}
	}
	for k := range ss { // the x values in order, for the lines and bands
		idx := make([]int, len(ss[k].x))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(i, j int) bool { return ss[k].x[idx[i]] < ss[k].x[idx[j]] })
		perm := func(v []float64) []float64 {
			out := make([]float64, len(v))
			for i, j := range idx {
				out[i] = v[j]
			}
			return out
		}
		sd := make([][]float64, len(idx))
		for i, j := range idx {
			sd[i] = seeds[k][j]
		}
		ss[k].x, ss[k].y, ss[k].lo, ss[k].hi, seeds[k] = perm(ss[k].x), perm(ss[k].y), perm(ss[k].lo), perm(ss[k].hi), sd
	}
	p, err := runsPlot(fmt.Sprintf("Tang or Song? Test accuracy, mean of %d runs (bars: 95%% bootstrap over seeds and test authors; small dots: the runs)", len(res.Options.PretrainSeeds)*len(res.Options.Seeds)), "maximum length (tokens; arms drawn side by side)", "test accuracy", ss, seeds, 0.02, 0)
	if err != nil {
		return err
	}
	if err := savePlot(p, dir, "accuracy"); err != nil {
		return err
	}
	return writeFile(dir, "summary.md", []byte(zhSummary(res)))
}

// zhSummary is summary.md.
func zhSummary(res *ZhResult) string {
	o := res.Options
	var md strings.Builder
	var byLabel []string
	for _, sp := range res.Split {
		var c []string
		for _, n := range sp {
			c = append(c, strconv.Itoa(n))
		}
		byLabel = append(byLabel, strings.Join(c, "/"))
	}
	split := fmt.Sprintf("%d / %d / %d documents (%s: %s) and %d / %d / %d authors in train / validation / test",
		sum(res.Split[0]), sum(res.Split[1]), sum(res.Split[2]), strings.Join(o.Labels, "/"), strings.Join(byLabel, ", "), res.Authors[0], res.Authors[1], res.Authors[2])
	if sum(res.Split[1]) == 0 {
		split = fmt.Sprintf("%d / %d documents (%s: %s, %s) and %d / %d authors in train / test (no validation set: nothing is selected)",
			sum(res.Split[0]), sum(res.Split[2]), strings.Join(o.Labels, "/"), byLabel[0], byLabel[2], res.Authors[0], res.Authors[2])
	}
	fmt.Fprintf(&md, "%s. Documents: an author's poems concatenated to ≥ %d characters (≤ %d an author), classes balanced, split by author: %s; %d–%d characters (median %d), %d–%d tokens (median %d). Tokenizer: RoFormer's jieba + characters, %d tokens trained on the training documents (%.1f%% of the tokens are words of 2+ characters, %.2f%% [UNK]).\n\n",
		res.Source, o.Docs.MinChars, o.Docs.PerAuthor, split, res.DocChars[0], res.DocChars[2], res.DocChars[1], res.DocTokens[0], res.DocTokens[2], res.DocTokens[1],
		res.Vocab, 100*res.WordShare, 100*res.UnkShare)
	nP, nS := len(o.PretrainSeeds), len(o.Seeds)
	fmt.Fprintf(&md, "Model: %d layers × hidden %d (%d heads). Pretraining (%s %s), one per encoding and seed: masked LM on the training documents, %d steps of %d × %d tokens, peak rate %g.",
		o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.NumAttentionHeads, plural(nP, "seed", "seeds"), joinUints(o.PretrainSeeds), o.Pretrain.Steps, o.PretrainBatch, o.PretrainLen, o.Pretrain.LR)
	for _, p := range res.Pretrain {
		fmt.Fprintf(&md, " %s seed %d: held-out (test documents) MLM loss %.3f, accuracy %.3f (%.0f s).", p.Encoding, p.Seed, float64(p.HeldOutLoss), float64(p.HeldOutAccuracy), p.Seconds)
	}
	wall := fmt.Sprintf("Wall time %.0f s", res.WallSeconds)
	if len(res.MergedFrom) > 0 {
		var parts []string
		for i, d := range res.MergedFrom {
			parts = append(parts, fmt.Sprintf("%s %.0f s", path.Base(d), res.PartSeconds[i]))
		}
		wall = fmt.Sprintf("Joined from %d runs made side by side (%s)", len(res.MergedFrom), strings.Join(parts, ", "))
	}
	fmt.Fprintf(&md, " Fine-tuning: %d steps, peak rate %g, %s %s under every pretraining seed (%d runs an arm). Majority class: %.1f%% of the %d test documents. %s.\n\n",
		o.Finetune.Steps, o.Finetune.LR, plural(nS, "seed", "seeds"), joinUints(o.Seeds), nP*nS, 100*res.Majority, len(res.TestLabels), wall)

	// What the intervals are.
	if nP == 1 {
		fmt.Fprintf(&md, "Three 95%% intervals are given for every mean. **Seeds and authors** (the one the verdicts go by): a bootstrap that resamples the fine-tuning seeds and the test authors, %d times; with one pretraining seed it holds the pretraining fixed.", o.Bootstrap)
	} else {
		fmt.Fprintf(&md, "Three 95%% intervals are given for every mean. **Seeds and authors** (the one the verdicts go by): a bootstrap that resamples the %d pretraining seeds, then the fine-tuning seeds within each drawn one, and the test authors, %d times: the spread another pretraining, another fine-tuning and another set of authors could give.", nP, o.Bootstrap)
	}
	md.WriteString(" **Authors only**: the bootstrap over the test authors with every run held fixed, the variation of the test set alone. **t over runs**: Student's t over the runs' accuracies, the runs taken as independent and the test set fixed.\n\n")

	if len(res.Comparisons) > 0 {
		md.WriteString("## What the intervals allow\n\n")
		for _, c := range res.Comparisons {
			md.WriteString("- " + zhVerdict(c, nP) + "\n")
		}
		md.WriteString("\n")
	}

	vals := map[string][]float64{}
	for _, r := range res.Runs {
		if r.Skipped == "" {
			vals[r.Arm] = append(vals[r.Arm], float64(r.ValAcc))
		}
	}
	hasVal := sum(res.Split[1]) > 0
	valHead, valSep, valSkip := "", "", ""
	if hasVal {
		valHead, valSep, valSkip = " validation accuracy |", "---|", " impossible |"
	}
	md.WriteString("## Arms\n\n")
	fmt.Fprintf(&md, "| arm | encoding | max length | windows a step | training tokens |%s test accuracy (mean ± sd over runs) | per run (pretraining seed: fine-tuning seeds) | 95%% CI, seeds and authors | 95%% CI, authors only | 95%% CI, t over runs | test tokens seen | s per run |\n|---|---|---|---|---|%s---|---|---|---|---|---|---|\n", valHead, valSep)
	for i, a := range o.Arms {
		s := res.Arms[i]
		if s.Skipped != "" {
			fmt.Fprintf(&md, "| %s | %s | %d | %d | – |%s impossible: %s | – | – | – | – | – | – |\n", a.Name, a.Encoding, a.MaxLen, a.Batch, valSkip, strings.TrimPrefix(s.Skipped, "roformer: "))
			continue
		}
		val := ""
		if hasVal {
			val = " " + SeedSpread(vals[a.Name]).Format(3) + " |"
		}
		fmt.Fprintf(&md, "| %s | %s | %d | %d | %d |%s %s | %s | %s | %s | %s | %.0f%% | %.0f |\n", a.Name, a.Encoding, a.MaxLen, a.Batch, s.Tokens,
			val, SeedSpread(s.Accs).Format(3), perRun(s.Accs, s.PretrainSeeds, "%.3f"),
			fmtCI(s.SeedsLo, s.SeedsHi, "%.3f"), fmtCI(s.Lo, s.Hi, "%.3f"), fmtCI(s.TLo, s.THi, "%.3f"), 100*s.Coverage, s.Seconds)
	}
	if len(res.Comparisons) > 0 {
		md.WriteString("\n## Comparisons\n\n| comparison (paired by run and test document) | difference (mean ± sd over runs) | per run (pretraining seed: fine-tuning seeds) | 95% CI, seeds and authors | 95% CI, authors only | runs ahead | paired t over runs | 95% CI, t over runs | sign-flip p |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range res.Comparisons {
			tt, tci, sf := "–", "–", "–"
			if c.Paired != nil {
				tt = fmt.Sprintf("t(%d) = %.2f, %s", c.Paired.DF, float64(c.Paired.T), pIs(float64(c.Paired.PT)))
				tci = fmtCI(c.Paired.Diff.CILo, c.Paired.Diff.CIHi, "%+.3f")
				sf = fmtP(float64(c.Paired.PSignFlip))
			}
			fmt.Fprintf(&md, "| %s − %s | %s | %s | %s | %s | %d of %d | %s | %s | %s |\n", c.A, c.B, SeedSpread(c.Diffs).Format(3),
				perRun(c.Diffs, c.PretrainSeeds, "%+.3f"), fmtCI(c.SeedsLo, c.SeedsHi, "%+.3f"), fmtCI(c.Lo, c.Hi, "%+.3f"), c.Wins, len(c.Diffs), tt, tci, sf)
		}
	}
	return md.String()
}

// zhVerdict is the sentence of comparison c: its heading says what the
// interval over seeds and authors allows (a ahead, b ahead, or not shown
// when it spans 0), and the sentence gives that interval beside the
// authors-only one and the paired t over runs, saying where they disagree.
func zhVerdict(c ZhComparison, nP int) string {
	lo, hi := float64(c.SeedsLo), float64(c.SeedsHi)
	alo, ahi := float64(c.Lo), float64(c.Hi)
	pts := func(x float64) string { return fmt.Sprintf("%+.1f", 100*x) }
	excl := func(lo, hi float64) bool { return lo > 0 || hi < 0 }
	var head string
	switch {
	case math.IsNaN(lo) || math.IsNaN(hi):
		head = fmt.Sprintf("**%s − %s: no interval.**", c.A, c.B)
	case lo > 0:
		head = fmt.Sprintf("**%s ahead of %s.**", c.A, c.B)
	case hi < 0:
		head = fmt.Sprintf("**%s ahead of %s.**", c.B, c.A)
	default:
		head = fmt.Sprintf("**%s − %s: not shown.**", c.A, c.B)
	}
	s := fmt.Sprintf("%s %s − %s = %s points over %d runs; over seeds and authors [%s, %s]", head, c.A, c.B, pts(float64(c.Mean)), len(c.Diffs), pts(lo), pts(hi))
	if !math.IsNaN(lo) && !excl(lo, hi) {
		s += ", which spans 0"
	}
	s += fmt.Sprintf("; authors only [%s, %s]", pts(alo), pts(ahi))
	if c.Paired != nil {
		s += "; paired t over runs " + pIs(float64(c.Paired.PT))
	}
	s += "."
	switch {
	case math.IsNaN(lo) || math.IsNaN(alo):
	case excl(alo, ahi) && !excl(lo, hi):
		s += " The authors-only interval excludes 0, but with the seeds resampled the difference is within what another seed gives: not shown."
	case !excl(alo, ahi) && excl(lo, hi):
		s += " The authors-only interval spans 0 but the one over seeds and authors does not (the seeds' runs differ little and agree)."
	}
	if nP == 1 && excl(lo, hi) {
		s += " One pretraining seed: it may hold for this pretraining only."
	}
	return s
}

// perRun writes values grouped by their pretraining seed,
// "1: 0.851, 0.886; 2: 0.870", in the format f; without the seeds' names
// when there is one pretraining seed.
func perRun(xs []float64, seeds []uint64, f string) string {
	var groups []string
	var cur []string
	for i, x := range xs {
		if i > 0 && seeds[i] != seeds[i-1] {
			groups, cur = append(groups, strings.Join(cur, ", ")), nil
		}
		if len(cur) == 0 && len(seeds) > 0 && seeds[len(seeds)-1] != seeds[0] {
			cur = append(cur, fmt.Sprintf("%d: "+f, seeds[i], x))
			continue
		}
		cur = append(cur, fmt.Sprintf(f, x))
	}
	if len(cur) > 0 {
		groups = append(groups, strings.Join(cur, ", "))
	}
	return strings.Join(groups, "; ")
}

// pIs writes "p = 0.19", or "p < 0.0001" (fmtP).
func pIs(p float64) string {
	if s := fmtP(p); strings.HasPrefix(s, "<") {
		return "p " + s
	}
	return "p = " + fmtP(p)
}

// fmtCI writes [lo, hi] in the format f, "–" when either is NaN.
func fmtCI(lo, hi Number, f string) string {
	if math.IsNaN(float64(lo)) || math.IsNaN(float64(hi)) {
		return "–"
	}
	return fmt.Sprintf("["+f+", "+f+"]", float64(lo), float64(hi))
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// joinUints writes 1, 2, 3.
func joinUints(xs []uint64) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.FormatUint(x, 10))
	}
	return strings.Join(s, ", ")
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

// ResummarizeLongTextZh rewrites the summaries, CSV and plot of the results
// folder dir from its results.json, training nothing. The plot also shows
// the arms of the results folders in also (e.g. the learned-table baseline,
// run on its own with its own pretraining); their files are not changed.
func ResummarizeLongTextZh(dir string, also ...string) (*ZhResult, error) {
	var res ZhResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	summarizeZh(&res)
	var more []*ZhResult
	for _, d := range also {
		var r ZhResult
		if err := readResults(d, &r); err != nil {
			return nil, err
		}
		summarizeZh(&r)
		more = append(more, &r)
	}
	return &res, writeLongTextZh(dir, &res, more...)
}

// MergeLongTextZh joins the results folders dirs, runs of the same settings
// with other pretraining or fine-tuning seeds (made side by side), into the
// results folder out, and summarises them there, training nothing. The
// parts must agree on everything but the seeds and threads (the test
// documents too), and no (arm, pretraining seed, fine-tuning seed) run or
// (encoding, pretraining seed) pretraining may be in two of them. The
// joined wall time is the longest part's; each part's is kept.
func MergeLongTextZh(out string, dirs []string) (*ZhResult, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("experiment: long-text-zh: no results folder to merge")
	}
	settings := func(r *ZhResult) ([]byte, error) {
		o := r.Options
		o.PretrainSeeds, o.Seeds, o.Threads = nil, nil, 0
		return json.Marshal(struct {
			O    LongTextZhOptions
			Test []string
		}{o, r.Test})
	}
	var res *ZhResult
	var ref []byte
	runs, pres := map[string]string{}, map[string]string{}
	for _, dir := range dirs {
		var part ZhResult
		if err := readResults(dir, &part); err != nil {
			return nil, err
		}
		zhUpgrade(&part)
		key, err := settings(&part)
		if err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
		for _, r := range part.Runs {
			k := fmt.Sprintf("%s pretraining seed %d seed %d", r.Arm, r.PretrainSeed, r.Seed)
			if d, ok := runs[k]; ok {
				return nil, fmt.Errorf("experiment: long-text-zh: run %s is in both %s and %s", k, d, dir)
			}
			runs[k] = dir
		}
		for _, p := range part.Pretrain {
			k := fmt.Sprintf("%s seed %d", p.Encoding, p.Seed)
			if d, ok := pres[k]; ok {
				return nil, fmt.Errorf("experiment: long-text-zh: pretraining %s is in both %s and %s", k, d, dir)
			}
			pres[k] = dir
		}
		if res == nil {
			res, ref = &part, key
			res.MergedFrom, res.PartSeconds = nil, nil
		} else {
			if !bytes.Equal(key, ref) {
				return nil, fmt.Errorf("experiment: long-text-zh: %s was run with other settings or test documents than %s (only the seeds may differ)", dir, dirs[0])
			}
			for _, p := range part.Options.PretrainSeeds {
				if !slices.Contains(res.Options.PretrainSeeds, p) {
					res.Options.PretrainSeeds = append(res.Options.PretrainSeeds, p)
				}
			}
			for _, s := range part.Options.Seeds {
				if !slices.Contains(res.Options.Seeds, s) {
					res.Options.Seeds = append(res.Options.Seeds, s)
				}
			}
			res.Pretrain = append(res.Pretrain, part.Pretrain...)
			res.Runs = append(res.Runs, part.Runs...)
			res.WallSeconds = max(res.WallSeconds, part.WallSeconds)
		}
		res.MergedFrom = append(res.MergedFrom, dir)
		res.PartSeconds = append(res.PartSeconds, part.WallSeconds)
	}
	summarizeZh(res)
	return res, writeLongTextZh(out, res)
}
