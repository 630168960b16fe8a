package roformer

import (
	"errors"
	"fmt"
	"github.com/roformer-go/roformer/rope"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/tensor"
)

// Names of the checkpoint tensors that the binder treats specially.
const (
	keyEmbedPositions = "roformer.encoder.embed_positions.weight"
	keyDecoderWeight  = "cls.predictions.decoder.weight"
	keyDecoderBias    = "cls.predictions.decoder.bias"
)

// BindOptions changes what Bind accepts.
type BindOptions struct {
	// AllowMissingHead keeps the current (initialised) values of head
	// parameters that the checkpoint lacks, as HF does when a pretrained
	// encoder gets a new head for fine-tuning. Missing encoder tensors are
	// always an error.
	AllowMissingHead bool
	// Strict makes unexpected tensors an error; by default they are
	// reported in BindReport.Unexpected and ignored, as HF ignores them.
	Strict bool
}

// BindReport says what Bind did besides copying tensors.
type BindReport struct {
	Loaded      int      // parameters copied from the checkpoint
	MissingHead []string // head parameters not in the checkpoint (kept as initialised with AllowMissingHead)
	Unexpected  []string // checkpoint tensors that no parameter uses
	Notes       []string // tied tensors re-tied, sinusoid table rebuilt or checked, prefix dropped
}

// Bind copies checkpoint tensors into the model's parameters, matching HF
// state-dict names. Encoder names may carry the "roformer." prefix or not
// (a checkpoint of RoFormerModel saved alone has none). The tied decoder
// weight (= word embeddings) and bias (= cls.predictions.bias) are re-tied,
// and the sinusoid table is rebuilt on demand, so those keys may be absent.
// All missing, mis-shaped and (with Strict) unexpected tensors are reported
// in one error.
func (m *Model) Bind(src map[string]*tensor.Tensor, opts BindOptions) (*BindReport, error) {
	return m.bind(src, opts, nil)
}

