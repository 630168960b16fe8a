package pretrain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/data"
)

// Example trains the tiny fake model of the tests for 12 steps, is
// interrupted after step 5 (as SIGINT would do through the context), and
// resumes to the end.
func Example() {
	dir, _ := os.MkdirTemp("", "train-example-")
	defer os.RemoveAll(dir)
	seqs := testSeqs(60, 16, 1)
	tr, ev, _ := data.SplitEval(seqs, 10)
	ctx, cancel := context.WithCancel(context.Background())
	m := newFake(40, 8, 1)
	m.onCall = func(call int) {
		if call == 6 {
			cancel() // Ctrl-C during step 6
		}
	}
	job := Loop{Model: m, Train: tr, Eval: ev, Vocab: testVocab, Options: TrainOptions{
		Steps: 12, BatchSize: 4, SeqLen: 16, LR: 0.05, Schedule: "cosine", Warmup: 2,
		WeightDecay: 0.01, Clip: 1, Seed: 1, SaveEvery: 4, EvalEvery: 6, LogEvery: 4, OutDir: dir,
	}}
	res, err := job.Run(ctx)
	fmt.Println(res.Step, res.Interrupted, err != nil)

	// Rebuild the model and data as the original run did (ReadLatestState
	// gives its options), then resume.
	st, ckpt, _ := ReadLatestState(dir)
	fmt.Println(filepath.Base(ckpt), st.Options.Schedule)
	job.Model = newFake(40, 8, 1)
	job.Options = TrainOptions{OutDir: dir}
	res, err = job.Resume(context.Background())
	fmt.Println(res.Step, res.Interrupted, err)
	for _, f := range []string{"model.bin", "config.json", "metrics.jsonl", "loss.png", "checkpoint-12"} {
		_, err := os.Stat(filepath.Join(dir, f))
		fmt.Println(f, err == nil)
	}
	// Output:
	// 5 true true
	// checkpoint-5 cosine
	// 12 false <nil>
	// model.bin true
	// config.json true
	// metrics.jsonl true
	// loss.png true
	// checkpoint-12 true
}
