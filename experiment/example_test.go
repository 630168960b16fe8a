package experiment_test

import (
	"fmt"
	"os"

	"github.com/roformer-go/roformer/experiment"
)

// The long-term decay bound of §3.4.3 (Fig. 2), written as decay.json,
// decay.csv, decay.png, decay.svg and summary.md.
func ExampleDecay() {
	dir, _ := os.MkdirTemp("", "decay")
	defer os.RemoveAll(dir)
	res, err := experiment.Decay(experiment.DefaultDecay(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("d = %d: bound %.2f at r = 0, %.2f at r = 50, %.2f at r = 250\n", res.Dim, res.Bound[0], res.Bound[50], res.Bound[250])
	// Output:
	// d = 128: bound 32.50 at r = 0, 12.63 at r = 50, 6.55 at r = 250
}
