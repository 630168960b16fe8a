package metrics

import (
	"fmt"
	"strings"
)

// CHRF computes chrF (Popović 2015, "chrF: character n-gram F-score for
// automatic MT evaluation", WMT) and chrF++ (Popović 2017) as sacreBLEU
// 2.6.0 does. The zero value is sacreBLEU's default, chrF2 (signature
// nrefs:N|case:mixed|eff:yes|nc:6|nw:0|space:no): character n-grams of
// orders 1–6 with white space removed, no word n-grams, β = 2.
//
// Per segment and order, the hypothesis's n-grams are matched against the
// reference's (clipped counts); a segment with several references keeps the
// statistics of the reference with the best segment score (the first on a
// tie). Statistics are summed over the corpus; then for each order i with
// hypothesis and reference n-grams, P_i = matches/hyp and R_i = matches/ref,
// and with P and R their averages over those orders
//
//	chrF_β = 100 · (1+β²)·P·R / (β²·P + R)   (0 when P + R = 0)
//
// With EpsSmoothing (chrF++.py's and NLTK's variant) the score is instead
// the mean over all orders of each order's F_β, an order without n-grams
// contributing ε = 1e-16.
type CHRF struct {
	// CharOrder is the largest character n-gram order; 0 means 6.
	CharOrder int
	// WordOrder is the largest word n-gram order: 0 (the default, chrF)
	// or 2 for chrF++. Words are split on white space, then a punctuation
	// mark at the end (else the start) of a word of two or more characters
	// is split off.
	WordOrder int
	// Beta weighs recall β times as much as precision; 0 means 2.
	Beta int
	// Lowercase compares lower-cased text.
	Lowercase bool
	// Whitespace keeps white space inside character n-grams.
	Whitespace bool
	// EpsSmoothing averages the F-scores of all orders, as above.
	EpsSmoothing bool
}

// CHRFScore is a chrF score.
type CHRFScore struct {
	Score     float64 // 0–100
	CharOrder int
	WordOrder int
	Beta      int
}

// Name is the metric's name as sacreBLEU prints it: chrF2, chrF2++.
func (s CHRFScore) Name() string {
	return fmt.Sprintf("chrF%d%s", s.Beta, strings.Repeat("+", s.WordOrder))
}

// CorpusCHRF is CHRF{}.Corpus: sacreBLEU's corpus_chrf with its defaults.
func CorpusCHRF(hyps []string, refs [][]string) (CHRFScore, error) {
	return CHRF{}.Corpus(hyps, refs)
}

func (c CHRF) norm() CHRF {
	if c.CharOrder <= 0 {
		c.CharOrder = 6
	}
	if c.Beta <= 0 {
		c.Beta = 2
	}
	if c.WordOrder < 0 {
		c.WordOrder = 0
	}
	return c
}

// Corpus returns the chrF of hyps against refs, a list of reference
// streams (refs[k][i] is the k-th reference of hyps[i]).
func (c CHRF) Corpus(hyps []string, refs [][]string) (CHRFScore, error) {
	stats, err := c.segmentStats(hyps, refs)
	if err != nil {
		return CHRFScore{}, err
	}
	return c.fromStats(sumStats(stats, c.width())), nil
}

// Sentence returns the chrF of one hypothesis against its references.
func (c CHRF) Sentence(hyp string, refs []string) (CHRFScore, error) {
	streams := make([][]string, len(refs))
	for k, r := range refs {
		streams[k] = []string{r}
	}
	return c.Corpus([]string{hyp}, streams)
}

// width is the length of a segment's statistics: hypothesis, reference and
// matching n-grams per order.
func (c CHRF) width() int {
	c = c.norm()
	return 3 * (c.CharOrder + c.WordOrder)
}

func (c CHRF) fromStats(s []float64) CHRFScore {
	c = c.norm()
	return CHRFScore{Score: c.fScore(s), CharOrder: c.CharOrder, WordOrder: c.WordOrder, Beta: c.Beta}
}

