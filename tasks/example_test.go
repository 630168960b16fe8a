package tasks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/metrics"
	"github.com/roformer-go/roformer/tasks"
	"github.com/roformer-go/roformer/tokenizer/bpe"
)

func ExampleNames() {
	for _, name := range tasks.Names() {
		t, _ := tasks.Get(name)
		fmt.Printf("%-18s %-12s %-9s pairs=%v labels=%d\n", name, t.Spec.Problem, t.Spec.Metric, t.Spec.Pair, len(t.Spec.Labels))
	}
	// Output:
	// paraphrase         single-label f1        pairs=true labels=2
	// paraphrase-matched single-label f1        pairs=true labels=2
	// sentiment          single-label accuracy  pairs=false labels=2
	// spam               single-label f1        pairs=false labels=2
	// topics             single-label macro_f1  pairs=false labels=10
}

func ExampleOSISText() {
	fmt.Println(tasks.OSISText(`<w lemma="strong:G2424">Jesus</w> <w lemma="strong:G1145">wept</w>.<note placement="foot">Or, shed tears</note>`))
	// Output: Jesus wept.
}

// The parallel Bible with a vocabulary shared by both languages, and the
// BLEU of a "translation" that copies the English side. (Not run as a test:
// it fetches two Debian packages on first use.)
func ExampleBibleParallel() {
	cache, _ := os.UserCacheDir()
	p, err := tasks.BibleParallel(context.Background(), filepath.Join(cache, "roformer", "tasks"), os.Stderr)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(p.Train), len(p.Dev), len(p.Test), p.TestBooks)
	var texts []string
	for _, x := range p.Train {
		texts = append(texts, x.Src, x.Tgt)
	}
	tok, err := bpe.Train(texts, 16000)
	if err != nil {
		fmt.Println(err)
		return
	}
	src := append(append([]int{bpe.BosID}, tok.Encode(p.Test[0].Src)...), bpe.EosID)
	fmt.Println(len(src), tok.Decode(src) == bpe.Normalize(p.Test[0].Src))
	hyps := make([]string, len(p.Test))
	refs := make([]string, len(p.Test))
	for i, x := range p.Test {
		hyps[i], refs[i] = x.Src, x.Tgt
	}
	bleu, _ := metrics.CorpusBLEU(hyps, [][]string{refs})
	fmt.Printf("copying the source: BLEU %.1f\n", bleu.Score)
}
