package metrics

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// CorpusMetric is a corpus-level metric that sums per-segment sufficient
// statistics: BLEU and CHRF. The bootstrap functions resample its segments.
type CorpusMetric interface {
	segmentStats(hyps []string, refs [][]string) ([][]float64, error)
	width() int
	scoreStats(sum []float64) float64
}

func (b BLEU) scoreStats(s []float64) float64 { return b.fromStats(s).Score }
func (c CHRF) scoreStats(s []float64) float64 { return c.fromStats(s).Score }

// DefaultBootstrapSeed is sacreBLEU's default seed (SACREBLEU_SEED=12345).
// The random numbers differ from sacreBLEU's (numpy's generator is not
// reproduced), so intervals and p-values agree with its in distribution,
// not digit for digit.
const DefaultBootstrapSeed = 12345

// sumStats adds the rows of stats (each of width w).
func sumStats(stats [][]float64, w int) []float64 {
	s := make([]float64, w)
	for _, row := range stats {
		for j, v := range row {
			s[j] += v
		}
	}
	return s
}

// Interval is a bootstrap estimate around a corpus score.
type Interval struct {
	Score float64 // the score of the corpus itself
	Mean  float64 // the mean of the resampled scores
	// CI is the half-width of the 95% interval, as sacreBLEU reports
	// "μ ± CI": half the distance between the resampled scores at sorted
	// positions ⌊n/40⌋ and n−1−⌊n/40⌋.
	CI float64
	// Lower and Upper are those two resampled scores.
	Lower, Upper float64
	// Samples is the number of resamples.
	Samples int
}

// resampleIndices draws samples × n segment indices with replacement from
// a PCG generator seeded with (seed, seed).
func resampleIndices(samples, n int, seed uint64) [][]int {
	r := rand.New(rand.NewPCG(seed, seed))
	idx := make([][]int, samples)
	for s := range idx {
		idx[s] = make([]int, n)
		for i := range idx[s] {
			idx[s][i] = r.IntN(n)
		}
	}
	return idx
}

// resampledScores scores each resample of stats.
func resampledScores(m CorpusMetric, stats [][]float64, idx [][]int) []float64 {
	out := make([]float64, len(idx))
	sum := make([]float64, m.width())
	for s, rows := range idx {
		clear(sum)
		for _, i := range rows {
			for j, v := range stats[i] {
				sum[j] += v
			}
		}
		out[s] = m.scoreStats(sum)
	}
	return out
}

// estimate is sacreBLEU's estimate_ci.
func estimate(score float64, scores []float64) Interval {
	sorted := append([]float64(nil), scores...)
	sort.Float64s(sorted)
	n := len(sorted)
	lo := n / 40
	hi := n - lo - 1
	mean := 0.0
	for _, v := range sorted {
		mean += v
	}
	mean /= float64(n)
	return Interval{Score: score, Mean: mean, CI: 0.5 * (sorted[hi] - sorted[lo]), Lower: sorted[lo], Upper: sorted[hi], Samples: n}
}

// Bootstrap estimates a 95% confidence interval of a corpus score by
// bootstrap resampling (Koehn 2004, "Statistical Significance Tests for
// Machine Translation Evaluation", EMNLP), as sacreBLEU's corpus_score
// with n_bootstrap: samples resamples (sacreBLEU's default is 1000) of
// the segments with replacement, each scored from its summed statistics.
func Bootstrap(m CorpusMetric, hyps []string, refs [][]string, samples int, seed uint64) (Interval, error) {
	if samples < 1 || len(hyps) == 0 {
		return Interval{}, fmt.Errorf("metrics: bootstrap of %d segments with %d resamples: need at least one of each", len(hyps), samples)
	}
	stats, err := m.segmentStats(hyps, refs)
	if err != nil {
		return Interval{}, err
	}
	score := m.scoreStats(sumStats(stats, m.width()))
	return estimate(score, resampledScores(m, stats, resampleIndices(samples, len(hyps), seed))), nil
}

// Paired is the result of a paired bootstrap test of a system against a
// baseline.
type Paired struct {
	Baseline float64  // the baseline's corpus score
	System   Interval // the system's score, with its bootstrap interval
	// P is the p-value of the null hypothesis that the two systems score
	// the same.
	P float64
}

// PairedBootstrap compares system with baseline (both translations of the
// same segments) as sacreBLEU's paired bootstrap resampling test (--paired-bs;
// Koehn 2004; Moses' bootstrap-hypothesis-difference-significance.pl):
// the same samples resamples of segment indices are scored for both
// systems; with d the observed |system − baseline| and d_s the resampled
// absolute differences centred on their mean,
//
//	p = (#{s: d_s − mean(d) > d} + 1) / (samples + 1)
//
// System also carries its own bootstrap interval from the same resamples.
// sacreBLEU's default is 1000 resamples.
func PairedBootstrap(m CorpusMetric, baseline, system []string, refs [][]string, samples int, seed uint64) (Paired, error) {
	if len(baseline) != len(system) {
		return Paired{}, fmt.Errorf("metrics: the baseline has %d segments, the system %d", len(baseline), len(system))
	}
	if samples < 1 || len(system) == 0 {
		return Paired{}, fmt.Errorf("metrics: paired bootstrap of %d segments with %d resamples: need at least one of each", len(system), samples)
	}
	bl, err := m.segmentStats(baseline, refs)
	if err != nil {
		return Paired{}, err
	}
	sys, err := m.segmentStats(system, refs)
	if err != nil {
		return Paired{}, err
	}
	blScore := m.scoreStats(sumStats(bl, m.width()))
	sysScore := m.scoreStats(sumStats(sys, m.width()))
	idx := resampleIndices(samples, len(system), seed)
	blScores := resampledScores(m, bl, idx)
	sysScores := resampledScores(m, sys, idx)
	diff := sysScore - blScore
	if diff < 0 {
		diff = -diff
	}
	d := make([]float64, samples)
	mean := 0.0
	for s := range d {
		d[s] = sysScores[s] - blScores[s]
		if d[s] < 0 {
			d[s] = -d[s]
		}
		mean += d[s]
	}
	mean /= float64(samples)
	c := 0
	for _, v := range d {
		if v-mean > diff {
			c++
		}
	}
	return Paired{Baseline: blScore, System: estimate(sysScore, sysScores), P: float64(c+1) / float64(samples+1)}, nil
}
