package metrics

import (
	"fmt"
	"math"
	"strings"
	"unicode"
)

// BLEU computes BLEU (Papineni et al. 2002, "BLEU: a Method for Automatic
// Evaluation of Machine Translation", ACL) as sacreBLEU 2.6.0 does (Post
// 2018, "A Call for Clarity in Reporting BLEU Scores", WMT). The zero value
// is sacreBLEU's default, BLEU signature nrefs:N|case:mixed|eff:no|tok:13a|
// smooth:exp: mteval-v13a tokenization, exponential smoothing, n-grams up
// to 4.
//
// For a corpus, the matches of every order n are clipped per segment (a
// hypothesis n-gram counts at most as often as in the reference that holds
// it most often) and summed over segments; with c the hypothesis length
// and r the sum of the reference lengths closest to each hypothesis's
// (the shorter on a tie),
//
//	BLEU = BP · exp(Σ_{n=1..N} log p_n / N),  BP = min(1, exp(1 − r/c))
//
// where p_n = matches_n / total_n in percent. When no n-gram of any order
// matches the score is 0. Smoothing changes p_n where matches_n = 0:
// "exp" (Chen and Cherry 2014, method 3; mteval's) takes 100/(2^k·total_n)
// for the k-th such order, "floor" 100·v/total_n, "add-k" adds v to the
// matches and totals of orders n ≥ 2, "none" leaves 0 (log 0 taken as
// −9999999999, so the score is 0). An order with total_n = 0 ends the sum;
// EffectiveOrder then divides by the last order with n-grams instead of N.
type BLEU struct {
	// Lowercase compares lower-cased text.
	Lowercase bool
	// Tokenize is "13a" (the default, "" means it), "intl" (TokenizeIntl),
	// "none" (split on white space only) or "char" (every character a
	// token).
	Tokenize string
	// Smooth is "exp" (the default, ""), "floor", "add-k" or "none".
	Smooth string
	// SmoothValue is the value of "floor" (default 0.1) and "add-k"
	// (default 1); 0 means the default.
	SmoothValue float64
	// MaxOrder is the largest n-gram order N; 0 means 4.
	MaxOrder int
	// EffectiveOrder averages over the orders that have n-grams only, as
	// sacreBLEU's sentence_bleu does by default.
	EffectiveOrder bool
}

// BLEUScore is a BLEU score with its parts, as sacreBLEU's BLEUScore.
type BLEUScore struct {
	Score      float64   // 0–100
	Counts     []float64 // matches per order (add-k smoothing adds to them)
	Totals     []float64 // hypothesis n-grams per order
	Precisions []float64 // percent per order, smoothed
	BP         float64   // brevity penalty
	SysLen     int       // hypothesis tokens
	RefLen     int       // reference tokens (the closest reference per segment)
	Ratio      float64   // SysLen / RefLen (0 without reference tokens)
}

// String formats the score as sacreBLEU prints it: "48.53 82.4/50.0/45.5/37.5
// (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)".
func (s BLEUScore) String() string {
	p := make([]string, len(s.Precisions))
	for i, v := range s.Precisions {
		p[i] = fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f %s (BP = %.3f ratio = %.3f hyp_len = %d ref_len = %d)",
		s.Score, strings.Join(p, "/"), s.BP, s.Ratio, s.SysLen, s.RefLen)
}

// CorpusBLEU is BLEU{}.Corpus: sacreBLEU's corpus_bleu with its defaults.
func CorpusBLEU(hyps []string, refs [][]string) (BLEUScore, error) {
	return BLEU{}.Corpus(hyps, refs)
}

// SentenceBLEU is sacreBLEU's sentence_bleu with its defaults: BLEU with
// EffectiveOrder, one hypothesis against its references.
func SentenceBLEU(hyp string, refs []string) (BLEUScore, error) {
	return BLEU{EffectiveOrder: true}.Sentence(hyp, refs)
}

func (b BLEU) order() int {
	if b.MaxOrder <= 0 {
		return 4
	}
	return b.MaxOrder
}

