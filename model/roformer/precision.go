package roformer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
)

// Precision is the number format of the inference products of the linear
// layers. Softmax, LayerNorm, the rotary and embeddings stay in float32
// whatever it is; bf16 also runs attention's products in bfloat16.
type Precision string

const (
	// PrecisionFP32 is float32 everywhere. Asked for explicitly, for
	// inference, the linear layers' weights are also stored once in the
	// layout of the backend in use (blas.Chosen), instead of packed again
	// by every product: oneDNN matmul's blocked layout (5–8% faster at base
	// size than dnnl_sgemm), or go-asm's panels (kernels.PanelLinear: the
	// bits of the plain product, a short query 1.2–1.5 times faster). The
	// layout replaces the plain weights where the loader can release them
	// (a mapped folder's pages).
	// The zero Precision ("") is float32 with nothing prepared: what a new
	// model has, and what training uses.
	PrecisionFP32 Precision = "fp32"
	// PrecisionBF16 keeps the weights in bfloat16 and accumulates in
	// float32 (oneDNN's matmul; needs AVX512_BF16 or AMX-BF16). The
	// feed-forward block's intermediate is stored in bfloat16 by its
	// first product (bias and activation fused into it) and read so by
	// the second, which would round it to bfloat16 anyway; the other
	// activations between products stay float32.
	PrecisionBF16 Precision = "bf16"
	// PrecisionInt8 is dynamic quantization: int8 weights per output
	// channel, quantized once; activations quantized per row at run time;
	// int32 accumulation (oneDNN's u8·s8 GEMM; VNNI where present).
	PrecisionInt8 Precision = "int8"
)

// ParsePrecision reads "fp32", "bf16", "int8" or "" (float32, nothing
// prepared).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.ToLower(s)); p {
	case "", PrecisionFP32:
		return p, nil
	case PrecisionBF16, PrecisionInt8:
		return p, nil
	}
	return "", fmt.Errorf("roformer: unknown precision %q (want fp32, bf16 or int8)", s)
}

// lowLinear is a linear layer prepared in a reduced precision:
// out = res + inp·Wᵀ + bias over BT rows (res and bias may be nil; out may
// alias res).
type lowLinear interface {
	Forward(out, inp, bias, res []float32, BT int)
}

// lowPrecision holds the prepared layers, keyed by their weight's storage
// and output width (the fused q/k/v weight shares its start with the
// query's).
type lowPrecision struct {
	prec   Precision
	mu     sync.Mutex
	layers map[linKey]lowLinear
}

type linKey struct {
	w  *float32
	oc int
}

// SetPrecision prepares every linear layer of the model for inference in p
// (quantizing, converting or repacking each weight once, now) or, with "",
// drops the prepared layers. It fails, leaving the model as it was, when
// this machine cannot run p: a clear error rather than a silent float32
// run. A model in bf16 or int8 runs Forward only: ForwardBackward refuses
// it. ForwardBackward on a model prepared for fp32 drops the preparation
// (the update would leave the copies stale) and trains. Call SetPrecision
// again after changing the weights in any other way.
func (m *Model) SetPrecision(p Precision) error { return m.setPrecision(p, prepHooks{}) }

// prepHooks are what Load does around the preparation of each weight:
// check it before (its values are read there for the first time) and
// release its pages after (the prepared form replaces it).
type prepHooks struct {
	before func(w []float32) error
	after  func(w []float32)
	// stored is called with a stored weight's bytes once it is prepared.
	stored func(b []byte)
}

