package finetune

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/internal/golden"
)

// The per-step losses, gradient norms and learning rates of a short
// fine-tuning run, and the final parameters, are pinned to the bit: a
// refactoring of the training step must not change them.
func TestTrainGolden(t *testing.T) {
	golden.Pin(t)
	dir := tinyModel(t)
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"negative", "positive"}}
	m, j := loadTiny(t, dir, &spec, 3)
	j.Train, j.Eval = synth(1, 40, "train"), synth(2, 16, "dev")
	j.Options.Epochs, j.Options.WarmupSteps, j.Options.LogEvery, j.Options.Clip = 2, 2, 1, 0.2
	var metrics bytes.Buffer
	j.Metrics = &metrics
	if _, err := Train(context.Background(), *j); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(metrics.String()), "\n") {
		var r MetricsRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.LR != nil {
			got = append(got, fmt.Sprintf("step %d loss %.17g norm %.17g lr %.17g", r.Step, *r.Loss, *r.GradNorm, *r.LR))
		} else {
			got = append(got, fmt.Sprintf("epoch %d loss %.17g eval %.17g", r.Epoch, *r.Loss, r.Eval.Loss))
		}
	}
	h := sha256.New()
	for _, p := range m.Params() {
		binary.Write(h, binary.LittleEndian, p.Data)
	}
	got = append(got, fmt.Sprintf("params %x", h.Sum(nil)[:16]))
	want := []string{
		"step 1 loss 0.69335910305380821 norm 0.2828302374150749 lr 0",
		"step 2 loss 0.69306186214089394 norm 0.096954361823321705 lr 0.0050000000000000001",
		"step 3 loss 0.69983954727649689 norm 0.38522592431044467 lr 0.01",
		"epoch 1 loss 0.69542017082373297 eval 0.69317283108830452",
		"step 4 loss 0.6910657025873661 norm 0.17994502806558949 lr 0.0074999999999999997",
		"step 5 loss 0.69020293280482292 norm 0.17554078883943922 lr 0.0050000000000000001",
		"step 6 loss 0.70195507258176804 norm 0.3775637601447438 lr 0.0025000000000000001",
		"epoch 2 loss 0.69440790265798569 eval 0.69330376759171486",
		"params d6d2d9a6bdd21b02b035f7e9bf1c906f",
	}
	golden.Check(t, got, want)
}
