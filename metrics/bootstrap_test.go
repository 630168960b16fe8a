package metrics

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// synthetic returns n reference segments and a hypothesis for each with
// every word replaced with probability q.
func synthetic(n int, q float64, seed uint64) (hyps, refs []string) {
	r := rand.New(rand.NewPCG(seed, 1))  // the references
	r2 := rand.New(rand.NewPCG(seed, 2)) // the errors
	words := strings.Fields("the dog bit man it was not unexpected no one surprised had bitten him first a cat sat on mat")
	for range n {
		var ref, hyp []string
		for range 5 + r.IntN(10) {
			w := words[r.IntN(len(words))]
			ref = append(ref, w)
			if r2.Float64() < q {
				w = words[r2.IntN(len(words))] + "x"
			}
			hyp = append(hyp, w)
		}
		refs = append(refs, strings.Join(ref, " ")+".")
		hyps = append(hyps, strings.Join(hyp, " ")+".")
	}
	return hyps, refs
}

// Each resample's score from summed statistics equals the corpus score of
// the resampled segments computed from scratch.
func TestBootstrapResamplesAreCorpora(t *testing.T) {
	hyps, refs := synthetic(60, 0.3, 1)
	for _, m := range []CorpusMetric{BLEU{}, CHRF{}} {
		stats, err := m.segmentStats(hyps, [][]string{refs})
		if err != nil {
			t.Fatal(err)
		}
		idx := resampleIndices(5, len(hyps), 7)
		fast := resampledScores(m, stats, idx)
		for s, rows := range idx {
			var h, r []string
			for _, i := range rows {
				h, r = append(h, hyps[i]), append(r, refs[i])
			}
			var want float64
			switch m := m.(type) {
			case BLEU:
				sc, _ := m.Corpus(h, [][]string{r})
				want = sc.Score
			case CHRF:
				sc, _ := m.Corpus(h, [][]string{r})
				want = sc.Score
			}
			if !within(fast[s], want, 1e-9) {
				t.Errorf("%T resample %d: %g from statistics, %g from the corpus", m, s, fast[s], want)
			}
		}
	}
}

func TestBootstrap(t *testing.T) {
	hyps, refs := synthetic(200, 0.3, 2)
	iv, err := Bootstrap(BLEU{}, hyps, [][]string{refs}, 1000, DefaultBootstrapSeed)
	if err != nil {
		t.Fatal(err)
	}
	score, _ := CorpusBLEU(hyps, [][]string{refs})
	if iv.Score != score.Score || iv.Samples != 1000 {
		t.Errorf("interval %+v, corpus BLEU %g", iv, score.Score)
	}
	if !(iv.Lower < iv.Score && iv.Score < iv.Upper) || iv.CI <= 0 || iv.CI > 10 || !within(iv.Mean, iv.Score, 2) {
		t.Errorf("implausible interval %+v", iv)
	}
	again, _ := Bootstrap(BLEU{}, hyps, [][]string{refs}, 1000, DefaultBootstrapSeed)
	if again != iv {
		t.Errorf("same seed, another interval: %+v, %+v", again, iv)
	}
	other, _ := Bootstrap(BLEU{}, hyps, [][]string{refs}, 1000, 1)
	if other == iv {
		t.Error("another seed gave the very same interval")
	}
	perfect, _ := Bootstrap(CHRF{}, refs, [][]string{refs}, 100, 3)
	if perfect.Score != 100 || perfect.CI != 0 || perfect.Mean != 100 {
		t.Errorf("a perfect system: %+v", perfect)
	}
	if _, err := Bootstrap(BLEU{}, hyps, [][]string{refs}, 0, 1); err == nil {
		t.Error("0 resamples: no error")
	}
}

func TestPairedBootstrap(t *testing.T) {
	base, refs := synthetic(300, 0.4, 4)
	better, _ := synthetic(300, 0.1, 4) // the same references, fewer errors
	// A near copy of the baseline: one segment differs.
	near := append([]string(nil), base...)
	near[0] = refs[0]
	for _, tc := range []struct {
		name   string
		sys    []string
		maxP   float64
		minP   float64
		higher bool
	}{
		{"clearly_better", better, 0.01, 0, true},
		{"one_segment_differs", near, 1, 0.05, true},
	} {
		for _, m := range []CorpusMetric{BLEU{}, CHRF{}} {
			res, err := PairedBootstrap(m, base, tc.sys, [][]string{refs}, 1000, DefaultBootstrapSeed)
			if err != nil {
				t.Fatal(err)
			}
			if res.P > tc.maxP || res.P < tc.minP || (res.System.Score > res.Baseline) != tc.higher {
				t.Errorf("%s %T: %+v, want p in [%g, %g]", tc.name, m, res, tc.minP, tc.maxP)
			}
		}
	}
	if _, err := PairedBootstrap(BLEU{}, base, better[:10], [][]string{refs}, 10, 1); err == nil || !strings.Contains(err.Error(), "baseline has 300 segments, the system 10") {
		t.Errorf("mismatch: %v", err)
	}
}