// setPrecision is SetPrecision, calling h's hooks (when not nil) around
// each weight it prepares.
func (m *Model) setPrecision(p Precision, h prepHooks) error {
	if _, err := ParsePrecision(string(p)); err != nil {
		return err
	}
	m.dequantizeFor(p) // the stored weights p cannot run as they are become float32
	if !prepares(p) {
		m.lowp = nil
		return nil
	}
	lp := &lowPrecision{prec: p, layers: map[linKey]lowLinear{}}
	var buf []float32 // a bf16 weight's values, one at a time
	for w, q := range m.stored {
		if !q.linear {
			continue // the word embedding, looked up by rows
		}
		OC, C := w.Shape[0], w.Shape[1]
		var l lowLinear
		var err error
		if q.bf16 != nil {
			buf = slices.Grow(buf[:0], OC*C)[:OC*C]
			q.values(buf, C)
			if err = checkFiniteValues(fmt.Sprintf("parameter %s%v", w.Name, w.Shape), buf); err != nil {
				return err
			}
			l, err = lp.make(buf, OC, C)
		} else {
			l, err = kernels.NewInt8LinearQuantized(q.codes, q.scale, OC, C)
		}
		if err != nil {
			if p == PrecisionFP32 {
				// float32 runs everywhere: without the repacked copies.
				m.dequantizeFor("")
				m.lowp = nil
				return nil
			}
			return fmt.Errorf("roformer: %s: %w", w.Name, err)
		}
		lp.layers[linKey{unsafe.SliceData(w.Data), OC}] = l
		if h.stored != nil {
			h.stored(q.bytes())
		}
	}
	for _, l := range m.linears() {
		if h.before != nil {
			if err := h.before(l.w[:l.oc*l.c]); err != nil {
				return err
			}
		}
		if _, err := lp.get(l.w, l.oc, l.c); err != nil {
			if p == PrecisionFP32 {
				// float32 runs everywhere: without the repacked copies.
				m.dequantizeFor("")
				m.lowp = nil
				return nil
			}
			return err
		}
		if h.after != nil {
			h.after(l.w[:l.oc*l.c])
		}
	}
	m.lowp = lp
	return nil
}

// prepares reports whether SetPrecision(p) makes prepared layers: for bf16
// and int8, and for fp32 asked for explicitly where oneDNN (its matmul's
// packed weights) or go-asm (its panels) is the backend.
func prepares(p Precision) bool {
	if p == PrecisionFP32 {
		k := blas.Chosen().Kind
		return k == blas.KindOneDNN || k == blas.KindGoAsm
	}
	return p != ""
}

// SetTrainingPrecision sets the number format of the linear layers'
// products in training: PrecisionBF16 is mixed precision (Micikevicius et
// al. 2018, in bfloat16 as Kalamkar et al. 2019): every product of a
// linear layer, forward and backward (input and weight gradients), takes
// its operands rounded to bfloat16 (each once per pass: the input, the
// weights, the output gradient) and accumulates in float32
// (kernels.MatmulForwardBF16, blas.GemmBF16), and so do the products of
// softmax attention: the fused kernel's tiles from fusedTrainMinT tokens
// (kernels.FlashAttentionForwardBF16, FlashAttentionBackwardBF16) and the
// per-head kernel's below (kernels.AttentionForwardBF16,
// AttentionBackwardBF16), while the weights, their gradients, the
// optimizer's state and everything else (embeddings, relative-position and
// UniLM-masked attention below fusedTrainMinT, softmax, LayerNorm,
// activations, losses) stay float32. bfloat16 keeps float32's exponent
// range, so no loss scaling is needed. It also applies to Forward for the
// layers SetPrecision has not prepared, so evaluation during training
// computes what training does. "" and PrecisionFP32 are float32; int8 is
// refused (it is an inference format). It fails, changing nothing, when
// blas.BF16Supported does.
func (m *Model) SetTrainingPrecision(p Precision) error {
	switch p {
	case "", PrecisionFP32:
		m.trainBF16 = false
		return nil
	case PrecisionBF16:
		if err := blas.BF16Supported(); err != nil {
			return fmt.Errorf("roformer: bf16 training: %w", err)
		}
		m.trainBF16 = true
		return nil
	case PrecisionInt8:
		return fmt.Errorf("roformer: int8 is an inference precision; training runs in fp32 or bf16")
	}
	_, err := ParsePrecision(string(p))
	return err
}

// TrainingPrecision returns the format SetTrainingPrecision set:
// PrecisionBF16 or PrecisionFP32.
func (m *Model) TrainingPrecision() Precision {
	if m.trainBF16 {
		return PrecisionBF16
	}
	return PrecisionFP32
}

// BatchInvariant reports whether m's outputs for a text are the same bits
// alone and in any batch, at any place in it, any padded length and any
// thread count: its products run on go-asm (blas.BatchInvariant), whose
// sums do not depend on the rows beside a row, in fp32 or int8 (bf16's
// products are oneDNN's matmul). The fused attention keeps a row's sums
// within its visible keys, so padding changes nothing.
func (m *Model) BatchInvariant() bool {
	return blas.BatchInvariant() && m.Precision() != PrecisionBF16
}

// Precision returns the precision the inference products run in:
// PrecisionFP32 also when nothing is prepared.
func (m *Model) Precision() Precision {
	if m.lowp == nil {
		return PrecisionFP32
	}
	return m.lowp.prec
}

