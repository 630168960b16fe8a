package roformer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
	"github.com/roformer-go/roformer/rope"
	"github.com/roformer-go/roformer/tensor"
)

// Embeddings is RoFormerEmbeddings: word and token-type tables and their
// LayerNorm (no absolute position table), plus BERT's learned position table
// when position_embedding_type is learned.
type Embeddings struct {
	Word      *tensor.Param `hf:"word_embeddings.weight"`       // [V, E]
	TokenType *tensor.Param `hf:"token_type_embeddings.weight"` // [TV, E]
	Position  *tensor.Param `hf:"position_embeddings.weight"`   // [P, E]; learned only
	LN        nn.LayerNorm  `hf:"LayerNorm"`                    // [E]
}

// Layer is one RoFormerLayer (post-LN): self-attention with rotary q, k (and
// v), then the feed-forward block.
type Layer struct {
	Query    nn.Linear    `hf:"attention.self.query"`   // [H, H]
	Key      nn.Linear    `hf:"attention.self.key"`     // [H, H]
	Value    nn.Linear    `hf:"attention.self.value"`   // [H, H]
	AttnOut  nn.Linear    `hf:"attention.output.dense"` // [H, H]
	AttnLN   nn.LayerNorm `hf:"attention.output.LayerNorm"`
	FFIn     nn.Linear    `hf:"intermediate.dense"` // [I, H]
	FFOut    nn.Linear    `hf:"output.dense"`       // [H, I]
	OutputLN nn.LayerNorm `hf:"output.LayerNorm"`
	// RelKey holds Shaw et al.'s relative key embeddings a_{−k} … a_k
	// [2k+1, HS], shared by the heads; position_embedding_type relative only.
	RelKey *tensor.Param `hf:"attention.self.distance_embedding.weight"`

	qkv *qkvBlock // the one allocation behind Query, Key and Value (New)
}

// qkvBlock holds the backing arrays that New allocates for the query, key
// and value layers: w [3H, H], b [3H] and their gradients, of which
// Query/Key/Value's Data and Grad are capacity-limited views.
type qkvBlock struct{ w, b, dw, db []float32 }

// Encoder is RoFormerModel: the part every head shares, stored under the
// "roformer." prefix in checkpoints of the head classes.
type Encoder struct {
	Embeddings Embeddings `hf:"embeddings"`
	Project    *nn.Linear `hf:"embeddings_project"` // [H, E]; only when E ≠ H
	Layers     []Layer    `hf:"encoder.layer"`
	// Pooler is RoFormerPooler (RoFormer-Sim): dense → pooler_activation on
	// the first token, Output.PoolerOutput; only when the checkpoint has
	// one (see EnablePooler).
	Pooler *nn.Linear `hf:"pooler.dense"` // [H, H]
}

// EnablePooler gives the model a pooler (roformer.pooler.dense [H, H]),
// initialised to zero; Load calls it when the checkpoint holds one.
func (m *Model) EnablePooler() {
	if m.Encoder.Pooler != nil {
		return
	}
	H := m.Config.HiddenSize
	p := newLinear(H, H)
	m.Encoder.Pooler = &p
	for _, np := range m.namedParams() {
		np.p.Name = np.name
	}
}

// poolerForward writes pooler_output [B, H]: the pooler on the first token
// of each row of x [B·T, H].
func (m *Model) poolerForward(x []float32, B, T int) *tensor.Tensor {
	p := m.Encoder.Pooler
	if p == nil {
		return nil
	}
	H := m.Config.HiddenSize
	first, out := make([]float32, B*H), make([]float32, B*H)
	for r := 0; r < B; r++ {
		copy(first[r*H:r*H+H], x[r*T*H:r*T*H+H])
	}
	act, _ := kernels.ParseActivation(m.Config.PoolerActivationName())
	m.matmulAct(out, first, p.W.Data, p.Bias(), act, B, H, H)
	return &tensor.Tensor{Shape: []int{B, H}, Data: out}
}

