package roformer

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// A session gives Model.Forward's numbers and, once warm, allocates (almost)
// nothing per call.
func TestSessionReuses(t *testing.T) {
	ctx := context.Background()
	m := randomModel(t, tinyConfig(nil), HeadMaskedLM, 31)
	b := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 0}, B: 2, T: 4}
	want, err := m.Forward(ctx, b, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	se := m.NewSession()
	for i := 0; i < 2; i++ {
		got, err := se.Forward(ctx, b, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		testutil.AssertClose(t, "session logits", got.Logits.Data, want.Logits.Data, 0, 0)
		testutil.AssertClose(t, "session hidden", got.LastHiddenState.Data, want.LastHiddenState.Data, 0, 0)
	}
	allocs := testing.AllocsPerRun(5, func() { se.Forward(ctx, b, nil, Options{}) })
	bytes := testing.Benchmark(func(tb *testing.B) {
		tb.ReportAllocs()
		for i := 0; i < tb.N; i++ {
			se.Forward(ctx, b, nil, Options{})
		}
	}).AllocedBytesPerOp()
	// A few small headers (Output tensors, sin/cos) are allowed; no activation buffer.
	if bytes > 8192 {
		t.Errorf("a warm session allocates %d bytes (%.0f allocations) per call", bytes, allocs)
	}
	t.Logf("warm session: %.0f allocations, %d bytes per call", allocs, bytes)
}

// Options.SkipHead runs the encoder only: the same hidden states, no logits.
func TestSkipHead(t *testing.T) {
	ctx := context.Background()
	m := randomModel(t, tinyConfig(nil), HeadMaskedLM, 32)
	b := &Batch{InputIDs: []int32{2, 5, 7, 3}, B: 1, T: 4}
	full, err := m.Forward(ctx, b, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := m.Forward(ctx, b, &Labels{IDs: []int32{1, 2, 3, 4}}, Options{SkipHead: true})
	if err != nil {
		t.Fatal(err)
	}
	if enc.Logits != nil || enc.HasLoss {
		t.Errorf("SkipHead gave logits %v, loss %v", enc.Logits != nil, enc.HasLoss)
	}
	testutil.AssertClose(t, "hidden", enc.LastHiddenState.Data, full.LastHiddenState.Data, 0, 0)
}

// An inference state lends its buffers out (the embeddings' sum to the
// feed-forward intermediate, the encoder input to the layers' outputs): two
// batches in turn on one session still give a fresh pass's numbers, for
// odd and even depths, with and without an embedding projection, and the
// state holds 7·H + I float32s a token (E = H) whatever the depth.
func TestInferenceStateShared(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ layers, E int }{{1, 8}, {2, 8}, {3, 8}, {3, 4}} {
		cfg := tinyConfig(func(c2 *Config) { c2.NumHiddenLayers, c2.EmbeddingSize, c2.IntermediateSize = c.layers, c.E, 32 })
		m := randomModel(t, cfg, HeadMaskedLM, 33)
		b1 := &Batch{InputIDs: []int32{2, 5, 7, 3, 2, 9, 1, 0}, B: 2, T: 4}
		b2 := &Batch{InputIDs: []int32{4, 4, 1, 8, 6, 3, 2, 2}, B: 2, T: 4}
		w1, err := m.Forward(ctx, b1, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		w2, _ := m.Forward(ctx, b2, nil, Options{})
		se := m.NewSession()
		for i := 0; i < 3; i++ {
			for j, p := range []struct {
				b *Batch
				w *Output
			}{{b1, w1}, {b2, w2}} {
				got, err := se.Forward(ctx, p.b, nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				testutil.AssertClose(t, fmt.Sprintf("%d layers, E %d, round %d, batch %d: hidden", c.layers, c.E, i, j), got.LastHiddenState.Data, p.w.LastHiddenState.Data, 0, 0)
				testutil.AssertClose(t, fmt.Sprintf("%d layers, E %d, round %d, batch %d: logits", c.layers, c.E, i, j), got.Logits.Data, p.w.Logits.Data, 0, 0)
			}
		}
	}
	// The bytes NewState allocates for inference at T 512 (E = H = 8, I 32):
	// (7·8 + 32)·4 bytes a token and the per-row LayerNorm statistics.
	for _, layers := range []int{1, 6} {
		m := randomModel(t, tinyConfig(func(c *Config) { c.NumHiddenLayers, c.IntermediateSize = layers, 32 }), HeadMaskedLM, 34)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := m.NewState(1, 512, false)
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		perToken := float64(after.TotalAlloc-before.TotalAlloc) / 512
		if want := float64((7*8+32)*4 + 6*4); perToken > want+4 {
			t.Errorf("%d layers: an inference state takes %.1f bytes a token, want at most %.0f", layers, perToken, want)
		}
	}
}
