package labelled_test

import (
	"fmt"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
)

// Reading GLUE's MRPC layout: tab-separated, a header, no quoting.
func ExampleRead() {
	tsv := "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" +
		"1\t1\t2\tHe said \"yes\".\tHe agreed.\n" +
		"0\t3\t4\tIt rained.\tThe sun shone.\n"
	ds, err := labelled.Read(strings.NewReader(tsv), "train.tsv", labelled.ReadOptions{
		Format:  labelled.TSV,
		Columns: labelled.Columns{Text: "#1 String", Pair: "#2 String", Label: "Quality"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ex := range ds.Examples {
		fmt.Printf("line %d: %q / %q → %s\n", ex.Line, ex.Text, *ex.TextPair, ex.Label)
	}
	fmt.Println(labelled.InferLabels(ds, labelled.SingleLabel))

	_, err = labelled.Read(strings.NewReader("text\tlabel\n"), "empty.tsv", labelled.ReadOptions{Format: labelled.TSV})
	fmt.Println(err)
	// Output:
	// line 2: "He said \"yes\"." / "He agreed." → 1
	// line 3: "It rained." / "The sun shone." → 0
	// [0 1]
	// labelled: empty.tsv: no examples: the file has a header but no rows
}