// Model is a RoFormer encoder with one head. Exactly one of the head fields
// is set, according to Head (none for HeadBase).
type Model struct {
	Config  Config
	Head    Head
	Encoder Encoder `hf:"roformer"`

	LM         *LMHead             `hf:"cls.predictions"` // masked-lm, causal-lm
	Classifier *ClassificationHead `hf:"classifier"`      // sequence-classification
	TokenCls   *nn.Linear          `hf:"classifier"`      // token-classification [NL, H]
	QA         *nn.Linear          `hf:"qa_outputs"`      // question-answering [2, H]
	Choice     *nn.Linear          `hf:"classifier"`      // multiple-choice [1, H]

	rotary *rope.Rotary
	act    kernels.Activation

	// Linear and performer attention: featRotary turns the features (width
	// F) when positions are rotary; omega holds each layer's performer
	// directions [M, HS], draw featureDraw of seed featureSeed.
	featRotary               *rope.Rotary
	omega                    [][]float32
	featureSeed, featureDraw uint64

	// lowp holds the linear layers prepared for bf16 or int8 inference
	// (SetPrecision); nil runs float32.
	lowp *lowPrecision
	// borrowed lists the parameters whose Data Load bound where they lie
	// in a mapped checkpoint (ownWeights copies them before training).
	borrowed []*tensor.Param
	// stored holds the weights kept as a quantized folder stores them (an
	// int8 folder loaded in int8, a bf16 one in bf16): their Params have
	// no Data.
	stored storedWeights
	// trainBF16 runs the products of the linear layers that lowp does not
	// hold, forward and backward, from bfloat16-rounded operands
	// (SetTrainingPrecision).
	trainBF16 bool
}

// New allocates a model with zero parameters for cfg and head. Use Init for
// HF's random initialisation or Bind to load a checkpoint. A configuration
// whose parameters (Config.ParamCount) exceed MaxParams is refused before
// anything is allocated.
func New(cfg Config, head Head) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("roformer: %w", err)
	}
	if _, err := ParseHead(string(head)); err != nil {
		return nil, err
	}
	if enc, hd, err := cfg.ParamCount(head); err != nil {
		return nil, fmt.Errorf("roformer: %w", err)
	} else if enc+hd > MaxParams {
		return nil, fmt.Errorf("roformer: %s with a %s head (num_labels %d) needs %d parameters, above the limit %d (MaxParams)", cfg.sizeWords(), head, cfg.NumLabels, enc+hd, int64(MaxParams))
	}
	act, _ := cfg.Activation()
	rot, err := rope.New(cfg.ropeConfig())
	if err != nil {
		return nil, fmt.Errorf("roformer: %w", err)
	}
	m := &Model{Config: cfg, Head: head, rotary: rot, act: act}
	E, H, I, V := cfg.EmbeddingSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	m.Encoder.Embeddings = Embeddings{
		Word:      newParam(V, E),
		TokenType: newParam(cfg.TypeVocabSize, E),
		LN:        newNorm(&cfg, E),
	}
	if cfg.PosEnc() == PosLearned {
		m.Encoder.Embeddings.Position = newParam(cfg.MaxPositionEmbeddings, E)
	}
	if F := cfg.NumFeatures(); F > 0 && cfg.PosEnc() == PosRotary {
		if m.featRotary, err = rope.New(rope.Config{HeadSize: F}); err != nil {
			return nil, fmt.Errorf("roformer: feature rotation: %w", err)
		}
	}
	if E != H {
		p := newLinear(H, E)
		m.Encoder.Project = &p
	}
	m.Encoder.Layers = make([]Layer, cfg.NumHiddenLayers)
	for i := range m.Encoder.Layers {
		q, k, v, blk := newLinears3(H, H, cfg.Bias())
		m.Encoder.Layers[i] = Layer{
			Query: q, Key: k, Value: v, AttnOut: newLinearBias(H, H, cfg.Bias()),
			AttnLN: newNorm(&cfg, H), FFIn: newLinearBias(I, H, cfg.Bias()), FFOut: newLinearBias(H, I, cfg.Bias()), OutputLN: newNorm(&cfg, H),
			qkv: blk,
		}
		if cfg.PosEnc() == PosRelative {
			m.Encoder.Layers[i].RelKey = newParam(2*cfg.RelativeMaxDistance+1, cfg.HeadSize())
		}
	}
	if cfg.Attention() == AttnPerformer {
		m.drawFeatures(0)
	}
	if cfg.RMSNorm() && (head == HeadMaskedLM || head == HeadCausalLM) && E != H {
		return nil, fmt.Errorf("roformer: RoFormer-V2's LM head decodes the hidden states with the word embeddings: embedding_size %d must equal hidden_size %d", E, H)
	}
	if k := kindOf(head); k.build != nil {
		k.build(m)
	}
	for _, np := range m.namedParams() {
		np.p.Name = np.name
	}
	return m, nil
}

