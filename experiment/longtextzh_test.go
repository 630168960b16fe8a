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

	"github.com/roformer-go/roformer/model/roformer"
)

// poetryJSON is one file of the collection with the poems given as
// (author, lines).
func poetryJSON(t *testing.T, poems ...[]string) []byte {
	t.Helper()
	type poem struct {
		Author     string   `json:"author"`
		Paragraphs []string `json:"paragraphs"`
		Title      string   `json:"title"`
	}
	var ps []poem
	for _, p := range poems {
		ps = append(ps, poem{Author: p[0], Paragraphs: p[1:], Title: "題"})
	}
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPoetryDocuments(t *testing.T) {
	files := map[string][]byte{
		"package/dist/quantangshi/poet.tang.0.json": poetryJSON(t,
			[]string{"甲", "一二三，", "四五六。"}, []string{"甲", "七八九。"}, []string{"甲", "十一十二。"},
			[]string{"乙", "春眠不覺曉。"},   // also a Song author: left out
			[]string{"無名氏", "處處聞啼鳥。"}, // anonymous: left out
			[]string{"丙", "夜來風雨聲。"}),  // its text is also in the Song collection: left out
		"package/dist/quantangshi/poet.tang.1000.json": poetryJSON(t, []string{"甲", "花落知多少。"}),
		"package/dist/quantangshi/poet.song.0.json": poetryJSON(t,
			[]string{"乙", "床前明月光。"}, []string{"丁", "夜來風雨聲。"}, []string{"丁", "疑是地上霜。"}),
		"package/dist/quantangshi/error/poet.tang.0.json": []byte("not read"),
		"package/README.md": []byte("not read"),
	}
	docs, src, err := poetryDocuments(files, PoetryDocOptions{MinChars: 8, PerAuthor: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "7 Tang and 3 Song shi") || !strings.Contains(src, "2 poems of the 1 authors in both") || !strings.Contains(src, "1 of anonymous") || !strings.Contains(src, "2 texts in both") {
		t.Errorf("source line %q", src)
	}
	// 甲: "一二三，四五六。\n" (9 characters) ends the first document,
	// "七八九。\n十一十二。\n" (11) the second, and the cap of 2 drops the rest;
	// 丁: "疑是地上霜。\n" (7 < 8) is a remainder, dropped.
	want := []LabelledDoc{
		{Name: "Tang-甲-0", Group: "甲", Label: 0, Text: "一二三，四五六。\n"},
		{Name: "Tang-甲-1", Group: "甲", Label: 0, Text: "七八九。\n十一十二。\n"},
	}
	if len(docs) != len(want) {
		t.Fatalf("%d documents %+v, want %d", len(docs), docs, len(want))
	}
	for i := range want {
		if docs[i] != want[i] {
			t.Errorf("document %d: %+v, want %+v", i, docs[i], want[i])
		}
	}
	if _, _, err := poetryDocuments(map[string][]byte{"package/dist/quantangshi/poet.tang.0.json": []byte("{")}, PoetryDocOptions{MinChars: 1, PerAuthor: 1}); err == nil || !strings.Contains(err.Error(), "poet.tang.0.json") {
		t.Errorf("broken JSON: error %v, want one naming the file", err)
	}
	if _, _, err := poetryDocuments(files, PoetryDocOptions{}); err == nil {
		t.Error("zero options: no error")
	}
}

// splitByGroup balances the labels and keeps every author in one split.
func TestSplitByGroup(t *testing.T) {
	var docs []LabelledDoc
	for a := 0; a < 30; a++ { // label 0: 30 authors of 2 documents
		for k := 0; k < 2; k++ {
			docs = append(docs, LabelledDoc{Name: fmt.Sprintf("a%d-%d", a, k), Group: fmt.Sprintf("a%d", a), Label: 0})
		}
	}
	for a := 0; a < 50; a++ { // label 1: 50 authors of 3 documents
		for k := 0; k < 3; k++ {
			docs = append(docs, LabelledDoc{Name: fmt.Sprintf("b%d-%d", a, k), Group: fmt.Sprintf("b%d", a), Label: 1})
		}
	}
	tr, va, te := splitByGroup(docs, 2, 0.6, 0.2)
	where := map[string]int{}
	count := [2]int{}
	for i, set := range [][]LabelledDoc{tr, va, te} {
		for _, d := range set {
			if j, ok := where[d.Group]; ok && j != i {
				t.Errorf("author %s in splits %d and %d", d.Group, j, i)
			}
			where[d.Group] = i
			count[d.Label]++
		}
	}
	if count != [2]int{60, 60} {
		t.Errorf("documents by label %v, want [60 60]", count)
	}
	if len(te) == 0 || len(va) == 0 || len(tr) < len(te) {
		t.Errorf("split %d/%d/%d", len(tr), len(va), len(te))
	}
	tr2, _, _ := splitByGroup(docs, 2, 0.6, 0.2)
	for i := range tr {
		if tr[i].Name != tr2[i].Name {
			t.Fatal("the split is not deterministic")
		}
	}
}

func TestParseZhArms(t *testing.T) {
	arms, err := ParseZhArms("rotary-1024-4, learned-512-8")
	want := []ZhArm{{"rotary-1024x4", roformer.PosRotary, 1024, 4}, {"learned-512x8", roformer.PosLearned, 512, 8}}
	if err != nil || len(arms) != 2 || arms[0] != want[0] || arms[1] != want[1] {
		t.Errorf("got %+v, %v; want %+v", arms, err, want)
	}
	for _, bad := range []string{"rotary-1024", "absolute-512-4", "rotary-2-4", "rotary-512-0", "rotary-x-4"} {
		if _, err := ParseZhArms(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestWilson(t *testing.T) {
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{
		{50, 100, 0.4038, 0.5962}, // the textbook values
		{0, 10, 0, 0.2775},
		{10, 10, 0.7225, 1},
	} {
		lo, hi := wilson(tc.k, tc.n)
		if math.Abs(lo-tc.lo) > 1e-4 || math.Abs(hi-tc.hi) > 1e-4 {
			t.Errorf("wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", tc.k, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
}

// The bootstrap over groups: an accuracy that is the same in every group
// has a zero-width interval; one that differs between groups does not, and
// contains the point estimate.
func TestGroupBootstrap(t *testing.T) {
	groups := []string{"a", "a", "b", "b", "c", "c", "d", "d"}
	ys := []int32{0, 1, 0, 1, 0, 1, 0, 1}
	half := [][]int32{{0, 0, 0, 0, 0, 0, 0, 0}} // right on every first document
	lo, hi := groupBootstrap(groups, 500, func(w []float64) float64 { return meanAccuracy(half, ys, w) })
	if lo != 0.5 || hi != 0.5 {
		t.Errorf("constant accuracy: [%v, %v], want [0.5, 0.5]", lo, hi)
	}
	mixed := [][]int32{{0, 1, 0, 1, 1, 0, 1, 0}} // right on a and b, wrong on c and d
	lo, hi = groupBootstrap(groups, 500, func(w []float64) float64 { return meanAccuracy(mixed, ys, w) })
	if !(lo < 0.5 && hi > 0.5 && lo >= 0 && hi <= 1) {
		t.Errorf("mixed accuracy: [%v, %v], want an interval around 0.5", lo, hi)
	}
	lo2, hi2 := groupBootstrap(groups, 500, func(w []float64) float64 { return meanAccuracy(mixed, ys, w) })
	if lo2 != lo || hi2 != hi {
		t.Error("the bootstrap is not deterministic")
	}
}

// The experiment end to end at toy size on English text: one pretraining
// per encoding, every arm and seed, the learned arm past its table
// recorded as impossible, the equal-token arms with equal tokens.
func TestLongTextZhTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 2 + 4 tiny models")
	}
	text := string(opticks(t, 96000))
	var docs []LabelledDoc
	for i := 0; i < 24; i++ {
		docs = append(docs, LabelledDoc{Name: fmt.Sprintf("d%02d", i), Group: fmt.Sprintf("g%d", i/2), Text: text[i*4000 : (i+1)*4000], Label: i / 2 % 2})
	}
	out := t.TempDir()
	o := DefaultLongTextZh(out)
	o.Model, o.Corpus, o.Labels, o.VocabSize = tinyModel(), docs, []string{"a", "b"}, 300
	o.PretrainLen, o.PretrainBatch, o.Pretrain.Steps, o.Pretrain.Warmup = 16, 2, 3, 1
	o.Finetune.Steps, o.Finetune.Warmup, o.Bootstrap = 3, 1, 50
	o.Arms = []ZhArm{
		{"rotary-16", roformer.PosRotary, 16, 4},
		{"rotary-32", roformer.PosRotary, 32, 2},
		{"learned-16", roformer.PosLearned, 16, 4},
		{"learned-32", roformer.PosLearned, 32, 2},
	}
	o.Seeds, o.PretrainSeeds = []uint64{1, 2}, []uint64{1, 2}
	res, err := LongTextZh(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, out, "results.json", "runs.csv", "accuracy.png", "accuracy.svg", "summary.md")
	if len(res.Pretrain) != 4 || len(res.Runs) != 16 || len(res.Arms) != 4 {
		t.Fatalf("%d pretrainings, %d runs, %d arm summaries; want 4, 16, 4", len(res.Pretrain), len(res.Runs), len(res.Arms))
	}
	for i, r := range res.Runs { // pretraining seed, then fine-tuning seed, then arm
		if want := [2]uint64{uint64(1 + i/8), uint64(1 + i/4%2)}; r.PretrainSeed != want[0] || r.Seed != want[1] {
			t.Errorf("run %d (%s): seeds %d/%d, want %v", i, r.Arm, r.PretrainSeed, r.Seed, want)
		}
	}
	if res.Majority < 0.5 || res.Majority > 1 || len(res.TestLabels) != len(res.TestGroups) {
		t.Errorf("majority %v, %d test labels for %d groups", res.Majority, len(res.TestLabels), len(res.TestGroups))
	}
	for _, r := range res.Runs {
		impossible := r.Arm == "learned-32"
		if impossible != (r.Skipped != "") {
			t.Errorf("%s seed %d: skipped %q", r.Arm, r.Seed, r.Skipped)
		}
		if impossible {
			continue
		}
		if r.Tokens != 3*64 {
			t.Errorf("%s: %d training tokens, want 192 at every length", r.Arm, r.Tokens)
		}
		acc := float64(r.TestAcc)
		if !(acc >= 0 && acc <= 1) || !(float64(r.TestLo) <= acc && acc <= float64(r.TestHi)) || len(r.Pred) != len(res.TestLabels) {
			t.Errorf("%s seed %d: accuracy %v in [%v, %v], %d predictions", r.Arm, r.Seed, acc, r.TestLo, r.TestHi, len(r.Pred))
		}
	}
	for _, c := range res.Comparisons {
		if c.A == "rotary-32" && c.B == "rotary-16" {
			if len(c.Diffs) != 4 || math.IsNaN(float64(c.Mean)) || !(float64(c.SeedsLo) <= float64(c.SeedsHi)) {
				t.Errorf("rotary-32 − rotary-16: %+v", c)
			}
			goto found
		}
	}
	t.Errorf("no comparison rotary-32 − rotary-16 in %+v", res.Comparisons)
found:
	raw, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if !strings.Contains(string(raw), "impossible") || !strings.Contains(string(raw), "rotary-32 − rotary-16") || !strings.Contains(string(raw), "## What the intervals allow") {
		t.Errorf("summary.md:\n%s", raw)
	}
	// The summaries are a function of results.json.
	before, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if _, err := ResummarizeLongTextZh(out); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if string(before) != string(after) {
		t.Errorf("resummarized summary.md differs:\n%s\nwant\n%s", after, before)
	}
	// A third pretraining seed made on its own joins the first two; the
	// runs it shares with them may not.
	o.Out, o.PretrainSeeds, o.Arms = t.TempDir(), []uint64{3}, o.Arms[:2]
	if _, err := LongTextZh(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if _, err := MergeLongTextZh(t.TempDir(), []string{out, o.Out}); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("merging other arms: error %v", err)
	}
	o.Arms = res.Options.Arms
	if _, err := LongTextZh(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	joined := t.TempDir()
	m, err := MergeLongTextZh(joined, []string{out, o.Out})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 24 || len(m.Pretrain) != 6 || fmt.Sprint(m.Options.PretrainSeeds) != "[1 2 3]" || len(m.Comparisons[0].Diffs) != 6 {
		t.Errorf("merged: %d runs, %d pretrainings, pretraining seeds %v, %d differences", len(m.Runs), len(m.Pretrain), m.Options.PretrainSeeds, len(m.Comparisons[0].Diffs))
	}
	if _, err := MergeLongTextZh(t.TempDir(), []string{out, o.Out, o.Out}); err == nil || !strings.Contains(err.Error(), "in both") {
		t.Errorf("merging a folder twice: error %v", err)
	}
}

// runMean is a statistic of hierBootstrap that ignores the documents: the
// run-weighted mean of v.
func runMean(v []float64) func(runW, docW []float64) float64 {
	return func(runW, _ []float64) float64 {
		s, n := 0.0, 0.0
		for r, w := range runW {
			s, n = s+w*v[r], n+w
		}
		return s / n
	}
}

// The bootstrap over seeds and authors: constant data give a zero-width
// interval; more spread between the seeds widens it, between the
// pretraining seeds most; one run gives the authors-only bootstrap's
// interval exactly; the resamples are a function of the seed.
func TestHierBootstrap(t *testing.T) {
	groups := []string{"a", "a", "b", "b", "c", "c", "d", "d"}
	ys := []int32{0, 1, 0, 1, 0, 1, 0, 1}
	clusters := [][]int{{0, 1, 2}, {3, 4, 5}}
	if lo, hi := hierBootstrap(clusters, groups, 500, 1, runMean([]float64{0.75, 0.75, 0.75, 0.75, 0.75, 0.75})); lo != 0.75 || hi != 0.75 {
		t.Errorf("constant runs: [%v, %v], want [0.75, 0.75]", lo, hi)
	}
	half := []int32{0, 0, 0, 0, 0, 0, 0, 0} // right on every first document: 0.5 under any weights
	six := [][]int32{half, half, half, half, half, half}
	if lo, hi := hierBootstrap(clusters, groups, 500, 1, zhRunStat(six, nil, ys)); lo != 0.5 || hi != 0.5 {
		t.Errorf("constant accuracy: [%v, %v], want [0.5, 0.5]", lo, hi)
	}
	if lo, hi := hierBootstrap(clusters, groups, 500, 1, zhRunStat(six, six, ys)); lo != 0 || hi != 0 {
		t.Errorf("an arm against itself: [%v, %v], want [0, 0]", lo, hi)
	}
	width := func(v []float64) float64 {
		lo, hi := hierBootstrap(clusters, groups, 2000, 1, runMean(v))
		if !(lo <= 0.5 && 0.5 <= hi) {
			t.Errorf("%v: [%v, %v] misses the mean 0.5", v, lo, hi)
		}
		return hi - lo
	}
	narrow := width([]float64{0.49, 0.5, 0.51, 0.49, 0.5, 0.51})
	wide := width([]float64{0.45, 0.5, 0.55, 0.45, 0.5, 0.55})
	between := width([]float64{0.44, 0.45, 0.46, 0.54, 0.55, 0.56}) // the pretraining seeds apart
	if !(0 < narrow && narrow < wide) {
		t.Errorf("fine-tuning spread ±0.01 gives width %v, ±0.05 %v; want 0 < the first < the second", narrow, wide)
	}
	if !(between > wide) {
		t.Errorf("pretraining seeds 0.1 apart give width %v, not above %v", between, wide)
	}
	// One run: the authors-only bootstrap, resample by resample.
	mixed := [][]int32{{0, 1, 0, 1, 1, 0, 1, 0}}
	glo, ghi := groupBootstrap(groups, 500, func(w []float64) float64 { return meanAccuracy(mixed, ys, w) })
	hlo, hhi := hierBootstrap([][]int{{0}}, groups, 500, zhBootSeed, zhRunStat(mixed, nil, ys))
	if glo != hlo || ghi != hhi || !(glo < 0.5 && ghi > 0.5) {
		t.Errorf("one run: [%v, %v], authors only [%v, %v]; want the same interval around 0.5", hlo, hhi, glo, ghi)
	}
	v := []float64{0.45, 0.5, 0.55, 0.4, 0.5, 0.6}
	lo1, hi1 := hierBootstrap(clusters, groups, 500, 1, runMean(v))
	lo2, hi2 := hierBootstrap(clusters, groups, 500, 1, runMean(v))
	lo3, hi3 := hierBootstrap(clusters, groups, 500, 2, runMean(v))
	if lo1 != lo2 || hi1 != hi2 {
		t.Error("the bootstrap is not deterministic")
	}
	if lo1 == lo3 && hi1 == hi3 {
		t.Error("seeds 1 and 2 give the same interval")
	}
	if lo, hi := hierBootstrap(nil, groups, 500, 1, runMean(nil)); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("no run: [%v, %v], want NaN", lo, hi)
	}
}

// The verdicts follow the interval over seeds and authors.
func TestLongTextZhVerdict(t *testing.T) {
	c := ZhComparison{A: "x", B: "y", Mean: 0.03, Diffs: make([]float64, 6), SeedsLo: -0.013, SeedsHi: 0.062, Lo: 0.01, Hi: 0.049}
	for _, tc := range []struct {
		lo, hi, alo, ahi Number
		nP               int
		want, not        []string
	}{
		{-0.013, 0.062, 0.01, 0.049, 2, []string{"**x − y: not shown.**", "[-1.3, +6.2], which spans 0", "authors only [+1.0, +4.9]", "The authors-only interval excludes 0"}, []string{"ahead"}},
		{0.006, 0.063, 0.008, 0.056, 2, []string{"**x ahead of y.**", "[+0.6, +6.3];"}, []string{"spans 0", "One pretraining seed"}},
		{0.006, 0.063, 0.008, 0.056, 1, []string{"**x ahead of y.**", "One pretraining seed"}, nil},
		{-0.05, -0.01, -0.04, 0.01, 2, []string{"**y ahead of x.**", "The authors-only interval spans 0 but"}, nil},
		{-0.02, 0.02, -0.01, 0.01, 2, []string{"not shown", "spans 0"}, []string{"authors-only interval"}},
	} {
		c.SeedsLo, c.SeedsHi, c.Lo, c.Hi = tc.lo, tc.hi, tc.alo, tc.ahi
		got := zhVerdict(c, tc.nP)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("[%v, %v]: %q lacks %q", tc.lo, tc.hi, got, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("[%v, %v]: %q has %q", tc.lo, tc.hi, got, w)
			}
		}
	}
}

// Results written before PretrainSeeds: the single pretraining seed is
// read into PretrainSeeds and given to the pretrainings and runs.
func TestLongTextZhUpgrade(t *testing.T) {
	var res ZhResult
	old := `{"options": {"pretrain_seed": 7, "seeds": [1, 2]}, "pretrain": [{"encoding": "rotary"}], "runs": [{"arm": "a", "seed": 1}, {"arm": "a", "seed": 2}]}`
	if err := json.Unmarshal([]byte(old), &res); err != nil {
		t.Fatal(err)
	}
	zhUpgrade(&res)
	if len(res.Options.PretrainSeeds) != 1 || res.Options.PretrainSeeds[0] != 7 || res.Options.PretrainSeed != 0 || res.Pretrain[0].Seed != 7 || res.Runs[0].PretrainSeed != 7 || res.Runs[1].PretrainSeed != 7 {
		t.Errorf("upgraded: options %v/%v, pretraining seed %d, runs %+v", res.Options.PretrainSeeds, res.Options.PretrainSeed, res.Pretrain[0].Seed, res.Runs)
	}
	b, _ := json.Marshal(res.Options)
	if strings.Contains(string(b), `"pretrain_seed"`) {
		t.Errorf("options written with the old field: %s", b)
	}
	if got := zhFinetuneSeed(1, 5); got != 5 {
		t.Errorf("fine-tuning seed 5 under pretraining seed 1 runs with %d, want 5", got)
	}
	if a, b := zhFinetuneSeed(2, 5), zhFinetuneSeed(3, 5); uint32(a) == 5 || uint32(b) == 5 || uint32(a) == uint32(b) {
		t.Errorf("under pretraining seeds 2 and 3 fine-tuning seed 5 runs with %#x, %#x: want other low 32 bits than 5's and each other's", a, b)
	}
}
