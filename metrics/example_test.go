package metrics_test

import (
	"fmt"

	"github.com/roformer-go/roformer/metrics"
)

func Example() {
	gold := []int{1, 1, 1, 0, 0, 0, 1, 0}
	pred := []int{1, 0, 1, 0, 1, 0, 1, 1}
	fmt.Printf("accuracy %.3f  f1 %.3f  macro-f1 %.3f  mcc %.3f\n",
		metrics.Accuracy(pred, gold), metrics.F1(pred, gold, 1), metrics.MacroF1(pred, gold), metrics.Matthews(pred, gold))
	fmt.Print(metrics.NewConfusion(pred, gold, []string{"neg", "pos"}))
	// Output:
	// accuracy 0.625  f1 0.667  macro-f1 0.619  mcc 0.258
	// gold \ pred    neg    pos |   prec recall     f1      n
	// neg              2      2 |  0.667  0.500  0.571      4
	// pos              1      3 |  0.600  0.750  0.667      4
}

func ExampleSpearman() {
	x := []float64{1, 2, 3, 4}
	y := []float64{1, 8, 27, 64}
	fmt.Printf("pearson %.4f spearman %.4f\n", metrics.Pearson(x, y), metrics.Spearman(x, y))
	// Output: pearson 0.9514 spearman 1.0000
}
