package experiment

import (
	"fmt"

	"github.com/roformer-go/roformer/metrics"
)

// corpusBLEU is sacreBLEU's corpus_bleu with its defaults (package metrics)
// against one reference per segment.
func corpusBLEU(hyps, refs []string) (float64, error) {
	s, err := metrics.CorpusBLEU(hyps, [][]string{refs})
	if err != nil {
		return 0, fmt.Errorf("experiment: translate: %w", err)
	}
	return s.Score, nil
}

// scoreTest is the corpus BLEU and chrF2 of hyps with their 95% bootstrap
// intervals (n resamples).
func scoreTest(hyps, refs []string, n int, seed uint64) (TranslateScore, error) {
	b, err := metrics.Bootstrap(metrics.BLEU{}, hyps, [][]string{refs}, n, seed)
	if err != nil {
		return TranslateScore{}, fmt.Errorf("experiment: translate: %w", err)
	}
	c, err := metrics.Bootstrap(metrics.CHRF{}, hyps, [][]string{refs}, n, seed)
	if err != nil {
		return TranslateScore{}, fmt.Errorf("experiment: translate: %w", err)
	}
	return TranslateScore{BLEU: Number(b.Score), BLEUCI: [2]Number{Number(b.Lower), Number(b.Upper)},
		ChrF: Number(c.Score), ChrFCI: [2]Number{Number(c.Lower), Number(c.Upper)}}, nil
}

// pairedBootstrap is the p-value of sacreBLEU's paired bootstrap test of
// system against baseline on BLEU (n resamples).
func pairedBootstrap(system, baseline, refs []string, n int, seed uint64) (float64, error) {
	p, err := metrics.PairedBootstrap(metrics.BLEU{}, baseline, system, [][]string{refs}, n, seed)
	if err != nil {
		return 0, fmt.Errorf("experiment: translate: %w", err)
	}
	return p.P, nil
}
