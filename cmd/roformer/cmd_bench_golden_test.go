package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/golden"
)

// The loss after the warm-up and timed training steps of the bench is
// pinned to the bit: a refactoring of the training step must not change
// it. The number was recorded on amd64 with the AVX-512 element-wise
// kernels, pure-Go matrix products and two kernel threads. Re-recorded on
// 2026-12-07 when linear layers of fewer than 64 rows a worker began to
// split their output columns over the workers (gonum's sums depend on the
// block's width; go-asm's do not): 4.8678237795829773 before.
func TestBenchTrainGolden(t *testing.T) {
	golden.Pin(t)
	o := benchOptions{size: "tiny", head: "masked-lm", mode: "train", batch: 2, seq: 8, steps: 3, warmup: 2,
		peakGFLOPS: 100, maskProb: 0.5, lr: 1e-3, weightDecay: 0.01, seed: 4, json: true, quiet: true, precision: "fp32", threads: 2}
	var stdout bytes.Buffer
	if err := runBench(context.Background(), o, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var r benchResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || r.Loss == nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if got, want := fmt.Sprintf("%.17g", *r.Loss), "4.8678236603736877"; got != want {
		t.Errorf("loss after 5 training steps = %s, want %s", got, want)
	}
}
