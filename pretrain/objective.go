package pretrain

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// The objectives of Options.Objective. The language-model objectives train
// Hugging Face's RoFormerForCausalLM (the causal-lm head, is_decoder true)
// through the same Loop as the masked LM, so checkpoints, exact resume and
// data parallelism are the masked LM's:
//
//   - causal: next-token prediction on the packed corpus under the causal
//     mask, labels shifted inside the head as HF's RoFormerForCausalLM does
//     (position t predicts token t+1; padding is not a target).
//   - unilm: UniLM's seq2seq LM (Dong et al. 2019, as bert4keras and
//     JunnYu/RoFormer_pytorch train it) on rows [CLS] source [SEP] target
//     [SEP]: the source (type 0, [CLS] and the first [SEP] included) is
//     seen bidirectionally, the target (type 1) causally over source and
//     target, and only target tokens (the last [SEP] included) are
//     predicted. The rows come from Options.Pairs, or else from the corpus:
//     each packed sequence is cut in two at the word start nearest its
//     middle, the first half the source and the rest its continuation.
//   - sim: the RoFormer-Sim recipe (see sim.go).
const (
	ObjectiveMLM    = "mlm"
	ObjectiveCausal = "causal"
	ObjectiveUniLM  = "unilm"
	ObjectiveSim    = "sim"
)

// prepareLM is Prepare for the causal, unilm and sim objectives.
func prepareLM(opts Options, say func(string, ...any)) (*Job, error) {
	obj := opts.Objective
	switch obj {
	case ObjectiveCausal, ObjectiveUniLM, ObjectiveSim:
	default:
		return nil, fmt.Errorf("pretrain: unknown objective %q (want mlm, causal, unilm or sim)", obj)
	}
	if obj == ObjectiveSim && (opts.Init == "" && opts.Model == nil || opts.Pairs == "") {
		return nil, fmt.Errorf("pretrain: the sim objective needs a masked-LM folder to start from (Init, --init) and paraphrase pairs (Pairs, --pairs FILE.jsonl or bible)")
	}
	if obj == ObjectiveCausal && opts.Pairs != "" {
		return nil, fmt.Errorf("pretrain: the causal objective trains on the corpus; pairs (%s) are for unilm and sim", opts.Pairs)
	}
	if opts.Vocab == "" && opts.Init != "" {
		opts.Vocab = opts.Init
	}
	var pairs [][2]string
	var docs []data.Document
	var err error
	if opts.Pairs != "" {
		if pairs, err = readTextPairs(opts, say); err != nil {
			return nil, err
		}
	} else if docs, err = readCorpus(opts, say); err != nil {
		return nil, err
	}
	if opts.Vocab == "" && docs == nil {
		// a vocabulary trained on the pairs' texts
		for _, p := range pairs {
			docs = append(docs, data.Document{Text: p[0] + "\n" + p[1]})
		}
	}
	tok, err := loadVocab(opts, docs, say)
	if err != nil {
		return nil, err
	}
	opts.VocabSize = tok.VocabSize()
	v := data.Vocab{Size: tok.VocabSize(), CLS: tok.ClsID(), SEP: tok.SepID(), MASK: tok.MaskID(), PAD: tok.PadID(), IsContinuation: tok.IsContinuation}
	T := opts.Train.SeqLen
	var seqs [][]int32
	switch {
	case pairs != nil:
		if seqs, err = encodePairs(tok, pairs, T); err != nil {
			return nil, err
		}
	case obj == ObjectiveCausal:
		packed, err := data.Pack(docs, tok, v, data.PackOptions{SeqLen: T, Workers: max(opts.Train.Threads, 1)})
		if err != nil {
			return nil, err
		}
		seqs = packed.Seqs
	default: // unilm on the corpus: each packed sequence cut in two
		packed, err := data.Pack(docs, tok, v, data.PackOptions{SeqLen: T - 1, Workers: max(opts.Train.Threads, 1)})
		if err != nil {
			return nil, err
		}
		seqs = splitSequences(packed.Seqs, v)
	}
	tokens := 0
	for _, s := range seqs {
		tokens += len(s)
	}
	trainSeqs, evalSeqs, err := data.SplitEval(seqs, opts.EvalEvery1In)
	if err != nil {
		return nil, err
	}
	say("data: %d rows of at most %d tokens, %d tokens (%d rows for training, %d held out)", len(seqs), T, tokens, len(trainSeqs), len(evalSeqs))
	m, err := lmModelFor(opts, tok.VocabSize(), say)
	if err == nil {
		err = setPrecision(m, opts.Train.Precision, say)
	}
	if err != nil {
		return nil, err
	}
	opts.Model = &m.Config // a resumed run rebuilds this configuration, not the folder's
	cfg := m.Config
	say("model: %s objective, %d layers, hidden %d, %d heads, intermediate %d, vocabulary %d: %.2fM parameters", obj, cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.VocabSize, float64(m.NumParams())/1e6)
	scale := opts.SimScale
	if scale == 0 {
		scale = DefaultSimScale
	}
	j := &Job{Options: opts, Tokenizer: tok, Model: m, Tokens: tokens}
	j.Loop = Loop{
		Model: newLMModel(m, obj, scale, v), Train: trainSeqs, Eval: evalSeqs, Vocab: v, Options: opts.Train, Group: opts.Group,
		SaveExtra: tok.Save, LossName: lossNames[obj],
	}
	return j, nil
}

