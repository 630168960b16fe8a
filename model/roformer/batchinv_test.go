package roformer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
)

// invModel is a model wide enough for every kernel's vector and tile paths
// and long enough for the fused attention's several key tiles.
func invModel(t *testing.T) *Model {
	cfg := tinyConfig(func(c *Config) {
		c.VocabSize, c.HiddenSize, c.EmbeddingSize, c.NumHiddenLayers, c.NumAttentionHeads = 97, 64, 64, 2, 4
		c.IntermediateSize, c.MaxPositionEmbeddings = 160, 1100
		pad := 0
		c.PadTokenID = &pad
	})
	m := randomModel(t, cfg, HeadMaskedLM, 41)
	for _, p := range m.Params() { // smaller weights: a deep enough signal, no overflow
		for i := range p.Data {
			p.Data[i] *= 0.3
		}
	}
	return m
}

// paddedBatch pads rows to the longest (right padding, mask 0) in the order given.
func paddedBatch(rows [][]int32, T int) *Batch {
	b := &Batch{B: len(rows), T: T, InputIDs: make([]int32, len(rows)*T), AttentionMask: make([]int32, len(rows)*T)}
	for i, r := range rows {
		copy(b.InputIDs[i*T:], r)
		for j := range r {
			b.AttentionMask[i*T+j] = 1
		}
	}
	return b
}

// On go-asm a text's hidden states and logits are the same bits alone, in
// batches of 2, 7 (beside texts of 1 to 700 tokens) and 32 (1 to 200),
// at any position of the batch, under any padded length, and on 1, 2 or 3
// workers: in float32 as training leaves the model, prepared for inference
// (go-asm's panels), and in int8 where it runs (exact int32 sums,
// activations quantized per row).
func TestBatchInvarianceGoAsm(t *testing.T) {
	testutil.UseBackend(t, blas.KindGoAsm)
	defer kernels.SetThreads(kernels.Threads())
	for _, prec := range []Precision{"", PrecisionFP32, PrecisionInt8} {
		m := invModel(t)
		if err := m.SetPrecision(prec); err != nil {
			t.Logf("%q: %v", prec, err)
			continue
		}
		if !m.BatchInvariant() {
			t.Errorf("%q on go-asm: BatchInvariant is false", prec)
		}
		t.Run(string(prec)+"_", func(t *testing.T) { batchInvariant(t, m) })
	}
}

func batchInvariant(t *testing.T, m *Model) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	text := func(n int) []int32 {
		x := make([]int32, n)
		for i := range x {
			x[i] = int32(1 + r.IntN(96))
		}
		return x
	}
	H, V := m.Config.HiddenSize, m.Config.VocabSize
	for _, n := range []int{1, 5, 16, 37, 130, 600} {
		probe := text(n)
		kernels.SetThreads(2)
		alone, err := m.Forward(ctx, paddedBatch([][]int32{probe}, n), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, bs := range []int{2, 7, 32} {
			for _, th := range []int{1, 2, 3} {
				kernels.SetThreads(th)
				rows := make([][]int32, bs)
				T := n
				for i := range rows {
					if bs < 32 {
						rows[i] = text(1 + r.IntN(700))
					} else {
						rows[i] = text(1 + r.IntN(200))
					}
					T = max(T, len(rows[i]))
				}
				at := r.IntN(bs)
				rows[at] = probe
				T += r.IntN(3) // padding past the longest row too
				out, err := m.Forward(ctx, paddedBatch(rows, T), nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				diff := 0
				for p := 0; p < n; p++ {
					for j := 0; j < H; j++ {
						a, b := alone.LastHiddenState.Data[p*H+j], out.LastHiddenState.Data[(at*T+p)*H+j]
						if math.Float32bits(a) != math.Float32bits(b) {
							diff++
						}
					}
					for j := 0; j < V; j++ {
						a, b := alone.Logits.Data[p*V+j], out.Logits.Data[(at*T+p)*V+j]
						if math.Float32bits(a) != math.Float32bits(b) {
							diff++
						}
					}
				}
				if diff > 0 {
					t.Errorf("%s", fmt.Sprintf("%d tokens at row %d of %d (padded to %d), %d workers: %d of %d values differ from the text alone", n, at, bs, T, th, diff, n*(H+V)))
				}
			}
		}
	}
}

// Greedy decoding of a prompt on go-asm gives the same ids and the same
// logits' bits alone and beside other prompts of other lengths (shorter,
// and longer: the prompt left-padded), causal and UniLM.
func TestGenerateBatchInvarianceGoAsm(t *testing.T) {
	testutil.UseBackend(t, blas.KindGoAsm)
	m := genModel(t, func(c *Config) {
		c.HiddenSize, c.EmbeddingSize, c.NumAttentionHeads, c.IntermediateSize, c.VocabSize = 64, 64, 4, 96, 50
	}, 21)
	m.Config.MaxPositionEmbeddings = 320
	r := rand.New(rand.NewPCG(3, 4))
	text := func(n int) []int32 {
		x := make([]int32, n)
		for i := range x {
			x[i] = int32(1 + r.IntN(49))
		}
		return x
	}
	// 20 tokens beside 1 and 30 (the cache within one of go-asm's inner
	// blocks), and 200 beside 1 and 260 (left padding across them)
	for _, c := range [][3]int{{20, 1, 30}, {200, 1, 260}} {
		probe, others := text(c[0]), [][]int32{text(c[1]), text(c[2])}
		generateInvariant(t, m, probe, others)
	}
}

func generateInvariant(t *testing.T, m *Model, probe []int32, others [][]int32) {
	for _, mode := range []string{DecodeCausal, DecodeUniLM} {
		o := genOptions{DecoderOptions: DecoderOptions{Mode: mode, Pad: true}, Options: generate.Options{MaxNewTokens: 12, EOS: -1, OutputScores: true}}
		alone := mustGenerate(t, m, [][]int32{probe}, o)
		for _, batch := range [][][]int32{{others[0], probe}, {probe, others[1], others[0]}} {
			at := slices.IndexFunc(batch, func(p []int32) bool { return len(p) == len(probe) })
			got := mustGenerate(t, m, batch, o)
			if !slices.Equal(got.Sequences[at], alone.Sequences[0]) {
				t.Errorf("%s, %d prompts of %d tokens: %v batched, %v alone", mode, len(batch), len(probe), got.Sequences[at][len(probe):], alone.Sequences[0][len(probe):])
				continue
			}
			diff := 0
			for s := range alone.Scores[0] {
				for j, v := range alone.Scores[0][s] {
					if math.Float32bits(v) != math.Float32bits(got.Scores[at][s][j]) {
						diff++
					}
				}
			}
			if diff > 0 {
				t.Errorf("%s, %d prompts of %d tokens: %d logits differ from the prompt alone", mode, len(batch), len(probe), diff)
			}
		}
	}
}
