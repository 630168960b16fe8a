package seq2seq

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/internal/boundedfile"
	"github.com/roformer-go/roformer/kernels"
)

// Position encodings of Config.Position.
const (
	Rotary     = "rotary"     // RoPE on encoder and decoder self-attention queries and keys
	Sinusoidal = "sinusoidal" // Vaswani et al.'s sinusoids added to the √C-scaled embeddings
)

// Layer-norm placements of Config.LayerNorm.
const (
	// PreLN normalises each sub-layer's input, x + Drop(f(LN(x))), with one
	// more LayerNorm at the top of each stack (tensor2tensor's v2 and
	// fairseq's normalize_before). The default, and what an empty
	// layer_norm_position (every config written before the field) means.
	PreLN = "pre"
	// PostLN normalises each residual sum, LN(x + Drop(f(x))), with no
	// LayerNorm at the top of either stack (Vaswani et al. §3.1, §5.4:
	// "LayerNorm(x + Sublayer(x))"; fairseq's transformer without
	// normalize_before, whose encoder and decoder then keep no final
	// layer_norm).
	PostLN = "post"
)

// Config is the model's config.json.
type Config struct {
	VocabSize     int     `json:"vocab_size"`      // shared source/target vocabulary V
	DModel        int     `json:"d_model"`         // C; 512 in Transformer-base
	Heads         int     `json:"num_heads"`       // NH; 8 in Transformer-base
	FFN           int     `json:"ffn_size"`        // I; 2048 in Transformer-base
	EncoderLayers int     `json:"encoder_layers"`  // 6 in Transformer-base
	DecoderLayers int     `json:"decoder_layers"`  // 6 in Transformer-base
	Position      string  `json:"position"`        // "rotary" or "sinusoidal"
	RopeBase      float64 `json:"rope_theta"`      // rotary base; 0 means 10000
	Dropout       float64 `json:"dropout"`         // residual and embedding dropout; 0.1 in Transformer-base
	LabelSmooth   float64 `json:"label_smoothing"` // ε of the loss; 0.1 in Transformer-base
	PadID         int     `json:"pad_token_id"`
	BOSID         int     `json:"bos_token_id"` // the decoder's first input
	EOSID         int     `json:"eos_token_id"` // ends sources and targets
	LayerNormEps  float64 `json:"layer_norm_eps"`
	// Activation of the feed-forward block: "relu" (Vaswani et al.; the
	// default when empty) or any name kernels.ParseActivation knows.
	Activation string `json:"activation,omitempty"`
	// LayerNorm places the LayerNorms: PreLN (the default when empty) or
	// PostLN.
	LayerNorm string `json:"layer_norm_position,omitempty"`
}

// postLN reports whether the layers are post-LN.
func (c Config) postLN() bool { return c.LayerNorm == PostLN }

// activation returns the feed-forward activation (ReLU when unset).
func (c Config) activation() (kernels.Activation, error) {
	if c.Activation == "" {
		return kernels.ReLU, nil
	}
	a, err := kernels.ParseActivation(c.Activation)
	if err != nil {
		return 0, fmt.Errorf("seq2seq: activation: %w", err)
	}
	return a, nil
}

// Limits on config.json's sizes, far above every released
// encoder-decoder (Transformer-big: d_model 1024, ffn 4096, 6 + 6 layers),
// checked by Validate before anything is allocated from them.
const (
	MaxConfigBytes = 1 << 20 // config.json
	MaxVocabSize   = 1 << 24
	MaxDModel      = 1 << 16
	MaxHeads       = 4096
	MaxFFN         = 1 << 18
	MaxLayers      = 1024 // encoder_layers and decoder_layers each
	// MaxParams bounds the parameter count the sizes imply: 2³⁴, 137 GB
	// with gradients as float32.
	MaxParams = 1 << 34
)

// NumParamsFor returns the number of parameters newEmpty allocates for c
// (each with a gradient of the same size). Within the limits above the
// count is exact in int64: V·C ≤ 2⁴⁰ and each layer below 2³⁷.
func (c Config) NumParamsFor() int64 {
	C, I, V := int64(c.DModel), int64(c.FFN), int64(c.VocabSize)
	lin := func(out, in int64) int64 { return out*in + out }
	enc := 2*2*C + lin(3*C, C) + lin(C, C) + lin(I, C) + lin(C, I)
	dec := 3*2*C + lin(3*C, C) + lin(C, C) + lin(C, C) + lin(2*C, C) + lin(C, C) + lin(I, C) + lin(C, I)
	top := 2 * C // the LayerNorm at the top of each stack, pre-LN only
	if c.postLN() {
		top = 0
	}
	return V*C + int64(c.EncoderLayers)*enc + top + int64(c.DecoderLayers)*dec + top
}

