package experiment

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/rope"
)

// opticks returns the first n bytes of Newton's Opticks (in every Go
// installation), or skips.
func opticks(t *testing.T, n int) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt"))
	if err != nil {
		t.Skipf("no test text: %v", err)
	}
	return b[:min(n, len(b))]
}

func mustExist(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.Size() == 0 {
			t.Errorf("results folder lacks %s (%v)", n, err)
		}
	}
}

// tinyModel is a model small enough for tests.
func tinyModel() roformer.Config {
	c := roformer.DefaultConfig()
	c.NumHiddenLayers, c.HiddenSize, c.EmbeddingSize, c.NumAttentionHeads, c.IntermediateSize = 1, 16, 16, 2, 32
	c.PerformerFeatures, c.RelativeMaxDistance, c.FeatureRedrawInterval = 8, 4, 3
	return c
}

func TestDecayWritesTheFormula(t *testing.T) {
	dir := t.TempDir()
	res, err := Decay(DecayOptions{Dim: 16, MaxDistance: 40, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, dir, "decay.json", "decay.csv", "decay.png", "decay.svg", "summary.md")
	raw, err := os.ReadFile(filepath.Join(dir, "decay.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Dim      int       `json:"dim"`
		Distance []int     `json:"distance"`
		Bound    []float64 `json:"bound"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Dim != 16 || len(got.Distance) != 41 || len(got.Bound) != 41 || len(res.Bound) != 41 {
		t.Fatalf("decay.json: dim %d, %d distances, %d bounds; want 16, 41, 41", got.Dim, len(got.Distance), len(got.Bound))
	}
	for r, b := range got.Bound {
		want, _ := rope.DecayBound(16, rope.DefaultBase, float64(r))
		if got.Distance[r] != r || b != want {
			t.Errorf("r=%d: distance %d bound %.17g, want %.17g (bit for bit through JSON)", r, got.Distance[r], b, want)
		}
	}
	if _, err := Decay(DecayOptions{Dim: 7, MaxDistance: 4, Out: dir}); err == nil {
		t.Error("odd dimension: no error")
	}
}

func TestStepToTarget(t *testing.T) {
	steps := []int{10, 20, 30}
	for _, c := range []struct {
		loss         []float64
		target, want float64
	}{
		{[]float64{8, 6, 4}, 7, 15},       // halfway between 10 and 20
		{[]float64{8, 6, 4}, 4, 30},       // reached exactly at the last
		{[]float64{5, 4, 3}, 6, 10},       // already below at the first
		{[]float64{8, 7.5, 7.2}, 7, -1},   // never
		{[]float64{8, 6.5, 7.5}, 6.5, 20}, // first crossing, not the last value
	} {
		got := stepToTarget(steps, c.loss, c.target)
		if c.want < 0 {
			if !math.IsNaN(got) {
				t.Errorf("%v to %v: %v, want NaN", c.loss, c.target, got)
			}
		} else if math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%v to %v: %v, want %v", c.loss, c.target, got, c.want)
		}
	}
}

func TestNumberJSON(t *testing.T) {
	b, err := json.Marshal([]Number{1.5, Number(math.NaN()), Number(math.Inf(1))})
	if err != nil || string(b) != "[1.5,null,null]" {
		t.Fatalf("got %s, %v", b, err)
	}
	var back []Number
	if err := json.Unmarshal(b, &back); err != nil || back[0] != 1.5 || !math.IsNaN(float64(back[1])) {
		t.Fatalf("round trip %v, %v", back, err)
	}
}

// The MLM comparison end to end at toy scale: every encoding and seed
// trains on the same packed data, and the results folder holds every file.
func TestMLMPETiny(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 10 tiny models")
	}
	corpus := filepath.Join(t.TempDir(), "opticks.txt")
	if err := os.WriteFile(corpus, opticks(t, 60000), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	o := DefaultMLMPE(out)
	o.Model, o.Corpus, o.VocabSize, o.Seeds, o.TargetLosses = tinyModel(), corpus, 300, []uint64{1, 2}, []float64{6, 5}
	o.Encodings = roformer.PositionEncodings
	o.Work = t.TempDir()
	o.Train.Steps, o.Train.BatchSize, o.Train.SeqLen, o.Train.Warmup, o.Train.LR = 6, 4, 16, 1, 3e-3
	o.Train.EvalEvery, o.Train.EvalBatches, o.Train.LogEvery = 3, 2, 3
	res, err := MLMPE(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, out, "results.json", "curves.csv", "train_curves.csv", "eval_loss.png", "eval_loss.svg", "train_loss.png", "summary.md")
	if md, _ := os.ReadFile(filepath.Join(out, "summary.md")); !strings.Contains(string(md), "N(0, 1/E) and multiplied by √E") {
		t.Errorf("summary.md does not say that the sinusoidal arm has Vaswani et al.'s word table:\n%s", md)
	}
	if len(res.Runs) != 10 || len(res.Summary) != 5 {
		t.Fatalf("%d runs and %d summaries, want 10 and 5", len(res.Runs), len(res.Summary))
	}
	params := map[roformer.PositionEncoding]int{}
	for _, r := range res.Runs {
		if len(r.EvalSteps) != 2 || r.EvalSteps[1] != 6 || len(r.StepToTarget) != 2 {
			t.Errorf("%s seed %d: evaluations at %v, %d targets", r.Encoding, r.Seed, r.EvalSteps, len(r.StepToTarget))
		}
		for _, l := range r.EvalLoss {
			if !(l > 0 && l < 20) {
				t.Errorf("%s seed %d: held-out loss %v", r.Encoding, r.Seed, l)
			}
		}
		params[r.Encoding] = r.Params
	}
	// Only learned and relative add parameters: a table [seq, E] and, per
	// layer, [2k+1, HS].
	if d := params[roformer.PosLearned] - params[roformer.PosRotary]; d != 16*16 {
		t.Errorf("learned adds %d parameters, want 16·16", d)
	}
	if d := params[roformer.PosRelative] - params[roformer.PosRotary]; d != 9*8 {
		t.Errorf("relative adds %d parameters, want 9·8", d)
	}
	if params[roformer.PosSinusoidal] != params[roformer.PosRotary] || params[roformer.PosNone] != params[roformer.PosRotary] {
		t.Errorf("parameter counts %v", params)
	}
	raw, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	for _, pe := range roformer.PositionEncodings {
		if !strings.Contains(string(raw), "| "+string(pe)+" |") {
			t.Errorf("summary.md has no row for %s:\n%s", pe, raw)
		}
	}
	// Every pair of the 5 encodings, over both seeds.
	if len(res.Paired) != 10 || res.Paired[0].A != roformer.PosRotary || res.Paired[0].Loss.Diff.N != 2 {
		t.Errorf("%d paired comparisons (want 10), first %+v", len(res.Paired), res.Paired[0])
	}
	if !strings.Contains(string(raw), "rotary − learned, loss: ") {
		t.Errorf("summary.md lacks the paired tests:\n%s", raw)
	}
	var back MLMPEResult
	b, _ := os.ReadFile(filepath.Join(out, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != 10 {
		t.Errorf("results.json does not read back: %v", err)
	}
	// A second experiment on the same work folder reads the finished runs
	// instead of training them again, and gets the same results.
	var log strings.Builder
	o.Out, o.Progress = t.TempDir(), &log
	again, err := MLMPE(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "read the finished run"); n != 10 {
		t.Errorf("second pass read %d finished runs, want 10:\n%s", n, log.String())
	}
	for i, r := range again.Runs {
		if fmt.Sprint(r.EvalLoss) != fmt.Sprint(res.Runs[i].EvalLoss) || r.Seconds <= 0 {
			t.Errorf("%s seed %d read back as %v (%v s), trained %v", r.Encoding, r.Seed, r.EvalLoss, r.Seconds, res.Runs[i].EvalLoss)
		}
	}
}

func TestCharLMTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 5 tiny models")
	}
	out := t.TempDir()
	o := DefaultCharLM(out)
	o.Model = tinyModel()
	o.Model.HiddenDropoutProb, o.Model.AttentionProbsDropoutProb = 0, 0
	o.Text, o.TextName = opticks(t, 200000), "Opticks"
	o.Steps, o.Warmup, o.LR, o.Batch, o.SeqLen = 8, 1, 1e-2, 2, 32
	o.EvalEvery, o.EvalWindows, o.TestWindows = 4, 4, 4
	o.Seeds = []uint64{1, 2}
	res, err := CharLM(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, out, "results.json", "curves.csv", "val_bpb.png", "val_bpb.svg", "summary.md")
	if len(res.Runs) != 2*len(DefaultCharLMVariants) {
		t.Fatalf("%d runs, want %d", len(res.Runs), 2*len(DefaultCharLMVariants))
	}
	// Each attention's rotary variant is paired with its other variants.
	wantPairs := 0
	for _, a := range DefaultCharLMVariants {
		for _, b := range DefaultCharLMVariants {
			if a.Position == roformer.PosRotary && !a.ScaleEmbedding && b.Attention == a.Attention && b != a {
				wantPairs++
			}
		}
	}
	if len(res.Paired) != wantPairs || wantPairs == 0 {
		t.Errorf("%d paired comparisons, want %d", len(res.Paired), wantPairs)
	}
	for _, p := range res.Paired {
		if p.Test.Diff.N != 2 || p.Test.DF != 1 {
			t.Errorf("%s − %s: %d pairs, df %d; want 2 seeds", p.A, p.B, p.Test.Diff.N, p.Test.DF)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if strings.Contains(string(md), "± 0.0000") || !strings.Contains(string(md), "Paired by seed") {
		t.Errorf("summary.md:\n%s", md)
	}
	for _, r := range res.Runs {
		// 8 bits per byte is a uniform guess; a few steps at a high rate do better.
		if !(r.TestBPB > 0 && r.TestBPB < 8) || len(r.ValBPB) != 2 {
			t.Errorf("%s: test %v bits/byte, validation %v", r.Variant, r.TestBPB, r.ValBPB)
		}
		if (r.Attention == "performer") != (r.FeatDraws > 0) {
			t.Errorf("%s: %d feature draws", r.Variant, r.FeatDraws)
		}
	}
	for _, r := range res.Runs {
		if r.Attention == "performer" && r.FeatDraws != 3 { // redraws at steps 3 and 6: draws 0, 1, 2
			t.Errorf("%s: performer with redraw interval 3 over 8 steps used %d draws, want 3", r.Variant, r.FeatDraws)
		}
	}
	vs, err := ParseCharLMVariants("performer-rotary,linear-none,linear-sinusoidal-scaled")
	if err != nil {
		t.Error(err)
	} else if len(vs) != 3 || !vs[2].ScaleEmbedding || vs[2].Position != roformer.PosSinusoidal || vs[2].Name() != "linear-sinusoidal-scaled" || vs[0].ScaleEmbedding {
		t.Errorf("parsed %+v", vs)
	}
	for _, bad := range []string{"performer", "flash-rotary", "linear-absolute", "linear-scaled"} {
		if _, err := ParseCharLMVariants(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLongTextTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 3 tiny models")
	}
	text := string(opticks(t, 120000))
	var docs []LabelledDoc
	for i := 0; i < 30; i++ {
		part := text[i*4000 : (i+1)*4000]
		docs = append(docs, LabelledDoc{Name: fmt.Sprintf("d%02d", i), Text: part, Label: i % 3})
	}
	out := t.TempDir()
	o := DefaultLongText(out)
	o.Model, o.Docs, o.Labels, o.VocabSize = tinyModel(), docs, []string{"a", "b", "c"}, 300
	o.Lengths, o.LearnedTable, o.Seeds = []int{16, 32}, 16, []uint64{1}
	o.Steps, o.Warmup, o.Batch, o.EvalEvery = 4, 1, 2, 2
	res, err := LongText(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, out, "results.json", "runs.csv", "accuracy.png", "accuracy.svg", "summary.md")
	if len(res.Runs) != 4 || res.Split != [3]int{18, 6, 6} {
		t.Fatalf("%d runs, split %v; want 4 and [18 6 6]", len(res.Runs), res.Split)
	}
	for _, r := range res.Runs {
		skip := r.Encoding == roformer.PosLearned && r.MaxLen == 32
		if skip != (r.Skipped != "") {
			t.Errorf("%s at %d: skipped %q", r.Encoding, r.MaxLen, r.Skipped)
		}
		if skip {
			if !strings.Contains(r.Skipped, "cannot go past their table") || !math.IsNaN(float64(r.TestAccuracy)) {
				t.Errorf("learned at 32 with a 16-row table: %q, accuracy %v", r.Skipped, r.TestAccuracy)
			}
			continue
		}
		if acc := float64(r.TestAccuracy); !(acc >= 0 && acc <= 1) || !(r.Coverage > 0 && r.Coverage < 1) {
			t.Errorf("%s at %d: accuracy %v, coverage %v", r.Encoding, r.MaxLen, acc, r.Coverage)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if !strings.Contains(string(raw), "impossible") {
		t.Errorf("summary.md does not say the learned run is impossible:\n%s", raw)
	}
}

func TestUntagBrown(t *testing.T) {
	in := "\n\n\tThe/at Fulton/np-tl jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ./.\n\n\n\tIt/pps 1/2/cd won/vbd\n"
	want := "The Fulton jury said \" no evidence \" .\nIt 1/2 won\n"
	if got := untagBrown(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSplitDocs(t *testing.T) {
	var docs []LabelledDoc
	for i := 0; i < 50; i++ {
		docs = append(docs, LabelledDoc{Name: fmt.Sprint(i), Label: i % 2})
	}
	a1, b1, c1 := splitDocs(docs, 2)
	a2, _, _ := splitDocs(docs, 2)
	if len(a1) != 30 || len(b1) != 10 || len(c1) != 10 {
		t.Fatalf("split %d/%d/%d, want 30/10/10", len(a1), len(b1), len(c1))
	}
	seen := map[string]bool{}
	for _, set := range [][]LabelledDoc{a1, b1, c1} {
		for _, d := range set {
			if seen[d.Name] {
				t.Errorf("%s in two splits", d.Name)
			}
			seen[d.Name] = true
		}
	}
	for i := range a1 {
		if a1[i].Name != a2[i].Name {
			t.Fatal("the split is not deterministic")
		}
	}
}

// fetchNPM reads a cached tarball and refuses one whose checksum differs.
func TestFetchNPMChecksum(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	body := []byte("hello")
	tw.WriteHeader(&tar.Header{Name: "package/data/a.txt", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	zw.Close()
	cache := t.TempDir()
	if err := os.WriteFile(filepath.Join(cache, "x-1.0.0.tgz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	p := npmPackage{Spec: "x@1.0.0", Tarball: "x-1.0.0.tgz", SHA256: hex.EncodeToString(sum[:])}
	files, err := fetchNPM(context.Background(), cache, p, nil)
	if err != nil || string(files["package/data/a.txt"]) != "hello" {
		t.Fatalf("files %v, error %v", files, err)
	}
	p.SHA256 = strings.Repeat("0", 64)
	if _, err := fetchNPM(context.Background(), cache, p, nil); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("wrong checksum: error %v", err)
	}
}

func TestResummarizeMLMPE(t *testing.T) {
	dir := t.TempDir()
	res := &MLMPEResult{Options: MLMPEOptions{Encodings: []roformer.PositionEncoding{roformer.PosRotary, roformer.PosNone}, Seeds: []uint64{1, 2}, TargetLosses: []float64{9}, Model: smallModel()}}
	for i, pe := range res.Options.Encodings {
		for _, seed := range res.Options.Seeds {
			res.Runs = append(res.Runs, MLMRun{Encoding: pe, Seed: seed, EvalSteps: []int{10, 20}, EvalLoss: []float64{8, 6 + float64(i)},
				EvalAccuracy: []Number{0.1, 0.2}, TrainSteps: []int{10}, TrainLoss: []float64{7}, StepToTarget: []Number{0}})
		}
	}
	if err := writeMLMPE(dir, res); err != nil {
		t.Fatal(err)
	}
	got, err := ResummarizeMLMPE(dir, []float64{7, 6.5})
	if err != nil {
		t.Fatal(err)
	}
	// rotary: 8 → 6 crosses 7 at 15 and 6.5 at 17.5; none: 8 → 7 reaches 7 at 20, never 6.5.
	r, n := got.Summary[0], got.Summary[1]
	if r.StepToTarget[0] != 15 || r.StepToTarget[1] != 17.5 || r.ReachedTarget[1] != 2 || n.StepToTarget[0] != 20 || n.ReachedTarget[1] != 0 || !math.IsNaN(float64(n.StepToTarget[1])) {
		t.Errorf("summaries %+v, %+v", r, n)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "summary.md"))
	if !strings.Contains(string(raw), "step to loss 6.50") {
		t.Errorf("summary.md not rewritten:\n%s", raw)
	}
}

// Rotated scores depend only on the offset (to float32 rounding), added
// sinusoids do not, and the linear denominator carries no position.
func TestRelativeSpreads(t *testing.T) {
	dir := t.TempDir()
	res, err := Relative(RelativeOptions{Dim: 16, Positions: 200, MaxOffset: 20, Seed: 3, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, dir, "relative.json", "relative.csv", "scores.png", "scores.svg", "summary.md")
	if len(res.Offsets) != 41 {
		t.Fatalf("%d offsets, want 41", len(res.Offsets))
	}
	for _, name := range []string{"rotary", "rotary-linear-num"} {
		if w := res.Worst[name]; w > 1e-4*res.Scale[name] {
			t.Errorf("%s: spread %.3g over m is not rounding (mean |score| %.3g)", name, w, res.Scale[name])
		}
	}
	if res.Worst["linear-den"] != 0 {
		t.Errorf("linear denominator spread %v, want 0", res.Worst["linear-den"])
	}
	if w := res.Worst["sinusoidal"]; w < 0.1*res.Scale["sinusoidal"] {
		t.Errorf("added sinusoids: spread %.3g is too small to show position dependence (mean |score| %.3g)", w, res.Scale["sinusoidal"])
	}
	if _, err := Relative(RelativeOptions{Dim: 15, Positions: 10, MaxOffset: 2, Out: dir}); err == nil {
		t.Error("odd dimension: no error")
	}
}
