package experiment

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/data/corpus"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// The tasks of the extrapolation experiment.
const (
	ExtrapCharLM = "char-lm" // byte-level causal LM on the char-lm text
	ExtrapMLM    = "mlm"     // masked LM on the built-in corpus
)

// The rotary scalings the extrapolation experiment applies at inference.
const (
	ScaleNone    = "none"    // the trained model as it is
	ScaleLinear  = "linear"  // position interpolation, factor L/TrainLen
	ScaleDynamic = "dynamic" // dynamic NTK, a fixed factor (DynamicFactor)
	ScaleYaRN    = "yarn"    // YaRN, factor L/TrainLen, original length TrainLen
)

// ExtrapFineTune is the short fine-tune at a longer length that the
// position-interpolation and YaRN papers do: the trained rotary model, with
// a fixed scaling of Factor (original length TrainLen), trained Steps more
// steps of Batch windows of Len tokens, then evaluated at every length with
// that same scaling.
type ExtrapFineTune struct {
	Len     int      `json:"len"`
	Factor  float64  `json:"factor"`
	Methods []string `json:"methods"` // none (plain fine-tune, no scaling), linear, yarn, dynamic
	Schedule
	Batch int `json:"batch"`
}

// ExtrapolateOptions configure the length-extrapolation experiment (issue
// #16; the paper's claim, §3.4, that RoPE has "the flexibility of being
// expanded to any sequence length"): small models trained at TrainLen
// tokens, evaluated at longer lengths with and without rotary scaling.
type ExtrapolateOptions struct {
	Tasks     []string                    `json:"tasks"`     // char-lm, mlm
	Encodings []roformer.PositionEncoding `json:"encodings"` // rotary and the absolute baselines
	// ScaleEmbedding sets scale_embedding (word embeddings ×√E) in the
	// models of the absolute encodings, whose curves are then named
	// "sinusoidal ×√E" and "learned ×√E"; rotary models are left alone.
	ScaleEmbedding bool `json:"scale_embedding,omitempty"`
	// Methods are the rotary scalings evaluated on the trained rotary model
	// (none, linear, dynamic, yarn); the baselines are evaluated as they are.
	Methods       []string `json:"methods"`
	DynamicFactor float64  `json:"dynamic_factor"`
	TrainLen      int      `json:"train_len"`
	EvalLengths   []int    `json:"eval_lengths"`
	// EvalTokens is the held-out text evaluated at every length: its first
	// EvalTokens bytes (char-lm) or WordPiece tokens (mlm, with masks drawn
	// once), cut into EvalTokens/L windows of L tokens, so that every length
	// scores the same text and only the context differs.
	EvalTokens int             `json:"eval_tokens"`
	Seeds      []uint64        `json:"seeds"`
	Model      roformer.Config `json:"model"`
	Schedule                   // training at TrainLen
	Batch      int             `json:"batch"`
	VocabSize  int             `json:"mlm_vocab_size"` // WordPiece trained on the built-in corpus
	FineTune   ExtrapFineTune  `json:"fine_tune"`      // Steps 0: none

	// Text and Docs, when set, replace the char-lm text and the built-in
	// corpus (tests); TextName names the text.
	Text     []byte          `json:"-"`
	TextName string          `json:"text"`
	Docs     []data.Document `json:"-"`

	Out      string    `json:"-"`
	Cache    string    `json:"-"`
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"`
}

// DefaultExtrapolate returns the full settings (not run here): both tasks,
// rotary, sinusoidal and learned, the small model without dropout trained
// at 128 tokens for 1000 steps of 16 windows, evaluated at 128 … 4096 on
// 32768 held-out tokens, three seeds, and fine-tunes of 100 steps at 512
// tokens with factor 4.
func DefaultExtrapolate(out string) ExtrapolateOptions {
	m := smallModel()
	m.HiddenDropoutProb, m.AttentionProbsDropoutProb = 0, 0
	return ExtrapolateOptions{
		Tasks:     []string{ExtrapCharLM, ExtrapMLM},
		Encodings: []roformer.PositionEncoding{roformer.PosRotary, roformer.PosSinusoidal, roformer.PosLearned},
		Methods:   []string{ScaleNone, ScaleLinear, ScaleDynamic, ScaleYaRN}, DynamicFactor: 2,
		TrainLen: 128, EvalLengths: []int{128, 256, 512, 1024, 2048, 4096}, EvalTokens: 32768,
		Seeds: []uint64{1, 2, 3}, Model: m,
		Schedule: Schedule{Steps: 1000, Warmup: 100, LR: 1e-3, WeightDecay: 0.01, Clip: 1},
		Batch:    16, VocabSize: 4000,
		FineTune: ExtrapFineTune{Len: 512, Factor: 4, Methods: []string{ScaleNone, ScaleLinear, ScaleYaRN},
			Schedule: Schedule{Steps: 100, Warmup: 10, LR: 3e-4, WeightDecay: 0.01, Clip: 1}, Batch: 4},
		Out: out,
	}
}

