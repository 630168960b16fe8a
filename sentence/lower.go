package sentence

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Lower returns s lowercased as Python's str.lower does it, which
// sentence-transformers applies when do_lower_case is set: Unicode's full
// lowercase mapping, so U+0130 (İ) becomes "i̇" (i and U+0307), and a
// capital sigma becomes final ς at the end of a word (preceded by a cased
// letter and not followed by one, case-ignorable characters skipped), σ
// elsewhere. Go's strings.ToLower uses the simple mapping for both.
func Lower(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r == 'İ' || r == 'Σ' }) {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch r {
		case 'İ':
			b.WriteString("i\u0307")
		case 'Σ':
			if casedBefore(s[:i]) && !casedAfter(s[i+len("Σ"):]) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// cased is Unicode's Cased property, near enough: letters with case.
func cased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
}

// caseIgnorable is near Unicode's Case_Ignorable: marks, format
// characters, modifier letters and symbols, and the apostrophes, periods
// and colons inside words.
func caseIgnorable(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) ||
		r == '\'' || r == '.' || r == ':' || r == '·' || r == '’'
}

func casedBefore(s string) bool {
	for len(s) > 0 {
		r, n := utf8.DecodeLastRuneInString(s)
		if !caseIgnorable(r) {
			return cased(r)
		}
		s = s[:len(s)-n]
	}
	return false
}

func casedAfter(s string) bool {
	for _, r := range s {
		if !caseIgnorable(r) {
			return cased(r)
		}
	}
	return false
}
