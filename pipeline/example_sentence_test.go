package pipeline_test

import (
	"context"
	"fmt"
	"log"

	"github.com/roformer-go/roformer/pipeline"
)

// A sentence-transformers folder (here one that sentence-transformers 2.7.0
// saved around a tiny random RoFormer: mean pooling without the prompt, two
// prompts) gives the vectors its encode gives: Open reads its modules, and
// Embed runs them with the prompt named.
func ExampleEmbed_sentenceTransformers() {
	m, err := pipeline.Open("../sentence/testdata/st/prompts_exclude", pipeline.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Sentence)
	texts := []pipeline.EmbedInput{{Text: "hello world"}, {Text: "hello to the world"}}
	for _, name := range []string{"query", "passage"} {
		vecs, _, err := pipeline.Embed(context.Background(), m.Model, m.Tokenizer, texts,
			pipeline.EmbedOptions{Sentence: m.Sentence, PromptName: name, Truncate: true})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d values, first %.3f\n", name, len(vecs[0]), vecs[0][0])
	}
	// Output:
	// mean (without the prompt); max_seq_length 64; prompts passage, query (default query); similarity cosine
	// query: 16 values, first 0.385
	// passage: 16 values, first 0.427
}
