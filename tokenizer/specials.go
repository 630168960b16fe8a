package tokenizer

import (
	"slices"
	"unicode/utf8"
)

// specialMatcher finds, at every position of a text, the longest special
// token that starts there, in time linear in the text whatever the special
// tokens are (Aho & Corasick 1975, "Efficient string matching").
//
// The automaton is built over the reversed tokens and run from the end of
// the text to its start: after reading text[i:] backwards, a reversed
// token is a suffix of what was read exactly when the token is a prefix of
// text[i:], and every such token is on the failure chain of the state, so
// the longest one, stored per state, is the match at i. Matching forward
// with a plain trie costs the depth walked at every position: with 4,096
// tokens of 255 bytes sharing their first 250 the text "aaaa…" walked 250
// runes per position (16 KB of text took longer than 20 s through the
// token list, and would still be 250× the text through a trie).
//
// The nodes' edges are in one sorted array (first, label, child), so the
// memory is 16 bytes a rune of the tokens (MaxSpecialTokens ×
// MaxSpecialTokenBytes bound it at 16 MiB) and no map per node.
type specialMatcher struct {
	first []int32 // node n's edges are label[first[n]:first[n+1]], child[…]
	label []rune  // sorted within a node
	child []int32
	fail  []int32 // the longest proper suffix of node n's string that is a node
	best  []int32 // 1 + the index of the longest token ending node n's string, 0: none
	runes []int32 // rune length of token k
	bytes []int32 // byte length of token k
	// rootMiss[r] for an ASCII r: no token ends with r, so a scan at the
	// root stays there (the common case, kept to one load).
	rootMiss [utf8.RuneSelf]bool
}

// newSpecialMatcher builds the automaton of tokens (non-empty, distinct).
func newSpecialMatcher(tokens []string) *specialMatcher {
	m := &specialMatcher{runes: make([]int32, len(tokens)), bytes: make([]int32, len(tokens))}
	rev := make([][]rune, len(tokens))
	order := make([]int, len(tokens))
	for k, s := range tokens {
		r := []rune(s)
		slices.Reverse(r)
		rev[k], order[k] = r, k
		m.runes[k], m.bytes[k] = int32(len(r)), int32(len(s))
	}
	slices.SortFunc(order, func(a, b int) int { return slices.Compare(rev[a], rev[b]) })

	// The trie of the sorted reversed tokens, breadth first: the children of
	// the nodes of one depth are made in node order and, since the tokens
	// are sorted, in rune order within a node. A group is a node and the
	// sorted tokens below it.
	type group struct {
		node   int32
		lo, hi int // order[lo:hi] share the node's string
	}
	m.first = append(m.first, 0)
	m.best = append(m.best, 0)
	level := []group{{0, 0, len(order)}}
	nodes := int32(1)
	for depth := 0; len(level) > 0; depth++ {
		var next []group
		for _, g := range level {
			lo := g.lo
			for lo < g.hi && len(rev[order[lo]]) == depth { // the token ending here
				m.best[g.node] = int32(order[lo]) + 1
				lo++
			}
			for lo < g.hi {
				r := rev[order[lo]][depth]
				hi := lo + 1
				for hi < g.hi && rev[order[hi]][depth] == r {
					hi++
				}
				m.label = append(m.label, r)
				m.child = append(m.child, nodes)
				m.best = append(m.best, 0)
				next = append(next, group{nodes, lo, hi})
				nodes++
				lo = hi
			}
			// Nodes are numbered breadth first, so node g.node+1's edges
			// follow this node's.
			m.first = append(m.first, int32(len(m.label)))
		}
		level = next
	}
	// Failure links, breadth first (node order is breadth first). The best
	// token of a node is its own (the longest) or its failure's.
	m.fail = make([]int32, nodes)
	for n := int32(0); n < nodes; n++ {
		for e := m.first[n]; e < m.first[n+1]; e++ {
			c := m.child[e]
			if n != 0 {
				m.fail[c] = m.step(m.fail[n], m.label[e])
			}
			if m.best[c] == 0 {
				m.best[c] = m.best[m.fail[c]]
			}
		}
	}
	for r := range m.rootMiss {
		m.rootMiss[r] = m.edge(0, rune(r)) < 0
	}
	return m
}

// edge returns node n's child by r, or −1.
func (m *specialMatcher) edge(n int32, r rune) int32 {
	lo, hi := m.first[n], m.first[n+1]
	for lo < hi {
		mid := int32(uint32(lo+hi) >> 1)
		switch l := m.label[mid]; {
		case l == r:
			return m.child[mid]
		case l < r:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return -1
}

// step is the automaton's transition from n by r.
func (m *specialMatcher) step(n int32, r rune) int32 {
	for {
		if n == 0 && r < utf8.RuneSelf && r >= 0 && m.rootMiss[r] {
			return 0
		}
		if c := m.edge(n, r); c >= 0 {
			return c
		}
		if n == 0 {
			return 0
		}
		n = m.fail[n]
	}
}

// longest sets at[i] to 1 + the index of the longest token that starts at
// rs[i] (0: none) and returns at, grown to len(rs).
func (m *specialMatcher) longest(at []int32, rs []rune) []int32 {
	at = slices.Grow(at[:0], len(rs))[:len(rs)]
	n := int32(0)
	for i := len(rs) - 1; i >= 0; i-- {
		n = m.step(n, rs[i])
		at[i] = m.best[n]
	}
	return at
}
