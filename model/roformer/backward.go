package roformer

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/kernels"
)

// gradBuffers holds the activation gradients of a backward pass; parameter
// gradients live in each tensor.Param.Grad.
type gradBuffers struct {
	dx, dres, dtmp  []float32 // [BT, H]
	dq, dk, dv, dcx []float32 // [BT, H]
	dpre, dpost     []float32 // [BT, I]
	demb, dembSum   []float32 // [BT, E]
	// linear attention: feature gradients, numerator and denominator paths [BT, NH·F]
	dfq, dfk, dfqd, dfkd []float32
}

func (m *Model) grads(s *State) *gradBuffers {
	if s.grads == nil {
		E, H, I := m.Config.EmbeddingSize, m.Config.HiddenSize, m.Config.IntermediateSize
		BT := s.B * s.T
		f := func(n int) []float32 { return make([]float32, n) }
		s.grads = &gradBuffers{dx: f(BT * H), dres: f(BT * H), dtmp: f(BT * H), dq: f(BT * H), dk: f(BT * H), dv: f(BT * H), dcx: f(BT * H),
			dpre: f(BT * I), dpost: f(BT * I), demb: f(BT * E), dembSum: f(BT * E)}
		if F := m.Config.NumFeatures(); F > 0 {
			n := BT * m.Config.NumAttentionHeads * F
			s.grads.dfq, s.grads.dfk, s.grads.dfqd, s.grads.dfkd = f(n), f(n), f(n), f(n)
		}
	}
	return s.grads
}

// StepOptions configures a training forward and backward pass.
type StepOptions struct {
	// Dropout applies HF's training-mode dropout with the configuration's
	// probabilities; its masks are a pure function of Seed (see
	// kernels.Dropout), so a step can be replayed exactly.
	Dropout bool
	Seed    uint64
	// RowOffset, with Dropout, says that the batch is rows RowOffset,
	// RowOffset+1, … of a larger batch of the same length T: every dropout
	// of the encoder and the head then draws the masks those rows have
	// there, so encoding a batch a few rows at a time (gradient caching)
	// drops what encoding it whole drops. 0: the batch is whole.
	RowOffset int
	// NumChoices and Causal as in Options.
	NumChoices int
	Causal     bool
	// UniLM applies MaskUniLM from the token types (RoFormer-Sim's mask:
	// type 0 bidirectional, type 1 causal over everything before it)
	// whatever the model's EncoderMask; a RoFormer-Sim model (IsSim) has it
	// without asking. Attention-probability dropout does not apply to a
	// pass under it.
	UniLM bool
	// PooledLoss, when set, adds a caller's loss on the pooler output
	// pooled [B, H] to the head's (ForwardBackward; the model needs a
	// pooler): it returns the loss and writes its gradient into dpooled
	// [B, H]. StepResult.PooledLoss reports it.
	PooledLoss func(pooled, dpooled []float32, B, H int) (float64, error)
}

// StepResult is what a training step measured.
type StepResult struct {
	Loss    float64 // HF's loss for the head (mean over the labelled terms)
	N       int     // labelled terms in the loss
	Correct int     // of those, how many the arg-max predicts (classification and LM heads)
	// PooledLoss is the value of StepOptions.PooledLoss (0 without it).
	PooledLoss float64
}

