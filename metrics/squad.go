package metrics

import (
	"strings"
	"unicode"
)

// SQuAD's answer metrics, as the official evaluation script (v1.1's
// normalize_answer, exact_match_score and f1_score; the v2.0 script's rule
// for empty answers) and Hugging Face's squad and squad_v2 metrics compute
// them:
//
//   - an answer is normalised by lowercasing it, removing ASCII
//     punctuation (Python's string.punctuation), replacing the articles a,
//     an and the (as whole words) by a space, and joining its
//     white-space-separated words with one space;
//   - exact match is 1 when the normalised prediction equals the normalised
//     gold answer, else 0;
//   - F1 is over the normalised words as bags: with c words in common
//     (multiset intersection), precision c/|pred|, recall c/|gold| and F1
//     2PR/(P+R); 0 when c = 0, and 1 when both are empty (an unanswerable
//     question answered "");
//   - with several gold answers a prediction scores its best match.
//
// The scores here are fractions in [0, 1]; the script reports 100 times them.

// NormalizeAnswer is the official script's normalize_answer.
func NormalizeAnswer(s string) string {
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if r < 0x80 && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r) {
			return -1
		}
		return r
	}, s)
	return strings.Join(dropArticles(s), " ")
}

// dropArticles replaces each whole-word a, an or the (Python's re \b: the
// neighbours are not letters, digits or '_') by a space and splits the
// result into words.
func dropArticles(s string) []string {
	rs := []rune(s)
	word := func(i int) bool {
		if i < 0 || i >= len(rs) {
			return false
		}
		r := rs[i]
		return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
	}
	var b strings.Builder
	for i := 0; i < len(rs); {
		if !word(i - 1) {
			if n := articleAt(rs, i); n > 0 && !word(i+n) {
				b.WriteRune(' ')
				i += n
				continue
			}
		}
		b.WriteRune(rs[i])
		i++
	}
	return strings.FieldsFunc(b.String(), isPySpace)
}

// articleAt returns the length of the article starting at rs[i], or 0.
func articleAt(rs []rune, i int) int {
	for _, a := range [...]string{"the", "an", "a"} {
		if i+len(a) <= len(rs) && string(rs[i:i+len(a)]) == a {
			return len(a)
		}
	}
	return 0
}

// isPySpace is Python's str.split() white space.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// ExactMatch is the official script's exact_match_score: 1 when pred and
// gold are equal after NormalizeAnswer, else 0.
func ExactMatch(pred, gold string) float64 {
	if NormalizeAnswer(pred) == NormalizeAnswer(gold) {
		return 1
	}
	return 0
}

// AnswerF1 is the official script's f1_score over the normalised words
// (the v2.0 script's 1 when both are empty, 0 when one is).
func AnswerF1(pred, gold string) float64 {
	p, g := strings.Fields(NormalizeAnswer(pred)), strings.Fields(NormalizeAnswer(gold))
	if len(p) == 0 || len(g) == 0 {
		if len(p) == len(g) {
			return 1
		}
		return 0
	}
	count := make(map[string]int, len(g))
	for _, w := range g {
		count[w]++
	}
	same := 0
	for _, w := range p {
		if count[w] > 0 {
			count[w]--
			same++
		}
	}
	if same == 0 {
		return 0
	}
	prec, rec := float64(same)/float64(len(p)), float64(same)/float64(len(g))
	return 2 * prec * rec / (prec + rec)
}

// SQuAD returns the mean exact match and F1 of the predictions against
// their gold answers (golds[i] the answers of question i; each prediction
// scores its best gold answer, and a question without gold answers counts
// as unanswerable, gold ""). Both are 0 for empty input. It panics when the
// lengths differ.
func SQuAD(preds []string, golds [][]string) (exactMatch, f1 float64) {
	sameLen(len(preds), len(golds))
	if len(preds) == 0 {
		return 0, 0
	}
	for i, p := range preds {
		g := golds[i]
		if len(g) == 0 {
			g = []string{""}
		}
		em, f := 0.0, 0.0
		for _, a := range g {
			em, f = max(em, ExactMatch(p, a)), max(f, AnswerF1(p, a))
		}
		exactMatch += em
		f1 += f
	}
	n := float64(len(preds))
	return exactMatch / n, f1 / n
}
