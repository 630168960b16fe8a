package roformer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unsafe"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/tensor"
)

// Quantized model folders. SaveQuantized writes a folder whose weights stay
// in the precision they are served in, and Load reads it without making
// float32 weights first:
//
//   - int8: each weight that PrecisionInt8 quantizes (the linear layers of
//     the encoder and of the head, not the embeddings nor the LM decoder
//     tied to them) is stored as compressed-tensors' "int-quantized" format
//     stores it: NAME.weight holds the I8 codes [OC, C], NAME.weight_scale
//     the F32 scales [OC, 1] (symmetric, per output channel: w = code·scale),
//     and config.json's quantization_config says so (vLLM and transformers
//     with compressed-tensors read it). The codes are those SetPrecision
//     makes (kernels.QuantizeInt8, ±127). The word embedding, which
//     compressed-tensors leaves unquantized, is stored in BF16 (a third of
//     a base model's float32 folder otherwise: 0.33× its bytes, 0.28× so)
//     and looked up in float32; everything else stays F32. Loading the
//     folder in int8 computes what quantizing at load a model whose word
//     embedding is rounded to bfloat16 computes, to the bit.
//   - bf16: every tensor in BF16 and torch_dtype "bfloat16", as
//     model.to(torch.bfloat16).save_pretrained writes it, and what Hugging
//     Face's from_pretrained(torch_dtype=torch.bfloat16) loads; but for the
//     sinusoid table (roformer.encoder.embed_positions.weight, 32 K values
//     at base), kept F32: Hugging Face computes with the stored table,
//     which rounded would move a float32 load's outputs by 3e-4 on base
//     from ours (we compute the rotation from its formula).

// int8ScaleSuffix names a quantized weight's scales beside NAME.weight.
const int8ScaleSuffix = "_scale"

// SaveQuantized writes config.json and model.safetensors into dir as Save
// does, the weights in p: PrecisionInt8 or PrecisionBF16 (see the package
// notes on quantized folders above). Save writes float32.
func (m *Model) SaveQuantized(dir string, p Precision) error {
	switch p {
	case PrecisionBF16:
		return m.save(dir, "bfloat16", func(name string, t *tensor.Tensor) []*checkpoint.Entry {
			dt := "BF16"
			if name == keyEmbedPositions {
				dt = "F32" // see the package notes on quantized folders
			}
			return []*checkpoint.Entry{{Name: name, DType: dt, Shape: t.Shape, Data: t.Data}}
		})
	case PrecisionInt8:
		quantized := m.int8WeightNames()
		word := m.Encoder.Embeddings.Word.Name
		var names []string
		entry := func(name string, t *tensor.Tensor) []*checkpoint.Entry {
			if !quantized[name] {
				dt := "F32"
				if name == word {
					dt = "BF16"
				}
				return []*checkpoint.Entry{{Name: name, DType: dt, Shape: t.Shape, Data: t.Data}}
			}
			names = append(names, strings.TrimSuffix(name, ".weight"))
			OC, C := t.Shape[0], t.Shape[1]
			codes, scale := make([]byte, OC*C), make([]float32, OC)
			kernels.QuantizeInt8(unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(codes))), len(codes)), scale, t.Data, OC, C, 127)
			return []*checkpoint.Entry{
				{Name: name, DType: "I8", Shape: t.Shape, Raw: codes},
				{Name: name + int8ScaleSuffix, DType: "F32", Shape: []int{OC, 1}, Data: scale},
			}
		}
		return m.save(dir, "", entry, func(c *Config) {
			if c.Extra == nil {
				c.Extra = map[string]json.RawMessage{}
			}
			c.Extra["quantization_config"] = int8QuantizationConfig(m)
		})
	}
	return fmt.Errorf("roformer: SaveQuantized: precision %q (want %s or %s; Save writes float32)", p, PrecisionInt8, PrecisionBF16)
}

