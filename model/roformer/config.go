package roformer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/internal/boundedfile"
	"github.com/roformer-go/roformer/kernels"
)

// Config mirrors HF's RoFormerConfig (configuration_roformer.py). Fields
// carry the exact config.json keys. Keys this type does not know are kept in
// Extra and written back by Save.
type Config struct {
	VocabSize                 int               `json:"vocab_size"`                   // rows of the word embedding; default 50000
	EmbeddingSize             int               `json:"embedding_size"`               // E; 0 or absent means hidden_size
	HiddenSize                int               `json:"hidden_size"`                  // H; default 768
	NumHiddenLayers           int               `json:"num_hidden_layers"`            // default 12
	NumAttentionHeads         int               `json:"num_attention_heads"`          // default 12; H must be divisible by it
	IntermediateSize          int               `json:"intermediate_size"`            // I; default 3072
	HiddenAct                 string            `json:"hidden_act"`                   // gelu, gelu_new, relu, silu, tanh, …; default gelu
	HiddenDropoutProb         float64           `json:"hidden_dropout_prob"`          // default 0.1
	AttentionProbsDropoutProb float64           `json:"attention_probs_dropout_prob"` // default 0.1
	MaxPositionEmbeddings     int               `json:"max_position_embeddings"`      // rows of HF's sinusoid table; default 1536. Not a limit here.
	TypeVocabSize             int               `json:"type_vocab_size"`              // default 2
	InitializerRange          float64           `json:"initializer_range"`            // std of the normal initialisation; default 0.02
	LayerNormEps              float64           `json:"layer_norm_eps"`               // default 1e-12
	RotaryValue               bool              `json:"rotary_value"`                 // rotate v as well as q and k; default false
	IsDecoder                 bool              `json:"is_decoder"`                   // causal mask (with a pooler, RoFormer-Sim's UniLM mask: Model.EncoderMask); default false
	UseCache                  bool              `json:"use_cache"`                    // default true (only meaningful for decoders)
	PadTokenID                *int              `json:"pad_token_id"`                 // default 0; its embedding row gets no gradient
	ProblemType               string            `json:"problem_type,omitempty"`       // regression, single_label_classification, multi_label_classification
	ID2Label                  map[string]string `json:"id2label,omitempty"`
	Label2ID                  map[string]int    `json:"label2id,omitempty"`
	ClassifierDropout         *float64          `json:"classifier_dropout,omitempty"`
	Architectures             []string          `json:"architectures,omitempty"`
	ModelType                 string            `json:"model_type"`
	TorchDtype                string            `json:"torch_dtype,omitempty"`

	// The position-encoding and attention switches of this toolkit (not
	// RoFormerConfig keys; HF keeps unknown keys as attributes, so a
	// config.json that carries them still loads there). Marshal writes them
	// only when they differ from the defaults, so a default model's
	// config.json is unchanged.
	PositionEmbeddingType PositionEncoding `json:"position_embedding_type,omitempty"` // rotary (default), sinusoidal, learned, relative, none
	AttentionType         AttentionKind    `json:"attention_type,omitempty"`          // softmax (default), linear, performer
	RelativeMaxDistance   int              `json:"relative_max_distance,omitempty"`   // relative: Shaw et al.'s clipping distance k; default 16
	PerformerFeatures     int              `json:"performer_features,omitempty"`      // performer: random features M (even); 0 means HS·ln HS rounded up to even
	FeatureRedrawInterval int              `json:"feature_redraw_interval,omitempty"` // performer: training steps between redraws of the features; default 1000, 0 never
	// ScaleEmbedding multiplies the word embeddings by √E before the token
	// types and positions are added (Vaswani et al. 2017 §3.4; the key and
	// meaning of HF's BART and Marian configs). With HF's N(0, 0.02²)
	// initialisation an added sinusoid (entries of size 1) otherwise
	// outweighs a word embedding by about 35 to 1 at E = 128, and the
	// layer norm that follows all but erases the token. Default false.
	ScaleEmbedding bool `json:"scale_embedding,omitempty"`

	// Rotary settings with Hugging Face's key names for RoPE models (not
	// RoFormerConfig keys; written only when set): the base θ (default
	// 10000), the share of each head that is turned, and context-extension
	// scaling (see RopeScaling).
	RopeTheta           float64      `json:"rope_theta,omitempty"`
	PartialRotaryFactor float64      `json:"partial_rotary_factor,omitempty"`
	RopeScaling         *RopeScaling `json:"rope_scaling,omitempty"`
	XPos                *XPosConfig  `json:"xpos,omitempty"`

	// RoFormer-V2 (JunnYu/RoFormer_pytorch's keys): norm_type "rms_norm"
	// normalises by x / sqrt(mean(x²) + eps) with no weight or bias, and
	// makes the MLM head the bare tied decoder; use_bias false drops the
	// biases of the encoder's linear layers. pooler_activation is the
	// pooler's (RoFormer-Sim: "linear").
	NormType         string `json:"norm_type,omitempty"`
	UseBias          *bool  `json:"use_bias,omitempty"`
	PoolerActivation string `json:"pooler_activation,omitempty"`

	// NumLabels is the number of labels of the classification heads: the
	// size of id2label, else the num_labels key, else 2 (HF's default).
	NumLabels int `json:"-"`

	// Extra holds every key of config.json that is not a field above.
	Extra map[string]json.RawMessage `json:"-"`
}

