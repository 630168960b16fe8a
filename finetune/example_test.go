package finetune_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/finetune"
)

// The bag-of-words baseline on a toy task.
func ExampleTrainBaseline() {
	mk := func(texts ...string) *labelled.Dataset {
		ds := &labelled.Dataset{File: "toy"}
		for i, t := range texts {
			label := "neg"
			if strings.Contains(t, "good") {
				label = "pos"
			}
			ds.Examples = append(ds.Examples, labelled.Example{Line: i + 1, Text: t, Label: label, HasLabel: true})
		}
		return ds
	}
	train := mk("a good film", "good acting", "a bad film", "bad acting", "good plot", "bad plot")
	dev := mk("good story", "bad story")
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"neg", "pos"}}
	b, rep, err := finetune.TrainBaseline(context.Background(), spec, train, dev, finetune.BaselineOptions{MinCount: 1}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("dev accuracy %.2f\n", rep.Metrics["accuracy"])
	fmt.Println(b.Predict(mk("quite good"))[0].Label)
	// Output:
	// dev accuracy 1.00
	// pos
}