// get returns the prepared layer for weight w [oc, c], preparing it first
// if needed.
func (lp *lowPrecision) get(w []float32, oc, c int) (lowLinear, error) {
	k := linKey{unsafe.SliceData(w), oc}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if l, ok := lp.layers[k]; ok {
		return l, nil
	}
	l, err := lp.make(w, oc, c)
	if err != nil {
		return nil, err
	}
	lp.layers[k] = l
	return l, nil
}

// make prepares weight w [oc, c] in lp's precision (a copy: w may be
// reused after).
func (lp *lowPrecision) make(w []float32, oc, c int) (lowLinear, error) {
	var l lowLinear
	var err error
	switch lp.prec {
	case PrecisionInt8:
		l, err = kernels.NewInt8Linear(w[:oc*c], oc, c)
	case PrecisionBF16:
		l, err = kernels.NewBF16Linear(w[:oc*c], oc, c)
	case PrecisionFP32:
		if blas.Chosen().Kind == blas.KindGoAsm {
			l, err = kernels.NewPanelLinear(w[:oc*c], oc, c)
		} else {
			l, err = kernels.NewPackedLinear(w[:oc*c], oc, c)
		}
	default:
		err = fmt.Errorf("roformer: precision %q has no prepared layers", lp.prec)
	}
	if err != nil {
		return nil, fmt.Errorf("roformer: precision %s: %w", lp.prec, err)
	}
	return l, nil
}

// rekey moves the prepared layers of the weight stored at old to the
// same weight copied to new (Model.ownWeights); lp may be nil.
func (lp *lowPrecision) rekey(old, new *float32) {
	if lp == nil {
		return
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	for k, l := range lp.layers {
		if k.w == old {
			lp.layers[linKey{new, k.oc}] = l
		}
	}
}

type linearShape struct {
	w     []float32
	oc, c int
}

// linears lists the weights of the linear layers Forward runs, with
// their shapes: the embedding projection, each layer's q/k/v (fused when
// adjacent), attention output and feed-forward, and the head's.
func (m *Model) linears() []linearShape {
	cfg := &m.Config
	E, H, I := cfg.EmbeddingSize, cfg.HiddenSize, cfg.IntermediateSize
	var ls []linearShape
	add := func(w []float32, oc, c int) {
		if len(w) >= oc*c && oc*c > 0 {
			ls = append(ls, linearShape{w, oc, c})
		}
	}
	if p := m.Encoder.Project; p != nil {
		add(p.W.Data, H, E)
	}
	for i := range m.Encoder.Layers {
		L := &m.Encoder.Layers[i]
		if w, _, ok := L.fusedWeights(); ok {
			add(w, 3*H, H)
		} else {
			add(L.Query.W.Data, H, H)
			add(L.Key.W.Data, H, H)
			add(L.Value.W.Data, H, H)
		}
		add(L.AttnOut.W.Data, H, H)
		add(L.FFIn.W.Data, I, H)
		add(L.FFOut.W.Data, H, I)
	}
	if p := m.Encoder.Pooler; p != nil {
		add(p.W.Data, H, H)
	}
	if k := kindOf(m.Head); k.linears != nil {
		for _, l := range k.linears(m) {
			add(l.w, l.oc, l.c)
		}
	}
	return ls
}

// matmul is the inference linear layer, out = inp·Wᵀ + b, in the model's
// precision.
//
//	out [BT, OC]; inp [BT, C]; w [OC, C]; b [OC] or nil
func (m *Model) matmul(out, inp, w, b []float32, BT, C, OC int) {
	if l := m.lowLinear(w, OC, C); l != nil {
		l.Forward(out, inp, b, nil, BT)
		return
	}
	if m.trainBF16 {
		kernels.MatmulForwardBF16(out, inp, w, b, BT, C, OC)
		return
	}
	kernels.MatmulForward(out, inp, w, b, BT, C, OC)
}

// matmulAct is matmul followed by act: out = act(inp·Wᵀ + b), the
// activation inside the product's kernel on a layer SetPrecision prepared
// in bf16 (kernels.PackedLinear.ForwardAct), else as a pass of its own
// (fp32 keeps this package's activation, as fusedFeedForward says). For inference: training keeps the pre-activation for backward.
func (m *Model) matmulAct(out, inp, w, b []float32, act kernels.Activation, BT, C, OC int) {
	if l, ok := m.lowLinear(w, OC, C).(*kernels.PackedLinear); ok && l.BF16() {
		l.ForwardAct(out, inp, b, act, BT)
		return
	}
	m.matmul(out, inp, w, b, BT, C, OC)
	kernels.ActivationForward(out, out, act, BT*OC)
}

// matmulResidual is matmul added to a residual stream: out = res + inp·Wᵀ + b.
func (m *Model) matmulResidual(out, inp, w, b, res []float32, BT, C, OC int) {
	if l := m.lowLinear(w, OC, C); l != nil {
		l.Forward(out, inp, b, res, BT)
		return
	}
	if m.trainBF16 {
		kernels.MatmulResidualForwardBF16(out, inp, w, b, res, BT, C, OC)
		return
	}
	kernels.MatmulResidualForward(out, inp, w, b, res, BT, C, OC)
}

// matmulBackward differentiates matmul in the training precision
// (kernels.MatmulBackward's contract).
func (m *Model) matmulBackward(dinp, dweight, dbias, dout, inp, weight []float32, BT, C, OC int) {
	if m.trainBF16 {
		kernels.MatmulBackwardBF16(dinp, dweight, dbias, dout, inp, weight, BT, C, OC)
		return
	}
	kernels.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, BT, C, OC)
}