// DefaultConfig returns RoFormerConfig's defaults (roformer_chinese_base).
func DefaultConfig() Config {
	pad := 0
	return Config{
		VocabSize: 50000, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12,
		IntermediateSize: 3072, HiddenAct: "gelu", HiddenDropoutProb: 0.1, AttentionProbsDropoutProb: 0.1,
		MaxPositionEmbeddings: 1536, TypeVocabSize: 2, InitializerRange: 0.02, LayerNormEps: 1e-12,
		UseCache: true, PadTokenID: &pad, ModelType: "roformer", NumLabels: 2,
		PositionEmbeddingType: PosRotary, AttentionType: AttnSoftmax, RelativeMaxDistance: 16, FeatureRedrawInterval: 1000,
	}
}

// knownKeys are the config.json keys that Config decodes itself.
var knownKeys = map[string]bool{}

func init() {
	for _, k := range []string{"vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
		"intermediate_size", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
		"max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps", "rotary_value",
		"is_decoder", "use_cache", "pad_token_id", "problem_type", "id2label", "label2id", "classifier_dropout",
		"architectures", "model_type", "torch_dtype", "num_labels",
		"position_embedding_type", "attention_type", "relative_max_distance", "performer_features", "feature_redraw_interval",
		"rope_theta", "partial_rotary_factor", "rope_scaling", "xpos", "norm_type", "use_bias", "pooler_activation"} {
		knownKeys[k] = true
	}
}

// ParseConfig decodes config.json bytes over the defaults and validates the
// result. name is used in error messages (usually the file path).
func ParseConfig(data []byte, name string) (Config, error) {
	c := DefaultConfig()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return c, fmt.Errorf("roformer: %s: not a JSON object: %w", name, err)
	}
	// embedding_size may be null (HF: None → hidden_size).
	if v, ok := raw["embedding_size"]; ok && string(bytes.TrimSpace(v)) == "null" {
		delete(raw, "embedding_size")
	}
	clean, _ := json.Marshal(raw)
	if err := json.Unmarshal(clean, (*plainConfig)(&c)); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if k := te.Type.Kind(); k >= reflect.Int && k <= reflect.Int64 && strings.HasPrefix(te.Value, "number ") {
				// 1e10, 1.5 or 2^63: not a Go int.
				return c, fmt.Errorf("roformer: %s: key %q must be an integer in the int range, got %s", name, te.Field, strings.TrimPrefix(te.Value, "number "))
			}
			return c, fmt.Errorf("roformer: %s: key %q must be %s, got a JSON %s", name, te.Field, te.Type, te.Value)
		}
		return c, fmt.Errorf("roformer: %s: %w", name, err)
	}
	if c.EmbeddingSize == 0 {
		c.EmbeddingSize = c.HiddenSize
	}
	c.NumLabels = 2
	if v, ok := raw["num_labels"]; ok {
		if err := json.Unmarshal(v, &c.NumLabels); err != nil {
			return c, fmt.Errorf("roformer: %s: key \"num_labels\" must be an integer in the int range, got %.40s", name, v)
		}
	}
	if len(c.ID2Label) > 0 {
		c.NumLabels = len(c.ID2Label)
	}
	c.Extra = map[string]json.RawMessage{}
	for k, v := range raw {
		if !knownKeys[k] {
			c.Extra[k] = v
		}
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("roformer: %s: %w", name, err)
	}
	return c, nil
}

