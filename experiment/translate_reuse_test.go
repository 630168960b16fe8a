package experiment

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reused run.json is read only up to what a run of the settings writes:
// the longest honest file passes, one byte more is refused unread with an
// error naming the file, its size and the limit.
func TestReusedRunBounded(t *testing.T) {
	o := tinyTranslate(t.TempDir())
	dir := filepath.Join(t.TempDir(), "rope-seed1")
	run := TranslateRun{Position: "rope", Seed: math.MaxUint64, Params: math.MaxInt, CPU: strings.Repeat("x", 200), Threads: math.MaxInt,
		Seconds: -math.MaxFloat64, DevBLEUAvg: -math.SmallestNonzeroFloat64}
	long := Number(-2.2250738585072014e-308)
	run.Averaged = TranslateScore{BLEU: long, BLEUCI: [2]Number{long, long}, ChrF: long, ChrFCI: [2]Number{long, long}}
	for i := 0; i <= o.Steps/o.EvalEvery; i++ {
		run.Curve = append(run.Curve, TranslateCurve{Step: math.MinInt, TrainLoss: long, DevNLL: long, DevBLEU: long})
	}
	if err := writeJSON(dir, "run.json", savedRun{Key: runKey(o, TranslatePreLN), Run: run}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "run.json")
	honest, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	limit := runJSONLimit(o, runKey(o, TranslatePreLN))
	t.Logf("the longest run.json of %d curve points: %d bytes, limit %d", len(run.Curve), len(honest), limit)
	if int64(len(honest)) > limit {
		t.Fatalf("the longest run.json of %d curve points has %d bytes, over the limit %d", len(run.Curve), len(honest), limit)
	}
	got, err := reusedRun(o, TranslatePreLN, dir)
	if err != nil || got == nil || len(got.Curve) != len(run.Curve) {
		t.Fatalf("the longest honest run.json (%d bytes, limit %d): %v, %v", len(honest), limit, got, err)
	}
	// Padded with white space (still valid JSON) to the limit and past it.
	for _, size := range []int64{limit, limit + 1, 4 * limit} {
		padded := append(bytes.Clone(honest), bytes.Repeat([]byte(" "), int(size)-len(honest))...)
		if err := os.WriteFile(path, padded, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := reusedRun(o, TranslatePreLN, dir)
		if size <= limit {
			if err != nil || got == nil {
				t.Errorf("run.json of %d bytes, the limit: %v, %v", size, got, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("run.json of %d bytes, over the limit %d, was read", size, limit)
			continue
		}
		for _, want := range []string{path, fmt.Sprint(size), fmt.Sprint(limit)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error %q does not name %s", err, want)
			}
		}
	}
	// Settings of a run without end are not an overflow.
	o.Steps, o.EvalEvery = math.MaxInt, 1
	if l := runJSONLimit(o, strings.Repeat("k", 1<<20)); l != math.MaxInt64/2 {
		t.Errorf("limit %d for %d steps, want it saturated at %d", l, o.Steps, int64(math.MaxInt64/2))
	}
}