// QuickExtrapolate is DefaultExtrapolate shrunk to about ten minutes on
// two cores: the small model (2 layers, hidden 128, 4 heads of 32) trained
// 600 steps of 8 windows, a 2000-piece vocabulary, 16384 held-out tokens
// per length (all six lengths, up to 4096), fine-tunes of 60 steps of
// 2 × 512 tokens.
func QuickExtrapolate(out string) ExtrapolateOptions {
	o := DefaultExtrapolate(out)
	o.Steps, o.Warmup, o.Batch, o.VocabSize, o.EvalTokens = 600, 60, 8, 2000, 16384
	o.FineTune.Steps, o.FineTune.Warmup, o.FineTune.Batch = 60, 6, 2
	return o
}

// ExtrapCurve is one model's held-out loss at every evaluation length.
type ExtrapCurve struct {
	Variant   string `json:"variant"` // e.g. "rotary+yarn", "learned", "rotary+linear×4 ft512"
	Encoding  string `json:"encoding"`
	Method    string `json:"method"` // scaling; none for the baselines
	FineTuned bool   `json:"fine_tuned"`
	// Loss is the mean cross-entropy (nats) per predicted token at each
	// length; null where the model cannot run (learned past its table).
	Loss   []Number `json:"loss"`
	Tokens []int    `json:"tokens"` // predictions scored at each length
	NA     string   `json:"na,omitempty"`
}

// ExtrapRun is one task and seed: the trained models' curves.
type ExtrapRun struct {
	Task         string             `json:"task"`
	Seed         uint64             `json:"seed"`
	Params       map[string]int     `json:"params"`        // per encoding
	TrainLoss    map[string]float64 `json:"train_loss"`    // per encoding: mean over the last tenth of the steps
	TrainSeconds map[string]float64 `json:"train_seconds"` // per encoding, and per fine-tune variant
	Curves       []ExtrapCurve      `json:"curves"`
	Seconds      float64            `json:"seconds"`
}

// ExtrapSummary is one (task, variant) over the seeds.
type ExtrapSummary struct {
	Task    string   `json:"task"`
	Variant string   `json:"variant"`
	Loss    []Number `json:"loss_mean"` // per length
	LossStd []Number `json:"loss_std"`
	PPL     []Number `json:"ppl_mean"` // exp(loss), averaged over the seeds
	PPLStd  []Number `json:"ppl_std"`
	N       []int    `json:"n"` // seeds with a number at each length
}

// ExtrapolateResult is results.json.
type ExtrapolateResult struct {
	Options     ExtrapolateOptions `json:"options"`
	Sources     map[string]string  `json:"sources"`
	Runs        []ExtrapRun        `json:"runs"`
	Summary     []ExtrapSummary    `json:"summary"`
	Complete    bool               `json:"complete"` // every task and seed ran
	WallSeconds float64            `json:"wall_seconds"`
}

// extrapTask is one task's data.
type extrapTask struct {
	name   string
	causal bool
	vocab  int
	train  []int32 // token stream for training windows
	// eval inputs and labels (labels −100 where not scored; for the causal
	// task the labels are the inputs, shifted by the model).
	evalIn, evalLab []int32
	dv              data.Vocab // mlm only
	source          string
}

// window writes row r of a batch of length L: the causal task's bytes, or
// [CLS] + L−2 tokens + [SEP] (mlm), from stream src/lab at off.
func (t *extrapTask) window(ids, labels []int32, r, L int, src, lab []int32, off int) {
	row, lr := ids[r*L:(r+1)*L], labels[r*L:(r+1)*L]
	if t.causal {
		copy(row, src[off:off+L])
		copy(lr, src[off:off+L])
		return
	}
	row[0], lr[0] = int32(t.dv.CLS), data.IgnoreIndex
	copy(row[1:L-1], src[off:off+L-2])
	copy(lr[1:L-1], lab[off:off+L-2])
	row[L-1], lr[L-1] = int32(t.dv.SEP), data.IgnoreIndex
}

// body is the stream tokens a window of L holds.
func (t *extrapTask) body(L int) int {
	if t.causal {
		return L
	}
	return L - 2
}