func (b BLEU) check() error {
	switch b.Tokenize {
	case "", "13a", "intl", "none", "char":
	default:
		return fmt.Errorf("metrics: BLEU tokenizer %q (valid: 13a, intl, none, char)", b.Tokenize)
	}
	switch b.Smooth {
	case "", "exp", "floor", "add-k", "none":
	default:
		return fmt.Errorf("metrics: BLEU smoothing %q (valid: exp, floor, add-k, none)", b.Smooth)
	}
	if b.SmoothValue < 0 || math.IsNaN(b.SmoothValue) {
		return fmt.Errorf("metrics: BLEU smoothing value %g is negative", b.SmoothValue)
	}
	return nil
}

// Corpus returns the BLEU of hyps against refs, a list of reference
// streams: refs[k][i] is the k-th reference of hyps[i], as sacreBLEU's
// corpus_score takes them. Every stream must have one segment per
// hypothesis. An empty reference adds no n-grams but its length 0 still
// competes for the closest length, as in sacreBLEU (whose README uses ""
// for a segment with fewer references).
func (b BLEU) Corpus(hyps []string, refs [][]string) (BLEUScore, error) {
	stats, err := b.segmentStats(hyps, refs)
	if err != nil {
		return BLEUScore{}, err
	}
	return b.fromStats(sumStats(stats, b.width())), nil
}

// Sentence returns the BLEU of one hypothesis against its references.
func (b BLEU) Sentence(hyp string, refs []string) (BLEUScore, error) {
	streams := make([][]string, len(refs))
	for k, r := range refs {
		streams[k] = []string{r}
	}
	return b.Corpus([]string{hyp}, streams)
}

// width is the length of a segment's statistics: hypothesis length,
// reference length, matches and totals per order.
func (b BLEU) width() int { return 2 + 2*b.order() }

// checkStreams checks that there is a reference stream and that every
// stream has one segment per hypothesis.
func checkStreams(hyps []string, refs [][]string) error {
	if len(refs) == 0 {
		return fmt.Errorf("metrics: no reference stream")
	}
	for k, r := range refs {
		if len(r) != len(hyps) {
			return fmt.Errorf("metrics: reference stream %d has %d segments, the hypotheses %d", k+1, len(r), len(hyps))
		}
	}
	return nil
}

// segmentStats returns each segment's statistics (width floats).
func (b BLEU) segmentStats(hyps []string, refs [][]string) ([][]float64, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if err := checkStreams(hyps, refs); err != nil {
		return nil, err
	}
	N := b.order()
	out := make([][]float64, len(hyps))
	for i, h := range hyps {
		var refCounts []map[string]int
		var refLens []int
		for k := range refs {
			toks := pyFields(b.preprocess(refs[k][i]))
			refLens = append(refLens, len(toks))
			grams := wordNgrams(toks, N)
			if refCounts == nil {
				refCounts = grams
				continue
			}
			for n := range grams {
				for ng, c := range grams[n] {
					if c > refCounts[n][ng] {
						refCounts[n][ng] = c
					}
				}
			}
		}
		toks := pyFields(b.preprocess(h))
		s := make([]float64, b.width())
		s[0] = float64(len(toks))
		s[1] = float64(closestRefLen(len(toks), refLens))
		for n, grams := range wordNgrams(toks, N) {
			for ng, c := range grams {
				s[2+N+n] += float64(c)
				s[2+n] += float64(min(c, refCounts[n][ng]))
			}
		}
		out[i] = s
	}
	return out, nil
}

// preprocess lower-cases (optionally), strips trailing white space and
// tokenizes, as sacreBLEU's BLEU._preprocess_segment.
func (b BLEU) preprocess(s string) string {
	if b.Lowercase {
		s = strings.ToLower(s)
	}
	s = strings.TrimRightFunc(s, pyIsSpace)
	switch b.Tokenize {
	case "none":
		return s
	case "char":
		return strings.Join(strings.Split(s, ""), " ")
	case "intl":
		return TokenizeIntl(s)
	}
	return Tokenize13a(s)
}