// Validate checks the numbers, naming the field. The sizes must be at most
// MaxVocabSize, MaxDModel, MaxHeads, MaxFFN and MaxLayers, and the
// parameter count they imply (NumParamsFor) at most MaxParams.
func (c Config) Validate() error {
	for _, f := range []struct {
		key      string
		v, limit int
	}{
		{"vocab_size", c.VocabSize, MaxVocabSize}, {"d_model", c.DModel, MaxDModel}, {"num_heads", c.Heads, MaxHeads},
		{"ffn_size", c.FFN, MaxFFN}, {"encoder_layers", c.EncoderLayers, MaxLayers}, {"decoder_layers", c.DecoderLayers, MaxLayers},
	} {
		if f.v > f.limit {
			return fmt.Errorf("seq2seq: %s %d is above the limit %d", f.key, f.v, f.limit)
		}
	}
	switch {
	case c.VocabSize < 2:
		return fmt.Errorf("seq2seq: vocab_size %d must be at least 2", c.VocabSize)
	case c.DModel <= 0 || c.Heads <= 0 || c.DModel%c.Heads != 0:
		return fmt.Errorf("seq2seq: d_model %d must be a positive multiple of num_heads %d", c.DModel, c.Heads)
	case (c.DModel/c.Heads)%2 != 0:
		return fmt.Errorf("seq2seq: head size %d (d_model %d / num_heads %d) must be even", c.DModel/c.Heads, c.DModel, c.Heads)
	case c.FFN <= 0:
		return fmt.Errorf("seq2seq: ffn_size %d must be positive", c.FFN)
	case c.EncoderLayers < 1 || c.DecoderLayers < 1:
		return fmt.Errorf("seq2seq: encoder_layers %d and decoder_layers %d must be at least 1", c.EncoderLayers, c.DecoderLayers)
	case c.Position != Rotary && c.Position != Sinusoidal:
		return fmt.Errorf("seq2seq: position %q is not %q or %q", c.Position, Rotary, Sinusoidal)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("seq2seq: dropout %v must lie in [0, 1)", c.Dropout)
	case !(c.LabelSmooth >= 0 && c.LabelSmooth < 1):
		return fmt.Errorf("seq2seq: label_smoothing %v must lie in [0, 1)", c.LabelSmooth)
	case !(c.LayerNormEps > 0) || math.IsInf(c.LayerNormEps, 0):
		return fmt.Errorf("seq2seq: layer_norm_eps %v must be positive", c.LayerNormEps)
	case c.RopeBase != 0 && !(c.RopeBase > 1):
		return fmt.Errorf("seq2seq: rope_theta %v must be above 1", c.RopeBase)
	case c.LayerNorm != "" && c.LayerNorm != PreLN && c.LayerNorm != PostLN:
		return fmt.Errorf("seq2seq: layer_norm_position %q is not %q or %q", c.LayerNorm, PreLN, PostLN)
	}
	if _, err := c.activation(); err != nil {
		return err
	}
	if n := c.NumParamsFor(); n > MaxParams {
		return fmt.Errorf("seq2seq: vocab_size %d, d_model %d, ffn_size %d, encoder_layers %d and decoder_layers %d imply %d parameters, above the limit %d (MaxParams)",
			c.VocabSize, c.DModel, c.FFN, c.EncoderLayers, c.DecoderLayers, n, int64(MaxParams))
	}
	for _, id := range []struct {
		name string
		v    int
	}{{"pad_token_id", c.PadID}, {"bos_token_id", c.BOSID}, {"eos_token_id", c.EOSID}} {
		if id.v < 0 || id.v >= c.VocabSize {
			return fmt.Errorf("seq2seq: %s %d is outside the vocabulary [0, %d)", id.name, id.v, c.VocabSize)
		}
	}
	return nil
}

// HeadSize is C/NH.
func (c Config) HeadSize() int { return c.DModel / c.Heads }

// DefaultConfig returns Vaswani et al.'s Transformer-base (§3, table 3: C
// 512, 8 heads, I 2048, 6 + 6 layers, dropout 0.1, label smoothing ε 0.1)
// over their shared vocabulary of 37000 tokens (§5.1), with the paper's
// rotary position encoding; pad 0, BOS 1, EOS 2 (package tokenizer/bpe's
// ids). Set VocabSize (and Position) for the tokenizer at hand.
func DefaultConfig() Config {
	return Config{VocabSize: 37000, DModel: 512, Heads: 8, FFN: 2048, EncoderLayers: 6, DecoderLayers: 6,
		Position: Rotary, Dropout: 0.1, LabelSmooth: 0.1, PadID: 0, BOSID: 1, EOSID: 2, LayerNormEps: 1e-5}
}

// LoadConfig reads and validates a config.json at path (at most
// MaxConfigBytes); unknown keys are ignored.
func LoadConfig(path string) (Config, error) {
	raw, err := boundedfile.ReadConfig(path, MaxConfigBytes)
	if err != nil {
		return Config{}, fmt.Errorf("seq2seq: %w", err)
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("seq2seq: %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return c, nil
}