// ForwardBackward runs the head on b in training mode and back-propagates
// its loss, ADDING each parameter's gradient into Param.Grad (so calls over
// micro-batches accumulate). s must come from NewState(b.B, b.T, true) and
// may be reused for every batch of that shape. The loss is the one Forward
// returns for the same labels (without dropout they are equal).
func (m *Model) ForwardBackward(ctx context.Context, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error) {
	if !s.train || s.B != b.B || s.T != b.T {
		return nil, fmt.Errorf("roformer: training state is for %d×%d (train %v), batch is %d×%d", s.B, s.T, s.train, b.B, b.T)
	}
	if labels == nil {
		return nil, fmt.Errorf("roformer: a training step needs labels")
	}
	if m.lowp != nil {
		if m.lowp.prec != PrecisionFP32 {
			return nil, fmt.Errorf("roformer: the model is prepared for %s inference; training needs float32 (SetPrecision(\"\"))", m.lowp.prec)
		}
		m.lowp = nil // the update would leave the repacked weights stale
	}
	m.ensureGrads()
	if err := b.Validate(&m.Config); err != nil {
		return nil, err
	}
	if err := m.checkChoices(b, opts.NumChoices); err != nil {
		return nil, err
	}
	if opts.RowOffset < 0 {
		return nil, fmt.Errorf("roformer: row offset %d: want at least 0", opts.RowOffset)
	}
	s.setDropout(opts)
	defer s.clearDropout()
	if err := m.setTrainInputs(s, b, opts); err != nil {
		return nil, err
	}
	x, err := m.encode(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	g := m.grads(s)
	res, err := m.headBackward(g.dx, x, s, b, labels, opts)
	if err != nil {
		return nil, err
	}
	if opts.PooledLoss != nil {
		if res.PooledLoss, err = m.poolerTrain(g.dx, x, b.B, b.T, opts.PooledLoss); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.encoderBackward(s, g.dx)
	return res, nil
}

// encoderBackward back-propagates dx [BT, H], the gradient of the last
// hidden state, through every layer and the embeddings.
func (m *Model) encoderBackward(s *State, dx []float32) {
	cfg := &m.Config
	B, T := s.B, s.T
	BT := B * T
	E, H, I := cfg.EmbeddingSize, cfg.HiddenSize, cfg.IntermediateSize
	g := s.grads
	for l := len(m.Encoder.Layers) - 1; l >= 0; l-- {
		L := &m.Encoder.Layers[l]
		la := &s.layers[l]
		x := s.hidden0
		if l > 0 {
			x = s.layers[l-1].out
		}
		// out = LayerNorm(res2)
		clear(g.dres)
		L.OutputLN.Backward(g.dres, dx, la.res2, la.ln2Mean, la.ln2Rstd, BT, H)
		// res2 = a + dropout(FFOut(post)): the residual passes dres to a
		copy(g.dtmp, g.dres)
		kernels.DropoutBackward(g.dtmp, s.dropAt(l, siteFFNOut, cfg.HiddenDropoutProb, T*H), BT*H)
		m.linearBackward(&L.FFOut, g.dpost, g.dtmp, la.post, BT)
		// post = act(pre)
		kernels.ActivationBackwardSaved(g.dpre, g.dpost, la.dact, BT*I)
		// pre = FFIn(a)
		m.linearBackward(&L.FFIn, g.dtmp, g.dpre, la.a, BT)
		kernels.AddForward(g.dres, g.dres, g.dtmp, BT*H) // da = dres2 + dFFIn
		// a = LayerNorm(res1)
		clear(dx)
		L.AttnLN.Backward(dx, g.dres, la.res1, la.ln1Mean, la.ln1Rstd, BT, H)
		// res1 = x + dropout(AttnOut(ctx)): dx holds dres1, which is also x's residual gradient
		copy(g.dtmp, dx)
		kernels.DropoutBackward(g.dtmp, s.dropAt(l, siteAttnOut, cfg.HiddenDropoutProb, T*H), BT*H)
		m.linearBackward(&L.AttnOut, g.dcx, g.dtmp, la.ctx, BT)
		// ctx = attention(q, k, v), q, k (, v) rotated
		m.attentionBackward(s, l, la, g)
		// q, k, v = Linear(x): add their input gradients to the residual's
		w, _, okW := L.fusedWeights()
		dw, db, okG := L.fusedGrads()
		if okW && okG {
			dqkv := s.qkvScratch(BT * 3 * H)
			kernels.ConcatQKV(dqkv, g.dq, g.dk, g.dv, BT, H)
			m.matmulBackward(g.dtmp, dw, db, dqkv, x, w, BT, H, 3*H)
			kernels.AddForward(dx, dx, g.dtmp, BT*H)
		} else {
			m.linearBackward(&L.Query, g.dtmp, g.dq, x, BT)
			kernels.AddForward(dx, dx, g.dtmp, BT*H)
			m.linearBackward(&L.Key, g.dtmp, g.dk, x, BT)
			kernels.AddForward(dx, dx, g.dtmp, BT*H)
			m.linearBackward(&L.Value, g.dtmp, g.dv, x, BT)
			kernels.AddForward(dx, dx, g.dtmp, BT*H)
		}
	}
	// Embeddings: hidden0 = project(dropout(LayerNorm(word + type)))
	emb := &m.Encoder.Embeddings
	demb := dx
	if p := m.Encoder.Project; p != nil {
		m.linearBackward(p, g.demb, dx, s.embLN, BT)
		demb = g.demb
	}
	kernels.DropoutBackward(demb, s.dropAt(-1, siteEmbeddings, cfg.HiddenDropoutProb, T*E), BT*E)
	clear(g.dembSum)
	emb.LN.Backward(g.dembSum, demb, s.embSum, s.embMean, s.embRstd, BT, E)
	m.positionsBackward(s, g.dembSum)
	if cfg.ScaleEmbedding {
		m.scaledEmbeddingBackward(s, g.dembSum)
	} else {
		kernels.EmbeddingBackward(emb.Word.Grad, emb.TokenType.Grad, g.dembSum, s.ids, s.types, cfg.PadID(), BT, E)
	}
}

// headBackward computes the head's loss on the last hidden state x [BT, H]
// and writes its gradient into dx [BT, H] (=), accumulating the head's
// parameter gradients (see the head's file).
func (m *Model) headBackward(dx, x []float32, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error) {
	clear(dx)
	k := kindOf(m.Head)
	if k.train == nil {
		return nil, fmt.Errorf("roformer: the %s head has no loss to train", m.Head)
	}
	return k.train(m, dx, x, s, b, labels, opts)
}

// ceGrad writes the gradient of the mean cross-entropy over the rows whose
// target is not negative into d (=) and returns their count and how many the
// arg-max gets right.
func ceGrad(d, logits []float32, targets []int32, N, V int) (n, correct int) {
	for r, t := range targets {
		if t >= 0 {
			n++
			if kernels.Argmax(logits[r*V:r*V+V]) == int(t) {
				correct++
			}
		}
	}
	dl := make([]float32, N)
	if n > 0 {
		for r, t := range targets {
			if t >= 0 {
				dl[r] = 1 / float32(n)
			}
		}
	}
	kernels.CrossEntropyBackward(d, dl, logits, targets, N, V)
	return n, correct
}

// ceGradInPlace turns logits [N, V] into the gradient of the mean
// cross-entropy over the rows whose target is set, in place, and returns
// their count and how many the arg-max predicts.
func ceGradInPlace(logits []float32, targets []int32, N, V int) (n, correct int) {
	for r, t := range targets {
		if t >= 0 {
			n++
			if kernels.Argmax(logits[r*V:r*V+V]) == int(t) {
				correct++
			}
		}
	}
	scale := float32(0)
	if n > 0 {
		scale = 1 / float32(n)
	}
	kernels.CrossEntropyGradInPlace(logits, targets, scale, N, V)
	return n, correct
}

// grow returns (*buf)[:n], reallocating (zeroed) only when the capacity is
// short; otherwise the elements hold what they held.
func grow[E any](buf *[]E, n int) []E {
	if cap(*buf) < n {
		*buf = make([]E, n)
	}
	return (*buf)[:n]
}

// EvaluateMLM runs the masked-LM head in inference mode on the rows of b
// whose label is set and returns the summed cross-entropy, the number of
// labelled tokens and how many the arg-max predicts.
func (m *Model) EvaluateMLM(ctx context.Context, s *State, b *Batch, labels []int32) (lossSum float64, n, correct int, err error) {
	return m.EvaluateLM(ctx, s, b, labels, StepOptions{})
}

// EvaluateLM is EvaluateMLM with the mask a training step with opts would
// use (opts.Causal, opts.UniLM; dropout and the rest are not read).
func (m *Model) EvaluateLM(ctx context.Context, s *State, b *Batch, labels []int32, opts StepOptions) (lossSum float64, n, correct int, err error) {
	if m.LM == nil {
		return 0, 0, 0, fmt.Errorf("roformer: the %s head has no LM head", m.Head)
	}
	if err := b.Validate(&m.Config); err != nil {
		return 0, 0, 0, err
	}
	if s == nil || s.B != b.B || s.T != b.T {
		s = m.NewState(b.B, b.T, false)
	}
	if err := m.setTrainInputs(s, b, StepOptions{Causal: opts.Causal, UniLM: opts.UniLM}); err != nil {
		return 0, 0, 0, err
	}
	x, err := m.encode(ctx, s, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	H, E, V := m.Config.HiddenSize, m.Config.EmbeddingSize, m.Config.VocabSize
	targets := labels
	if m.Head == HeadCausalLM {
		targets = shiftLeft(labels, b.B, b.T)
	}
	var rows []int
	for r, t := range targets {
		if t >= 0 {
			rows = append(rows, r)
		}
	}
	N := len(rows)
	if N == 0 {
		return 0, 0, 0, nil
	}
	xs := make([]float32, N*H)
	tg := make([]int32, N)
	for i, r := range rows {
		copy(xs[i*H:i*H+H], x[r*H:r*H+H])
		tg[i] = targets[r]
	}
	logits := make([]float32, N*V)
	m.lmLogits(logits, xs, N, newLMActs(N, E), true)
	losses := make([]float32, N)
	kernels.CrossEntropyForward(losses, logits, tg, N, V)
	for i, l := range losses {
		lossSum += float64(l)
		if kernels.Argmax(logits[i*V:i*V+V]) == int(tg[i]) {
			correct++
		}
	}
	return lossSum, N, correct, nil
}