// lossNames name each objective's loss in the plot's title.
var lossNames = map[string]string{ObjectiveCausal: "causal-LM loss", ObjectiveUniLM: "UniLM loss", ObjectiveSim: "Sim loss (UniLM + similarity; eval: UniLM)"}

// lmModelFor builds the causal-LM model of a run: opts.Model when set (a
// resumed run), else the folder opts.Init with its weights, else a fresh
// model of opts' size. The configuration says is_decoder true; the sim
// objective adds a pooler when the model has none.
func lmModelFor(opts Options, vocabSize int, say func(string, ...any)) (*roformer.Model, error) {
	sim := opts.Objective == ObjectiveSim
	var m *roformer.Model
	if opts.Init != "" && opts.Model == nil {
		l, err := roformer.Load(opts.Init, roformer.HeadCausalLM, roformer.LoadOptions{ConfigOverride: func(c *roformer.Config) { c.IsDecoder = true }})
		if err != nil {
			return nil, fmt.Errorf("pretrain: the model to start from: %w", err)
		}
		m = l.Model
		if m.Config.VocabSize != vocabSize {
			return nil, fmt.Errorf("pretrain: %s has vocab_size %d but its tokenizer has %d tokens", opts.Init, m.Config.VocabSize, vocabSize)
		}
		say("init: %s (%s)", opts.Init, l.Checkpoint)
		if sim && m.Encoder.Pooler == nil {
			if opts.PoolerActivation != "" {
				m.Config.PoolerActivation = opts.PoolerActivation
				if err := m.Config.Validate(); err != nil {
					return nil, fmt.Errorf("pretrain: --pooler-activation: %w", err)
				}
			}
			m.EnablePooler()
			initPooler(m, opts.Train.Seed)
			say("init: a new pooler (roformer.pooler.dense, %s), drawn from N(0, %g²)", m.Config.PoolerActivationName(), m.Config.InitializerRange)
		}
		return m, nil
	}
	cfg, err := modelConfig(opts, vocabSize)
	if err != nil {
		return nil, err
	}
	cfg.IsDecoder = true
	if m, err = roformer.New(cfg, roformer.HeadCausalLM); err != nil {
		return nil, err
	}
	if sim {
		m.EnablePooler()
	}
	m.Init(opts.Train.Seed)
	return m, nil
}

// initPooler draws a new pooler's weight from HF's N(0, initializer_range²),
// bias 0.
func initPooler(m *roformer.Model, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x706f6f6c6572)) // "pooler"
	p := m.Encoder.Pooler
	for i := range p.W.Data {
		p.W.Data[i] = float32(r.NormFloat64() * m.Config.InitializerRange)
	}
	if p.B != nil {
		clear(p.B.Data)
	}
}

