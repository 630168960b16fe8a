package bpe

import (
	"container/heap"
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"
)

// ErrNoText is returned by Train when the texts hold no word.
var ErrNoText = errors.New("bpe: no word to train on")

// word is a distinct piece being merged: its symbols and its frequency.
type word struct {
	syms []int32
	n    int
}

// start counts the pieces of texts and returns the model with the fixed
// tokens and the alphabet, and each distinct piece as alphabet symbols, in
// sorted order.
func start(texts []string, vocabSize int) (*Model, []word, error) {
	counts := map[string]int{}
	for _, t := range texts {
		pieces(t, func(p string, final bool) {
			if final {
				counts["\x01"+p]++ // the first byte tells whether the piece ends a word
			} else {
				counts["\x00"+p]++
			}
		})
	}
	if len(counts) == 0 {
		return nil, nil, ErrNoText
	}
	keys := make([]string, 0, len(counts))
	alpha := map[string]bool{}
	for k := range counts {
		keys = append(keys, k)
		p, final := k[1:], k[0] == 1
		for i, r := range p {
			n := i + utf8.RuneLen(r)
			alpha[symbolKey(p[i:n], final && n == len(p))] = true
		}
	}
	sort.Strings(keys)
	alphabet := make([]string, 0, len(alpha))
	for k := range alpha {
		alphabet = append(alphabet, k)
	}
	sort.Strings(alphabet)
	if base := firstSym + len(alphabet); vocabSize < base {
		return nil, nil, fmt.Errorf("bpe: vocabulary size %d is below the %d fixed tokens plus the %d symbols of the alphabet (%d)",
			vocabSize, firstSym, len(alphabet), base)
	}
	m := newModel(alphabet)
	words := make([]word, len(keys))
	for w, k := range keys {
		p, final := k[1:], k[0] == 1
		syms := make([]int32, 0, utf8.RuneCountInString(p))
		for i, r := range p {
			n := i + utf8.RuneLen(r)
			syms = append(syms, m.ids[symbolKey(p[i:n], final && n == len(p))])
		}
		words[w] = word{syms: syms, n: counts[k]}
	}
	return m, words, nil
}

// better reports whether pair (a, b) with count n goes before (c, d) with
// count k: the higher count, then the smaller left key, then the smaller
// right key.
func (m *Model) better(n int, a, b int32, k int, c, d int32) bool {
	if n != k {
		return n > k
	}
	if m.keys[a] != m.keys[c] {
		return m.keys[a] < m.keys[c]
	}
	return m.keys[b] < m.keys[d]
}

// Train learns a vocabulary of at most vocabSize tokens from texts (the
// sentences of both languages): the 261 fixed tokens, the alphabet, and
// merges learned as the package documentation says until the size is
// reached or no pair occurs twice. The result depends only on the multiset
// of pieces in texts, not on their order.
func Train(texts []string, vocabSize int) (*Model, error) {
	m, words, err := start(texts, vocabSize)
	if err != nil {
		return nil, err
	}
	// count[p]: occurrences of pair p, weighted by piece frequency; where[p]:
	// the pieces that held p when it was counted (some may no longer).
	count := map[uint64]int{}
	where := map[uint64][]int32{}
	note := func(w int32, delta int) {
		s := words[w].syms
		for i := 0; i+1 < len(s); i++ {
			p := pairKey(s[i], s[i+1])
			count[p] += delta * words[w].n
			if delta > 0 {
				if l := where[p]; len(l) == 0 || l[len(l)-1] != w {
					where[p] = append(where[p], w)
				}
			}
		}
	}
	for w := range words {
		note(int32(w), 1)
	}
	h := &pairHeap{m: m}
	for p, n := range count {
		h.items = append(h.items, pairItem{n, int32(p >> 32), int32(uint32(p))})
	}
	heap.Init(h)
	seen := make([]int, len(words)) // merge number + 1 at which a piece was last rewritten
	changed := map[uint64]bool{}
	for m.VocabSize() < vocabSize && h.Len() > 0 {
		top := heap.Pop(h).(pairItem)
		p := pairKey(top.a, top.b)
		if count[p] != top.n {
			continue // stale: the pair's count changed after this was pushed
		}
		if top.n < 2 {
			break
		}
		c := m.addMerge(top.a, top.b)
		clear(changed)
		for _, w := range where[p] {
			if seen[w] == m.NumMerges() {
				continue
			}
			seen[w] = m.NumMerges()
			s := words[w].syms
			has := false
			for i := 0; i+1 < len(s); i++ {
				if s[i] == top.a && s[i+1] == top.b {
					has = true
					break
				}
			}
			if !has {
				continue
			}
			for i := 0; i+1 < len(s); i++ {
				changed[pairKey(s[i], s[i+1])] = true
			}
			note(w, -1)
			words[w].syms = mergePair(s, top.a, top.b, c)
			note(w, 1)
			s = words[w].syms
			for i := 0; i+1 < len(s); i++ {
				changed[pairKey(s[i], s[i+1])] = true
			}
		}
		delete(where, p)
		for q := range changed {
			if n := count[q]; n > 0 {
				heap.Push(h, pairItem{n, int32(q >> 32), int32(uint32(q))})
			} else {
				delete(count, q)
			}
		}
	}
	return m, nil
}

type pairItem struct {
	n    int
	a, b int32
}

// pairHeap orders pairs best first (Model.better).
type pairHeap struct {
	m     *Model
	items []pairItem
}

func (h *pairHeap) Len() int { return len(h.items) }
func (h *pairHeap) Less(i, j int) bool {
	x, y := h.items[i], h.items[j]
	return h.m.better(x.n, x.a, x.b, y.n, y.a, y.b)
}
func (h *pairHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *pairHeap) Push(x any)    { h.items = append(h.items, x.(pairItem)) }
func (h *pairHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// trainNaive is Train's reference twin: every step recounts every pair of
// every piece and scans them all for the best.
func trainNaive(texts []string, vocabSize int) (*Model, error) {
	m, words, err := start(texts, vocabSize)
	if err != nil {
		return nil, err
	}
	for m.VocabSize() < vocabSize {
		count := map[uint64]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				count[pairKey(w.syms[i], w.syms[i+1])] += w.n
			}
		}
		found := false
		var best pairItem
		for p, n := range count {
			a, b := int32(p>>32), int32(uint32(p))
			if !found || m.better(n, a, b, best.n, best.a, best.b) {
				best, found = pairItem{n, a, b}, true
			}
		}
		if !found || best.n < 2 {
			break
		}
		c := m.addMerge(best.a, best.b)
		for i := range words {
			words[i].syms = mergePair(words[i].syms, best.a, best.b, c)
		}
	}
	return m, nil
}