// bind is Bind; the tensors of src that inPlace names become the
// parameters' storage instead of being copied (Load's tensors of a
// checkpoint file it has just read or mapped, which nothing else holds).
func (m *Model) bind(src map[string]*tensor.Tensor, opts BindOptions, inPlace map[string]bool) (*BindReport, error) {
	m.lowp = nil // prepared layers would keep the old weights
	m.dequantize()
	m.ownWeights()
	rep := &BindReport{}
	used := map[string]bool{}
	var missing, misshaped []string
	prefixDropped := false
	for _, np := range m.namedParams() {
		key := np.name
		t, ok := src[key]
		if !ok && strings.HasPrefix(key, "roformer.") {
			if t2, ok2 := src[strings.TrimPrefix(key, "roformer.")]; ok2 {
				t, ok, key = t2, true, strings.TrimPrefix(key, "roformer.")
				prefixDropped = true
			}
		}
		if !ok && np.name == "cls.predictions.bias" {
			if t2, ok2 := src[keyDecoderBias]; ok2 {
				t, ok, key = t2, true, keyDecoderBias
			}
		}
		if !ok {
			if !strings.HasPrefix(np.name, "roformer.") {
				rep.MissingHead = append(rep.MissingHead, np.name)
				if opts.AllowMissingHead {
					continue
				}
			}
			missing = append(missing, fmt.Sprintf("%s %v", np.name, np.p.Shape))
			continue
		}
		used[key] = true
		if !tensor.SameShape(t.Shape, np.p.Shape) {
			misshaped = append(misshaped, fmt.Sprintf("%s: checkpoint has %v, the model needs %v", key, t.Shape, np.p.Shape))
			continue
		}
		if n := len(np.p.Data); inPlace[key] && len(t.Data) == n {
			np.p.Data = t.Data[:n:n]
		} else {
			copy(np.p.Data, t.Data)
		}
		rep.Loaded++
	}
	for i := range m.Encoder.Layers {
		if L := &m.Encoder.Layers[i]; L.qkv != nil {
			if _, _, ok := L.fusedWeights(); !ok {
				L.qkv = nil // bound in place: the block New made is no one's storage
			}
		}
	}
	if prefixDropped {
		rep.Notes = append(rep.Notes, "encoder tensors have no \"roformer.\" prefix (a RoFormerModel checkpoint)")
	}
	// Tied and derived tensors.
	for _, key := range []string{keyEmbedPositions, strings.TrimPrefix(keyEmbedPositions, "roformer.")} {
		if t, ok := src[key]; ok {
			used[key] = true
			rep.Notes = append(rep.Notes, m.checkTable(key, t))
		}
	}
	if _, ok := src[keyDecoderWeight]; ok {
		used[keyDecoderWeight] = true
		if m.LM != nil {
			rep.Notes = append(rep.Notes, m.checkTied(keyDecoderWeight, src[keyDecoderWeight], m.Encoder.Embeddings.Word))
		}
	}
	if _, ok := src[keyDecoderBias]; ok {
		used[keyDecoderBias] = true
		if m.LM != nil && m.LM.Bias != nil {
			rep.Notes = append(rep.Notes, m.checkTied(keyDecoderBias, src[keyDecoderBias], m.LM.Bias))
		}
	}
	if err := m.bindBuffers(src, used, rep); err != nil {
		return rep, err
	}
	for k := range src {
		if !used[k] {
			rep.Unexpected = append(rep.Unexpected, k)
		}
	}
	sort.Strings(rep.Unexpected)
	if err := m.checkVariant(rep.Unexpected, missing); err != nil {
		return rep, err
	}
	var errs []string
	if len(missing) > 0 {
		errs = append(errs, fmt.Sprintf("%d missing: %s", len(missing), strings.Join(missing, ", ")))
	}
	if len(misshaped) > 0 {
		errs = append(errs, fmt.Sprintf("%d with the wrong shape: %s", len(misshaped), strings.Join(misshaped, "; ")))
	}
	if len(errs) > 0 || (opts.Strict && len(rep.Unexpected) > 0) {
		if len(rep.Unexpected) > 0 {
			errs = append(errs, fmt.Sprintf("%d unexpected: %s", len(rep.Unexpected), strings.Join(rep.Unexpected, ", ")))
		}
		err := fmt.Errorf("roformer: checkpoint does not fit %s (%s): %s%s", m.Head.HFClass(), m.describe(), strings.Join(errs, "; "), m.variantHint(missing))
		if len(missing) > 0 && len(missing) == len(rep.MissingHead) && len(misshaped) == 0 {
			err = fmt.Errorf("%w: %w", ErrHeadMissing, err)
		}
		return rep, err
	}
	return rep, nil
}

// checkVariant names a mismatch between config.json's RoFormer variant and
// the checkpoint's: a v1 checkpoint (LayerNorm weights, encoder biases)
// under a RoFormer-V2 config would otherwise load with those tensors
// ignored, and a V2 checkpoint under a v1 config misses them.
func (m *Model) checkVariant(unexpected, missing []string) error {
	encoderNorm := func(k string) bool {
		return strings.Contains(k, "LayerNorm.") && !strings.HasPrefix(k, "cls.")
	}
	encoderBias := func(k string) bool {
		return strings.Contains(k, "encoder.layer.") && strings.HasSuffix(strings.Fields(k)[0], ".bias") && !strings.Contains(k, "LayerNorm")
	}
	first := func(keys []string, f func(string) bool) string {
		for _, k := range keys {
			if f(k) {
				return strings.Fields(k)[0]
			}
		}
		return ""
	}
	cfg := &m.Config
	if k := first(unexpected, encoderNorm); k != "" && cfg.RMSNorm() {
		return fmt.Errorf("roformer: config.json says norm_type rms_norm (RoFormer-V2, norms without weights), but the checkpoint has LayerNorm tensors such as %s: a v1 checkpoint, or a config missing norm_type layer_norm", k)
	}
	if k := first(unexpected, encoderBias); k != "" && !cfg.Bias() {
		return fmt.Errorf("roformer: config.json says use_bias false (RoFormer-V2), but the checkpoint has encoder biases such as %s", k)
	}
	return nil
}

