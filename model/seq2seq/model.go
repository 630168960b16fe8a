package seq2seq

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
	"github.com/roformer-go/roformer/rope"
	"github.com/roformer-go/roformer/tensor"
)

// EncoderLayer is one encoder layer: self-attention (the fused
// projection QKV [3C, C], Out [C, C]) and the feed-forward block (FC1 [I, C],
// FC2 [C, I]). AttnNorm and FFNNorm normalise each sub-layer's input
// (pre-LN) or its residual sum (post-LN).
type EncoderLayer struct {
	AttnNorm nn.LayerNorm
	QKV, Out nn.Linear
	FFNNorm  nn.LayerNorm
	FC1, FC2 nn.Linear
}

// DecoderLayer is one decoder layer: causal self-attention, then
// cross-attention over the encoder's output (Q [C, C] from the decoder, KV
// [2C, C] from the encoder, CrossOut [C, C]), then the feed-forward block,
// each with its LayerNorm (SelfNorm, CrossNorm, FFNNorm: before the
// sub-layer in pre-LN, after its residual sum in post-LN).
type DecoderLayer struct {
	SelfNorm        nn.LayerNorm
	QKV, SelfOut    nn.Linear
	CrossNorm       nn.LayerNorm
	Q, KV, CrossOut nn.Linear
	FFNNorm         nn.LayerNorm
	FC1, FC2        nn.Linear
}

// Model is the encoder-decoder. Its parameters are named as fairseq's
// transformer names them (embed_tokens, encoder.layers.N.self_attn, …),
// with the q, k, v projections fused.
type Model struct {
	Config Config
	Embed  *tensor.Param // E [V, C]: source and target embeddings and the output projection
	Enc    []EncoderLayer
	// EncNorm and DecNorm are the LayerNorms at the top of the stacks,
	// pre-LN only: post-LN has none (their W and B are nil, and they are
	// not among Params).
	EncNorm nn.LayerNorm
	Dec     []DecoderLayer
	DecNorm nn.LayerNorm

	rot    *rope.Rotary // nil for sinusoidal
	act    kernels.Activation
	params []*tensor.Param
}

// New allocates a model with zero parameters for cfg, in a fixed order
// (the order of Params). Use Init for the random initialisation or Load to
// read a saved model.
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	C, I, V := cfg.DModel, cfg.FFN, cfg.VocabSize
	m := &Model{Config: cfg}
	m.act, _ = cfg.activation() // checked by Validate
	if cfg.Position == Rotary {
		rot, err := rope.New(rope.Config{HeadSize: cfg.HeadSize(), Base: cfg.RopeBase})
		if err != nil {
			return nil, fmt.Errorf("seq2seq: %w", err)
		}
		m.rot = rot
	}
	add := func(name string, shape ...int) *tensor.Param {
		p := tensor.NewParam(name, shape...)
		m.params = append(m.params, p)
		return p
	}
	lin := func(name string, oc, c int) nn.Linear {
		return nn.Linear{W: add(name+".weight", oc, c), B: add(name+".bias", oc)}
	}
	ln := func(name string) nn.LayerNorm {
		return nn.LayerNorm{W: add(name+".weight", C), B: add(name+".bias", C)}
	}
	m.Embed = add("embed_tokens.weight", V, C)
	for l := 0; l < cfg.EncoderLayers; l++ {
		p := fmt.Sprintf("encoder.layers.%d.", l)
		m.Enc = append(m.Enc, EncoderLayer{
			AttnNorm: ln(p + "self_attn_layer_norm"),
			QKV:      lin(p+"self_attn.qkv_proj", 3*C, C),
			Out:      lin(p+"self_attn.out_proj", C, C),
			FFNNorm:  ln(p + "final_layer_norm"),
			FC1:      lin(p+"fc1", I, C),
			FC2:      lin(p+"fc2", C, I),
		})
	}
	if !cfg.postLN() {
		m.EncNorm = ln("encoder.layer_norm")
	}
	for l := 0; l < cfg.DecoderLayers; l++ {
		p := fmt.Sprintf("decoder.layers.%d.", l)
		m.Dec = append(m.Dec, DecoderLayer{
			SelfNorm:  ln(p + "self_attn_layer_norm"),
			QKV:       lin(p+"self_attn.qkv_proj", 3*C, C),
			SelfOut:   lin(p+"self_attn.out_proj", C, C),
			CrossNorm: ln(p + "encoder_attn_layer_norm"),
			Q:         lin(p+"encoder_attn.q_proj", C, C),
			KV:        lin(p+"encoder_attn.kv_proj", 2*C, C),
			CrossOut:  lin(p+"encoder_attn.out_proj", C, C),
			FFNNorm:   ln(p + "final_layer_norm"),
			FC1:       lin(p+"fc1", I, C),
			FC2:       lin(p+"fc2", C, I),
		})
	}
	if !cfg.postLN() {
		m.DecNorm = ln("decoder.layer_norm")
	}
	return m, nil
}

// Init sets every parameter from seed: E ~ N(0, C^−½) (so √C·E has unit
// variance, as fairseq's transformer), the linear layers Xavier-uniform
// (Vaswani et al.'s tensor2tensor and fairseq), biases 0, LayerNorm
// weights 1.
func (m *Model) Init(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x7365713273657121))
	std := 1 / math.Sqrt(float64(m.Config.DModel))
	for i := range m.Embed.Data {
		m.Embed.Data[i] = float32(r.NormFloat64() * std)
	}
	for _, p := range m.params {
		switch {
		case p == m.Embed:
		case len(p.Shape) == 2:
			a := math.Sqrt(6 / float64(p.Shape[0]+p.Shape[1]))
			for i := range p.Data {
				p.Data[i] = float32((2*r.Float64() - 1) * a)
			}
		case isNormWeight(p.Name):
			for i := range p.Data {
				p.Data[i] = 1
			}
		default:
			clear(p.Data)
		}
	}
}

func isNormWeight(name string) bool {
	n := len(name)
	return n > len("layer_norm.weight") && name[n-len("layer_norm.weight"):] == "layer_norm.weight"
}

// Params returns every parameter in a fixed order (the optimizer's).
func (m *Model) Params() []*tensor.Param { return m.params }

// NumParams is the number of weights.
func (m *Model) NumParams() int {
	n := 0
	for _, p := range m.params {
		n += len(p.Data)
	}
	return n
}

// ZeroGrad clears every gradient.
func (m *Model) ZeroGrad() {
	for _, p := range m.params {
		p.ZeroGrad()
	}
}

// Clone returns a deep copy of the weights (gradients zero).
func (m *Model) Clone() *Model {
	c, _ := New(m.Config) // m.Config was validated
	for i, p := range m.params {
		copy(c.params[i].Data, p.Data)
	}
	return c
}

// sinusoid fills pe [T, C] with Vaswani et al.'s encoding (§3.5) of
// positions 0 … T−1: PE(p, 2i) = sin(p/10000^(2i/C)), PE(p, 2i+1) = cos(…).
func sinusoid(pe []float32, offset, T, C int) {
	for t := 0; t < T; t++ {
		p := float64(offset + t)
		row := pe[t*C : t*C+C]
		for i := 0; i < C; i += 2 {
			a := p / math.Pow(10000, float64(i)/float64(C))
			row[i] = float32(math.Sin(a))
			if i+1 < C {
				row[i+1] = float32(math.Cos(a))
			}
		}
	}
}