// int8QuantizationConfig is compressed-tensors' description of the int8
// folder: 8-bit symmetric integer weights per output channel, activations
// quantized per token at run time, every Linear but the LM decoder.
func int8QuantizationConfig(m *Model) json.RawMessage {
	ignore := []string{}
	if m.LM != nil {
		ignore = append(ignore, "cls.predictions.decoder")
	}
	cfg := map[string]any{
		"quant_method": "compressed-tensors",
		"format":       "int-quantized",
		"config_groups": map[string]any{
			"group_0": map[string]any{
				"targets":           []string{"Linear"},
				"weights":           map[string]any{"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel", "dynamic": false},
				"input_activations": map[string]any{"num_bits": 8, "type": "int", "symmetric": false, "strategy": "token", "dynamic": true},
			},
		},
		"ignore":              ignore,
		"quantization_status": "compressed",
	}
	b, _ := json.Marshal(cfg)
	return b
}

// int8WeightNames names the weights PrecisionInt8 quantizes: the
// parameters that lie in one of linears' matrices (the fused q/k/v block
// holds three), but for the word embedding (tied to the LM decoder, looked
// up in float32).
func (m *Model) int8WeightNames() map[string]bool {
	inLinear := m.inLinear()
	out := map[string]bool{}
	for _, p := range m.Weights() {
		if p != m.Encoder.Embeddings.Word && len(p.Shape) == 2 && len(p.Data) > 0 && inLinear(p.Data) {
			out[p.Name] = true
		}
	}
	for p, q := range m.stored {
		if q.linear && p != m.Encoder.Embeddings.Word {
			out[p.Name] = true
		}
	}
	return out
}

// inLinear returns a test of whether values lie in one of linears'
// matrices (the fused q/k/v block holds three weights), as the model's
// layers are now.
func (m *Model) inLinear() func(w []float32) bool {
	type span struct{ lo, hi uintptr }
	var spans []span
	for _, l := range m.linears() {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(l.w)))
		spans = append(spans, span{lo, lo + uintptr(4*l.oc*l.c)})
	}
	return func(w []float32) bool {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(w)))
		for _, s := range spans {
			if lo >= s.lo && lo+uintptr(4*len(w)) <= s.hi {
				return true
			}
		}
		return false
	}
}

// storedWeight is a weight kept as a quantized folder stores it: its
// Param has no Data.
//   - int8 (an int8 folder served in int8): codes [OC, C] and scale [OC],
//     w = code·scale; its prepared layer is made from them;
//   - bf16 (a mapped folder that stores it in BF16): bf16, the tensor's
//     little-endian bytes where they lie in the mapping. A linear layer's
//     weight is decoded, one at a time, into the layer the precision
//     prepares; the word embedding is looked up by rows from them
//     (kernels.EmbeddingForwardBF16), and, when the LM decoder is tied to
//     it, prepared as that layer too.
type storedWeight struct {
	codes []int8    // in the mapped file or the model's own memory
	scale []float32 // [OC]
	bf16  []byte    // 2·OC·C bytes
	// linear says the weight is a linear layer's (SetPrecision prepares
	// it, or gives it its float32 values where it prepares nothing).
	linear bool
}

// values writes the weight's float32 values into dst [OC·C]; C is its
// number of columns.
func (s storedWeight) values(dst []float32, C int) {
	if s.bf16 != nil {
		kernels.DecodeBF16(dst, s.bf16)
		return
	}
	for i, c := range s.codes[:len(dst)] {
		dst[i] = float32(c) * s.scale[i/C]
	}
}

// bytes are the stored values' bytes (the pages Load releases).
func (s storedWeight) bytes() []byte {
	if s.bf16 != nil {
		return s.bf16
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s.codes))), len(s.codes))
}

// storedWeights are a model's weights held as a quantized folder stores
// them.
type storedWeights map[*tensor.Param]storedWeight

