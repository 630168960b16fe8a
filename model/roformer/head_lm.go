package roformer

import (
	"fmt"
	"math"
	"sync"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
	"github.com/roformer-go/roformer/tensor"
)

// The language-model heads, RoFormerForMaskedLM and RoFormerForCausalLM:
// cls.predictions (transform.dense → act → LayerNorm → the decoder tied to
// the word embeddings + bias) on every position; the causal head predicts
// the next token (labels shifted left) under the causal mask.

// LMHead is RoFormerOnlyMLMHead (cls.predictions), used by the masked and
// causal LM heads. The decoder weight is the word embedding table (tied), so
// it is not a field; its bias is cls.predictions.bias.
type LMHead struct {
	Transform nn.Linear     `hf:"transform.dense"`     // [E, H]
	LN        nn.LayerNorm  `hf:"transform.LayerNorm"` // [E]
	Bias      *tensor.Param `hf:"bias"`                // [V]
}

func buildLM(m *Model) {
	if m.Config.RMSNorm() {
		m.LM = &LMHead{} // RoFormer-V2: the bare tied decoder
		return
	}
	E, V := m.Config.EmbeddingSize, m.Config.VocabSize
	m.LM = &LMHead{Transform: newLinear(E, m.Config.HiddenSize), LN: newLayerNorm(E), Bias: newParam(V)}
}

// bare reports whether the head is RoFormer-V2's: the decoder tied to the
// word embeddings on the hidden states, with no transform, LayerNorm or
// bias.
func (h *LMHead) bare() bool { return h.Transform.W == nil }

// lmLinears are the LM head's linear layers: transform.dense [E, H] and the
// tied decoder [V, E].
func lmLinears(m *Model) []linearShape {
	c := &m.Config
	if m.LM.bare() {
		return []linearShape{{m.Encoder.Embeddings.Word.Data, c.VocabSize, c.EmbeddingSize}}
	}
	return []linearShape{{m.LM.Transform.W.Data, c.EmbeddingSize, c.HiddenSize}, {m.Encoder.Embeddings.Word.Data, c.VocabSize, c.EmbeddingSize}}
}

