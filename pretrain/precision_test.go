package pretrain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
)

// A bf16 run resumed from its checkpoint at step 10 ends byte-identical to
// the same run left alone (the resumed run takes its precision from the
// checkpoint), and differs from the fp32 run (the products did run in
// bfloat16).
func TestBF16ResumeIdentical(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	run := func(steps int, prec string) (string, string) {
		dir := t.TempDir()
		o := testOptions(t, dir, steps)
		o.Train.Precision, o.Train.Keep = prec, 4
		var log bytes.Buffer
		if _, _, err := Start(ctx, o, &log, false); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		return dir, log.String()
	}
	straight, log := run(20, "bf16")
	if !strings.Contains(log, "precision: bf16") {
		t.Errorf("the log does not say the precision:\n%s", log)
	}
	want, err := os.ReadFile(filepath.Join(straight, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the run folder whose latest checkpoint is step 10's.
	half := t.TempDir()
	if err := os.CopyFS(half, os.DirFS(straight)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, LatestFile), []byte(checkpointName(10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _, err := ReadLatestState(half)
	if err != nil {
		t.Fatal(err)
	}
	if st.Step != 10 || st.Options.Precision != "bf16" {
		t.Fatalf("train_state.json of step %d records precision %q", st.Step, st.Options.Precision)
	}
	if _, _, err := Resume(ctx, half, 0, 2, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(half, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bf16 run resumed from step 10 differs from the one left alone")
	}
	fp32, _ := run(20, "")
	other, err := os.ReadFile(filepath.Join(fp32, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other, want) {
		t.Fatal("the bf16 run equals the fp32 run")
	}
}

func TestPrecisionOption(t *testing.T) {
	o := DefaultTrainOptions(10, "x")
	for _, p := range []string{"", "fp32", "bf16"} {
		o.Precision = p
		if err := o.Validate(); err != nil {
			t.Errorf("precision %q: %v", p, err)
		}
	}
	for _, p := range []string{"int8", "fp16", "BF16x"} {
		o.Precision = p
		if err := o.Validate(); err == nil {
			t.Errorf("precision %q accepted", p)
		}
	}
}