func (s storedWeights) params() []*tensor.Param {
	out := make([]*tensor.Param, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	return out
}

// dequantize gives every stored weight its float32 values again and
// forgets its stored form: for what needs float32 weights (training,
// binding other weights).
func (m *Model) dequantize() {
	for p := range m.stored {
		m.dequantizeOne(p)
	}
}

// dequantizeFor gives float32 values to the stored weights precision p
// cannot run as they are stored: int8 codes unless p is int8, and bf16
// linear weights where p prepares no layers (the products then read
// float32 weights). A bf16 word embedding that no product reads stays.
func (m *Model) dequantizeFor(p Precision) {
	for w, q := range m.stored {
		if q.bf16 == nil && p != PrecisionInt8 || q.bf16 != nil && q.linear && !prepares(p) {
			m.dequantizeOne(w)
		}
	}
}

func (m *Model) dequantizeOne(p *tensor.Param) {
	q := m.stored[p]
	p.Data = make([]float32, tensor.Numel(p.Shape))
	q.values(p.Data, p.Shape[1])
	delete(m.stored, p)
	if len(m.stored) == 0 {
		m.stored = nil
	}
}

// wordBF16 returns the word embedding's BF16 bytes when it is stored so,
// else nil.
func (m *Model) wordBF16() []byte {
	if q, ok := m.stored[m.Encoder.Embeddings.Word]; ok {
		return q.bf16
	}
	return nil
}

// int8Pair is a quantized weight read from a folder.
type int8Pair struct {
	codes []int8
	scale []float32
	shape []int
}

// int8Pairs finds the quantized weights of f: each NAME.weight stored as I8
// with a NAME.weight_scale beside it. It checks their shapes (codes
// [OC, C], scales [OC, 1] or [OC]) and reads the scales as float32; the
// codes are the mapped file's bytes where f is mapped. A weight_scale
// without its I8 weight, or an I8 weight without scales, is an error.
func int8Pairs(f *checkpoint.File) (map[string]int8Pair, error) {
	out := map[string]int8Pair{}
	for name, e := range f.Tensors {
		if strings.HasSuffix(name, ".weight"+int8ScaleSuffix) {
			w, ok := f.Tensors[strings.TrimSuffix(name, int8ScaleSuffix)]
			if !ok || w.DType != "I8" {
				return nil, fmt.Errorf("roformer: %s: %s has no I8 weight %s beside it", f.Path, name, strings.TrimSuffix(name, int8ScaleSuffix))
			}
			continue
		}
		if e.DType != "I8" {
			continue
		}
		se, ok := f.Tensors[name+int8ScaleSuffix]
		if !ok {
			return nil, fmt.Errorf("roformer: %s: tensor %s is I8 but has no %s (an int8 folder stores each weight's scales beside its codes)", f.Path, name, name+int8ScaleSuffix)
		}
		if len(e.Shape) != 2 || e.Shape[0] <= 0 || e.Shape[1] <= 0 {
			return nil, fmt.Errorf("roformer: %s: I8 weight %s has shape %v (want [out, in])", f.Path, name, e.Shape)
		}
		OC := e.Shape[0]
		if n := tensor.Numel(se.Shape); n != OC || len(se.Shape) > 2 || len(se.Shape) == 2 && se.Shape[1] != 1 {
			return nil, fmt.Errorf("roformer: %s: %s has shape %v; the weight %s %v needs [%d, 1] or [%d]", f.Path, name+int8ScaleSuffix, se.Shape, name, e.Shape, OC, OC)
		}
		scale, err := se.Float32()
		if err != nil {
			return nil, fmt.Errorf("roformer: %s: %w", f.Path, err)
		}
		var codes []int8
		if e.Raw != nil {
			codes = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(e.Raw))), len(e.Raw))
		} else {
			codes = make([]int8, len(e.Data))
			for i, v := range e.Data {
				codes[i] = int8(v)
			}
		}
		out[name] = int8Pair{codes: codes, scale: scale, shape: e.Shape}
	}
	return out, nil
}
