package tasks_test

import (
	"fmt"

	"github.com/roformer-go/roformer/tasks"
)

func ExampleNames() {
	for _, name := range tasks.Names() {
		t, _ := tasks.Get(name)
		fmt.Printf("%-10s %-12s %-9s pairs=%v labels=%d\n", name, t.Spec.Problem, t.Spec.Metric, t.Spec.Pair, len(t.Spec.Labels))
	}
	// Output:
	// paraphrase single-label f1        pairs=true labels=2
	// sentiment  single-label accuracy  pairs=false labels=2
	// spam       single-label f1        pairs=false labels=2
	// topics     single-label macro_f1  pairs=false labels=10
}

func ExampleOSISText() {
	fmt.Println(tasks.OSISText(`<w lemma="strong:G2424">Jesus</w> <w lemma="strong:G1145">wept</w>.<note placement="foot">Or, shed tears</note>`))
	// Output: Jesus wept.
}
