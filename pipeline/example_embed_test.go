package pipeline_test

import (
	"context"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// Embed on a small model made in memory (a folder loaded with roformer.Load
// and tokenizer.Load does the same): one vector per input, a text or
// a pair, mean-pooled and normalized as the server's POST /embed does.
func ExampleEmbed() {
	v, _ := tokenizer.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "call", "me", "ishmael", "the", "whale"})
	tok, _ := tokenizer.New(v, tokenizer.DefaultConfig(tokenizer.Bert))
	cfg := roformer.DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = v.Size(), 8, 8, 1, 2, 16
	m, err := roformer.New(cfg, roformer.HeadBase)
	if err != nil {
		fmt.Println(err)
		return
	}
	m.Init(1)

	pair := "the whale"
	vecs, st, err := pipeline.Embed(context.Background(), m, tok, []pipeline.EmbedInput{
		{Text: "call me ishmael"},
		{Text: "call me", TextPair: &pair},
	}, pipeline.EmbedOptions{Normalize: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, vec := range vecs {
		norm := 0.0
		for _, x := range vec {
			norm += float64(x) * float64(x)
		}
		fmt.Printf("input %d: %d values, norm %.3f\n", i, len(vec), math.Sqrt(norm))
	}
	fmt.Printf("%d tokens in %d batch, %d with padding\n", st.Tokens, st.Batches, st.PaddedTokens)
	// Output:
	// input 0: 8 values, norm 1.000
	// input 1: 8 values, norm 1.000
	// 12 tokens in 1 batch, 14 with padding
}
