package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/seq2seq"
	"github.com/roformer-go/roformer/optim"
)

// TestTranslateArms runs both arms with the length penalty tuned on dev:
// the post-LN runs train a post-LN model with the inverse-square-root
// schedule; every run has its α chosen from the grid by dev BLEU, its test
// scores at that α and the fixed one, lengths and repetition; the paired
// comparisons cover both arms on BLEU and chrF; the translations of every
// run land in the results folder; a second call reuses all four runs.
func TestTranslateArms(t *testing.T) {
	out := t.TempDir()
	o := tinyTranslate(out)
	o.Arms = []string{TranslatePreLN, TranslatePostLN}
	o.PostLN = PaperPostLN
	o.AlphaGrid = []float64{0, 0.6, 1.2}
	o.Seeds = []uint64{1, 2}
	res, err := Translate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 8 || len(res.Paired) != 4 {
		t.Fatalf("%d runs and %d paired comparisons, want 8 and 4", len(res.Runs), len(res.Paired))
	}
	mustExist(t, out, "results.json", "runs.csv", "curves.csv", "decoding.csv", "summary.md",
		"translations/rotary-seed1.txt", "translations/post-ln-sinusoidal-seed2.txt", "translations/post-ln-rotary-seed1-fixed-alpha.txt")
	for _, r := range res.Runs {
		dir := runDir(res.Options, r.arm(), r.Position, r.Seed)
		m, err := seq2seq.Load(filepath.Join(dir, "averaged"))
		if err != nil {
			t.Fatal(err)
		}
		if post := m.Config.LayerNorm == seq2seq.PostLN; post != (r.Arm == TranslatePostLN) {
			t.Errorf("%s seed %d: layer_norm_position %q", translateLabel(r.Arm, r.Position), r.Seed, m.Config.LayerNorm)
		}
		a := r.Alpha
		if a == nil || len(a.DevBLEU) != 3 || r.FixedAlpha == nil || r.Averaged.Output == nil || r.FixedAlpha.Output == nil {
			t.Fatalf("%s seed %d: α %+v, fixed-α score %+v, output %+v", r.Position, r.Seed, a, r.FixedAlpha, r.Averaged.Output)
		}
		best := 0
		for i, b := range a.DevBLEU {
			if b > a.DevBLEU[best] {
				best = i
			}
		}
		if a.Chosen != a.Grid[best] {
			t.Errorf("%s seed %d: α %g chosen, but the best dev BLEU %v is at α %g", r.Position, r.Seed, a.Chosen, a.DevBLEU, a.Grid[best])
		}
		if a.Chosen == o.Decode.Alpha && (r.FixedAlpha.BLEU != r.Averaged.BLEU || r.FixedAlpha.ChrF != r.Averaged.ChrF) {
			t.Errorf("%s seed %d: tuned α is the fixed one, yet the scores differ: %+v, %+v", r.Position, r.Seed, r.Averaged, *r.FixedAlpha)
		}
		if out := r.Averaged.Output; out.RefTokens == 0 || math.Abs(float64(out.LengthRatio)-float64(out.SysTokens)/float64(out.RefTokens)) > 1e-12 || out.RefRepeat < 0 || out.RefRepeat > 1 {
			t.Errorf("%s seed %d: output stats %+v", r.Position, r.Seed, *out)
		}
		copied, err := readLines(filepath.Join(out, "translations"), fmt.Sprintf("%s-seed%d.txt", strings.ReplaceAll(translateLabel(r.arm(), r.Position), "/", "-"), r.Seed))
		if err != nil || len(copied) != 16 {
			t.Errorf("%s seed %d: %d copied translations (%v), want 16", r.Position, r.Seed, len(copied), err)
		}
	}
	for _, p := range res.Paired {
		if p.ChrF == nil || math.IsNaN(float64(p.ChrF.PBootstrap)) {
			t.Errorf("paired %+v lacks chrF", p)
		}
	}
	if len(res.ArmSeeds) != 2 || res.ArmSeeds[0].ChrF == nil || res.SeedsBLEU == nil || len(res.ArmDiffs) != 2 {
		t.Errorf("arm seeds %+v, pre-LN BLEU %v, arm differences %+v", res.ArmSeeds, res.SeedsBLEU, res.ArmDiffs)
	}
	if _, ok := res.TestBLEU["post-ln/rotary"]; !ok {
		t.Errorf("test BLEU keys %v lack post-ln/rotary", res.TestBLEU)
	}
	md, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	for _, want := range []string{"post-ln/sinusoidal", "inverse-square-root", "length ratio", "Arm post-ln", "post-ln − pre-ln (rotary)", "test chrF"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q", want)
		}
	}
	o.Progress = &strings.Builder{}
	if _, err := Translate(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if log := o.Progress.(*strings.Builder).String(); strings.Count(log, "reusing") != 8 {
		t.Errorf("second run did not reuse all eight runs:\n%s", log)
	}
	again, err := ResummarizeTranslate(out)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, again.ArmSeeds), mustJSON(t, res.ArmSeeds); a != b {
		t.Errorf("resummarized over-seed tests differ:\n%s\n%s", a, b)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTranslateOptimizer: the pre-LN arm keeps the recorded recipe
// (β₂ 0.999, cosine at Schedule's rate); the post-LN arm is Adam β₂ 0.98,
// inverse-sqrt at 5e-4, its warm-up 4% of the steps.
func TestTranslateOptimizer(t *testing.T) {
	o := DefaultTranslate("")
	o.Steps = 1500
	adam, s := translateOptimizer(o, TranslatePreLN)
	if adam.Beta2 != 0.999 || s.Kind != optim.Cosine || s.PeakLR != o.LR || s.Warmup != o.Warmup {
		t.Errorf("pre-LN: %+v, %+v", adam, s)
	}
	adam, s = translateOptimizer(o, TranslatePostLN)
	if adam.Beta2 != 0.98 || adam.WeightDecay != o.WeightDecay || s.Kind != optim.InverseSqrt || s.PeakLR != 5e-4 || s.Warmup != 60 {
		t.Errorf("post-LN: %+v, %+v", adam, s)
	}
	if w := PaperPostLN.Warmup(300); w != 12 {
		t.Errorf("warm-up of 300 steps %d, want 12", w)
	}
	// The pre-LN key carries nothing of the new options, so that run
	// folders made before them are reused.
	key := runKey(DefaultTranslate(""), TranslatePreLN)
	for _, k := range []string{"arms", "post_ln", "alpha_grid", "layer_norm_position"} {
		if strings.Contains(key, k) {
			t.Errorf("the pre-LN run key holds %q: %s", k, key)
		}
	}
	if runKey(o, TranslatePostLN) == runKey(o, TranslatePreLN) {
		t.Error("the arms share a run key")
	}
	o.Arms = []string{"sandwich"}
	o.Out, o.Pairs = t.TempDir(), toyParallel(20)
	if _, err := Translate(context.Background(), o); err == nil || !strings.Contains(err.Error(), `arm "sandwich"`) {
		t.Errorf("unknown arm: %v", err)
	}
}

// TestRepeatShare: a segment repeats when some 4-gram of its 13a tokens
// occurs twice; punctuation is a token.
func TestRepeatShare(t *testing.T) {
	segs := []string{
		"y los hijos de los hijos de los hijos de Israel", // "los hijos de los" twice
		"y los hijos de Israel.",
		"a b c d a b c",
		"",
		"a b c d, a b c d", // "a b c d" twice around the comma
	}
	want := []bool{true, false, false, false, true}
	for i, s := range segs {
		if got := repeatShare([]string{s}, 4) == 1; got != want[i] {
			t.Errorf("%q: repeats %v, want %v", s, got, want[i])
		}
	}
	if got := repeatShare(segs, 4); got != 0.4 {
		t.Errorf("share %v, want 0.4", got)
	}
	o, err := outputStats([]string{"a b", ""}, []string{"a b c d", "e f"})
	if err != nil || o.SysTokens != 2 || o.RefTokens != 6 || math.Abs(float64(o.LengthRatio)-2.0/6) > 1e-12 || o.Empty != 1 {
		t.Errorf("output stats %+v, %v", o, err)
	}
}

// TestResummarizeOldTranslate: the committed results written before arms,
// α tuning, chrF tests and output statistics existed still re-summarise:
// the same tables of per-run scores, the over-seed chrF comparison
// recomputed from the runs, no decoding table.
func TestResummarizeOldTranslate(t *testing.T) {
	src := filepath.Join("..", "docs", "experiments", "translate-1500", "results.json")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Skipf("no committed results: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "results.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ResummarizeTranslate(dir)
	if err != nil {
		t.Fatal(err)
	}
	var old TranslateResult
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, res.TestBLEU), mustJSON(t, old.TestBLEU); a != b {
		t.Errorf("test BLEU over seeds changed:\n%s\n%s", a, b)
	}
	if a, b := mustJSON(t, res.SeedsBLEU), mustJSON(t, old.SeedsBLEU); a != b {
		t.Errorf("paired BLEU over seeds changed:\n%s\n%s", a, b)
	}
	if len(res.ArmSeeds) != 1 || res.ArmSeeds[0].ChrF == nil || res.ArmSeeds[0].ChrF.Diff.N != 3 {
		t.Fatalf("over-seed comparisons %+v", res.ArmSeeds)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "summary.md"))
	for _, want := range []string{"| rotary | 3 |", "RoPE − sinusoidal test chrF", "| pre-ln | 1 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "Decoding, per run") {
		t.Error("summary.md has a decoding table without decoding statistics")
	}
	t.Logf("RoPE − sinusoidal chrF over seeds: %+v", res.ArmSeeds[0].ChrF.Diff)
}
