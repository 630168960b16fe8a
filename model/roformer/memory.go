package roformer

import "unsafe"

// WeightMemory is where a model's weights lie, in bytes by form (see
// Model.WeightMemory).
type WeightMemory struct {
	// Float32 is float32 weights in the model's own memory.
	Float32 int64
	// Mapped is float32 weights used where they lie in a mapped
	// checkpoint file: file bytes, resident only where read (a product
	// not prepared reads its whole weight, a lookup its rows; a prepared
	// layer's is released once prepared).
	Mapped int64
	// Stored is weights kept as a quantized folder stores them: int8
	// codes with their scales, BF16 bytes (see the package notes on
	// quantized folders).
	Stored int64
	// Prepared is the layers' copies of their weights in the form the
	// precision runs (bf16, int8, oneDNN's packed fp32), in every layout
	// made so far.
	Prepared int64
}

// Total is the sum of the forms.
func (w WeightMemory) Total() int64 { return w.Float32 + w.Mapped + w.Stored + w.Prepared }

// WeightMemory returns the bytes the model's weights take, by form. It
// may be called while the model serves (Forward) but not while it trains,
// loads weights or changes precision.
func (m *Model) WeightMemory() WeightMemory {
	var w WeightMemory
	mapped := make(map[*float32]bool, len(m.borrowed))
	for _, p := range m.borrowed {
		if len(p.Data) > 0 {
			mapped[unsafe.SliceData(p.Data)] = true
		}
	}
	for _, p := range m.Weights() {
		if q, ok := m.stored[p]; ok {
			w.Stored += int64(len(q.bytes())) + 4*int64(len(q.scale))
			continue
		}
		n := 4 * int64(len(p.Data))
		if mapped[unsafe.SliceData(p.Data)] {
			w.Mapped += n
		} else {
			w.Float32 += n
		}
	}
	if lp := m.lowp; lp != nil {
		type sized interface{ Bytes() int64 }
		lp.mu.Lock()
		seen := map[lowLinear]bool{}
		for _, l := range lp.layers {
			if s, ok := l.(sized); ok && !seen[l] {
				seen[l] = true
				w.Prepared += s.Bytes()
			}
		}
		lp.mu.Unlock()
	}
	return w
}