// Extrapolate trains, per seed and task, one model per encoding at
// TrainLen, evaluates the held-out loss at every length (the rotary model
// with each scaling, the baselines as they are), fine-tunes the rotary
// model at FineTune.Len and evaluates again. It writes results.json,
// summary.md, curves.csv and loss plots after every (seed, task), so an
// interrupted run leaves what finished.
func Extrapolate(ctx context.Context, opts ExtrapolateOptions) (*ExtrapolateResult, error) {
	start := time.Now()
	if opts.Out == "" {
		return nil, fmt.Errorf("experiment: extrapolate: no output folder")
	}
	if len(opts.Tasks) == 0 || len(opts.Seeds) == 0 || len(opts.EvalLengths) == 0 {
		return nil, fmt.Errorf("experiment: extrapolate: %d tasks, %d seeds, %d lengths; need at least one of each", len(opts.Tasks), len(opts.Seeds), len(opts.EvalLengths))
	}
	if opts.TrainLen < 4 {
		return nil, fmt.Errorf("experiment: extrapolate: training length %d is too short", opts.TrainLen)
	}
	maxL := opts.TrainLen
	for _, L := range opts.EvalLengths {
		if L < opts.TrainLen {
			return nil, fmt.Errorf("experiment: extrapolate: evaluation length %d is below the training length %d", L, opts.TrainLen)
		}
		maxL = max(maxL, L)
	}
	if opts.EvalTokens < maxL {
		return nil, fmt.Errorf("experiment: extrapolate: %d evaluation tokens do not fill one window of %d", opts.EvalTokens, maxL)
	}
	for _, m := range append(append([]string{}, opts.Methods...), opts.FineTune.Methods...) {
		switch m {
		case ScaleNone, ScaleLinear, ScaleDynamic, ScaleYaRN:
		default:
			return nil, fmt.Errorf("experiment: extrapolate: unknown scaling %q (valid: none, linear, dynamic, yarn)", m)
		}
	}
	tasks := map[string]*extrapTask{}
	res := &ExtrapolateResult{Options: opts, Sources: map[string]string{}}
	res.Options.Text, res.Options.Docs = nil, nil
	for _, name := range opts.Tasks {
		var t *extrapTask
		var err error
		switch name {
		case ExtrapCharLM:
			t, err = charTask(ctx, opts)
		case ExtrapMLM:
			t, err = mlmTask(opts)
		default:
			return nil, fmt.Errorf("experiment: extrapolate: unknown task %q (valid: char-lm, mlm)", name)
		}
		if err != nil {
			return nil, fmt.Errorf("experiment: extrapolate %s: %w", name, err)
		}
		if len(t.train) < opts.FineTune.Len+1 || len(t.train) < opts.TrainLen+1 {
			return nil, fmt.Errorf("experiment: extrapolate %s: %d training tokens are too few", name, len(t.train))
		}
		tasks[name] = t
		res.Sources[name] = t.source
		say(opts.Progress, "extrapolate: %s: %s; %d training tokens, %d evaluated", name, t.source, len(t.train), len(t.evalIn))
	}
	for _, seed := range opts.Seeds {
		for _, name := range opts.Tasks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			run, err := extrapRun(ctx, opts, tasks[name], seed)
			if err != nil {
				return nil, fmt.Errorf("experiment: extrapolate %s seed %d: %w", name, seed, err)
			}
			res.Runs = append(res.Runs, *run)
			res.WallSeconds = time.Since(start).Seconds()
			res.Complete = len(res.Runs) == len(opts.Seeds)*len(opts.Tasks)
			if err := writeExtrapolate(opts.Out, res); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// charTask is the char-lm text, split 90/5/5 as the char-lm experiment
// does; the evaluation text is the first EvalTokens bytes of the test split.
func charTask(ctx context.Context, o ExtrapolateOptions) (*extrapTask, error) {
	text, source := o.Text, o.TextName
	if text == nil {
		var err error
		if text, source, err = charText(ctx, o.Cache, o.Progress); err != nil {
			return nil, err
		}
	}
	n := len(text)
	trainB, testB := text[:n*90/100], text[n*95/100:]
	if len(testB) < o.EvalTokens {
		return nil, fmt.Errorf("the test split's %d bytes are fewer than %d evaluation tokens", len(testB), o.EvalTokens)
	}
	t := &extrapTask{name: ExtrapCharLM, causal: true, vocab: 256, source: source + " (train: first 90%; evaluation: the start of the last 5%)"}
	t.train = make([]int32, len(trainB))
	for i, b := range trainB {
		t.train[i] = int32(b)
	}
	t.evalIn = make([]int32, o.EvalTokens)
	for i := range t.evalIn {
		t.evalIn[i] = int32(testB[i])
	}
	t.evalLab = t.evalIn
	return t, nil
}

// mlmTask is the built-in corpus as one WordPiece stream (documents joined
// by [SEP]); the first 95% trains, the evaluation text is the first
// EvalTokens tokens of the rest, masked once (15%, 80/10/10) with a fixed
// seed, so every model and length is scored on the same masked tokens.
func mlmTask(o ExtrapolateOptions) (*extrapTask, error) {
	docs, source := o.Docs, "test documents"
	if docs == nil {
		var err error
		if docs, err = corpus.Builtin(); err != nil {
			return nil, err
		}
		source = "built-in corpus (Moby-Dick + State of the Union 1934–2021) as one stream, documents joined by [SEP]"
	}
	to := tokenizer.DefaultTrainOptions()
	to.VocabSize, to.Workers = o.VocabSize, max(o.Threads, 1)
	vocab, err := tokenizer.TrainWordPiece(func(yield func(string) bool) {
		for _, d := range docs {
			if !yield(d.Text) {
				return
			}
		}
	}, to)
	if err != nil {
		return nil, fmt.Errorf("vocabulary: %w", err)
	}
	tok, err := tokenizer.New(vocab, tokenizer.DefaultConfig(tokenizer.Bert))
	if err != nil {
		return nil, err
	}
	var stream []int32
	for i, d := range docs {
		if i > 0 {
			stream = append(stream, int32(tok.SepID()))
		}
		for _, id := range tok.EncodeIDs(d.Text) {
			stream = append(stream, int32(id))
		}
	}
	cut := len(stream) * 95 / 100
	held := stream[cut:]
	if len(held) < o.EvalTokens {
		return nil, fmt.Errorf("the held-out %d tokens are fewer than %d evaluation tokens", len(held), o.EvalTokens)
	}
	t := &extrapTask{name: ExtrapMLM, vocab: tok.VocabSize(), train: stream[:cut],
		dv:     data.Vocab{Size: tok.VocabSize(), CLS: tok.ClsID(), SEP: tok.SepID(), MASK: tok.MaskID(), PAD: tok.PadID()},
		source: fmt.Sprintf("%s; %d-piece WordPiece; %d tokens (train: first 95%%; evaluation: the start of the rest, masked once)", source, tok.VocabSize(), len(stream))}
	mk, err := data.NewMasker(t.dv, data.MaskOptions{}, 0x65787472, 0x6576616c)
	if err != nil {
		return nil, err
	}
	t.evalIn, t.evalLab = make([]int32, o.EvalTokens), make([]int32, o.EvalTokens)
	mk.Mask(t.evalIn, t.evalLab, held[:o.EvalTokens])
	return t, nil
}

// extrapConfig is the model configuration of one encoding for task t.
func extrapConfig(o ExtrapolateOptions, t *extrapTask, pe roformer.PositionEncoding) roformer.Config {
	cfg := o.Model
	cfg.VocabSize, cfg.PositionEmbeddingType, cfg.MaxPositionEmbeddings = t.vocab, pe, o.TrainLen
	cfg.RopeScaling = nil
	cfg.ScaleEmbedding = o.ScaleEmbedding && pe != roformer.PosRotary
	if t.causal {
		cfg.TypeVocabSize, cfg.PadTokenID, cfg.IsDecoder = 1, nil, true
	} else {
		cfg.PadTokenID = new(int)
		*cfg.PadTokenID = t.dv.PAD
	}
	return cfg
}

// scaling returns rope_scaling for a method at length L (nil: none).
func (o ExtrapolateOptions) scaling(method string, L int) *roformer.RopeScaling {
	f := float64(L) / float64(o.TrainLen)
	switch method {
	case ScaleLinear:
		return &roformer.RopeScaling{RopeType: "linear", Factor: f}
	case ScaleDynamic:
		return &roformer.RopeScaling{RopeType: "dynamic", Factor: o.DynamicFactor}
	case ScaleYaRN:
		return &roformer.RopeScaling{RopeType: "yarn", Factor: f, OriginalMaxPositionEmbeddings: o.TrainLen}
	}
	return nil
}

// withScaling returns a model of m's weights whose config has rope_scaling
// s (m itself for nil when m has none).
func withScaling(m *roformer.Model, s *roformer.RopeScaling) (*roformer.Model, error) {
	if s == nil && m.Config.RopeScaling == nil {
		return m, nil
	}
	cfg := m.Config
	cfg.RopeScaling = s
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	out, err := roformer.New(cfg, m.Head)
	if err != nil {
		return nil, err
	}
	ps, src := out.Params(), m.Params()
	if len(ps) != len(src) {
		return nil, fmt.Errorf("experiment: the scaled model has %d parameters, the trained one %d", len(ps), len(src))
	}
	for i, p := range ps {
		if len(p.Data) != len(src[i].Data) {
			return nil, fmt.Errorf("experiment: parameter %d has %d values in the scaled model, %d in the trained one", i, len(p.Data), len(src[i].Data))
		}
		copy(p.Data, src[i].Data)
	}
	return out, nil
}

// trainExtrap trains m for s.Steps steps of B windows of L tokens drawn from
// the task's training stream (a stream seeded by seed and stream, the same
// for every encoding), and returns the mean loss over the last tenth.
func trainExtrap(ctx context.Context, m *roformer.Model, t *extrapTask, s Schedule, B, L int, seed, stream uint64) (float64, error) {
	st, err := newStepper(m, s)
	if err != nil {
		return 0, err
	}
	state := m.NewState(B, L, true)
	ids, labels, tmp := make([]int32, B*L), make([]int32, B*L), make([]int32, B*L)
	batch := &roformer.Batch{InputIDs: ids, B: B, T: L}
	lab := &roformer.Labels{IDs: labels}
	rng := rand.New(rand.NewPCG(seed, stream))
	var mk *data.Masker
	if !t.causal {
		if mk, err = data.NewMasker(t.dv, data.MaskOptions{}, seed, stream^0x6d61736b); err != nil {
			return 0, err
		}
	}
	sum, cnt, tail := 0.0, 0, max(1, s.Steps/10)
	for step := 0; step < s.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		for r := 0; r < B; r++ {
			off := rng.IntN(len(t.train) - t.body(L) + 1)
			t.window(tmp, labels, r, L, t.train, t.train, off)
			if mk != nil {
				mk.Mask(ids[r*L:(r+1)*L], labels[r*L:(r+1)*L], tmp[r*L:(r+1)*L])
			} else {
				copy(ids[r*L:(r+1)*L], tmp[r*L:(r+1)*L])
			}
		}
		if mk != nil && !anyLabel(labels) { // a batch without a masked token has no loss: mask one
			labels[1], ids[1] = tmp[1], int32(t.dv.MASK)
		}
		loss, err := st.step(step, func() (float64, error) {
			r, err := m.ForwardBackward(ctx, state, batch, lab, roformer.StepOptions{Causal: t.causal})
			if err != nil {
				return 0, err
			}
			return r.Loss, nil
		})
		if err != nil {
			return 0, err
		}
		if step >= s.Steps-tail {
			sum += loss
			cnt++
		}
	}
	return sum / float64(cnt), nil
}

// evalExtrap is the mean held-out cross-entropy per scored token of m on
// windows of L tokens tiling the task's evaluation text, and the number of
// scored tokens. A model that cannot take L tokens returns its error.
func evalExtrap(ctx context.Context, m *roformer.Model, t *extrapTask, L int) (float64, int, error) {
	n := len(t.evalIn) / t.body(L)
	if n == 0 {
		return 0, 0, fmt.Errorf("experiment: no window of %d tokens in %d", L, len(t.evalIn))
	}
	rows := max(1, min(n, 4096/L))
	var lossSum float64
	var count int
	var s *roformer.State
	for lo := 0; lo < n; lo += rows {
		B := min(rows, n-lo)
		ids, labels := make([]int32, B*L), make([]int32, B*L)
		for r := 0; r < B; r++ {
			t.window(ids, labels, r, L, t.evalIn, t.evalLab, (lo+r)*t.body(L))
		}
		b := &roformer.Batch{InputIDs: ids, B: B, T: L}
		if err := b.Validate(&m.Config); err != nil {
			return 0, 0, err
		}
		if s == nil || s.B != B {
			s = m.NewState(B, L, false)
		}
		l, c, _, err := m.EvaluateMLM(ctx, s, b, labels)
		if err != nil {
			return 0, 0, err
		}
		lossSum += l
		count += c
	}
	return lossSum / float64(count), count, nil
}

// curve evaluates model m at every length, scaled by method at each
// (fixed: the model's own config when method is empty).
func curve(ctx context.Context, o ExtrapolateOptions, m *roformer.Model, t *extrapTask, c ExtrapCurve, method string) (ExtrapCurve, error) {
	for _, L := range o.EvalLengths {
		mm := m
		if method != "" {
			var err error
			if mm, err = withScaling(m, o.scaling(method, L)); err != nil {
				return c, err
			}
		}
		if err := (&roformer.Batch{InputIDs: make([]int32, L), B: 1, T: L}).Validate(&mm.Config); err != nil {
			c.Loss, c.Tokens = append(c.Loss, Number(math.NaN())), append(c.Tokens, 0)
			if c.NA == "" {
				c.NA = strings.TrimPrefix(err.Error(), "roformer: ")
			}
			continue
		}
		loss, n, err := evalExtrap(ctx, mm, t, L)
		if err != nil {
			return c, err
		}
		c.Loss, c.Tokens = append(c.Loss, Number(loss)), append(c.Tokens, n)
	}
	say(o.Progress, "extrapolate: %s %s: loss %v", t.name, c.Variant, fmtLosses(c.Loss))
	return c, nil
}

func fmtLosses(ls []Number) string {
	var parts []string
	for _, l := range ls {
		if math.IsNaN(float64(l)) {
			parts = append(parts, "n/a")
		} else {
			parts = append(parts, strconv.FormatFloat(float64(l), 'f', 3, 64))
		}
	}
	return strings.Join(parts, " ")
}

// zeroShotName names a scaling applied at inference.
func (o ExtrapolateOptions) zeroShotName(method string) string {
	switch method {
	case ScaleNone:
		return "rotary"
	case ScaleDynamic:
		return fmt.Sprintf("rotary+dynamic×%g", o.DynamicFactor)
	}
	return "rotary+" + method
}

// ftName names a fine-tuned variant.
func (o ExtrapolateOptions) ftName(method string) string {
	ft := o.FineTune
	if method == ScaleNone {
		return fmt.Sprintf("rotary ft%d", ft.Len)
	}
	return fmt.Sprintf("rotary+%s×%g ft%d", method, ft.Factor, ft.Len)
}

func extrapRun(ctx context.Context, o ExtrapolateOptions, t *extrapTask, seed uint64) (*ExtrapRun, error) {
	t0 := time.Now()
	run := &ExtrapRun{Task: t.name, Seed: seed, Params: map[string]int{}, TrainLoss: map[string]float64{}, TrainSeconds: map[string]float64{}}
	for _, pe := range o.Encodings {
		m, err := roformer.New(extrapConfig(o, t, pe), headOf(t))
		if err != nil {
			return nil, err
		}
		m.Init(seed)
		run.Params[string(pe)] = m.NumParams()
		say(o.Progress, "extrapolate: %s %s seed %d: training at %d (%d parameters)", t.name, pe, seed, o.TrainLen, m.NumParams())
		ts := time.Now()
		loss, err := trainExtrap(ctx, m, t, o.Schedule, o.Batch, o.TrainLen, seed, 0x74726169)
		if err != nil {
			return nil, err
		}
		run.TrainLoss[string(pe)], run.TrainSeconds[string(pe)] = loss, time.Since(ts).Seconds()
		say(o.Progress, "extrapolate: %s %s seed %d: train loss %.3f, %.0f s", t.name, pe, seed, loss, run.TrainSeconds[string(pe)])
		if pe != roformer.PosRotary {
			name := string(pe)
			if m.Config.ScaleEmbedding {
				name += " ×√E"
			}
			c, err := curve(ctx, o, m, t, ExtrapCurve{Variant: name, Encoding: string(pe), Method: ScaleNone}, "")
			if err != nil {
				return nil, err
			}
			run.Curves = append(run.Curves, c)
			continue
		}
		for _, method := range o.Methods {
			c, err := curve(ctx, o, m, t, ExtrapCurve{Variant: o.zeroShotName(method), Encoding: string(pe), Method: method}, method)
			if err != nil {
				return nil, err
			}
			run.Curves = append(run.Curves, c)
		}
		if o.FineTune.Steps == 0 {
			continue
		}
		for _, method := range o.FineTune.Methods {
			s := (*roformer.RopeScaling)(nil)
			if method != ScaleNone {
				s = o.scaling(method, o.TrainLen)
				s.Factor = o.FineTune.Factor
			}
			fm, err := withScaling(m, s)
			if err != nil {
				return nil, err
			}
			if fm == m { // fine-tune a copy: the scalings start from the same weights
				if fm, err = roformer.New(m.Config, m.Head); err != nil {
					return nil, err
				}
				for i, p := range fm.Params() {
					copy(p.Data, m.Params()[i].Data)
				}
			}
			name := o.ftName(method)
			ts := time.Now()
			if _, err := trainExtrap(ctx, fm, t, o.FineTune.Schedule, o.FineTune.Batch, o.FineTune.Len, seed, 0x66696e65); err != nil {
				return nil, err
			}
			run.TrainSeconds[name] = time.Since(ts).Seconds()
			c, err := curve(ctx, o, fm, t, ExtrapCurve{Variant: name, Encoding: string(pe), Method: method, FineTuned: true}, "")
			if err != nil {
				return nil, err
			}
			run.Curves = append(run.Curves, c)
		}
	}
	run.Seconds = time.Since(t0).Seconds()
	return run, nil
}

func anyLabel(labels []int32) bool {
	for _, l := range labels {
		if l >= 0 {
			return true
		}
	}
	return false
}

func headOf(t *extrapTask) roformer.Head {
	if t.causal {
		return roformer.HeadCausalLM
	}
	return roformer.HeadMaskedLM
}

// summariseExtrap aggregates the seeds per (task, variant), in the order
// the variants first appear.
func summariseExtrap(res *ExtrapolateResult) []ExtrapSummary {
	var out []ExtrapSummary
	idx := map[string]int{}
	vals := map[string][][]float64{}
	nL := len(res.Options.EvalLengths)
	for _, r := range res.Runs {
		for _, c := range r.Curves {
			k := r.Task + "\x00" + c.Variant
			if _, ok := idx[k]; !ok {
				idx[k] = len(out)
				out = append(out, ExtrapSummary{Task: r.Task, Variant: c.Variant})
				vals[k] = make([][]float64, nL)
			}
			for i := range min(nL, len(c.Loss)) {
				vals[k][i] = append(vals[k][i], float64(c.Loss[i]))
			}
		}
	}
	for i := range out {
		s := &out[i]
		for _, xs := range vals[s.Task+"\x00"+s.Variant] {
			m, sd := meanStdN(xs)
			var ppl []float64
			n := 0
			for _, x := range xs {
				ppl = append(ppl, math.Exp(x))
				if !math.IsNaN(x) {
					n++
				}
			}
			pm, ps := meanStdN(ppl)
			s.Loss, s.LossStd, s.PPL, s.PPLStd, s.N = append(s.Loss, m), append(s.LossStd, sd), append(s.PPL, pm), append(s.PPLStd, ps), append(s.N, n)
		}
	}
	return out
}

// fmtN formats mean ± std over n seeds: "n/a" for none, "x (1 seed)" for one.
func fmtN(mean, std Number, n, dec int) string {
	switch {
	case n == 0 || math.IsNaN(float64(mean)):
		return "n/a"
	case n == 1:
		return fmt.Sprintf("%.*f (1 seed)", dec, float64(mean))
	}
	return fmt.Sprintf("%.*f ± %.*f", dec, float64(mean), dec, float64(std))
}

// writeExtrapolate writes the results folder dir; the plots without a
// fine-tune also show the curves of the results in also.
func writeExtrapolate(dir string, res *ExtrapolateResult, also ...*ExtrapolateResult) error {
	res.Summary = summariseExtrap(res)
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	o := res.Options
	var rows [][]string
	for _, r := range res.Runs {
		for _, c := range r.Curves {
			for i, L := range o.EvalLengths {
				if i < len(c.Loss) {
					rows = append(rows, []string{r.Task, c.Variant, strconv.FormatUint(r.Seed, 10), strconv.Itoa(L), ftoa(float64(c.Loss[i])), ftoa(math.Exp(float64(c.Loss[i]))), strconv.Itoa(c.Tokens[i])})
				}
			}
		}
	}
	if err := writeCSV(dir, "curves.csv", []string{"task", "variant", "seed", "length", "loss", "perplexity", "tokens"}, rows); err != nil {
		return err
	}
	var md strings.Builder
	seeds := map[string][]uint64{}
	for _, r := range res.Runs {
		seeds[r.Task] = append(seeds[r.Task], r.Seed)
	}
	ft := o.FineTune
	fmt.Fprintf(&md, "Length extrapolation: %d layers × hidden %d (%d heads of %d), trained at %d tokens for %d steps of %d windows (peak rate %g); evaluated on the same %d held-out tokens at every length (windows of L tiling them). Scalings are applied at inference to the trained rotary model: linear and yarn with factor L/%d (yarn's original_max_position_embeddings %d), dynamic with a fixed factor %g (max_position_embeddings %d). Fine-tunes: %d steps of %d × %d tokens (peak rate %g) with a fixed factor %g, then evaluated with that factor at every length. Loss: mean cross-entropy (nats) per scored token; mean ± sample std over the seeds. Wall time %.0f s.",
		o.Model.NumHiddenLayers, o.Model.HiddenSize, o.Model.NumAttentionHeads, o.Model.HeadSize(), o.TrainLen, o.Steps, o.Batch, o.LR,
		o.EvalTokens, o.TrainLen, o.TrainLen, o.DynamicFactor, o.TrainLen, ft.Steps, ft.Batch, ft.Len, ft.LR, ft.Factor, res.WallSeconds)
	if !res.Complete {
		fmt.Fprintf(&md, " **Incomplete: %d of %d (task, seed) runs finished.**", len(res.Runs), len(o.Tasks)*len(o.Seeds))
	}
	md.WriteString("\n")
	for _, task := range o.Tasks {
		if len(seeds[task]) == 0 {
			continue
		}
		fmt.Fprintf(&md, "\n### %s (seeds %v)\n\nSource: %s.\n\n", task, seeds[task], res.Sources[task])
		for _, what := range []string{"loss", "perplexity"} {
			fmt.Fprintf(&md, "| %s | %s |\n|---|", what, joinLengths(o.EvalLengths, " | "))
			md.WriteString(strings.Repeat("---|", len(o.EvalLengths)) + "\n")
			for _, s := range res.Summary {
				if s.Task != task {
					continue
				}
				fmt.Fprintf(&md, "| %s |", s.Variant)
				for i := range s.Loss {
					if what == "loss" {
						fmt.Fprintf(&md, " %s |", fmtN(s.Loss[i], s.LossStd[i], s.N[i], 3))
					} else {
						fmt.Fprintf(&md, " %s |", fmtN(s.PPL[i], s.PPLStd[i], s.N[i], 2))
					}
				}
				md.WriteString("\n")
			}
			md.WriteString("\n")
		}
		for _, r := range res.Runs {
			if r.Task == task {
				for _, c := range r.Curves {
					if c.NA != "" {
						fmt.Fprintf(&md, "n/a (%s): %s\n", c.Variant, c.NA)
						break
					}
				}
				break
			}
		}
		if err := extrapPlots(dir, res, task, also...); err != nil {
			return err
		}
	}
	return writeFile(dir, "summary.md", []byte(md.String()))
}

func joinLengths(ls []int, sep string) string {
	var s []string
	for _, l := range ls {
		s = append(s, strconv.Itoa(l))
	}
	return strings.Join(s, sep)
}

// extrapPlots draws task_loss.png/svg (the trained models at inference)
// and task_finetuned.png/svg (the fine-tunes, with plain rotary for
// reference): loss against length, log-scaled, bands of ± one std.
func extrapPlots(dir string, res *ExtrapolateResult, task string, also ...*ExtrapolateResult) error {
	o := res.Options
	for _, fine := range []bool{false, true} {
		want := map[string]bool{}
		for _, r := range res.Runs {
			for _, c := range r.Curves {
				if c.FineTuned == fine || (fine && c.Variant == "rotary") {
					want[c.Variant] = true
				}
			}
		}
		type sum struct {
			ExtrapSummary
			lengths []int
		}
		var sums []sum
		for _, s := range res.Summary {
			if s.Task == task && want[s.Variant] {
				sums = append(sums, sum{s, o.EvalLengths})
			}
		}
		if !fine {
			for _, a := range also {
				for _, s := range a.Summary {
					if s.Task == task && !want[s.Variant] {
						sums = append(sums, sum{s, a.Options.EvalLengths})
					}
				}
			}
		}
		var ss []series
		for _, s := range sums {
			absolute := strings.HasPrefix(s.Variant, "sinusoidal") || strings.HasPrefix(s.Variant, "learned")
			se := series{name: s.Variant, points: true, dashed: absolute || (fine && !strings.Contains(s.Variant, "ft"))}
			band := true
			for i, L := range s.lengths {
				if i >= len(s.Loss) || math.IsNaN(float64(s.Loss[i])) {
					continue
				}
				m, sd := float64(s.Loss[i]), float64(s.LossStd[i])
				se.x, se.y, se.lo, se.hi = append(se.x, float64(L)), append(se.y, m), append(se.lo, m-sd), append(se.hi, m+sd)
				band = band && s.N[i] > 1
			}
			if !band {
				se.lo, se.hi = nil, nil
			}
			ss = append(ss, se)
		}
		if len(ss) == 0 {
			continue
		}
		title, base := fmt.Sprintf("%s: held-out loss against length, trained at %d (mean ± std over seeds)", task, o.TrainLen), task+"_loss"
		if fine {
			title, base = fmt.Sprintf("%s: after %d fine-tune steps at %d (dashed: no fine-tune)", task, o.FineTune.Steps, o.FineTune.Len), task+"_finetuned"
		}
		p, err := linePlot(title, "evaluation length (tokens, log scale)", "loss (nats per token)", ss)
		if err != nil {
			return err
		}
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, lengthTicks(o.EvalLengths)
		p.X.Min, p.X.Max = float64(o.EvalLengths[0])*0.9, float64(o.EvalLengths[len(o.EvalLengths)-1])*1.1
		if err := savePlot(p, dir, base); err != nil {
			return err
		}
	}
	return nil
}

// lengthTicks marks the evaluation lengths.
type lengthTicks []int

// Ticks returns one labelled tick per length.
func (l lengthTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for _, L := range l {
		ts = append(ts, plot.Tick{Value: float64(L), Label: strconv.Itoa(L)})
	}
	return ts
}

// ResummarizeExtrapolate rewrites curves.csv, the plots and summary.md of
// the results folder dir from its results.json, training nothing. The
// plots without a fine-tune also show the curves of the results folders in
// also whose variants dir lacks (e.g. the sinusoidal run with
// scale_embedding); their files are not changed.
func ResummarizeExtrapolate(dir string, also ...string) (*ExtrapolateResult, error) {
	var res ExtrapolateResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	var more []*ExtrapolateResult
	for _, d := range also {
		var r ExtrapolateResult
		if err := readResults(d, &r); err != nil {
			return nil, err
		}
		more = append(more, &r)
	}
	return &res, writeExtrapolate(dir, &res, more...)
}