// newLinears3 returns three [out, in] linear layers whose weights and
// biases are consecutive, capacity-limited views of one allocation each,
// so that they also form one [3·out, in] layer (Layer.fusedWeights);
// ensureGrads gives their gradients the same layout. Bind copies into
// these slices, so the layout survives it; Load's binding in place does
// not keep it (the projections then run one by one).
func newLinears3(out, in int, bias bool) (a, b, c nn.Linear, blk *qkvBlock) {
	blk = &qkvBlock{w: make([]float32, 3*out*in)}
	if bias {
		blk.b = make([]float32, 3*out)
	}
	ls := [3]nn.Linear{}
	for i := range ls {
		n, o := out*in, i*out*in
		ls[i] = nn.Linear{W: &tensor.Param{Shape: []int{out, in}, Data: blk.w[o : o+n : o+n]}}
		if bias {
			ls[i].B = &tensor.Param{Shape: []int{out}, Data: blk.b[i*out : (i+1)*out : (i+1)*out]}
		}
	}
	return ls[0], ls[1], ls[2], blk
}

// ownWeights gives the stored weights their float32 values (dequantize),
// copies the weights Load bound in place (in a mapped file) into memory of
// the model's own, and, unless layers are prepared for
// another precision (which then run them one by one), puts the query, key
// and value projections into one block again (Layer.fusedWeights): a model
// that trains writes its weights, and computes what a model made by New
// computes, to the bit (a kernel's sums may depend on where its operands
// lie).
func (m *Model) ownWeights() {
	m.dequantize()
	for _, p := range m.borrowed {
		old := &p.Data[0]
		p.Data = slices.Clone(p.Data)
		m.lowp.rekey(old, &p.Data[0])
	}
	m.borrowed = nil
	if m.lowp != nil {
		return
	}
	for i := range m.Encoder.Layers {
		L := &m.Encoder.Layers[i]
		if L.qkv != nil {
			continue
		}
		H, C := L.Query.W.Shape[0], L.Query.W.Shape[1]
		q, k, v, blk := newLinears3(H, C, L.Query.B != nil)
		for _, pair := range [][2]*nn.Linear{{&q, &L.Query}, {&k, &L.Key}, {&v, &L.Value}} {
			dst, src := pair[0], pair[1]
			copy(dst.W.Data, src.W.Data)
			src.W.Data = dst.W.Data
			if src.B != nil {
				copy(dst.B.Data, src.B.Data)
				src.B.Data = dst.B.Data
			}
		}
		L.qkv = blk
	}
}

// newParam returns a parameter of the given shape, zero, without a
// gradient: ensureGrads allocates the gradients when the model first
// trains, so that a model that only runs inference holds its weights once.
func newParam(shape ...int) *tensor.Param {
	return &tensor.Param{Shape: append([]int(nil), shape...), Data: make([]float32, tensor.Numel(shape))}
}

// newLinear is nn.NewLinear without gradients (newParam).
func newLinear(out, in int) nn.Linear {
	return nn.Linear{W: newParam(out, in), B: newParam(out)}
}

// newLayerNorm is nn.NewLayerNorm without gradients (newParam).
func newLayerNorm(c int) nn.LayerNorm {
	ln := nn.LayerNorm{W: newParam(c), B: newParam(c)}
	for i := range ln.W.Data {
		ln.W.Data[i] = 1
	}
	return ln
}