// encodePairs encodes each pair as [CLS] a [SEP] b [SEP], longest first
// truncated to T tokens; pairs with an empty side are left out.
func encodePairs(tok *tokenizer.Tokenizer, pairs [][2]string, T int) ([][]int32, error) {
	out := make([][]int32, 0, len(pairs))
	for i, p := range pairs {
		e, err := tok.EncodePair(p[0], p[1], tokenizer.EncodeOptions{MaxLength: T, Truncation: tokenizer.TruncateLongestFirst})
		if err != nil {
			return nil, fmt.Errorf("pretrain: pair %d: %w", i+1, err)
		}
		if n := len(e.IDs); n < 5 || e.TypeIDs[1] != 0 || e.TypeIDs[n-2] != 1 {
			continue // an empty source or target
		}
		s := make([]int32, len(e.IDs))
		for k, id := range e.IDs {
			s[k] = int32(id)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pretrain: %w: no pair has text on both sides", data.ErrEmptyCorpus)
	}
	return out, nil
}

// splitSequences cuts each packed [CLS] t1 … tn [SEP] into [CLS] t1 … tk
// [SEP] tk+1 … tn [SEP], k the first word start at or after n/2 (n/2 when
// none is); sequences of fewer than 2 tokens are left out.
func splitSequences(seqs [][]int32, v data.Vocab) [][]int32 {
	out := make([][]int32, 0, len(seqs))
	for _, s := range seqs {
		body := s[1 : len(s)-1]
		n := len(body)
		if n < 2 {
			continue
		}
		k := n / 2
		for c := k; c < n; c++ {
			if v.IsContinuation == nil || !v.IsContinuation(int(body[c])) {
				k = c
				break
			}
		}
		r := make([]int32, 0, n+3)
		r = append(r, int32(v.CLS))
		r = append(r, body[:k]...)
		r = append(r, int32(v.SEP))
		r = append(r, body[k:]...)
		r = append(r, int32(v.SEP))
		out = append(out, r)
	}
	return out
}

// lmModel adapts a causal-LM RoFormer to Model for the causal, unilm and
// sim objectives. The Loader masks its batches for the masked LM; data.Batch
// keeps each masked position's original id in Labels, so the rows are read
// back exactly (original = Labels where set, InputIDs elsewhere), then cut
// to their longest row: these objectives see no [MASK].
type lmModel struct {
	mlm
	objective string
	scale     float64 // sim: the similarity scale
	sep, pad  int32
	states    map[int]*roformer.State // training workspaces by row length
	evals     map[int]*roformer.State
}

func newLMModel(m *roformer.Model, objective string, scale float64, v data.Vocab) *lmModel {
	return &lmModel{mlm: mlm{m: m}, objective: objective, scale: scale, sep: int32(v.SEP), pad: int32(v.PAD),
		states: map[int]*roformer.State{}, evals: map[int]*roformer.State{}}
}

// lmBatch is a loader batch as the objective trains on it: the rows (for
// sim each pair in both orders, rows 2k and 2k+1), their token types and
// the causal-LM labels (unshifted: the head shifts them).
func (a *lmModel) lmBatch(b *data.Batch) (*roformer.Batch, []int32) {
	rows := make([][]int32, 0, 2*b.B)
	T := 0
	for r := range b.B {
		in, lab, att := b.InputIDs[r*b.T:(r+1)*b.T], b.Labels[r*b.T:(r+1)*b.T], b.AttentionMask[r*b.T:(r+1)*b.T]
		var row []int32
		for t := range in {
			if att[t] == 0 {
				break
			}
			id := in[t]
			if lab[t] != data.IgnoreIndex {
				id = lab[t]
			}
			row = append(row, id)
		}
		rows = append(rows, row)
		if a.objective == ObjectiveSim {
			rows = append(rows, a.swap(row))
		}
		T = max(T, len(row))
	}
	B := len(rows)
	rb := &roformer.Batch{InputIDs: make([]int32, B*T), TokenTypeIDs: make([]int32, B*T), AttentionMask: make([]int32, B*T), B: B, T: T}
	labels := make([]int32, B*T)
	for r, row := range rows {
		in, ty, att, lab := rb.InputIDs[r*T:(r+1)*T], rb.TokenTypeIDs[r*T:(r+1)*T], rb.AttentionMask[r*T:(r+1)*T], labels[r*T:(r+1)*T]
		target := false
		for t := range T {
			lab[t] = data.IgnoreIndex
			if t >= len(row) {
				in[t] = a.pad
				continue
			}
			in[t], att[t] = row[t], 1
			switch {
			case a.objective == ObjectiveCausal:
				lab[t] = row[t]
			case target:
				ty[t], lab[t] = 1, row[t]
			}
			if row[t] == a.sep {
				target = true
			}
		}
	}
	return rb, labels
}

// swap turns [CLS] a [SEP] b [SEP] into [CLS] b [SEP] a [SEP] (a row
// without two parts is returned as it is).
func (a *lmModel) swap(row []int32) []int32 {
	p := -1
	for t, id := range row {
		if id == a.sep {
			p = t
			break
		}
	}
	n := len(row)
	if p < 1 || p >= n-2 {
		return row
	}
	out := make([]int32, 0, n)
	out = append(out, row[0])
	out = append(out, row[p+1:n-1]...)
	out = append(out, a.sep)
	out = append(out, row[1:p]...)
	return append(out, a.sep)
}

func (a *lmModel) stepOptions() roformer.StepOptions {
	o := roformer.StepOptions{UniLM: a.objective != ObjectiveCausal}
	if a.objective == ObjectiveSim {
		scale := a.scale
		o.PooledLoss = func(z, dz []float32, B, H int) (float64, error) {
			clear(dz)
			return contrastive.PairedBackward(dz, z, B, H, scale, 1), nil
		}
	}
	return o
}

func state(cache map[int]*roformer.State, m *roformer.Model, B, T int, train bool) *roformer.State {
	s := cache[T]
	if s == nil || s.B != B {
		s = m.NewState(B, T, train)
		cache[T] = s
	}
	return s
}

// ForwardBackward returns the objective's loss: the LM loss, plus for sim
// the similarity loss.
func (a *lmModel) ForwardBackward(ctx context.Context, b *data.Batch) (float64, error) {
	rb, labels := a.lmBatch(b)
	o := a.stepOptions()
	o.Dropout, o.Seed = true, b.Seed
	r, err := a.m.ForwardBackward(ctx, state(a.states, a.m, rb.B, rb.T, true), rb, &roformer.Labels{IDs: labels}, o)
	if err != nil {
		return 0, err
	}
	return r.Loss + r.PooledLoss, nil
}

// Evaluate scores the LM part (for sim: the generation loss, not the
// similarity).
func (a *lmModel) Evaluate(ctx context.Context, b *data.Batch) (float64, int, int, error) {
	rb, labels := a.lmBatch(b)
	return a.m.EvaluateLM(ctx, state(a.evals, a.m, rb.B, rb.T, false), rb, labels, a.stepOptions())
}

// losses returns the mean LM loss and (sim) the similarity loss of b in
// inference mode, for tests and reports.
func (a *lmModel) losses(ctx context.Context, b *data.Batch) (lm, sim float64, err error) {
	rb, labels := a.lmBatch(b)
	sum, n, _, err := a.m.EvaluateLM(ctx, nil, rb, labels, a.stepOptions())
	if err != nil || n == 0 {
		return 0, 0, err
	}
	if a.objective == ObjectiveSim {
		out, err := a.m.Forward(ctx, rb, nil, roformer.Options{SkipHead: true})
		if err != nil {
			return 0, 0, err
		}
		sim = contrastive.PairedForward(out.PoolerOutput.Data, rb.B, a.m.Config.HiddenSize, a.scale)
	}
	return sum / float64(n), sim, nil
}
