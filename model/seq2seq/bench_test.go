package seq2seq

import (
	"context"
	"fmt"
	"testing"
)

func benchModel(b *testing.B, C, L, V int) (*Model, [][]int32) {
	cfg := Config{VocabSize: V, DModel: C, Heads: 4, FFN: 4 * C, EncoderLayers: L, DecoderLayers: L, Position: Rotary,
		Dropout: 0.1, LabelSmooth: 0.1, PadID: 0, BOSID: 1, EOSID: 2, LayerNormEps: 1e-5}
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m.Init(1)
	var src [][]int32
	for i := 0; i < 64; i++ {
		s := make([]int32, 40)
		for j := range s {
			s[j] = int32(3 + (i*7+j*13)%(V-3))
		}
		src = append(src, s)
	}
	return m, src
}

// BenchmarkTrainStep times forward and backward of 64 pairs of 40 tokens
// (the translate experiment's shape); tokens/s counts source and target.
func BenchmarkTrainStep(b *testing.B) {
	for _, c := range []struct{ C, L, V int }{{128, 3, 8000}, {256, 3, 8000}} {
		b.Run(fmt.Sprintf("C%d_L%d_V%d_B64_T40", c.C, c.L, c.V), func(b *testing.B) {
			m, src := benchModel(b, c.C, c.L, c.V)
			batch, _ := NewBatch(m.Config, src, src)
			b.ReportAllocs()
			for b.Loop() {
				m.ZeroGrad()
				p, _ := m.Forward(context.Background(), batch, Options{Train: true, Seed: 1})
				p.Backward(context.Background())
			}
			b.ReportMetric(float64(b.N*64*(41+41))/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkBeam times beam-4 decoding of 8 sources of 40 tokens with the
// key/value cache (untrained weights: every output runs to the length limit
// of 40 + 10).
func BenchmarkBeam(b *testing.B) {
	m, src := benchModel(b, 128, 3, 8000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Translate(context.Background(), src[:8], DecodeOptions{Beam: 4, Alpha: 0.6, MaxExtra: 10}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForwardInference times an inference pass (no training: the
// encoder's self-attention, the decoder's causal self-attention and
// cross-attention) at the translate experiment's shape (64 pairs of 40
// tokens) and over one pair of long sequences, through the fused attention
// kernels and through the saved-probability ones (fusedOff).
func BenchmarkForwardInference(b *testing.B) {
	m, pairs := benchModel(b, 256, 3, 8000)
	for _, sh := range [][2]int{{64, 41}, {1, 512}, {1, 2048}} {
		B, n := sh[0], sh[1]
		src, tgt := pairs, pairs
		if B == 1 {
			s := make([]int32, n-1)
			for j := range s {
				s[j] = int32(3 + j*13%7997)
			}
			src, tgt = [][]int32{s}, [][]int32{s[:n/2-1]}
		}
		batch, err := NewBatch(m.Config, src, tgt)
		if err != nil {
			b.Fatal(err)
		}
		for _, off := range []bool{true, false} {
			name := "fused"
			if off {
				name = "reference"
			}
			b.Run(fmt.Sprintf("B%d_S%d_T%d/%s", B, batch.S, batch.T, name), func(b *testing.B) {
				defer func(v bool) { fusedOff = v }(fusedOff)
				fusedOff = off
				b.ReportAllocs()
				for b.Loop() {
					if _, err := m.Forward(context.Background(), batch, Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*B*(batch.S+batch.T))/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

// BenchmarkTrainLong times a training step (forward and backward) on one
// pair of a 2,048-token source and a 1,024-token target, where training
// takes the fused attention (fusedTrainMinT), against the
// saved-probability kernels (fusedOff); B/op shows the probabilities kept.
func BenchmarkTrainLong(b *testing.B) {
	m, _ := benchModel(b, 256, 3, 8000)
	S, T := 2048, 1024
	src, tgt := make([]int32, S-1), make([]int32, T-1)
	for j := range src {
		src[j] = int32(3 + j*13%7997)
	}
	copy(tgt, src)
	batch, err := NewBatch(m.Config, [][]int32{src}, [][]int32{tgt})
	if err != nil {
		b.Fatal(err)
	}
	for _, off := range []bool{true, false} {
		name := "fused"
		if off {
			name = "reference"
		}
		b.Run(fmt.Sprintf("S%d_T%d/%s", S, T, name), func(b *testing.B) {
			defer func(v bool) { fusedOff = v }(fusedOff)
			fusedOff = off
			b.ReportAllocs()
			for b.Loop() {
				m.ZeroGrad()
				p, err := m.Forward(context.Background(), batch, Options{Train: true, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Backward(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*(S+T))/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