// ensureGrads allocates the gradients that are missing, zero: the fused
// query/key/value gradients as one block when their weights are one
// (fusedGrads), every other parameter's of its own size. It first gives
// the model its own copy of the weights Load bound where they lie in a
// mapped file (ownWeights).
func (m *Model) ensureGrads() {
	m.ownWeights()
	for i := range m.Encoder.Layers {
		L := &m.Encoder.Layers[i]
		if L.Query.W.Grad != nil {
			continue
		}
		if _, _, ok := L.fusedWeights(); !ok {
			continue
		}
		f := L.qkv
		f.dw = make([]float32, len(f.w))
		n := len(f.w) / 3
		L.Query.W.Grad, L.Key.W.Grad, L.Value.W.Grad = f.dw[:n:n], f.dw[n:2*n:2*n], f.dw[2*n:]
		if f.b != nil {
			f.db = make([]float32, len(f.b))
			nb := len(f.b) / 3
			L.Query.B.Grad, L.Key.B.Grad, L.Value.B.Grad = f.db[:nb:nb], f.db[nb:2*nb:2*nb], f.db[2*nb:]
		}
	}
	for _, np := range m.namedParams() {
		if np.p.Grad == nil {
			np.p.Grad = make([]float32, len(np.p.Data))
		}
	}
}

// newLinearBias is nn.NewLinear, without the bias when bias is false.
func newLinearBias(out, in int, bias bool) nn.Linear {
	l := newLinear(out, in)
	if !bias {
		l.B = nil
	}
	return l
}

// newNorm returns a LayerNorm over c features, or RoFormer-V2's RMS norm
// (no parameters: W and B nil) when the config says rms_norm.
func newNorm(cfg *Config, c int) nn.LayerNorm {
	if cfg.RMSNorm() {
		return nn.LayerNorm{}
	}
	return newLayerNorm(c)
}

// fusedWeights returns the query, key and value weights as one [3H, H]
// matrix and their biases as one [3H] vector, so that the three projections
// run as one matrix product; ok is false when the layer was not made by New
// or a caller replaced one of the Data slices (the projections then run one
// by one).
func (L *Layer) fusedWeights() (w, b []float32, ok bool) {
	f := L.qkv
	if f == nil || !views3(f.w, L.Query.W.Data, L.Key.W.Data, L.Value.W.Data) ||
		(f.b != nil || L.Query.B != nil) && !views3(f.b, L.Query.Bias(), L.Key.Bias(), L.Value.Bias()) {
		return nil, nil, false
	}
	return f.w, f.b, true
}

// fusedGrads is fusedWeights for the gradients.
func (L *Layer) fusedGrads() (dw, db []float32, ok bool) {
	f := L.qkv
	if f == nil || !views3(f.dw, L.Query.W.Grad, L.Key.W.Grad, L.Value.W.Grad) ||
		!views3(f.db, L.Query.BiasGrad(), L.Key.BiasGrad(), L.Value.BiasGrad()) {
		return nil, nil, false
	}
	return f.dw, f.db, true
}

// views3 reports whether x, y, z are still the three thirds of full.
func views3(full, x, y, z []float32) bool {
	n := len(full) / 3
	return n > 0 && len(x) == n && len(y) == n && len(z) == n &&
		&full[0] == &x[0] && &full[n] == &y[0] && &full[2*n] == &z[0]
}

type namedParam struct {
	name string
	p    *tensor.Param
}

// namedParams walks the struct tags: the HF state-dict name of every
// parameter of m, in a fixed order (the order of the fields).
func (m *Model) namedParams() []namedParam {
	var out []namedParam
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			if p, ok := v.Interface().(*tensor.Param); ok {
				out = append(out, namedParam{strings.TrimSuffix(prefix, "."), p})
				return
			}
			walk(v.Elem(), prefix)
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i), prefix+strconv.Itoa(i)+".")
			}
		case reflect.Struct:
			t := v.Type()
			for i := 0; i < t.NumField(); i++ {
				tag, ok := t.Field(i).Tag.Lookup("hf")
				if !ok {
					continue
				}
				walk(v.Field(i), prefix+tag+".")
			}
		}
	}
	walk(reflect.ValueOf(m).Elem(), "")
	return out
}

