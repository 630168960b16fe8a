package pipeline_test

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// TokenClassification with a model folder saved by `roformer finetune
// --task ner` or from Hugging Face (RoFormerForTokenClassification).
func ExampleTokenClassification() {
	dir := "ner-model"
	l, err := roformer.Load(dir, roformer.HeadTokenCls, roformer.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	ents, err := pipeline.TokenClassification(context.Background(), l.Model, tok, "anna lives in kraków",
		pipeline.TokenClassificationOptions{Aggregation: pipeline.AggregateFirst})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range ents {
		fmt.Printf("%s %q [%d, %d) %.2f\n", e.EntityGroup, e.Word, e.Start, e.End, e.Score)
	}
}

// Aggregate is the pipeline's last step on its own: tokens with their
// probabilities over the labels become entities.
func ExampleAggregate() {
	labels := []string{"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}
	tokens := []pipeline.PreEntity{
		{Word: "ann", Scores: []float64{0.1, 0.7, 0.1, 0.05, 0.05}, Start: 0, End: 3, Index: 1},
		{Word: "##a", Scores: []float64{0.1, 0, 0, 0.9, 0}, Start: 3, End: 4, Index: 2, IsSubword: true},
		{Word: "lives", Scores: []float64{0.9, 0.025, 0.025, 0.025, 0.025}, Start: 5, End: 10, Index: 3},
	}
	for _, agg := range []pipeline.Aggregation{pipeline.AggregateSimple, pipeline.AggregateFirst, pipeline.AggregateMax} {
		for _, e := range pipeline.Aggregate(tokens, labels, agg, []string{"O"}) {
			fmt.Printf("%s: %s %q [%d, %d) %.2f\n", agg, e.EntityGroup, e.Word, e.Start, e.End, e.Score)
		}
	}
	// Output:
	// simple: PER "ann" [0, 3) 0.70
	// simple: LOC "##a" [3, 4) 0.90
	// first: PER "anna" [0, 4) 0.70
	// max: LOC "anna" [0, 4) 0.90
}
