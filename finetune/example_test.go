package finetune_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/roformer-go/roformer/finetune"
)

// Reading GLUE's MRPC layout: tab-separated, a header, no quoting.
func ExampleRead() {
	tsv := "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" +
		"1\t1\t2\tHe said \"yes\".\tHe agreed.\n" +
		"0\t3\t4\tIt rained.\tThe sun shone.\n"
	ds, err := finetune.Read(strings.NewReader(tsv), "train.tsv", finetune.ReadOptions{
		Format:  finetune.TSV,
		Columns: finetune.Columns{Text: "#1 String", Pair: "#2 String", Label: "Quality"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ex := range ds.Examples {
		fmt.Printf("line %d: %q / %q → %s\n", ex.Line, ex.Text, *ex.TextPair, ex.Label)
	}
	fmt.Println(finetune.InferLabels(ds, finetune.SingleLabel))

	_, err = finetune.Read(strings.NewReader("text\tlabel\n"), "empty.tsv", finetune.ReadOptions{Format: finetune.TSV})
	fmt.Println(err)
	// Output:
	// line 2: "He said \"yes\"." / "He agreed." → 1
	// line 3: "It rained." / "The sun shone." → 0
	// [0 1]
	// finetune: empty.tsv: no examples: the file has a header but no rows
}

// The bag-of-words baseline on a toy task.
func ExampleTrainBaseline() {
	mk := func(texts ...string) *finetune.Dataset {
		ds := &finetune.Dataset{File: "toy"}
		for i, t := range texts {
			label := "neg"
			if strings.Contains(t, "good") {
				label = "pos"
			}
			ds.Examples = append(ds.Examples, finetune.Example{Line: i + 1, Text: t, Label: label, HasLabel: true})
		}
		return ds
	}
	train := mk("a good film", "good acting", "a bad film", "bad acting", "good plot", "bad plot")
	dev := mk("good story", "bad story")
	spec := finetune.Spec{Problem: finetune.SingleLabel, Labels: []string{"neg", "pos"}}
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
