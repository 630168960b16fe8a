package tasks

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/roformer-go/roformer/data/labelled"
)

// overlaps returns the Jaccard overlap of the two texts' word sets and
// whether the pair is a paraphrase, for every example of ds.
func overlaps(ds *labelled.Dataset) ([]float64, []bool) {
	ids := map[string]int32{}
	jac, gold := make([]float64, len(ds.Examples)), make([]bool, len(ds.Examples))
	for i, ex := range ds.Examples {
		jac[i], gold[i] = jaccardIDs(wordIDs(ex.Text, ids), wordIDs(*ex.TextPair, ids)), ex.Label == "paraphrase"
	}
	return jac, gold
}

// overlapOnly scores the one-feature classifier "paraphrase when the
// overlap is at least th": F1 of paraphrase and accuracy.
func overlapOnly(jac []float64, gold []bool, th float64) (f1, acc float64) {
	var tp, fp, fn, right int
	for i, j := range jac {
		p, g := j >= th, gold[i]
		switch {
		case p && g:
			tp++
		case p:
			fp++
		case g:
			fn++
		}
		if p == g {
			right++
		}
	}
	if tp > 0 {
		f1 = 2 * float64(tp) / float64(2*tp+fp+fn)
	}
	return f1, float64(right) / float64(max(len(jac), 1))
}

// bestThreshold picks the threshold (a multiple of 0.01) of best F1, or of
// best accuracy.
func bestThreshold(jac []float64, gold []bool, byAccuracy bool) float64 {
	best, th := -1.0, 0.0
	for k := 0; k <= 100; k++ {
		f1, acc := overlapOnly(jac, gold, float64(k)/100)
		if byAccuracy {
			f1 = acc
		}
		if f1 > best {
			best, th = f1, float64(k)/100
		}
	}
	return th
}

// matchedFixture returns Bibles of 2 books × 8 chapters × 20 verses drawn
// from a small word pool: a WEB verse keeps each word of its KJV verse with
// probability 1/2 (else a pool word), so that the positives' overlap
// varies and other verses reach it. It also returns each KJV and WEB text's
// verse (all texts differ).
func matchedFixture(t *testing.T) (fstest.MapFS, map[string]string, map[string]string) {
	pool := strings.Fields("light colour ray prism glass red blue green sun eye body motion white black water fire earth air stone tree")
	r := rand.New(rand.NewPCG(7, 11))
	kjvOf, webOf := map[string]string{}, map[string]string{}
	var kjv, web [][][]string
	for b, book := range []string{"Matt", "Mark"} {
		var kc, wc [][]string
		for c := 0; c < 8; c++ {
			var kv, wv []string
			for v := 0; v < 20; v++ {
				var k, w []string
				for i := 0; i < 6+r.IntN(6); i++ {
					x := pool[r.IntN(len(pool))]
					k = append(k, x)
					if r.IntN(2) == 0 {
						x = pool[r.IntN(len(pool))]
					}
					w = append(w, x)
				}
				ks, ws := strings.Join(k, " ")+".", strings.Join(w, " ")+"."
				ref := fmt.Sprintf("%s.%d.%d", book, c+1, v+1)
				if _, dup := kjvOf[ks]; dup {
					ks = fmt.Sprintf("%s %s", pool[b], ks) // keep texts distinct
				}
				if _, dup := webOf[ws]; dup {
					ws = fmt.Sprintf("%s %s", pool[c], ws)
				}
				kjvOf[ks], webOf[ws] = ref, ref
				kv, wv = append(kv, ks), append(wv, ws)
			}
			kc, wc = append(kc, kv), append(wc, wv)
		}
		kjv, web = append(kjv, kc), append(web, wc)
	}
	fsys := fstest.MapFS{}
	putZText(t, fsys, path.Join(kjvSource.Dir(), "usr/share/sword/modules/texts/ztext/engKJV2006eb"), "nt", testament([]string{"Matt", "Mark"}, kjv, ""), 7)
	putZText(t, fsys, path.Join(webSource.Dir(), "usr/share/sword/modules/texts/ztext/engWEB2015eb"), "nt", testament([]string{"Matt", "Mark"}, web, ""), 5)
	return fsys, kjvOf, webOf
}