// closestRefLen is the reference length closest to hypLen, the shorter on
// a tie.
func closestRefLen(hypLen int, refLens []int) int {
	best, bestDiff := -1, -1
	for _, r := range refLens {
		d := hypLen - r
		if d < 0 {
			d = -d
		}
		if bestDiff < 0 || d < bestDiff || (d == bestDiff && r < best) {
			best, bestDiff = r, d
		}
	}
	return best
}

// wordNgrams counts the n-grams of toks for n = 1..N (element n−1), each
// keyed by its tokens, each written as its length in 4 bytes and its bytes.
func wordNgrams(toks []string, N int) []map[string]int {
	keys := make([]string, len(toks))
	for i, t := range toks {
		l := len(t)
		keys[i] = string([]byte{byte(l >> 24), byte(l >> 16), byte(l >> 8), byte(l)}) + t
	}
	c := make([]map[string]int, N)
	for n := 1; n <= N; n++ {
		c[n-1] = map[string]int{}
		for i := 0; i+n <= len(toks); i++ {
			c[n-1][strings.Join(keys[i:i+n], "")]++
		}
	}
	return c
}

// fromStats is the score of summed statistics.
func (b BLEU) fromStats(s []float64) BLEUScore {
	N := b.order()
	v := b.SmoothValue
	if v == 0 {
		v = map[string]float64{"floor": 0.1, "add-k": 1}[b.Smooth]
	}
	smooth := b.Smooth
	if smooth == "" {
		smooth = "exp"
	}
	return ComputeBLEU(s[2:2+N], s[2+N:2+2*N], int(s[0]), int(s[1]), smooth, v, b.EffectiveOrder)
}

// ComputeBLEU returns the BLEU of sufficient statistics, as sacreBLEU's
// BLEU.compute_bleu: matches and totals per order (len N each), the
// hypothesis and reference lengths, the smoothing method ("exp", "floor",
// "add-k", "none") and its value (used as given, 0 included). counts and
// totals are not modified.
func ComputeBLEU(counts, totals []float64, sysLen, refLen int, smooth string, smoothValue float64, effectiveOrder bool) BLEUScore {
	N := len(counts)
	correct := append([]float64(nil), counts...)
	total := append([]float64(nil), totals...)
	bp := 1.0
	if sysLen < refLen {
		bp = 0
		if sysLen > 0 {
			bp = math.Exp(1 - float64(refLen)/float64(sysLen))
		}
	}
	res := BLEUScore{Counts: correct, Totals: total, Precisions: make([]float64, N), BP: bp, SysLen: sysLen, RefLen: refLen}
	if refLen > 0 {
		res.Ratio = float64(sysLen) / float64(refLen)
	}
	any := false
	for _, c := range correct {
		any = any || c != 0
	}
	if !any {
		return res
	}
	smoothMteval := 1.0
	eff := N
	for n := 1; n <= N; n++ {
		if smooth == "add-k" && n > 1 {
			correct[n-1] += smoothValue
			total[n-1] += smoothValue
		}
		if total[n-1] == 0 {
			break
		}
		if effectiveOrder {
			eff = n
		}
		switch {
		case correct[n-1] != 0:
			res.Precisions[n-1] = 100 * correct[n-1] / total[n-1]
		case smooth == "exp":
			smoothMteval *= 2
			res.Precisions[n-1] = 100 / (smoothMteval * total[n-1])
		case smooth == "floor":
			res.Precisions[n-1] = 100 * smoothValue / total[n-1]
		}
	}
	sum := 0.0
	for _, p := range res.Precisions[:eff] {
		if p == 0 {
			sum += -9999999999
		} else {
			sum += math.Log(p)
		}
	}
	res.Score = bp * math.Exp(sum/float64(eff))
	return res
}

// pyIsSpace is Python's str.isspace for one character: Go's unicode.IsSpace
// plus the information separators U+001C–U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyFields is Python's str.split() without arguments.
func pyFields(s string) []string { return strings.FieldsFunc(s, pyIsSpace) }

