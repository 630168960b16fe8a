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

// Final losses of two settings trained with the same five seeds: the spread
// of each, and the paired comparison by seed.
func ExamplePairedDiff() {
	rotary := []float64{4.99, 5.76, 4.59, 5.10, 4.80}
	learned := []float64{5.60, 5.90, 5.50, 5.70, 5.65}
	fmt.Println("rotary: ", experiment.SeedSpread(rotary).Format(3), experiment.SeedSpread(rotary).FormatCI(3))
	fmt.Println("one seed:", experiment.SeedSpread(rotary[:1]).Format(3))
	p, err := experiment.PairedDiff(rotary, learned)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("rotary − learned:", p.Format(3))
	// Output:
	// rotary:  5.048 ± 0.443 [4.498, 5.598]
	// one seed: 4.990 (1 seed)
	// rotary − learned: -0.622 ± 0.303, 95% CI [-0.999, -0.245]; 0 of 5 seeds > 0; paired t(4) = -4.59, p = 0.0101; sign-flip p = 0.0625
}
