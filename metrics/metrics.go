package metrics

import (
	"fmt"
	"math"
	"sort"
)

func sameLen(a, b int) {
	if a != b {
		panic(fmt.Sprintf("metrics: %d predictions for %d gold values", a, b))
	}
}

// Accuracy returns the share of positions where pred equals gold:
// (1/n)·Σ [pred_i = gold_i]. It is 0 for empty input.
func Accuracy(pred, gold []int) float64 {
	sameLen(len(pred), len(gold))
	if len(gold) == 0 {
		return 0
	}
	n := 0
	for i := range gold {
		if pred[i] == gold[i] {
			n++
		}
	}
	return float64(n) / float64(len(gold))
}

// PRF returns the precision, recall and F1 of class c:
//
//	P = tp/(tp+fp), R = tp/(tp+fn), F1 = 2PR/(P+R) = 2tp/(2tp+fp+fn)
//
// with 0 for an undefined ratio (sklearn's zero_division=0).
func PRF(pred, gold []int, c int) (precision, recall, f1 float64) {
	sameLen(len(pred), len(gold))
	var tp, fp, fn int
	for i := range gold {
		switch {
		case pred[i] == c && gold[i] == c:
			tp++
		case pred[i] == c:
			fp++
		case gold[i] == c:
			fn++
		}
	}
	return prf(tp, fp, fn)
}

func prf(tp, fp, fn int) (p, r, f float64) {
	if tp+fp > 0 {
		p = float64(tp) / float64(tp+fp)
	}
	if tp+fn > 0 {
		r = float64(tp) / float64(tp+fn)
	}
	if 2*tp+fp+fn > 0 {
		f = 2 * float64(tp) / float64(2*tp+fp+fn)
	}
	return p, r, f
}

// F1 returns the binary F1 score of the positive class (sklearn's
// f1_score(gold, pred, pos_label=positive)): GLUE's F1 for MRPC and QQP,
// where the positive class is 1.
func F1(pred, gold []int, positive int) float64 {
	_, _, f := PRF(pred, gold, positive)
	return f
}

// MacroF1 returns the unweighted mean of the per-class F1 over the classes
// that occur in gold or pred (sklearn's f1_score(average="macro") with its
// default labels). It is 0 for empty input.
func MacroF1(pred, gold []int) float64 {
	sameLen(len(pred), len(gold))
	seen := map[int]bool{}
	for i := range gold {
		seen[gold[i]] = true
		seen[pred[i]] = true
	}
	if len(seen) == 0 {
		return 0
	}
	s := 0.0
	for c := range seen {
		_, _, f := PRF(pred, gold, c)
		s += f
	}
	return s / float64(len(seen))
}

// Matthews returns the Matthews correlation coefficient in the multi-class
// form of Gorodkin (2004), as sklearn's matthews_corrcoef computes it from
// the confusion matrix C (rows gold, columns predicted), with t_k and p_k the
// row and column sums, c the trace and s the total:
//
//	MCC = (c·s − Σ p_k·t_k) / sqrt((s² − Σ p_k²)·(s² − Σ t_k²))
//
// For two classes it equals (tp·tn − fp·fn)/sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)).
// It is 0 when the denominator is 0 (for example a constant prediction).
func Matthews(pred, gold []int) float64 {
	sameLen(len(pred), len(gold))
	t, p := map[int]float64{}, map[int]float64{}
	var c, s float64
	for i := range gold {
		t[gold[i]]++
		p[pred[i]]++
		if gold[i] == pred[i] {
			c++
		}
		s++
	}
	var pt, pp, tt float64
	for k, v := range p {
		pt += v * t[k]
		pp += v * v
	}
	for _, v := range t {
		tt += v * v
	}
	den := (s*s - pp) * (s*s - tt)
	if den == 0 {
		return 0
	}
	return (c*s - pt) / math.Sqrt(den)
}

// Pearson returns Pearson's correlation coefficient
//
//	r = Σ(x−x̄)(y−ȳ) / sqrt(Σ(x−x̄)² · Σ(y−ȳ)²)
//
// (scipy.stats.pearsonr), computed in float64 with centred sums. It is NaN
// when either series is constant or has fewer than two values.
func Pearson(x, y []float64) float64 {
	sameLen(len(x), len(y))
	n := len(x)
	if n < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	r := sxy / math.Sqrt(sxx*syy)
	return math.Max(-1, math.Min(1, r))
}

// Spearman returns Spearman's rank correlation: Pearson's r of the ranks of
// x and y, tied values getting the mean of the ranks they span
// (scipy.stats.spearmanr).
func Spearman(x, y []float64) float64 {
	sameLen(len(x), len(y))
	return Pearson(Ranks(x), Ranks(y))
}

// Ranks returns the 1-based ranks of x, ties sharing the average of their
// ranks (scipy.stats.rankdata, method="average").
func Ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] < x[idx[b]] })
	r := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && x[idx[j+1]] == x[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// MultiLabel holds the scores of multi-label predictions.
type MultiLabel struct {
	SubsetAccuracy float64 // share of examples whose whole label set is right (sklearn accuracy_score)
	MicroF1        float64 // F1 of the pooled (example, label) decisions
	MacroF1        float64 // mean over label columns of their F1
}

// ScoreMultiLabel compares multi-label predictions with gold sets given as
// rows of k booleans. MacroF1 averages over all k columns (sklearn's
// f1_score(average="macro") on indicator matrices), a column never
// predicted nor present scoring 0.
func ScoreMultiLabel(pred, gold [][]bool) MultiLabel {
	sameLen(len(pred), len(gold))
	var out MultiLabel
	if len(gold) == 0 {
		return out
	}
	k := len(gold[0])
	tp, fp, fn := make([]int, k), make([]int, k), make([]int, k)
	exact := 0
	for i := range gold {
		sameLen(len(pred[i]), len(gold[i]))
		same := true
		for j := range gold[i] {
			g, p := gold[i][j], pred[i][j]
			switch {
			case g && p:
				tp[j]++
			case p:
				fp[j]++
			case g:
				fn[j]++
			}
			if g != p {
				same = false
			}
		}
		if same {
			exact++
		}
	}
	out.SubsetAccuracy = float64(exact) / float64(len(gold))
	var TP, FP, FN int
	for j := 0; j < k; j++ {
		_, _, f := prf(tp[j], fp[j], fn[j])
		out.MacroF1 += f
		TP, FP, FN = TP+tp[j], FP+fp[j], FN+fn[j]
	}
	if k > 0 {
		out.MacroF1 /= float64(k)
	}
	_, _, out.MicroF1 = prf(TP, FP, FN)
	return out
}