// Tokenize13a tokenizes a segment as mteval-v13a.pl does, in sacreBLEU's
// version (tokenizers/tokenizer_13a.py and tokenizer_re.py): "<skipped>"
// and "-\n" removed, newlines made spaces, the entities &quot; &amp; &lt;
// &gt; decoded; then, on the segment with a space added at both ends,
//
//  1. each of  space ! " # $ % & ( ) * + / : ; < = > ? @ [ \ ] ^ _ ` { | } ~
//     gets a space on both sides;
//  2. a period or comma after a non-digit gets spaces: "x." → "x . ";
//  3. a period or comma before a non-digit gets spaces: ".x" → " . x";
//  4. a dash after a digit gets spaces: "3-" → "3 - ";
//
// each rule a left-to-right pass of non-overlapping matches, as Python's
// re.sub makes; finally white space (Python's) is collapsed to single
// spaces and trimmed. Apostrophes and hyphens between letters stay.
func Tokenize13a(line string) string {
	line = strings.ReplaceAll(line, "<skipped>", "")
	line = strings.ReplaceAll(line, "-\n", "")
	line = strings.ReplaceAll(line, "\n", " ")
	if strings.Contains(line, "&") {
		line = strings.ReplaceAll(line, "&quot;", `"`)
		line = strings.ReplaceAll(line, "&amp;", "&")
		line = strings.ReplaceAll(line, "&lt;", "<")
		line = strings.ReplaceAll(line, "&gt;", ">")
	}
	r := []rune(" " + line + " ")
	isDigit := func(c rune) bool { return c >= '0' && c <= '9' }
	var out []rune
	// Rule 1.
	for _, c := range r {
		if spaced13a(c) {
			out = append(out, ' ', c, ' ')
		} else {
			out = append(out, c)
		}
	}
	// Rules 2–4.
	periodComma := func(c rune) bool { return c == '.' || c == ',' }
	out = pairPass(out, func(a, b rune) bool { return !isDigit(a) && periodComma(b) }, spaceAfter)
	out = pairPass(out, func(a, b rune) bool { return periodComma(a) && !isDigit(b) }, spaceBefore)
	out = pairPass(out, func(a, b rune) bool { return isDigit(a) && b == '-' }, spaceAfter)
	return strings.Join(pyFields(string(out)), " ")
}

// pairPass replaces each pair of characters (a, b) that match, scanning left
// to right and resuming after a replaced pair, as Python's re.sub does with
// a two-character pattern.
func pairPass(in []rune, match func(a, b rune) bool, repl func(a, b rune) []rune) []rune {
	var o []rune
	for i := 0; i < len(in); i++ {
		if i+1 < len(in) && match(in[i], in[i+1]) {
			o = append(o, repl(in[i], in[i+1])...)
			i++
			continue
		}
		o = append(o, in[i])
	}
	return o
}

// spaceAfter is "\1 \2 "; spaceBefore " \1 \2".
func spaceAfter(a, b rune) []rune  { return []rune{a, ' ', b, ' '} }
func spaceBefore(a, b rune) []rune { return []rune{' ', a, ' ', b} }

// TokenizeIntl tokenizes a segment as mteval-v14.pl's international
// tokenization, in sacreBLEU's version (tokenizers/tokenizer_intl.py): a
// punctuation mark (Unicode P) after a character that is not a number
// (Unicode N) gets spaces, "x." → "x . "; one before a non-number too, ".x"
// → " . x"; every symbol (Unicode S) gets a space on both sides; each rule a
// left-to-right pass; then white space is collapsed. Unicode categories are
// Go's (Unicode 15), which may differ from those of the Python regex module
// for characters added since.
func TokenizeIntl(line string) string {
	r := []rune(line)
	r = pairPass(r, func(a, b rune) bool { return !unicode.IsNumber(a) && unicode.IsPunct(b) }, spaceAfter)
	r = pairPass(r, func(a, b rune) bool { return unicode.IsPunct(a) && !unicode.IsNumber(b) }, spaceBefore)
	var out []rune
	for _, c := range r {
		if unicode.IsSymbol(c) {
			out = append(out, ' ', c, ' ')
		} else {
			out = append(out, c)
		}
	}
	return strings.Join(pyFields(string(out)), " ")
}

// spaced13a reports whether c is in rule 1's class [{-~[-` -&(-+:-@/].
func spaced13a(c rune) bool {
	return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
		(c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/'
}
