package experiment

import (
	"fmt"
	"strings"

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
// intervals (n resamples), and their length and repetition.
func scoreTest(hyps, refs []string, n int, seed uint64) (TranslateScore, error) {
	b, err := metrics.Bootstrap(metrics.BLEU{}, hyps, [][]string{refs}, n, seed)
	if err != nil {
		return TranslateScore{}, fmt.Errorf("experiment: translate: %w", err)
	}
	c, err := metrics.Bootstrap(metrics.CHRF{}, hyps, [][]string{refs}, n, seed)
	if err != nil {
		return TranslateScore{}, fmt.Errorf("experiment: translate: %w", err)
	}
	out, err := outputStats(hyps, refs)
	if err != nil {
		return TranslateScore{}, err
	}
	return TranslateScore{BLEU: Number(b.Score), BLEUCI: [2]Number{Number(b.Lower), Number(b.Upper)},
		ChrF: Number(c.Score), ChrFCI: [2]Number{Number(c.Lower), Number(c.Upper)}, Output: out}, nil
}

// pairedBootstrap is the p-value of sacreBLEU's paired bootstrap test of
// system against baseline on metric m (n resamples).
func pairedBootstrap(m metrics.CorpusMetric, system, baseline, refs []string, n int, seed uint64) (float64, error) {
	p, err := metrics.PairedBootstrap(m, baseline, system, [][]string{refs}, n, seed)
	if err != nil {
		return 0, fmt.Errorf("experiment: translate: %w", err)
	}
	return p.P, nil
}

// outputStats measures translations against their references: the token
// counts and their ratio as BLEU takes them (sacreBLEU's corpus_bleu
// defaults) and the share of segments of either that repeat a 4-gram.
func outputStats(hyps, refs []string) (*TranslateOutput, error) {
	s, err := metrics.CorpusBLEU(hyps, [][]string{refs})
	if err != nil {
		return nil, fmt.Errorf("experiment: translate: %w", err)
	}
	o := &TranslateOutput{LengthRatio: Number(s.Ratio), SysTokens: s.SysLen, RefTokens: s.RefLen,
		Repeat: Number(repeatShare(hyps, 4)), RefRepeat: Number(repeatShare(refs, 4))}
	for _, h := range hyps {
		if len(strings.Fields(metrics.Tokenize13a(h))) == 0 {
			o.Empty++
		}
	}
	return o, nil
}

// repeatShare is the share of segments in which some n-gram of 13a tokens
// occurs at least twice (0 for no segments).
func repeatShare(segs []string, n int) float64 {
	if len(segs) == 0 {
		return 0
	}
	k := 0
	for _, s := range segs {
		if repeatsNgram(strings.Fields(metrics.Tokenize13a(s)), n) {
			k++
		}
	}
	return float64(k) / float64(len(segs))
}

// repeatsNgram reports whether some n-gram of toks occurs twice or more.
func repeatsNgram(toks []string, n int) bool {
	seen := map[string]bool{}
	for i := 0; i+n <= len(toks); i++ {
		g := strings.Join(toks[i:i+n], "\x00")
		if seen[g] {
			return true
		}
		seen[g] = true
	}
	return false
}