// variantHint explains missing tensors when the checkpoint has none of the
// model's LayerNorm tensors: a RoFormer-V2 checkpoint under a v1 config.
func (m *Model) variantHint(missing []string) string {
	if m.Config.RMSNorm() {
		return ""
	}
	norms, gone := 0, 0
	for _, np := range m.namedParams() {
		if strings.Contains(np.name, "LayerNorm.") && strings.HasPrefix(np.name, "roformer.") {
			norms++
		}
	}
	for _, k := range missing {
		if strings.Contains(k, "LayerNorm.") && strings.HasPrefix(k, "roformer.") {
			gone++
		}
	}
	if norms == 0 || gone < norms {
		return ""
	}
	return " (the checkpoint has none of the encoder's LayerNorm tensors: a RoFormer-V2 checkpoint? Its config.json needs norm_type rms_norm, and use_bias false)"
}

// ErrHeadMissing is wrapped by the error Load returns when the checkpoint
// has no weights for the requested head.
var ErrHeadMissing = errors.New("roformer: the checkpoint has no weights for this head")

func (m *Model) describe() string {
	c := &m.Config
	return fmt.Sprintf("vocab %d, E %d, H %d, layers %d, heads %d, I %d", c.VocabSize, c.EmbeddingSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize)
}

// checkTable compares a stored sinusoid table with the on-demand formula.
func (m *Model) checkTable(key string, t *tensor.Tensor) string {
	if !m.plainRotary() {
		return fmt.Sprintf("%s ignored: the rotary embedding is computed from rope_theta, partial_rotary_factor and rope_scaling", key)
	}
	d := m.Config.HeadSize()
	if len(t.Shape) != 2 || t.Shape[1] != d {
		return fmt.Sprintf("%s has shape %v, not [P, %d]: ignored; the table is computed on demand", key, t.Shape, d)
	}
	want := m.rotary.Table(t.Shape[0])
	diff := 0
	for i := range want {
		if want[i] != t.Data[i] {
			diff++
		}
	}
	if diff > 0 {
		return fmt.Sprintf("%s differs from the RoPE formula in %d of %d entries: ignored; the formula is used (as HF's code does)", key, diff, len(want))
	}
	return fmt.Sprintf("%s %v equals the RoPE formula bit for bit; it is computed on demand for any length", key, t.Shape)
}

func (m *Model) checkTied(key string, t *tensor.Tensor, p *tensor.Param) string {
	if !tensor.SameShape(t.Shape, p.Shape) {
		return fmt.Sprintf("%s has shape %v but is tied to %s %v: ignored", key, t.Shape, p.Name, p.Shape)
	}
	if d, _ := tensor.MaxAbsDiff(t.Data, p.Data); d != 0 {
		return fmt.Sprintf("%s differs from %s (max |diff| %.3g): the tied %s is used, as HF ties them", key, p.Name, d, p.Name)
	}
	return fmt.Sprintf("%s is tied to %s", key, p.Name)
}

// plainRotary reports whether the rotary embedding is HF RoFormer's own
// (base 10000, every dimension turned, no scaling, no xPos), the one its stored
// sinusoid table holds.
func (m *Model) plainRotary() bool {
	c := m.rotary.Config()
	return !m.rotary.Scaled() && c.RotaryDims == c.HeadSize && c.Base == rope.DefaultBase && m.Config.XPos == nil
}

// StateDict returns the tensors HF's save_pretrained(safe_serialization=True)
// writes for this model: every parameter under its HF name, plus the
// sinusoid table (roformer.encoder.embed_positions.weight, max_position_embeddings
// rows), without the tied decoder duplicates. The slices alias the parameters.
func (m *Model) StateDict() map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, p := range m.Weights() {
		out[p.Name] = &tensor.Tensor{Shape: p.Shape, Data: p.Data}
		if q, ok := m.stored[p]; ok { // stored only: their values
			d := make([]float32, tensor.Numel(p.Shape))
			q.values(d, p.Shape[1])
			out[p.Name].Data = d
		}
	}
	m.addBuffers(out)
	if P := m.Config.MaxPositionEmbeddings; P > 0 && m.Config.PosEnc() == PosRotary && m.plainRotary() {
		out[keyEmbedPositions] = &tensor.Tensor{Shape: []int{P, m.Config.HeadSize()}, Data: m.rotary.Table(P)}
	}
	return out
}
