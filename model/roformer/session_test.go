package roformer

import (
	"context"
	"fmt"
	"math"
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

// shapedBatch returns B rows of T random tokens, the last row padded after
// its first half (when B > 1) and, with types, the second half of each
// row of token type 1.
func shapedBatch(seed uint64, B, T, V int, types bool) *Batch {
	r := testutil.Rand(seed)
	b := &Batch{InputIDs: make([]int32, B*T), AttentionMask: make([]int32, B*T), B: B, T: T}
	if types {
		b.TokenTypeIDs = make([]int32, B*T)
	}
	for i := range b.InputIDs {
		row, t := i/T, i%T
		b.InputIDs[i] = int32(r.IntN(V))
		if row < B-1 || B == 1 || t <= T/2 {
			b.AttentionMask[i] = 1
		}
		if types && t >= T/2 {
			b.TokenTypeIDs[i] = 1
		}
	}
	return b
}

// One session over batches of changing shapes gives, bit for bit, what a
// fresh Model.Forward gives for each, and once it has run its largest
// shape, a pass over smaller shapes allocates what a pass over one shape
// does (the kernels' per-call headers) give or take less than one state of
// the smallest: the workspace of every shape is cut from the arena the
// largest one left. (A session that made a state per shape allocated the
// workspace of each batch again.)
func TestSessionMixedShapes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		mod  func(*Config)
	}{
		{"I<3H", func(c *Config) { c.HiddenSize, c.EmbeddingSize, c.IntermediateSize = 64, 64, 96 }},   // the fused q, k, v in the state's scratch
		{"I>=3H", func(c *Config) { c.HiddenSize, c.EmbeddingSize, c.IntermediateSize = 64, 64, 256 }}, // in the feed-forward buffer
		{"E<H", func(c *Config) { c.HiddenSize, c.EmbeddingSize, c.IntermediateSize = 64, 32, 256 }},   // an embedding projection
		{"I<E", func(c *Config) { c.HiddenSize, c.EmbeddingSize, c.IntermediateSize = 64, 64, 48 }},    // the embeddings' sum in a buffer of its own
	} {
		t.Run(c.name, func(t *testing.T) {
			m := randomModel(t, tinyConfig(c.mod), HeadMaskedLM, 36)
			batches := func(seed uint64, shapes ...[2]int) []*Batch {
				bs := make([]*Batch, len(shapes))
				for i, sh := range shapes {
					bs[i] = shapedBatch(seed+uint64(i), sh[0], sh[1], m.Config.VocabSize, false)
				}
				return bs
			}
			se := m.NewSession()
			run := func(bs []*Batch, check bool) {
				for i, b := range bs {
					got, err := se.Forward(ctx, b, nil, Options{})
					if err != nil {
						t.Fatal(err)
					}
					if !check {
						continue
					}
					want, err := m.Forward(ctx, b, nil, Options{})
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("batch %d (%d×%d)", i, b.B, b.T)
					testutil.AssertClose(t, name+": hidden", got.LastHiddenState.Data, want.LastHiddenState.Data, layoutTol(), 0)
					testutil.AssertClose(t, name+": logits", got.Logits.Data, want.Logits.Data, layoutTol(), 0)
				}
			}
			run(batches(100, [2]int{2, 7}, [2]int{1, 3}, [2]int{3, 11}, [2]int{1, 3}, [2]int{2, 7}), true)
			mixed := batches(200, [2]int{1, 3}, [2]int{2, 7}, [2]int{1, 3}, [2]int{2, 7})
			same := batches(300, [2]int{2, 7}, [2]int{2, 7}, [2]int{2, 7}, [2]int{2, 7})
			run(mixed, true) // the arena and the input buffers of other shapes reused
			run(same, true)
			bytes := func(bs []*Batch) float64 { return warmBytes(func() { run(bs, false) }) }
			mixedBytes, sameBytes := bytes(mixed), bytes(same)
			var probe arena
			m.newState(1, 3, false, &probe)
			smallest := 4 * probe.off // bytes of a 1 × 3 state
			if mixedBytes-sameBytes > float64(smallest) {
				t.Errorf("a warm session allocates %.0f bytes per pass over 4 batches of changing shapes, %.0f over 4 of one shape; one 1×3 state is %d bytes", mixedBytes, sameBytes, smallest)
			}
			t.Logf("per pass of 4 batches: %.0f bytes over changing shapes, %.0f over one shape (a 1×3 state: %d bytes)", mixedBytes, sameBytes, smallest)
		})
	}
}

