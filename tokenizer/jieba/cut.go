package jieba

import (
	"math"
	"sync"
)

// Segmenter cuts text into words exactly as jieba 0.42.1's
// jieba.lcut(text, cut_all=False, HMM=False), the word segmentation that
// Hugging Face's RoFormerTokenizer runs (through rjieba, whose no-HMM path
// has the same logic). A Segmenter is safe for concurrent use.
type Segmenter struct {
	dict *Dictionary
}

// New returns a segmenter over d.
func New(d *Dictionary) *Segmenter { return &Segmenter{dict: d} }

// NewDefault returns a segmenter over the embedded jieba 0.42.1 dictionary,
// building the dictionary on first use (see Default).
func NewDefault() (*Segmenter, error) {
	d, err := Default()
	if err != nil {
		return nil, err
	}
	return New(d), nil
}

// Dictionary returns the segmenter's dictionary.
func (s *Segmenter) Dictionary() *Dictionary { return s.dict }

// IsHan reports whether r belongs to jieba's re_han_default character class
// [\u4E00-\u9FD5a-zA-Z0-9+#&\._%\-]: runs of these characters are cut with
// the dictionary, every other character is a word of its own.
func IsHan(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FD5:
		return true
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	switch r {
	case '+', '#', '&', '.', '_', '%', '-':
		return true
	}
	return false
}

// isEng is jieba's re_eng [a-zA-Z0-9].
func isEng(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// routeStep is one entry of jieba's route: the best log probability of
// text[idx:] and the (inclusive) end index of the first word on that route.
type routeStep struct {
	logp float64
	end  int
}

var routePool = sync.Pool{New: func() any { s := make([]routeStep, 0, 256); return &s }}

// AppendCut appends to dst the exclusive end index, in runes, of each word
// of text and returns the extended slice; word k is text[ends[k-1]:ends[k]]
// (with ends[-1] = 0). It follows jieba.Tokenizer.cut(text, cut_all=False,
// HMM=False):
//
//  1. text is split into maximal runs of IsHan characters and the rest;
//  2. a run is cut by __cut_DAG_NO_HMM: for every start index the DAG lists
//     the end indices of dictionary words (freq > 0) starting there (or the
//     start itself when there is none); the route maximises
//     Σ log(freq(w) or 1) − log(total) from the right, ties going to the
//     larger end index (Python's max over (logp, end) tuples); along the
//     route, consecutive one-character words [a-zA-Z0-9] are merged into one;
//  3. outside the runs every character is a word, except that "\r\n" is one.
func (s *Segmenter) AppendCut(dst []int, text []rune) []int {
	i := 0
	for i < len(text) {
		if IsHan(text[i]) {
			j := i + 1
			for j < len(text) && IsHan(text[j]) {
				j++
			}
			dst = s.cutBlock(dst, text[i:j], i)
			i = j
			continue
		}
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i += 2
		} else {
			i++
		}
		dst = append(dst, i)
	}
	return dst
}

// cutBlock cuts one run of IsHan characters; offset is its start in the text.
func (s *Segmenter) cutBlock(dst []int, block []rune, offset int) []int {
	d := s.dict
	n := len(block)
	rp := routePool.Get().(*[]routeStep)
	route := *rp
	if cap(route) < n+1 {
		route = make([]routeStep, n+1)
	}
	route = route[:n+1]
	route[n] = routeStep{0, 0}
	fallback := 0 - d.logTotal // log(1) − log(total)
	for idx := n - 1; idx >= 0; idx-- {
		best, bestEnd := math.Inf(-1), -1
		node := d.rootChild(block[idx])
		for x := idx; node >= 0; {
			if w := d.weight[node]; w == w { // a word (NaN marks a bare prefix)
				// Tuples (logp, x) with x increasing: >= keeps the larger x on ties.
				if v := w + route[x+1].logp; bestEnd < 0 || v >= best {
					best, bestEnd = v, x
				}
			}
			x++
			if x >= n {
				break
			}
			node = d.child(node, block[x])
		}
		if bestEnd < 0 {
			best, bestEnd = fallback+route[idx+1].logp, idx
		}
		route[idx] = routeStep{best, bestEnd}
	}
	inBuf := false // a run of single [a-zA-Z0-9] words is pending
	for x := 0; x < n; {
		y := route[x].end + 1
		if y-x == 1 && isEng(block[x]) {
			inBuf = true
		} else {
			if inBuf {
				dst = append(dst, offset+x)
				inBuf = false
			}
			dst = append(dst, offset+y)
		}
		x = y
	}
	if inBuf {
		dst = append(dst, offset+n)
	}
	*rp = route[:0]
	routePool.Put(rp)
	return dst
}

// Cut returns the words of text, as jieba.lcut(text, cut_all=False,
// HMM=False). Invalid UTF-8 bytes become U+FFFD words, one per byte.
func (s *Segmenter) Cut(text string) []string {
	runes := []rune(text)
	ends := s.AppendCut(nil, runes)
	words := make([]string, len(ends))
	start := 0
	for k, e := range ends {
		words[k] = string(runes[start:e])
		start = e
	}
	return words
}