// Params returns every trainable parameter, named by its HF state-dict key
// (as RoFormerFor<Head>.named_parameters() names it), in a fixed order. The
// decoder weight of the LM heads is the word embedding (tied) and appears
// once, as roformer.embeddings.word_embeddings.weight.
//
// Params is for training: it gives every parameter its gradient first
// (zero), which a model made by New or Load does not hold until then, so
// that inference keeps its weights once. Weights lists the same
// parameters without allocating anything.
func (m *Model) Params() []*tensor.Param {
	m.ensureGrads()
	return m.Weights()
}

// Weights returns the parameters Params returns, in the same order, with
// the gradients they have (nil until the model trains or Params is
// called): for reading or setting values, as hashing, saving and
// initialising do.
func (m *Model) Weights() []*tensor.Param {
	nps := m.namedParams()
	out := make([]*tensor.Param, len(nps))
	for i, np := range nps {
		out[i] = np.p
	}
	return out
}

// NumParams returns the number of trainable scalars.
func (m *Model) NumParams() int {
	n := 0
	for _, p := range m.Weights() {
		n += tensor.Numel(p.Shape)
	}
	return n
}

// ZeroGrad clears every parameter gradient.
func (m *Model) ZeroGrad() {
	for _, p := range m.Params() {
		p.ZeroGrad()
	}
}

// Init sets every parameter as HF's RoFormerPreTrainedModel._init_weights
// does: linear and embedding weights N(0, initializer_range²), biases 0,
// LayerNorm weight 1 and bias 0, and the padding row of the word embedding 0.
//
// The learned position table and the relative key embeddings are normal
// too (BERT, Shaw et al.). A performer's random features are drawn afresh
// (draw 0) from seed.
func (m *Model) Init(seed uint64) {
	if m.Config.Attention() == AttnPerformer {
		m.featureSeed = seed
		m.drawFeatures(0)
	}
	r := rand.New(rand.NewPCG(seed, 0x726f666f726d6572))
	std := m.Config.InitializerRange
	for _, p := range m.Weights() {
		switch {
		case strings.Contains(p.Name, "LayerNorm") && strings.HasSuffix(p.Name, ".weight"):
			for i := range p.Data {
				p.Data[i] = 1
			}
		case strings.HasSuffix(p.Name, "bias"):
			clear(p.Data)
		default:
			for i := range p.Data {
				p.Data[i] = float32(r.NormFloat64() * std)
			}
		}
	}
	if pad := m.Config.PadID(); pad >= 0 {
		E := m.Config.EmbeddingSize
		clear(m.Encoder.Embeddings.Word.Data[pad*E : pad*E+E])
	}
}

// Rotary returns the model's rotary position embedding.
func (m *Model) Rotary() *rope.Rotary { return m.rotary }

// checkFinite reports the first parameter holding a NaN or Inf.
func (m *Model) checkFinite() error {
	for _, p := range m.Weights() {
		if err := checkFinite(p); err != nil {
			return err
		}
	}
	return nil
}

// checkFinite reports the first NaN or Inf in p.
func checkFinite(p *tensor.Param) error {
	return checkFiniteValues(fmt.Sprintf("parameter %s%v", p.Name, p.Shape), p.Data)
}

// checkFiniteValues reports the first NaN or Inf in v, naming it what.
func checkFiniteValues(what string, v []float32) error {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("roformer: %s holds %v at element %d", what, x, i)
		}
	}
	return nil
}

// checkFiniteBF16 is checkFinite for a parameter stored as the BF16 bytes
// raw (its Data empty).
func checkFiniteBF16(p *tensor.Param, raw []byte) error {
	for i := 0; i+1 < len(raw); i += 2 {
		if h := uint16(raw[i]) | uint16(raw[i+1])<<8; h&0x7f80 == 0x7f80 { // exponent all ones: Inf or NaN
			return fmt.Errorf("roformer: parameter %s%v holds %v at element %d", p.Name, p.Shape, tensor.BF16ToF32(h), i/2)
		}
	}
	return nil
}