// linearForward is l.Forward in the model's precision.
func (m *Model) linearForward(l *nn.Linear, out, inp []float32, N int) {
	m.matmul(out, inp, l.W.Data, l.Bias(), N, l.W.Shape[1], l.W.Shape[0])
}

// linearBackward is l.Backward in the training precision.
func (m *Model) linearBackward(l *nn.Linear, dinp, dout, inp []float32, N int) {
	m.matmulBackward(dinp, l.W.Grad, l.BiasGrad(), dout, inp, l.W.Data, N, l.W.Shape[1], l.W.Shape[0])
}

func (m *Model) lowLinear(w []float32, OC, C int) lowLinear {
	lp := m.lowp
	if lp == nil {
		return nil
	}
	l, err := lp.get(w, OC, C)
	if err != nil {
		// SetPrecision prepared every layer Forward runs, so this is a
		// layer added since; the same preparation succeeded then.
		panic(err)
	}
	return l
}

// feedForwardOut is the feed-forward block's second product,
// res2 = a + dropout(FFOut(post)).
func (m *Model) feedForwardOut(L *Layer, la *layerActs, post []float32, d kernels.Dropout, BT int) {
	H, I := m.Config.HiddenSize, m.Config.IntermediateSize
	if d.Active() {
		m.matmul(la.res2, post, L.FFOut.W.Data, L.FFOut.Bias(), BT, I, H)
		kernels.DropoutForward(la.res2, d, BT*H)
		kernels.AddForward(la.res2, la.res2, la.a, BT*H)
		return
	}
	m.matmulResidual(la.res2, post, L.FFOut.W.Data, L.FFOut.Bias(), la.a, BT, I, H)
}

// fusedFeedForward runs the feed-forward block of an inference pass,
// res2 = a + FFOut(act(FFIn(a))), with the activation inside the first
// product's kernel, when SetPrecision prepared both layers in bf16: the
// intermediate [BT, I] stays bfloat16 between the two products (written by
// the first, read by the second, in the first half of la.pre), which the
// second product would round it to anyway. It reports false, having done
// nothing, for the other layers: fp32 keeps this package's activation
// (oneDNN's differs by float32 ulps), so that a prepared fp32 model gives
// what training's evaluation gives to the last bits the products allow.
func (m *Model) fusedFeedForward(L *Layer, la *layerActs, BT int) bool {
	H, I := m.Config.HiddenSize, m.Config.IntermediateSize
	in, ok1 := m.lowLinear(L.FFIn.W.Data, I, H).(*kernels.PackedLinear)
	out, ok2 := m.lowLinear(L.FFOut.W.Data, H, I).(*kernels.PackedLinear)
	if !ok1 || !ok2 || !in.BF16() || !out.BF16() {
		return false
	}
	pre16 := kernels.BF16Buffer(la.pre[:BT*I])[:BT*I]
	in.ForwardActBF16(pre16, la.a, L.FFIn.Bias(), m.act, BT)
	out.ForwardBF16(la.res2, pre16, L.FFOut.Bias(), la.a, BT)
	return true
}
