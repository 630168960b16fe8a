package roformer

import (
	"context"
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

func benchConfig(layers, hidden, heads, inter, vocab int) Config {
	c := DefaultConfig()
	c.NumHiddenLayers, c.HiddenSize, c.EmbeddingSize, c.NumAttentionHeads, c.IntermediateSize, c.VocabSize = layers, hidden, hidden, heads, inter, vocab
	c.MaxPositionEmbeddings = 512
	return c
}

func benchBatch(B, T, V int) (*Batch, *Labels) {
	r := testutil.Rand(1)
	ids, lab := make([]int32, B*T), make([]int32, B*T)
	for i := range ids {
		ids[i] = int32(5 + r.IntN(V-5))
		lab[i] = -100
		if r.Float64() < 0.15 {
			lab[i] = ids[i]
		}
	}
	return &Batch{InputIDs: ids, B: B, T: T}, &Labels{IDs: lab}
}

// BenchmarkForward times inference of the masked-LM model per shape.
func BenchmarkForward(b *testing.B) {
	for _, c := range []struct {
		name                 string
		B, T, L, H, NH, I, V int
	}{
		{"small_B8_T128_C384", 8, 128, 6, 384, 6, 1536, 12000},
		{"base_B8_T128_C768", 8, 128, 12, 768, 12, 3072, 12000},
	} {
		// Model.Forward allocates its activations each call; a Session
		// keeps them, so once warm it allocates only small bookkeeping.
		for _, session := range []bool{false, true} {
			name := c.name
			if session {
				name += "/session"
			}
			b.Run(name, func(b *testing.B) {
				m, _ := New(benchConfig(c.L, c.H, c.NH, c.I, c.V), HeadMaskedLM)
				m.Init(1)
				batch, _ := benchBatch(c.B, c.T, c.V)
				forward := m.Forward
				if session {
					forward = m.NewSession().Forward
					if _, err := forward(context.Background(), batch, nil, Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := forward(context.Background(), batch, nil, Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(c.B*c.T)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

// BenchmarkTrainStep times forward + backward (no optimizer) of the MLM model.
func BenchmarkTrainStep(b *testing.B) {
	for _, c := range []struct {
		name                 string
		B, T, L, H, NH, I, V int
	}{
		{"tiny_B16_T128_C256", 16, 128, 4, 256, 4, 1024, 8000},
		{"small_B16_T128_C384", 16, 128, 6, 384, 6, 1536, 12000},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := benchConfig(c.L, c.H, c.NH, c.I, c.V)
			m, _ := New(cfg, HeadMaskedLM)
			m.Init(1)
			batch, lab := benchBatch(c.B, c.T, c.V)
			s := m.NewState(c.B, c.T, true)
			// One warm-up step allocates the gradient buffers; the timed
			// steps then report what a step allocates once warm.
			if _, err := m.ForwardBackward(context.Background(), s, batch, lab, StepOptions{Dropout: true, Seed: 99}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := m.ForwardBackward(context.Background(), s, batch, lab, StepOptions{Dropout: true, Seed: uint64(i)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.B*c.T)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

var _ = fmt.Sprint
