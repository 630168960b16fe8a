package roformer

import (
	"context"
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
