package tokenizer

import "unicode"

// Character classes of Hugging Face's BERT tokenizer (tokenization_utils.py
// and tokenization_bert.py, transformers 4.30.2) and of Python's str methods
// that it relies on. Unicode data come from Go's unicode package (Unicode
// 15.0); CPython 3.11 uses Unicode 14.0, so the two can disagree only on the
// characters assigned in 15.0.

// isBertWhitespace is _is_whitespace: space, \t, \n, \r or category Zs.
// BasicTokenizer._clean_text turns these into spaces.
func isBertWhitespace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r':
		return true
	}
	if r < 0x80 {
		return false
	}
	return unicode.Is(unicode.Zs, r)
}

// isBertControl is _is_control: every category C character (Cc, Cf, Co, Cs
// and unassigned Cn) except \t, \n and \r. _clean_text drops these.
func isBertControl(r rune) bool {
	if r < 0x80 {
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7F
	}
	// Go's unicode.C table covers Cc, Cf, Co, Cs and the unassigned code
	// points (checked against CPython's unicodedata for every code point:
	// they differ only on the 4,489 characters new in Unicode 15.0).
	return unicode.Is(unicode.C, r)
}

// isBertPunct is _is_punctuation: the ASCII non-alphanumeric printable
// characters (33–47, 58–64, 91–96, 123–126) or any category P character.
func isBertPunct(r rune) bool {
	if r < 0x80 {
		return r >= 33 && r <= 47 || r >= 58 && r <= 64 || r >= 91 && r <= 96 || r >= 123 && r <= 126
	}
	return unicode.IsPunct(r)
}

// isChineseChar is BasicTokenizer._is_chinese_char: the CJK Unified
// Ideographs blocks (and extensions A–E) plus the two CJK Compatibility
// Ideographs blocks.
func isChineseChar(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF ||
		r >= 0x3400 && r <= 0x4DBF ||
		r >= 0x20000 && r <= 0x2A6DF ||
		r >= 0x2A700 && r <= 0x2B73F ||
		r >= 0x2B740 && r <= 0x2B81F ||
		r >= 0x2B820 && r <= 0x2CEAF ||
		r >= 0xF900 && r <= 0xFAFF ||
		r >= 0x2F800 && r <= 0x2FA1F
}

// isPySpace is Python's str.isspace for one character: what str.split(),
// str.strip() and whitespace_tokenize split on (bidirectional class WS, B or
// S, or category Zs).
func isPySpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r >= 0x1C && r <= 0x20:
		return true
	case r < 0x85:
		return false
	case r == 0x85, r == 0xA0, r == 0x1680, r >= 0x2000 && r <= 0x200A,
		r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000:
		return true
	}
	return false
}

// pyLower maps one character as Python's str.lower() does when applied to
// that character alone (which is how PreTrainedTokenizer.tokenize lower-cases
// text: its regex substitution lower-cases one character per match, so the
// final-sigma rule never applies). It returns the first rune of the lower
// case form and, for U+0130 (İ, whose full lower case form is "i̇"), a
// second rune; otherwise second is −1.
func pyLower(r rune) (first, second rune) {
	if r < 0x80 {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r, -1
	}
	if r == 0x130 {
		return 'i', 0x307
	}
	return unicode.ToLower(r), -1
}
