// Package merge is the byte-pair-encoding merge engine (Sennrich, Haddow and
// Birch 2016, "Neural Machine Translation of Rare Words with Subword Units",
// ACL, algorithm 1) that both of the module's trainers run: the WordPiece
// trainer of package tokenizer and the BPE trainer of package tokenizer/bpe.
// The trainers differ only in their symbols (what a merge makes, how ties
// are broken, when to stop), which they hand over as a Vocab.
//
// Each step merges the pair of adjacent symbols with the highest count,
//
//	count(a, b) = Σ_w  n_w · #{i : w_i = a, w_{i+1} = b},
//
// summed over the distinct words w with their frequencies n_w, into the
// symbol Vocab.Merge(a, b), left to right within each word ("a a a" merging
// (a, a) is "aa a"). Pairs of equal count are ordered by Vocab.Before, a
// strict total order, so the result does not depend on map or heap order.
//
// Learn keeps the counts up to date incrementally: a merge rewrites only the
// words that hold the pair (an index from pair to words) and changes only
// the counts of the pairs around each occurrence; a max-heap with lazy
// deletion yields the best pair. Naive, its reference twin, recounts every
// pair of every word at every step.
package merge

import "container/heap"

// Word is a distinct word being merged: its symbols and its frequency.
type Word struct {
	Syms  []int32
	Count int64
}

// Vocab is the vocabulary that a training grows.
type Vocab interface {
	// Full reports whether the vocabulary has its size: no merge is wanted.
	Full() bool
	// Merge records the merge of (a, b) and returns the symbol that replaces
	// the pair in the words (it may exist already).
	Merge(a, b int32) int32
	// Before reports whether the pair (a, b) goes before (c, d) when their
	// counts are equal. It must be a strict total order on pairs.
	Before(a, b, c, d int32) bool
}

// key packs a pair into a map key.
func key(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// unkey is key's inverse.
func unkey(p uint64) (a, b int32) { return int32(p >> 32), int32(uint32(p)) }

// Learn merges, best pair first, until v is full or no pair occurs at least
// minCount times (minCount below 1 counts as 1). It rewrites the symbols of
// words in place.
func Learn(v Vocab, words []Word, minCount int64) {
	minCount = max(minCount, 1)
	// count[p]: occurrences of p, weighted by word frequency; where[p]: the
	// words that held p when it appeared (some may no longer).
	count := map[uint64]int64{}
	where := map[uint64][]int32{}
	for i, w := range words {
		for k := 0; k+1 < len(w.Syms); k++ {
			p := key(w.Syms[k], w.Syms[k+1])
			count[p] += w.Count
			addWhere(where, p, int32(i))
		}
	}
	h := &pairHeap{v: v, items: make([]item, 0, len(count))}
	for p, n := range count {
		if n > 0 {
			h.items = append(h.items, item{p, n})
		}
	}
	heap.Init(h)
	// The heap holds, for every pair that occurs, an entry with its count
	// or a higher one: a pair that grows is pushed again, one that shrinks
	// keeps its old entry, which is requeued with the current count when it
	// comes to the top. So the first entry popped whose count is current is
	// the best pair.
	seen := make([]int32, len(words)) // the last step that rewrote each word
	delta := map[uint64]int64{}
	for step := int32(1); !v.Full() && h.Len() > 0; {
		top := heap.Pop(h).(item)
		if n := count[top.pair]; n != top.n {
			if n > 0 {
				heap.Push(h, item{top.pair, n})
			}
			continue
		}
		if top.n < minCount {
			break
		}
		a, b := unkey(top.pair)
		c := v.Merge(a, b)
		clear(delta)
		for _, wi := range where[top.pair] {
			if seen[wi] == step {
				continue
			}
			seen[wi] = step
			w := &words[wi]
			syms, out := w.Syms, w.Syms[:0]
			for k := 0; k < len(syms); {
				if k+1 >= len(syms) || syms[k] != a || syms[k+1] != b {
					out = append(out, syms[k])
					k++
					continue
				}
				// ... x a b y ... becomes ... x c y ...: (x, a) and (b, y)
				// give way to (x, c) and (c, y); x is out's last symbol,
				// which an earlier merge in this word may have made c.
				if len(out) > 0 {
					x := out[len(out)-1]
					delta[key(x, a)] -= w.Count
					delta[key(x, c)] += w.Count
					addWhere(where, key(x, c), wi)
				}
				if k+2 < len(syms) {
					y := syms[k+2]
					delta[key(b, y)] -= w.Count
					delta[key(c, y)] += w.Count
					addWhere(where, key(c, y), wi)
				}
				delta[top.pair] -= w.Count
				out = append(out, c)
				k += 2
			}
			w.Syms = out
		}
		delete(where, top.pair)
		for p, d := range delta {
			n := count[p] + d
			if n <= 0 {
				delete(count, p)
				continue
			}
			count[p] = n
			if d > 0 {
				heap.Push(h, item{p, n})
			}
		}
		step++
	}
}

func addWhere(where map[uint64][]int32, p uint64, wi int32) {
	if ws := where[p]; len(ws) == 0 || ws[len(ws)-1] != wi {
		where[p] = append(ws, wi)
	}
}

// Naive is Learn's reference twin: every step recounts every pair of every
// word and scans them all for the best.
func Naive(v Vocab, words []Word, minCount int64) {
	minCount = max(minCount, 1)
	for !v.Full() {
		count := map[uint64]int64{}
		for _, w := range words {
			for k := 0; k+1 < len(w.Syms); k++ {
				count[key(w.Syms[k], w.Syms[k+1])] += w.Count
			}
		}
		var best item
		for p, n := range count {
			if best.n == 0 || better(v, item{p, n}, best) {
				best = item{p, n}
			}
		}
		if best.n < minCount {
			return
		}
		a, b := unkey(best.pair)
		c := v.Merge(a, b)
		for i := range words {
			words[i].Syms = Replace(words[i].Syms, a, b, c)
		}
	}
}

// Replace replaces every occurrence of a, b in syms, left to right, by c,
// in place, and returns the shortened slice.
func Replace(syms []int32, a, b, c int32) []int32 {
	out := syms[:0]
	for i := 0; i < len(syms); i++ {
		if i+1 < len(syms) && syms[i] == a && syms[i+1] == b {
			out = append(out, c)
			i++
			continue
		}
		out = append(out, syms[i])
	}
	return out
}

// item is a heap entry: a pair and its count when pushed.
type item struct {
	pair uint64
	n    int64
}

// better reports whether x goes before y: the higher count, then v.Before.
func better(v Vocab, x, y item) bool {
	if x.n != y.n {
		return x.n > y.n
	}
	a, b := unkey(x.pair)
	c, d := unkey(y.pair)
	return v.Before(a, b, c, d)
}

// pairHeap orders entries best first.
type pairHeap struct {
	v     Vocab
	items []item
}

func (h *pairHeap) Len() int           { return len(h.items) }
func (h *pairHeap) Less(i, j int) bool { return better(h.v, h.items[i], h.items[j]) }
func (h *pairHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *pairHeap) Push(x any)         { h.items = append(h.items, x.(item)) }
func (h *pairHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
