package main

import (
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/model/roformer"
)

// The ceiling format of a run is the one its linear products run in.
func TestCeilingFormat(t *testing.T) {
	packed := blas.FormatFP32
	if blas.Chosen().Kind == blas.KindOneDNN {
		packed = blas.FormatFP32Packed
	}
	for _, c := range []struct {
		mode string
		prec roformer.Precision
		want string
	}{
		{"train", roformer.PrecisionFP32, blas.FormatFP32},
		{"infer", roformer.PrecisionFP32, packed},
		{"decode", roformer.PrecisionFP32, packed},
		{"infer", roformer.PrecisionBF16, blas.FormatBF16},
		{"train", roformer.PrecisionBF16, blas.FormatBF16},
		{"infer", roformer.PrecisionInt8, blas.FormatInt8},
	} {
		if got := ceilingFormat(c.mode, c.prec); got != c.want {
			t.Errorf("ceilingFormat(%s, %s) = %q, want %q", c.mode, c.prec, got, c.want)
		}
	}
}

// bench's JSON holds the ceiling of the run's format at its thread count
// and the MFU against it, and the text report states it; where the format
// cannot be measured, the reason.
func TestBenchCeiling(t *testing.T) {
	cases := []struct {
		name string
		args []string
		prec roformer.Precision
		mode string
		runs error // why this machine cannot run the job's format
	}{
		{"train", []string{"--mode", "train"}, roformer.PrecisionFP32, "train", nil},
		{"infer", []string{"--precision", "fp32"}, roformer.PrecisionFP32, "infer", nil},
		{"bf16", []string{"--precision", "bf16"}, roformer.PrecisionBF16, "infer", blas.BF16Supported()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.runs != nil {
				t.Skip(c.runs)
			}
			r, stdout := benchJSON(t, append([]string{"--size", "tiny", "--batch", "2", "--seq", "8", "--steps", "1", "--warmup", "0",
				"--threads", "2", "--json", "--quiet", "--peak-gflops", "100"}, c.args...)...)
			ce := r.Ceiling
			if ce == nil {
				t.Fatalf("no ceiling in the JSON:\n%s", stdout)
			}
			if want := ceilingFormat(c.mode, c.prec); ce.Format != want || ce.Threads != 2 {
				t.Errorf("ceiling %+v, want format %s on 2 threads", *ce, want)
			}
			// fp32 through Sgemm always runs; fp32-packed needs oneDNN,
			// which the backend in use then is.
			if !ce.Measured() {
				t.Fatalf("ceiling not measured: %+v", *ce)
			}
			if got, want := r.MFUCeiling, r.GFLOPS/ce.Rate; math.Abs(got-want) > 1e-12*want || !(got > 0) {
				t.Errorf("mfu_ceiling = %v, want gflops/rate = %v", got, want)
			}
			if want := "of the " + ce.Format + " ceiling, "; !strings.Contains(stdout, want) {
				t.Errorf("the report does not say %q:\n%s", want, stdout)
			}
		})
	}
}

// A ceiling that cannot be measured is reported with its reason, and no
// MFU against it.
func TestBenchCeilingReason(t *testing.T) {
	c := benchCeiling(blas.FormatFP32, blas.MaxCeilingThreads+1)
	if c.Measured() || c.Reason == "" || c.Format != blas.FormatFP32 {
		t.Fatalf("ceiling %+v, want a reason", *c)
	}
	r := benchResult{GFLOPS: 10}
	r.setCeiling(c)
	if r.MFUCeiling != 0 || r.Ceiling != c {
		t.Errorf("mfu_ceiling %v, ceiling %+v", r.MFUCeiling, r.Ceiling)
	}
	var b strings.Builder
	if err := printBenchTail(&b, benchOptions{}, r, false); err != nil {
		t.Fatal(err)
	}
	if want := "fp32 ceiling not measured: " + c.Reason; !strings.Contains(b.String(), want) {
		t.Errorf("report without %q:\n%s", want, b.String())
	}
}