// LoadConfig reads and validates a config.json file of at most
// MaxConfigBytes.
func LoadConfig(path string) (Config, error) {
	data, err := boundedfile.ReadConfig(path, MaxConfigBytes)
	if err != nil {
		return Config{}, fmt.Errorf("roformer: %w", err)
	}
	return ParseConfig(data, path)
}

// HeadSize returns H / num_attention_heads.
func (c *Config) HeadSize() int { return c.HiddenSize / c.NumAttentionHeads }

// PadID returns pad_token_id, or -1 when it is null.
func (c *Config) PadID() int {
	if c.PadTokenID == nil {
		return -1
	}
	return *c.PadTokenID
}

// Activation returns hidden_act as a kernel activation.
func (c *Config) Activation() (kernels.Activation, error) {
	return kernels.ParseActivation(c.HiddenAct)
}

// Validate checks that the configuration describes a model that can be
// built; errors carry the key and the numbers. The sizes must be positive
// and at most their limits (MaxVocabSize, MaxHiddenSize,
// MaxIntermediateSize, MaxLayers, MaxAttentionHeads, MaxTypeVocabSize,
// MaxPositions, MaxLabels, MaxRelativeDistance, MaxPerformerFeatures), and
// the encoder's parameter count, computed with overflow checks, at most
// MaxParams; a configuration that fails these is refused before any other
// check computes with its sizes.
func (c *Config) Validate() error {
	var errs []error
	pos := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s %d must be positive", name, v))
		}
	}
	pos("vocab_size", c.VocabSize)
	pos("hidden_size", c.HiddenSize)
	pos("embedding_size", c.EmbeddingSize)
	pos("num_hidden_layers", c.NumHiddenLayers)
	pos("num_attention_heads", c.NumAttentionHeads)
	pos("intermediate_size", c.IntermediateSize)
	pos("type_vocab_size", c.TypeVocabSize)
	if c.MaxPositionEmbeddings < 0 {
		errs = append(errs, fmt.Errorf("max_position_embeddings %d must not be negative", c.MaxPositionEmbeddings))
	}
	if c.NumLabels <= 0 {
		errs = append(errs, fmt.Errorf("num_labels %d must be positive", c.NumLabels))
	}
	// The sizes are bounded before anything below computes with them.
	if lim := c.checkLimits(len(errs) == 0); len(lim) > 0 {
		return errors.Join(append(errs, lim...)...)
	}
	if c.NumAttentionHeads > 0 && c.HiddenSize > 0 {
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			errs = append(errs, fmt.Errorf("hidden_size %d is not divisible by num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads))
		} else if c.HeadSize()%2 != 0 {
			errs = append(errs, fmt.Errorf("head size %d (hidden_size %d / num_attention_heads %d) must be even for the rotary pairs", c.HeadSize(), c.HiddenSize, c.NumAttentionHeads))
		}
	}
	if _, err := c.Activation(); err != nil {
		errs = append(errs, fmt.Errorf("hidden_act: %w", err))
	}
	if !(c.LayerNormEps > 0) || math.IsInf(c.LayerNormEps, 0) {
		errs = append(errs, fmt.Errorf("layer_norm_eps %v must be a positive number", c.LayerNormEps))
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"hidden_dropout_prob", c.HiddenDropoutProb}, {"attention_probs_dropout_prob", c.AttentionProbsDropoutProb}} {
		if !(p.v >= 0 && p.v < 1) {
			errs = append(errs, fmt.Errorf("%s %v must be in [0, 1)", p.name, p.v))
		}
	}
	if c.PadTokenID != nil && (*c.PadTokenID < 0 || *c.PadTokenID >= c.VocabSize) && c.VocabSize > 0 {
		errs = append(errs, fmt.Errorf("pad_token_id %d is outside the vocabulary [0, %d)", *c.PadTokenID, c.VocabSize))
	}
	switch c.ProblemType {
	case "", "regression", "single_label_classification", "multi_label_classification":
	default:
		errs = append(errs, fmt.Errorf("problem_type %q is not one of regression, single_label_classification, multi_label_classification", c.ProblemType))
	}
	for k := range c.ID2Label {
		if i, err := strconv.Atoi(k); err != nil || i < 0 || i >= len(c.ID2Label) {
			errs = append(errs, fmt.Errorf("id2label key %q is not an integer in [0, %d)", k, len(c.ID2Label)))
		}
	}
	errs = append(errs, c.validateSwitches()...)
	switch c.NormType {
	case "", "layer_norm", "rms_norm":
	default:
		errs = append(errs, fmt.Errorf("norm_type %q is not layer_norm or rms_norm", c.NormType))
	}
	if c.PoolerActivation != "" {
		if _, err := kernels.ParseActivation(c.PoolerActivation); err != nil {
			errs = append(errs, fmt.Errorf("pooler_activation: %w", err))
		}
	}
	if c.HeadSize() > 0 && c.HeadSize()%2 == 0 && c.HiddenSize%max(c.NumAttentionHeads, 1) == 0 {
		errs = append(errs, c.validateRope()...)
	}
	if c.ModelType != "" && c.ModelType != "roformer" {
		errs = append(errs, fmt.Errorf("model_type %q is not roformer", c.ModelType))
	}
	return errors.Join(errs...)
}

