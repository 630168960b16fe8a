package data

import (
	"fmt"
	"math/rand/v2"
)

// MaskOptions controls dynamic MLM masking.
type MaskOptions struct {
	// Prob is the selection probability, 0.15 when zero.
	Prob float64
	// WholeWord selects whole words (a token and the continuation tokens
	// after it, per Vocab.IsContinuation) instead of single tokens.
	WholeWord bool
}

// Masker applies dynamic MLM masking with its own seeded PCG generator. Its
// state round-trips through MarshalBinary/UnmarshalBinary, so a restored
// Masker draws exactly the masks the original would have drawn next.
type Masker struct {
	v    Vocab
	prob float64
	ww   bool
	src  *rand.PCG
	rng  *rand.Rand
}

// NewMasker returns a Masker whose generator is PCG(seed, stream).
func NewMasker(v Vocab, opt MaskOptions, seed, stream uint64) (*Masker, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if opt.Prob == 0 {
		opt.Prob = 0.15
	}
	if !(opt.Prob > 0 && opt.Prob <= 1) {
		return nil, fmt.Errorf("data: mask probability %g must lie in (0, 1]", opt.Prob)
	}
	if opt.WholeWord && v.IsContinuation == nil {
		return nil, fmt.Errorf("data: whole-word masking needs Vocab.IsContinuation")
	}
	src := rand.NewPCG(seed, stream)
	return &Masker{v: v, prob: opt.Prob, ww: opt.WholeWord, src: src, rng: rand.New(src)}, nil
}

// Mask writes into inputs and labels (both len(seq)) the masked copy of seq
// and its labels. Special tokens ([CLS], [SEP], [PAD], [MASK]) are never
// selected. For each selected position i, labels[i] = seq[i] and inputs[i]
// is [MASK] (probability 0.8), a uniform id in [0, Size) (0.1) or seq[i]
// (0.1); elsewhere labels[i] = IgnoreIndex and inputs[i] = seq[i]. With
// WholeWord, selection is drawn once per word and the 80/10/10 choice per
// token, as in Hugging Face's DataCollatorForWholeWordMask.
func (m *Masker) Mask(inputs, labels, seq []int32) {
	inputs, labels = inputs[:len(seq)], labels[:len(seq)]
	selected := false
	for i, id := range seq {
		inputs[i], labels[i] = id, IgnoreIndex
		if m.v.special(id) {
			selected = false
			continue
		}
		if !m.ww || !m.v.IsContinuation(int(id)) || i == 0 || m.v.special(seq[i-1]) {
			// A new unit (token, or word start): draw its selection.
			selected = m.rng.Float64() < m.prob
		}
		if !selected {
			continue
		}
		labels[i] = id
		switch r := m.rng.Float64(); {
		case r < 0.8:
			inputs[i] = int32(m.v.MASK)
		case r < 0.9:
			inputs[i] = int32(m.rng.IntN(m.v.Size))
		}
	}
}

// MarshalBinary returns the generator state.
func (m *Masker) MarshalBinary() ([]byte, error) { return m.src.MarshalBinary() }

// UnmarshalBinary restores a generator state from MarshalBinary.
func (m *Masker) UnmarshalBinary(b []byte) error {
	if err := m.src.UnmarshalBinary(b); err != nil {
		return fmt.Errorf("data: masking generator state: %w", err)
	}
	return nil
}
