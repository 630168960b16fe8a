package tokenizer

import (
	"slices"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// continuationPrefix marks WordPiece pieces that continue a word.
const continuationPrefix = "##"

// basic runs BasicTokenizer.tokenize over sc.r[a:b] and WordPiece over each
// resulting word, as BertTokenizer._tokenize does:
//
//  1. _clean_text drops U+0000, U+FFFD and control characters (category C
//     except \t \n \r) and turns whitespace into spaces;
//  2. _tokenize_chinese_chars puts spaces around CJK ideographs;
//  3. NFC, then whitespace_tokenize (Python's str.split);
//  4. per word, unless it is in never_split: lower-case, strip accents
//     (NFD, drop category Mn), split off every punctuation character;
//  5. WordPiece per piece.
//
// Dropped characters join their neighbours ("zero\u200bwidth" is one word).
func (t *Tokenizer) basic(sc *scratch, a, b int, out *seq) {
	w := &sc.w
	w.reset()
	for i := a; i < b; i++ {
		r := sc.r[i]
		switch {
		case r == 0 || r == utf8.RuneError || isBertControl(r):
			// dropped (U+FFFD also stands for invalid UTF-8 input bytes)
		case isBertWhitespace(r) || isPySpace(r):
			t.basicWord(sc, out)
			w.reset()
		case t.cfg.TokenizeChineseChars && isChineseChar(r):
			t.basicWord(sc, out)
			w.reset()
			w.push(r, sc.s[i], sc.e[i])
			t.basicWord(sc, out)
			w.reset()
		default:
			w.push(r, sc.s[i], sc.e[i])
		}
	}
	t.basicWord(sc, out)
	w.reset()
}

// basicWord finishes one whitespace-delimited word held in sc.w (steps 3–5
// of basic).
func (t *Tokenizer) basicWord(sc *scratch, out *seq) {
	w := &sc.w
	if len(w.r) == 0 {
		return
	}
	maxR := rune(0)
	for _, r := range w.r {
		maxR = max(maxR, r)
	}
	if maxR >= 0x300 { // below U+0300 nothing composes: NFC is the identity
		sc.b = appendRunes(sc.b[:0], w.r)
		if !norm.NFC.IsNormal(sc.b) {
			normalizeInto(sc, norm.NFC, false)
		}
	}
	if len(t.neverSplit) > 0 {
		sc.b = appendRunes(sc.b[:0], w.r)
		if kind := t.neverSplit[string(sc.b)]; kind != 0 {
			s, e := spanOf(w.s, w.e, 0, len(w.r))
			if kind == 1 { // configured never_split: the word as it stands
				id, ok := t.vocab.idBytes(sc.b)
				tok := string(sc.b)
				if ok {
					tok = t.vocab.tokens[id]
				} else {
					id = t.unkID
				}
				out.emit(id, tok, s, e)
				return
			}
			// A special token only: not lower-cased or split, but WordPiece
			// still runs on it (it is not in BasicTokenizer's own never_split).
			t.wordPiece(sc, w, 0, len(w.r), out)
			return
		}
	}
	if t.cfg.DoLowerCase && maxR >= 0x80 {
		// Already lower-cased character by character in tokenize; NFC can
		// only compose lower-case letters into lower-case letters, but apply
		// str.lower again as BasicTokenizer does, to be safe.
		n := &sc.n
		n.reset()
		for i, r := range w.r {
			r1, r2 := pyLower(r)
			n.push(r1, w.s[i], w.e[i])
			if r2 >= 0 {
				n.push(r2, w.s[i], w.e[i])
			}
		}
		sc.w, sc.n = sc.n, sc.w
		w = &sc.w
	}
	if t.strip && maxR >= 0xC0 { // nothing below U+00C0 decomposes or is Mn
		sc.b = appendRunes(sc.b[:0], w.r)
		if !norm.NFD.IsNormal(sc.b) || slices.ContainsFunc(w.r, isMn) {
			normalizeInto(sc, norm.NFD, true)
		}
	}
	// Split off punctuation; also split at Python whitespace, as the final
	// whitespace_tokenize(" ".join(split_tokens)) does.
	start := 0
	for i, r := range w.r {
		switch {
		case isBertPunct(r):
			t.wordPiece(sc, w, start, i, out)
			t.wordPiece(sc, w, i, i+1, out)
			start = i + 1
		case isPySpace(r):
			t.wordPiece(sc, w, start, i, out)
			start = i + 1
		}
	}
	t.wordPiece(sc, w, start, len(w.r), out)
}

// normalizeInto replaces sc.w by form(sc.w), given sc.b = UTF-8 of sc.w;
// with dropMn it also drops category Mn runes (_run_strip_accents). Each
// output rune gets the span of the input segment it came from.
func normalizeInto(sc *scratch, form norm.Form, dropMn bool) {
	w, n := &sc.w, &sc.n
	n.reset()
	// Byte offset of each rune of w in sc.b.
	sc.rb = sc.rb[:0]
	off := int32(0)
	for _, r := range w.r {
		sc.rb = append(sc.rb, off)
		off += int32(utf8.RuneLen(r))
	}
	sc.rb = append(sc.rb, off)
	it := &sc.it
	it.Init(form, sc.b)
	k := 0 // first rune of the current input segment
	for !it.Done() {
		seg := it.Next()
		p1 := int32(it.Pos())
		k1 := k
		for k1 < len(w.r) && sc.rb[k1] < p1 {
			k1++
		}
		s, e := spanOf(w.s, w.e, k, k1)
		if k1 == k { // defensive: an empty input segment
			s, e = w.s[min(k, len(w.s)-1)], w.e[min(k, len(w.e)-1)]
		}
		single := k1-k == 1
		for p := 0; p < len(seg); {
			r, size := utf8.DecodeRune(seg[p:])
			p += size
			if dropMn && isMn(r) {
				continue
			}
			if single {
				n.push(r, w.s[k], w.e[k])
			} else {
				n.push(r, s, e)
			}
		}
		k = k1
	}
	sc.w, sc.n = sc.n, sc.w
}

// isMn reports whether r is a nonspacing mark (category Mn), which
// _run_strip_accents drops.
func isMn(r rune) bool { return r >= 0x300 && unicode.Is(unicode.Mn, r) }

// spanOf returns the smallest original byte range covering runes [i, j).
func spanOf(s, e []int32, i, j int) (int32, int32) {
	if i >= j {
		return 0, 0
	}
	lo, hi := s[i], e[i]
	for k := i + 1; k < j; k++ {
		lo = min(lo, s[k])
		hi = max(hi, e[k])
	}
	return lo, hi
}

// wordPiece runs WordpieceTokenizer.tokenize on the runes w[i:j]: greedy
// longest-match-first, pieces after the first spelt "##…"; a word with more
// than MaxInputCharsPerWord characters, or with a stretch that no piece
// matches, becomes the unknown token as a whole.
func (t *Tokenizer) wordPiece(sc *scratch, w *runeBuf, i, j int, out *seq) {
	if i >= j {
		return
	}
	if sc.collect != nil {
		sc.collect(w.r[i:j])
		return
	}
	if j-i > t.cfg.MaxInputCharsPerWord {
		s, e := spanOf(w.s, w.e, i, j)
		out.emit(t.unkID, t.vocab.tokens[t.unkID], s, e)
		return
	}
	// UTF-8 of the word and the byte offset of each rune.
	sc.b = sc.b[:0]
	sc.rb = sc.rb[:0]
	for _, r := range w.r[i:j] {
		sc.rb = append(sc.rb, int32(len(sc.b)))
		sc.b = utf8.AppendRune(sc.b, r)
	}
	sc.rb = append(sc.rb, int32(len(sc.b)))
	mark := len(out.ids)
	maxRunes := t.vocab.maxRunes
	for start := 0; start < j-i; {
		var cand []byte
		if start == 0 {
			cand = sc.b
		} else {
			sc.hb = append(append(sc.hb[:0], continuationPrefix...), sc.b[sc.rb[start]:]...)
			cand = sc.hb
		}
		base := sc.rb[start]
		if start > 0 {
			base -= int32(len(continuationPrefix))
		}
		end := min(j-i, start+maxRunes)
		found := -1
		for ; end > start; end-- {
			if id, ok := t.vocab.idBytes(cand[:sc.rb[end]-base]); ok {
				found = id
				break
			}
		}
		if found < 0 { // is_bad: the whole word is unknown
			out.ids, out.toks, out.offs = out.ids[:mark], out.toks[:mark], out.offs[:mark]
			s, e := spanOf(w.s, w.e, i, j)
			out.emit(t.unkID, t.vocab.tokens[t.unkID], s, e)
			return
		}
		s, e := spanOf(w.s, w.e, i+start, i+end)
		out.emit(found, t.vocab.tokens[found], s, e)
		start = end
	}
}
