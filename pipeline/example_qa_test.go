package pipeline_test

import (
	"context"
	"fmt"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// QuestionAnswering with a model folder of a question-answering model
// (RoFormerForQuestionAnswering from Hugging Face): the two best
// spans of the context, or "" when the model finds no answer there.
func ExampleQuestionAnswering() {
	dir := "qa-model"
	l, err := roformer.Load(dir, roformer.HeadQA, roformer.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	answers, err := pipeline.QuestionAnswering(context.Background(), l.Model, tok,
		"where does the whale live?", "the whale lives in the cold sea near kraków.",
		pipeline.QuestionAnsweringOptions{TopK: 2, HandleImpossibleAnswer: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range answers {
		fmt.Printf("%q [%d, %d) %.2f\n", a.Answer, a.Start, a.End, a.Score)
	}
}