// TestParaphraseMatchedFixture builds the task from matchedFixture: a
// second build is identical, every pair is of one split, a positive is the
// same verse, and each split has as many negatives as positives in every
// overlap bin.
func TestParaphraseMatchedFixture(t *testing.T) {
	fsys, kjvOf, webOf := matchedFixture(t)
	sp, err := buildParaphraseMatched(fsys)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := buildParaphraseMatched(fsys)
	if a, b := all(sp), all(again); len(a) != len(b) || len(a) < 40 || len(sp.Test.Examples) == 0 {
		t.Fatalf("%d then %d examples (%d in test); want the same, at least 40, some in test", len(a), len(b), len(sp.Test.Examples))
	} else {
		for i := range a {
			if a[i].Text != b[i].Text || *a[i].TextPair != *b[i].TextPair || a[i].Label != b[i].Label {
				t.Fatalf("build is not deterministic at %d", i)
			}
		}
	}
	splitOf := map[string]int{}
	ids := map[string]int32{}
	for s, ds := range []*labelled.Dataset{sp.Train, sp.Dev, sp.Test} {
		bins := map[int][2]int{}
		for _, ex := range ds.Examples {
			k, w := kjvOf[ex.Text], webOf[*ex.TextPair]
			if k == "" || w == "" {
				t.Fatalf("unknown texts %q / %q", ex.Text, *ex.TextPair)
			}
			if (k == w) != (ex.Label == "paraphrase") {
				t.Errorf("label %s for %s / %s", ex.Label, k, w)
			}
			for _, v := range []string{k, w} {
				if got, ok := splitOf[v]; ok && got != s {
					t.Errorf("verse %s is in splits %d and %d", v, got, s)
				}
				splitOf[v] = s
				if matchedBucket(v) != s {
					t.Errorf("verse %s is in split %d, its reference hashes to %d", v, s, matchedBucket(v))
				}
			}
			b := matchedBin(jaccardIDs(wordIDs(ex.Text, ids), wordIDs(*ex.TextPair, ids)))
			c := bins[b]
			if ex.Label == "paraphrase" {
				c[1]++
			} else {
				c[0]++
			}
			bins[b] = c
		}
		for b, c := range bins {
			if c[0] != c[1] {
				t.Errorf("split %d, overlap bin %d: %d negatives, %d positives", s, b, c[0], c[1])
			}
		}
		if err := mustGet(t, "paraphrase-matched").Spec.Check(ds, "paraphrase-matched"); err != nil {
			t.Error(err)
		}
	}
}

func mustGet(t *testing.T, name string) *Task {
	t.Helper()
	task, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestParaphraseMatchedOverlap builds both paraphrase tasks from the real
// Bibles when they are in the default cache (roformer finetune --task
// paraphrase fetches them) and checks that word overlap alone, which
// solves the plain task, is at chance on the matched one: the threshold
// chosen on train, scored on test.
func TestParaphraseMatchedOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both paraphrase tasks from the real Bibles (seconds)")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	cache := filepath.Join(dir, "roformer", "tasks")
	for _, s := range []Source{kjvSource, webSource} {
		if !Fetched(s, cache) {
			t.Skipf("%s is not in %s (set ROFORMER_FETCH_TESTS=1 for TestFetchOnline to fetch it)", s, cache)
		}
	}
	for _, tc := range []struct {
		task             string
		minF1, maxF1     float64 // test F1 at the train threshold of best F1
		minAcc, maxAcc   float64 // test accuracy at the train threshold of best accuracy
		minTest, minEach int     // test examples; train examples
	}{
		{"paraphrase", 0.98, 1, 0.98, 1, 700, 6000},
		// Half the pairs are positive, so answering "paraphrase" always
		// gives F1 2/3 and accuracy 1/2: chance.
		{"paraphrase-matched", 0, 0.68, 0.45, 0.55, 300, 1200},
	} {
		sp, err := mustGet(t, tc.task).Build(os.DirFS(cache))
		if err != nil {
			t.Fatal(err)
		}
		jt, gt := overlaps(sp.Train)
		thF, thA := bestThreshold(jt, gt, false), bestThreshold(jt, gt, true)
		js, gs := overlaps(sp.Test)
		f1, acc := overlapOnly(js, gs, thF)
		f1a, acca := overlapOnly(js, gs, thA)
		t.Logf("%s: %d/%d/%d examples; overlap alone on test: F1 %.4f (accuracy %.4f) at the best-F1 threshold %.2f; accuracy %.4f (F1 %.4f) at the best-accuracy threshold %.2f",
			tc.task, len(sp.Train.Examples), len(sp.Dev.Examples), len(sp.Test.Examples), f1, acc, thF, acca, f1a, thA)
		if f1 < tc.minF1 || f1 > tc.maxF1 || acca < tc.minAcc || acca > tc.maxAcc {
			t.Errorf("%s: overlap alone gives test F1 %.4f, accuracy %.4f; want F1 in [%.2f, %.2f], accuracy in [%.2f, %.2f]", tc.task, f1, acca, tc.minF1, tc.maxF1, tc.minAcc, tc.maxAcc)
		}
		if len(sp.Test.Examples) < tc.minTest || len(sp.Train.Examples) < tc.minEach {
			t.Errorf("%s: %d train and %d test examples; want at least %d and %d", tc.task, len(sp.Train.Examples), len(sp.Test.Examples), tc.minEach, tc.minTest)
		}
	}
}
