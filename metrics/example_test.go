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

func ExampleCorpusBLEU() {
	hyps := []string{"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."}
	refs := [][]string{ // two reference streams, one segment per hypothesis each
		{"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
		{"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."},
	}
	bleu, err := metrics.CorpusBLEU(hyps, refs)
	if err != nil {
		fmt.Println(err)
		return
	}
	chrf, _ := metrics.CorpusCHRF(hyps, refs)
	fmt.Println("BLEU =", bleu)
	fmt.Printf("%s = %.2f\n", chrf.Name(), chrf.Score)
	// Output (as sacreBLEU's README prints for this example):
	// BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
	// chrF2 = 59.73
}
