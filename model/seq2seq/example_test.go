package seq2seq_test

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/model/seq2seq"
)

// A tiny encoder-decoder: one training step on a pair, then beam search.
func Example() {
	cfg := seq2seq.Config{VocabSize: 16, DModel: 16, Heads: 2, FFN: 32, EncoderLayers: 1, DecoderLayers: 1,
		Position: seq2seq.Rotary, LabelSmooth: 0.1, PadID: 0, BOSID: 1, EOSID: 2, LayerNormEps: 1e-5}
	m, err := seq2seq.New(cfg)
	if err != nil {
		panic(err)
	}
	m.Init(1)
	b, err := seq2seq.NewBatch(cfg, [][]int32{{5, 6, 7}}, [][]int32{{7, 6, 5}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	p, err := m.Forward(ctx, b, seq2seq.Options{Train: true, Seed: 1})
	if err != nil {
		panic(err)
	}
	if err := p.Backward(ctx); err != nil {
		panic(err)
	}
	fmt.Printf("%d target tokens, loss near ln 16 = 2.77: %v\n", p.Tokens, p.Loss > 2 && p.Loss < 4)
	out, err := m.Translate(ctx, [][]int32{{5, 6, 7}}, seq2seq.DecodeOptions{Beam: 4, Alpha: 0.6, MaxExtra: 4})
	if err != nil {
		panic(err)
	}
	fmt.Println("at most 3+4 tokens:", len(out[0]) <= 7)
	// Output:
	// 4 target tokens, loss near ln 16 = 2.77: true
	// at most 3+4 tokens: true
}
