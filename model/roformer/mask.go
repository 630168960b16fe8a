package roformer

import (
	"fmt"
	"math"
)

// EncoderMask names the attention mask of an encoder pass (Forward).
type EncoderMask string

// The masks of an encoder pass; Model.EncoderMask says which one a model
// uses.
const (
	// MaskBidirectional: every real token sees every real token (an
	// encoder; is_decoder false).
	MaskBidirectional EncoderMask = "bidirectional"
	// MaskCausal: token i sees the tokens up to itself (is_decoder true,
	// or the causal-lm head; Hugging Face's RoFormerForCausalLM).
	MaskCausal EncoderMask = "causal"
	// MaskUniLM is RoFormer-Sim's mask, built from the token types as
	// JunnYu/RoFormer_pytorch and bert4keras build it: with c the running
	// sum of a row's token_type_ids, token i sees token j when c[j] ≤ c[i].
	// Text of type 0 alone is therefore seen in both directions (the
	// encoding Sim's similarity vectors come from); a type-1 part that
	// follows sees all of it and itself causally.
	MaskUniLM EncoderMask = "unilm"
)

// IsSim reports whether m is RoFormer-Sim: config.json says is_decoder true
// and the checkpoint holds a pooler (roformer.pooler.dense, which
// EnablePooler adds when the weights carry it). Hugging Face's causal LMs
// have no pooler; Sim folders (RoFormerForCausalLM, is_decoder true) do,
// whatever head they are opened with.
func (m *Model) IsSim() bool { return m.Config.IsDecoder && m.Encoder.Pooler != nil }

// EncoderMask returns the mask of m's encoder passes, the one rule that
// Forward (and so every embedding, similarity and head path) follows:
// MaskUniLM for RoFormer-Sim (IsSim), else MaskCausal when config.json says
// is_decoder or the head is causal-lm, else MaskBidirectional.
// Options.Causal forces the causal mask on a pass; generation (Decoder)
// has its own modes.
func (m *Model) EncoderMask() EncoderMask {
	switch {
	case m.IsSim():
		return MaskUniLM
	case m.Config.IsDecoder || kindOf(m.Head).causal:
		return MaskCausal
	}
	return MaskBidirectional
}

// passMask resolves the mask of one Forward pass over b: whether it is
// causal, and for MaskUniLM with a token type other than 0 the running
// sums of the types [B·T] (nil when every type is 0: the pass is then
// plainly bidirectional). The general UniLM mask is computed by
// unilmAttention, which serves softmax attention without relative
// positions; other kinds are an error.
func (m *Model) passMask(b *Batch, opts Options) (causal bool, seg []int32, err error) {
	if opts.Causal {
		return true, nil, nil
	}
	switch m.EncoderMask() {
	case MaskCausal:
		return true, nil, nil
	case MaskBidirectional:
		return false, nil, nil
	}
	mixed := false
	for _, v := range b.TokenTypeIDs {
		if v != 0 {
			mixed = true
			break
		}
	}
	if !mixed {
		return false, nil, nil
	}
	if m.Config.Attention() != AttnSoftmax || m.Config.PosEnc() == PosRelative {
		return false, nil, fmt.Errorf("roformer: the UniLM mask of a RoFormer-Sim model with token type 1 needs softmax attention without relative positions (attention_type %s, position_embedding_type %s)", m.Config.Attention(), m.Config.PosEnc())
	}
	seg = make([]int32, b.B*b.T)
	for r := range b.B {
		var c int32
		for t := range b.T {
			c += b.TokenTypeIDs[r*b.T+t]
			seg[r*b.T+t] = c
		}
	}
	return false, seg, nil
}

// unilmAttention is softmax attention under MaskUniLM: query i of row b
// attends to key j when seg[b·T+j] ≤ seg[b·T+i] and keyMask (nil: all
// visible) is not 0 at j; a query that sees no key attends to all of its
// row's keys evenly, as Hugging Face's additive mask makes it. out [BT, H]
// gets the context vectors; probs, when not nil, [B, NH, T, T] the
// attention weights.
func unilmAttention(out, probs, q, k, v, keyMask []float32, seg []int32, B, T, NH, HS int) {
	H := NH * HS
	scale := float32(1 / math.Sqrt(float64(HS)))
	p := make([]float32, T)
	for b := range B {
		for h := range NH {
			for i := range T {
				qi := q[(b*T+i)*H+h*HS:][:HS]
				mx := float32(math.Inf(-1))
				for j := range T {
					if seg[b*T+j] > seg[b*T+i] || (keyMask != nil && keyMask[b*T+j] == 0) {
						p[j] = float32(math.Inf(-1))
						continue
					}
					kj := k[(b*T+j)*H+h*HS:][:HS]
					var d float32
					for e, x := range qi {
						d += x * kj[e]
					}
					p[j] = d * scale
					mx = max(mx, p[j])
				}
				if math.IsInf(float64(mx), -1) {
					for j := range p {
						p[j] = 1 / float32(T)
					}
				} else {
					var sum float32
					for j, x := range p {
						p[j] = float32(math.Exp(float64(x - mx)))
						sum += p[j]
					}
					for j := range p {
						p[j] /= sum
					}
				}
				o := out[(b*T+i)*H+h*HS:][:HS]
				clear(o)
				for j, w := range p {
					if w == 0 {
						continue
					}
					vj := v[(b*T+j)*H+h*HS:][:HS]
					for e := range o {
						o[e] += w * vj[e]
					}
				}
				if probs != nil {
					copy(probs[((b*NH+h)*T+i)*T:][:T], p)
				}
			}
		}
	}
}
