package blas

import (
	"strings"
	"testing"
	"time"
)

// quickCeilings are options that keep a test's measurement short: one
// timed round a format.
func quickCeilings(threads int, formats ...string) CeilingOptions {
	return CeilingOptions{Threads: threads, Formats: formats, Rounds: 1, Budget: time.Millisecond}
}

// Every format is reported, in order; fp32 always has a rate, and each of
// the others has one exactly when this machine can run it, a reason
// otherwise.
func TestMeasureCeilings(t *testing.T) {
	cs, err := MeasureCeilings(quickCeilings(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(CeilingFormats) {
		t.Fatalf("%d ceilings, want one per format %v: %+v", len(cs), CeilingFormats, cs)
	}
	_, oneDNNErr := NewF32Matmul([]float32{1}, 1, 1) // fails exactly when oneDNN's matmul cannot be loaded
	supported := map[string]error{
		FormatFP32:       nil,
		FormatFP32Packed: oneDNNErr,
		FormatBF16:       BF16Supported(),
		FormatInt8:       oneDNNErr,
	}
	for i, c := range cs {
		t.Logf("%-12s %8.1f %-7s %d rounds, %.0f ms, %s%s", c.Format, c.Rate, c.Unit, c.Rounds, c.Millis, c.Impl, c.Reason)
		if c.Format != CeilingFormats[i] {
			t.Errorf("ceiling %d is %q, want %q", i, c.Format, CeilingFormats[i])
		}
		if c.Threads != 2 {
			t.Errorf("%s: threads %d, want 2", c.Format, c.Threads)
		}
		wantUnit := "GFLOP/s"
		if c.Format == FormatInt8 {
			wantUnit = "GOP/s"
		}
		if c.Unit != wantUnit {
			t.Errorf("%s: unit %q, want %q", c.Format, c.Unit, wantUnit)
		}
		if err := supported[c.Format]; err != nil {
			if c.Measured() || c.Rate != 0 || c.Reason == "" || c.Rounds != 0 {
				t.Errorf("%s cannot run here (%v) but has rate %v, %d rounds, reason %q", c.Format, err, c.Rate, c.Rounds, c.Reason)
			}
			continue
		}
		if !c.Measured() || !(c.Rate > 0) || c.Reason != "" || c.Rounds != 1 || c.Impl == "" {
			t.Errorf("%s runs here but has rate %v, %d rounds, impl %q, reason %q", c.Format, c.Rate, c.Rounds, c.Impl, c.Reason)
		}
	}
}

// Formats asked for are measured alone, still in CeilingFormats' order.
func TestMeasureCeilingsFormats(t *testing.T) {
	cs, err := MeasureCeilings(quickCeilings(1, FormatInt8, FormatFP32))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Format != FormatFP32 || cs[1].Format != FormatInt8 {
		t.Fatalf("got %+v, want fp32 then int8", cs)
	}
	if !cs[0].Measured() || !strings.Contains(cs[0].Impl, Current().Name()) {
		t.Errorf("fp32: %+v, want a rate through %s", cs[0], Current().Name())
	}
}

// The go backend's Sgemm is what fp32 measures when it is the backend in
// use, and a bf16 machine's reason names what is missing.
func TestMeasureCeilingsBackend(t *testing.T) {
	prev := Set(Go())
	defer Set(prev)
	cs, err := MeasureCeilings(quickCeilings(1, FormatFP32, FormatBF16))
	if err != nil {
		t.Fatal(err)
	}
	if !cs[0].Measured() || cs[0].Impl != Go().Name()+" (Sgemm)" {
		t.Errorf("fp32 through gonum: %+v", cs[0])
	}
	if err := BF16Supported(); err != nil && cs[1].Reason != err.Error() {
		t.Errorf("bf16 reason %q, want BF16Supported's %q", cs[1].Reason, err)
	}
}

func TestMeasureCeilingsOptions(t *testing.T) {
	for _, o := range []CeilingOptions{
		{Threads: 0},
		{Threads: -1},
		{Threads: MaxCeilingThreads + 1},
		{Threads: 1, Formats: []string{"fp16"}},
		{Threads: 1, Rounds: -1},
		{Threads: 1, Budget: -time.Second},
	} {
		if cs, err := MeasureCeilings(o); err == nil || cs != nil {
			t.Errorf("%+v: got %v, %v; want an error", o, cs, err)
		}
	}
}

// The round's products are the linear layers of probeShapes.
func TestCeilingShapes(t *testing.T) {
	if got, want := CeilingShapes(), "128 rows × W [2304, 768], [3072, 768], [768, 3072]"; got != want {
		t.Errorf("CeilingShapes() = %q, want %q", got, want)
	}
	if got, want := ceilingOps(), 2*128*(2304*768+3072*768+768*3072.0); got != want {
		t.Errorf("ceilingOps() = %v, want %v", got, want)
	}
}

// Set keeps Chosen's kind (a test that swaps the backend and restores it
// left an empty kind, which ExampleChosen caught in the whole suite).
func TestSetKeepsKind(t *testing.T) {
	prev := Set(Go())
	if k := Chosen().Kind; k != KindGo {
		t.Errorf("after Set(Go()): kind %q", k)
	}
	Set(prev)
	if k := Chosen().Kind; k == "" {
		t.Errorf("after restoring %s: empty kind", prev.Name())
	}
}