// fScore is sacreBLEU's CHRF._compute_f_score.
func (c CHRF) fScore(s []float64) float64 {
	const eps = 1e-16
	factor := float64(c.Beta * c.Beta)
	score, avgP, avgR, eff := 0.0, 0.0, 0.0, 0
	order := c.CharOrder + c.WordOrder
	for i := range order {
		nHyp, nRef, nMatch := s[3*i], s[3*i+1], s[3*i+2]
		prec, rec := eps, eps
		if nHyp > 0 {
			prec = nMatch / nHyp
		}
		if nRef > 0 {
			rec = nMatch / nRef
		}
		if d := factor*prec + rec; d > 0 {
			score += (1 + factor) * prec * rec / d
		} else {
			score += eps
		}
		if nHyp > 0 && nRef > 0 {
			avgP += prec
			avgR += rec
			eff++
		}
	}
	if c.EpsSmoothing {
		return 100 * score / float64(order)
	}
	if eff == 0 {
		return 0
	}
	avgP /= float64(eff)
	avgR /= float64(eff)
	if avgP+avgR == 0 {
		return 0
	}
	return 100 * (1 + factor) * avgP * avgR / (factor*avgP + avgR)
}

// ngramSets are the n-gram counts of a segment: characters of orders
// 1..CharOrder, then words of orders 1..WordOrder.
func (c CHRF) ngramSets(s string) []map[string]int {
	if c.Lowercase {
		s = strings.ToLower(s)
	}
	line := s
	if !c.Whitespace {
		line = strings.Join(pyFields(s), "")
	}
	r := []rune(line)
	var sets []map[string]int
	for n := 1; n <= c.CharOrder; n++ {
		m := map[string]int{}
		for i := 0; i+n <= len(r); i++ {
			m[string(r[i:i+n])]++
		}
		sets = append(sets, m)
	}
	if c.WordOrder > 0 {
		words := chrfWords(s)
		for n := 1; n <= c.WordOrder; n++ {
			m := map[string]int{}
			for i := 0; i+n <= len(words); i++ {
				m[strings.Join(words[i:i+n], " ")]++
			}
			sets = append(sets, m)
		}
	}
	return sets
}

// chrfPuncts are the punctuation marks chrF++ splits off words.
const chrfPuncts = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// chrfWords splits s into words as sacreBLEU's CHRF._remove_punctuation.
func chrfWords(s string) []string {
	var out []string
	for _, w := range pyFields(s) {
		r := []rune(w)
		switch {
		case len(r) == 1:
			out = append(out, w)
		case strings.ContainsRune(chrfPuncts, r[len(r)-1]):
			out = append(out, string(r[:len(r)-1]), string(r[len(r)-1]))
		case strings.ContainsRune(chrfPuncts, r[0]):
			out = append(out, string(r[0]), string(r[1:]))
		default:
			out = append(out, w)
		}
	}
	return out
}

// segmentStats returns each segment's statistics: per order, hypothesis,
// reference and matching n-grams, for the best reference.
func (c CHRF) segmentStats(hyps []string, refs [][]string) ([][]float64, error) {
	c = c.norm()
	if err := checkStreams(hyps, refs); err != nil {
		return nil, err
	}
	out := make([][]float64, len(hyps))
	for i, h := range hyps {
		hs := c.ngramSets(h)
		best, bestF := []float64(nil), -1.0
		for k := range refs {
			rs := c.ngramSets(refs[k][i])
			st := make([]float64, 0, c.width())
			for o := range hs {
				hypCount, refCount, match := 0, 0, 0
				for ng, n := range hs[o] {
					hypCount += n
					match += min(n, rs[o][ng])
				}
				for _, n := range rs[o] {
					refCount += n
				}
				if len(rs[o]) == 0 {
					hypCount = 0
				}
				st = append(st, float64(hypCount), float64(refCount), float64(match))
			}
			if f := c.fScore(st); f > bestF {
				best, bestF = st, f
			}
		}
		out[i] = best
	}
	return out, nil
}
