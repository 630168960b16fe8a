package finetune

import (
	"context"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/model/roformer"
)

// Options.Precision bf16 trains in mixed precision: the tiny model still
// learns the synthetic rule, its losses differ from fp32's (the products
// ran in bfloat16) but stay close, and two bf16 runs are identical.
func TestTrainBF16(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	dir := tinyModel(t)
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"negative", "positive"}}
	run := func(prec string) *Result {
		m, j := loadTiny(t, dir, &spec, 3)
		j.Train, j.Eval = synth(1, 256, "train"), synth(2, 64, "dev")
		j.Options.Precision = prec
		res, err := Train(context.Background(), *j)
		mustf(t, err, "Train")
		if want := roformer.Precision(prec); prec != "" && m.TrainingPrecision() != want {
			t.Errorf("the model trained in %q, asked %q", m.TrainingPrecision(), want)
		}
		return res
	}
	fp32, bf16, again := run(""), run("bf16"), run("bf16")
	if bf16.Best == nil || bf16.Best.Metrics["accuracy"] < 0.9 {
		t.Fatalf("dev accuracy after bf16 training: %+v", bf16.Best)
	}
	last := len(fp32.Epochs) - 1
	a, b := fp32.Epochs[last].TrainLoss, bf16.Epochs[last].TrainLoss
	if a == b {
		t.Error("bf16 training loss equals fp32's: the products did not run in bfloat16")
	}
	if d := a - b; d > 0.05 || d < -0.05 {
		t.Errorf("last epoch's training loss: fp32 %.4f, bf16 %.4f", a, b)
	}
	for e := range bf16.Epochs {
		if bf16.Epochs[e].TrainLoss != again.Epochs[e].TrainLoss {
			t.Errorf("epoch %d: two bf16 runs differ (%v, %v)", e+1, bf16.Epochs[e].TrainLoss, again.Epochs[e].TrainLoss)
		}
	}
	t.Logf("last epoch's training loss fp32 %.5f, bf16 %.5f; bf16 dev accuracy %.3f", a, b, bf16.Best.Metrics["accuracy"])
}