// Every buffer of an inference state is written before it is read, so the
// arena hands them out as it finds them: with the slab filled with NaN
// after every call, a session still gives Model.Forward's bits for every
// position encoding and attention kind, xPos, RoFormer-V2's norm, the
// UniLM mask of RoFormer-Sim and the reduced precisions this machine runs.
func TestSessionArenaPoisoned(t *testing.T) {
	ctx := context.Background()
	type variant struct {
		name  string
		mod   func(*Config)
		head  Head
		sim   bool
		prec  Precision
		types bool
	}
	var vs []variant
	for _, sc := range switchCases() {
		vs = append(vs, variant{name: fmt.Sprintf("%s_%s", sc.pe, sc.at), mod: switchConfig(sc.pe, sc.at), head: HeadMaskedLM, types: true})
	}
	vs = append(vs,
		variant{name: "causal_rotary_value_E6", mod: func(c *Config) { c.RotaryValue, c.EmbeddingSize = true, 6 }, head: HeadCausalLM},
		variant{name: "xpos", mod: func(c *Config) { c.XPos = &XPosConfig{ScaleBase: 4} }, head: HeadMaskedLM},
		variant{name: "v2_rms_norm", mod: func(c *Config) { c.NormType = "rms_norm" }, head: HeadMaskedLM},
		variant{name: "sim_unilm", mod: func(c *Config) { c.IsDecoder = true }, head: HeadBase, sim: true, types: true},
		variant{name: "seq_cls", head: HeadSequenceCls, types: true},
		variant{name: "bf16", mod: func(c *Config) { c.IntermediateSize = 32 }, head: HeadMaskedLM, prec: PrecisionBF16},
		variant{name: "int8", mod: func(c *Config) { c.IntermediateSize = 32 }, head: HeadMaskedLM, prec: PrecisionInt8},
	)
	// Largest first: the later shapes reuse the poisoned slab.
	shapes := [][2]int{{3, 11}, {2, 7}, {1, 3}, {2, 7}, {1, 5}, {1, 5}}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			if v.prec != "" {
				if err := precisionSupported(v.prec); err != nil {
					t.Skip(err)
				}
			}
			m := randomModel(t, tinyConfig(v.mod), v.head, 37)
			if v.sim {
				m.EnablePooler()
			}
			if v.prec != "" {
				if err := m.SetPrecision(v.prec); err != nil {
					t.Fatal(err)
				}
			}
			se := m.NewSession()
			for i, sh := range shapes {
				b := shapedBatch(uint64(200+i), sh[0], sh[1], m.Config.VocabSize, v.types)
				want, err := m.Forward(ctx, b, nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := se.Forward(ctx, b, nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("batch %d (%d×%d)", i, sh[0], sh[1])
				testutil.AssertClose(t, name+": hidden", got.LastHiddenState.Data, want.LastHiddenState.Data, layoutTol(), 0)
				for _, o := range []string{"logits", "pooler_output"} {
					if w := want.Named(o); w != nil {
						testutil.AssertClose(t, name+": "+o, got.Named(o).Data, w.Data, layoutTol(), 0)
					}
				}
				for j := range se.ar.slab {
					se.ar.slab[j] = float32(math.NaN())
				}
			}
		})
	}
}