// lmForward writes the logits [B, T, V] and, with labels, HF's loss.
func lmForward(m *Model, out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error {
	cfg := &m.Config
	B, T, E, V := b.B, b.T, cfg.EmbeddingSize, cfg.VocabSize
	BT := B * T
	var logits []float32
	var scratch *lmActs // nil: lmPool's
	if se != nil {
		logits = grow(&se.logits, BT*V)
		scratch = &lmActs{post: grow(&se.lm.post, BT*E), ln: grow(&se.lm.ln, BT*E), mean: grow(&se.lm.mean, BT), rstd: grow(&se.lm.rstd, BT)}
	} else {
		logits = make([]float32, BT*V)
	}
	m.lmLogits(logits, x, BT, scratch, false)
	out.Logits = &tensor.Tensor{Shape: []int{B, T, V}, Data: logits}
	if labels != nil && labels.IDs != nil {
		if len(labels.IDs) != BT {
			return fmt.Errorf("roformer: labels have %d values, want %d (%d × %d)", len(labels.IDs), BT, B, T)
		}
		if err := checkClassIDs("labels", labels.IDs, V); err != nil {
			return err
		}
		targets := labels.IDs
		if m.Head == HeadCausalLM {
			// logits[:, :-1] predict labels[:, 1:]
			targets = shiftLeft(labels.IDs, B, T)
		}
		out.Loss, out.HasLoss = meanCE(logits, targets, BT, V), true
	}
	return nil
}

// lmTrain is lmForward's loss and its gradient.
func lmTrain(m *Model, dx, x []float32, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error) {
	B, T, H, V := b.B, b.T, m.Config.HiddenSize, m.Config.VocabSize
	BT := B * T
	if len(labels.IDs) != BT {
		return nil, fmt.Errorf("roformer: labels have %d values, want %d (%d × %d)", len(labels.IDs), BT, B, T)
	}
	if err := checkClassIDs("labels", labels.IDs, V); err != nil {
		return nil, err
	}
	targets := labels.IDs
	if m.Head == HeadCausalLM {
		targets = shiftLeft(labels.IDs, B, T)
	}
	return m.lmBackward(s, dx, x, targets, H), nil
}

// LMLogits runs the language-model head (cls.predictions) on N rows of last
// hidden states: logits [N, V] from hidden [N, H], rows of
// Output.LastHiddenState (a forward pass with Options.SkipHead) at the
// positions wanted. The head works row by row with Forward's products, so
// each row's logits are those Forward's masked- or causal-LM head gives at
// that position: bit for bit where a product's row does not depend on the
// rows computed beside it (go-asm and gonum), within rounding on OpenBLAS
// and oneDNN, which choose their kernels by the number of rows. A caller that
// needs a few positions (fill-mask's masks) or a reduction over positions
// (SPLADE's max) thus holds N × V logits instead of B × T × V. It fails
// when the model has no LM head or the slices are shorter than N rows.
func (m *Model) LMLogits(logits, hidden []float32, N int) error {
	H, V := m.Config.HiddenSize, m.Config.VocabSize
	switch {
	case m.LM == nil:
		return fmt.Errorf("roformer: the %s head has no LM head", m.Head)
	case N < 0 || len(hidden) < N*H || len(logits) < N*V:
		return fmt.Errorf("roformer: LM logits of %d rows need %d hidden values and room for %d logits; got %d and %d", N, N*H, N*V, len(hidden), len(logits))
	}
	m.lmLogits(logits[:N*V], hidden[:N*H], N, nil, false)
	return nil
}

// lmLogits runs cls.predictions on rows of x [N, H]: transform.dense → act →
// transform.LayerNorm → decoder tied to the word embeddings + bias, its
// intermediate values in a. With train, a keeps them for backward (pre
// included); in inference pre is not kept (the activation runs inside the
// product where SetPrecision prepared it so) and a nil a is scratch from
// lmPool, so that a warm call allocates nothing.
func (m *Model) lmLogits(logits, x []float32, N int, a *lmActs, train bool) {
	cfg := &m.Config
	H, E, V := cfg.HiddenSize, cfg.EmbeddingSize, cfg.VocabSize
	if m.LM.bare() { // logits = x·Wteᵀ
		m.matmul(logits, x, m.Encoder.Embeddings.Word.Data, nil, N, E, V)
		return
	}
	if a == nil {
		a = getLMScratch(N, E)
		defer lmPool.Put(a)
	}
	if !train {
		m.matmulAct(a.post, x, m.LM.Transform.W.Data, m.LM.Transform.Bias(), m.act, N, H, E)
	} else {
		m.matmul(a.pre, x, m.LM.Transform.W.Data, m.LM.Transform.Bias(), N, H, E)
		kernels.ActivationForward(a.post, a.pre, m.act, N*E)
	}
	m.LM.LN.Forward(a.ln, a.mean, a.rstd, a.post, float32(cfg.LayerNormEps), N, E)
	m.matmul(logits, a.ln, m.Encoder.Embeddings.Word.Data, m.LM.Bias.Data, N, E, V)
}

// lmActs are the LM head's activations for N rows.
type lmActs struct {
	pre, post, ln []float32 // [N, E]
	mean, rstd    []float32 // [N]
}

func newLMActs(N, E int) *lmActs {
	return &lmActs{pre: make([]float32, N*E), post: make([]float32, N*E), ln: make([]float32, N*E), mean: make([]float32, N), rstd: make([]float32, N)}
}

// lmPool keeps the LM head's inference scratch (*lmActs without pre)
// between the calls of Model.Forward, LMLogits and cached decoding, as
// kernels keeps its workers' scratch: a fill-mask request, or SPLADE's
// pooling chunk after chunk, allocates none of it once warm. The buffers
// come back with old contents, which lmLogits overwrites.
var lmPool sync.Pool

// getLMScratch returns inference scratch for N rows of E from lmPool,
// grown when short. Give it back with lmPool.Put.
func getLMScratch(N, E int) *lmActs {
	a, _ := lmPool.Get().(*lmActs)
	if a == nil {
		a = new(lmActs)
	}
	a.post, a.ln, a.mean, a.rstd = grow(&a.post, N*E), grow(&a.ln, N*E), grow(&a.mean, N), grow(&a.rstd, N)
	return a
}

// lmBackward runs the LM head on the rows of x whose target is set (the
// others do not change the loss), back-propagates the mean cross-entropy
// and scatters the gradient into dx.
//
// Its buffers live in s and are reused by the next step of the same shape.
func (m *Model) lmBackward(s *State, dx, x []float32, targets []int32, H int) *StepResult {
	cfg := &m.Config
	E, V := cfg.EmbeddingSize, cfg.VocabSize
	var rows []int
	for r, t := range targets {
		if t >= 0 {
			rows = append(rows, r)
		}
	}
	N := len(rows)
	res := &StepResult{N: N, Loss: math.NaN()}
	if N == 0 {
		return res
	}
	sc := &s.lm
	xs := grow(&sc.xs, N*H)
	tg := sc.tg[:0]
	for i, r := range rows {
		copy(xs[i*H:i*H+H], x[r*H:r*H+H])
		tg = append(tg, targets[r])
	}
	sc.tg = tg
	a := &lmActs{pre: grow(&sc.pre, N*E), post: grow(&sc.post, N*E), ln: grow(&sc.ln, N*E), mean: grow(&sc.mean, N), rstd: grow(&sc.rstd, N)}
	logits := grow(&sc.logits, N*V)
	m.lmLogits(logits, xs, N, a, true)
	losses := grow(&sc.losses, N)
	kernels.CrossEntropyForward(losses, logits, tg, N, V)
	sum := 0.0
	for _, l := range losses {
		sum += float64(l)
	}
	res.Loss = sum / float64(N)
	dlogits := logits // the logits are not needed after their gradient: reuse the buffer
	_, res.Correct = ceGradInPlace(dlogits, tg, N, V)
	if m.LM.bare() { // logits = xs·Wteᵀ
		dxs := grow(&sc.dxs, N*H)
		m.matmulBackward(dxs, m.Encoder.Embeddings.Word.Grad, nil, dlogits, xs, m.Encoder.Embeddings.Word.Data, N, E, V)
		for i, r := range rows {
			copy(dx[r*H:r*H+H], dxs[i*H:i*H+H])
		}
		return res
	}
	// logits = ln·Wteᵀ + bias (decoder tied to the word embeddings)
	dln, dpost, dpre, dxs := grow(&sc.dln, N*E), grow(&sc.dpost, N*E), grow(&sc.dpre, N*E), grow(&sc.dxs, N*H)
	clear(dpost) // LayerNormBackward accumulates into it
	m.matmulBackward(dln, m.Encoder.Embeddings.Word.Grad, m.LM.Bias.Grad, dlogits, a.ln, m.Encoder.Embeddings.Word.Data, N, E, V)
	m.LM.LN.Backward(dpost, dln, a.post, a.mean, a.rstd, N, E)
	kernels.ActivationBackward(dpre, dpost, a.pre, m.act, N*E)
	m.linearBackward(&m.LM.Transform, dxs, dpre, xs, N)
	for i, r := range rows {
		copy(dx[r*H:r*H+H], dxs[i*H:i*H+H])
	}
	return res
}