// PoolerActivationName returns pooler_activation, by default tanh (BERT's
// pooler).
func (c *Config) PoolerActivationName() string {
	if c.PoolerActivation == "" {
		return "tanh"
	}
	return c.PoolerActivation
}

// RMSNorm reports whether the norms are RoFormer-V2's (norm_type rms_norm).
func (c *Config) RMSNorm() bool { return c.NormType == "rms_norm" }

// Bias reports whether the encoder's linear layers have biases (use_bias,
// default true).
func (c *Config) Bias() bool { return c.UseBias == nil || *c.UseBias }

// Labels returns the label names in id order (LABEL_i where id2label is absent).
func (c *Config) Labels() []string {
	out := make([]string, c.NumLabels)
	for i := range out {
		if s, ok := c.ID2Label[strconv.Itoa(i)]; ok {
			out[i] = s
		} else {
			out[i] = "LABEL_" + strconv.Itoa(i)
		}
	}
	return out
}

// SetLabels sets id2label and label2id from names (in id order).
func (c *Config) SetLabels(names []string) {
	c.NumLabels = len(names)
	c.ID2Label = map[string]string{}
	c.Label2ID = map[string]int{}
	for i, n := range names {
		c.ID2Label[strconv.Itoa(i)] = n
		c.Label2ID[n] = i
	}
}

// plainConfig has Config's fields without its JSON methods.
type plainConfig Config

// MarshalJSON writes the config.json form (see Marshal).
func (c Config) MarshalJSON() ([]byte, error) { return c.Marshal() }

// UnmarshalJSON reads the config.json form over the defaults and validates
// it, as ParseConfig does.
func (c *Config) UnmarshalJSON(b []byte) error {
	cfg, err := ParseConfig(b, "config")
	if err != nil {
		return err
	}
	*c = cfg
	return nil
}

// Marshal returns config.json bytes that HF's RoFormerConfig reads back to
// the same configuration: every field, the unknown keys kept from the file,
// sorted and indented as save_pretrained writes them.
func (c *Config) Marshal() ([]byte, error) {
	cc := *c
	if len(cc.ID2Label) == 0 {
		cc.SetLabels(c.Labels())
	}
	if cc.ModelType == "" {
		cc.ModelType = "roformer"
	}
	cc.clearDefaultSwitches()
	b, err := json.Marshal((*plainConfig)(&cc))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if c.Attention() == AttnPerformer {
		// 0 (never redraw) is meaningful: write it even though it is empty.
		m["feature_redraw_interval"] = json.RawMessage(strconv.Itoa(c.FeatureRedrawInterval))
	}
	for k, v := range c.Extra {
		if _, ok := m[k]; !ok && k != "num_labels" {
			m[k] = v
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for i, k := range keys {
		var v bytes.Buffer
		if err := json.Indent(&v, m[k], "  ", "  "); err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "  %q: %s", k, v.Bytes())
		if i < len(keys)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}
