package bpe

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/roformer-go/roformer/tokenizer/internal/merge"
)

// The special ids.
const (
	PadID = 0 // <pad>
	BosID = 1 // <s>
	EosID = 2 // </s>
	UnkID = 3 // <unk>

	byteID   = 4   // <0x00>; byte b is byteID+b
	eowID    = 260 // </w> alone, after a word's last character in bytes
	firstSym = 261 // the first alphabet symbol
)

// EndOfWord marks a symbol that ends a word, in files and in Token.
const EndOfWord = "</w>"

var specials = [4]string{"<pad>", "<s>", "</s>", "<unk>"}

// Model is a trained BPE vocabulary: the alphabet and the merges. It is safe
// for concurrent use.
type Model struct {
	keys     []string         // token by id: text, plus EndOfWord when it ends a word
	ids      map[string]int32 // alphabet and merged symbols by key
	rank     map[uint64]int32 // merge rank by pair
	parts    [][3]int32       // each merge by rank: the pair and the symbol made
	alphabet int              // number of alphabet symbols

	cache  sync.Map // piece key → []int
	cached atomic.Int64
}

// maxCache bounds the number of pieces Encode remembers.
const maxCache = 1 << 17

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// newModel returns a model with the fixed tokens and the alphabet (keys, in
// order) and no merges.
func newModel(alphabet []string) *Model {
	m := &Model{ids: map[string]int32{}, rank: map[uint64]int32{}, alphabet: len(alphabet)}
	m.keys = append(m.keys, specials[:]...)
	for b := 0; b < 256; b++ {
		m.keys = append(m.keys, fmt.Sprintf("<0x%02X>", b))
	}
	m.keys = append(m.keys, EndOfWord)
	for _, k := range alphabet {
		m.ids[k] = int32(len(m.keys))
		m.keys = append(m.keys, k)
	}
	return m
}

// addMerge appends the merge of a and b (ids of non-byte symbols, a not
// ending a word) and returns the id of the symbol a+b: a new token, or the
// one an earlier merge made of other parts ("ab"+"c" after "a"+"bc").
func (m *Model) addMerge(a, b int32) int32 {
	k := strings.TrimSuffix(m.keys[a], EndOfWord) + m.keys[b]
	id, ok := m.ids[k]
	if !ok {
		id = int32(len(m.keys))
		m.keys = append(m.keys, k)
		m.ids[k] = id
	}
	m.rank[pairKey(a, b)] = int32(len(m.parts))
	m.parts = append(m.parts, [3]int32{a, b, id})
	return id
}

// VocabSize returns the number of tokens: the fixed 261, the alphabet and
// the symbols the merges made.
func (m *Model) VocabSize() int { return len(m.keys) }

// NumMerges returns the number of merges learned.
func (m *Model) NumMerges() int { return len(m.parts) }

// Merges returns the merges in the order learned, each as its two symbols
// ("th", "e</w>").
func (m *Model) Merges() [][2]string {
	out := make([][2]string, len(m.parts))
	for r, p := range m.parts {
		out[r] = [2]string{m.keys[p[0]], m.keys[p[1]]}
	}
	return out
}

// Token returns the token of id: a symbol (with EndOfWord when it ends a
// word), <pad>, <s>, </s>, <unk>, a byte <0xNN> or </w>. An id out of range
// gives "".
func (m *Model) Token(id int) string {
	if id < 0 || id >= len(m.keys) {
		return ""
	}
	return m.keys[id]
}

// Normalize returns text as the model sees it: invalid UTF-8 replaced by
// U+FFFD, white space collapsed to single spaces between words, none at the
// ends.
func Normalize(text string) string {
	return strings.Join(strings.Fields(strings.ToValidUTF8(text, "\uFFFD")), " ")
}

// isolated reports whether r is a piece of its own: punctuation or a symbol.
func isolated(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }

// pieces calls f with each piece of the normalized text and whether it ends
// its word.
func pieces(text string, f func(piece string, final bool)) {
	for _, w := range strings.Fields(strings.ToValidUTF8(text, "\uFFFD")) {
		start := 0
		for i, r := range w {
			if isolated(r) {
				if i > start {
					f(w[start:i], false)
				}
				n := i + utf8.RuneLen(r)
				f(w[i:n], n == len(w))
				start = n
			}
		}
		if start < len(w) {
			f(w[start:], true)
		}
	}
}

// symbolKey is the key of character r, marked when it ends a word.
func symbolKey(r string, final bool) string {
	if final {
		return r + EndOfWord
	}
	return r
}

// Encode returns the token ids of text (after Normalize), without <s> or
// </s>.
func (m *Model) Encode(text string) []int {
	var out []int
	pieces(text, func(p string, final bool) { out = m.appendPiece(out, p, final) })
	return out
}

// appendPiece appends the ids of one piece to out.
func (m *Model) appendPiece(out []int, p string, final bool) []int {
	ck := "\x00" + p // the first byte tells whether the piece ends a word
	if final {
		ck = "\x01" + p
	}
	if v, ok := m.cache.Load(ck); ok {
		return append(out, v.([]int)...)
	}
	ids := m.encodePiece(p, final)
	if m.cached.Load() < maxCache {
		if _, loaded := m.cache.LoadOrStore(ck, ids); !loaded {
			m.cached.Add(1)
		}
	}
	return append(out, ids...)
}

// encodePiece applies the merges to one piece: its characters (bytes for
// those outside the alphabet), then repeatedly every occurrence, left to
// right, of the adjacent pair with the lowest merge rank.
func (m *Model) encodePiece(p string, final bool) []int {
	syms := make([]int32, 0, len(p))
	for i, r := range p {
		n := i + utf8.RuneLen(r)
		last := final && n == len(p)
		if id, ok := m.ids[symbolKey(p[i:n], last)]; ok {
			syms = append(syms, id)
			continue
		}
		for _, b := range []byte(p[i:n]) {
			syms = append(syms, byteID+int32(b))
		}
		if last {
			syms = append(syms, eowID)
		}
	}
	for len(syms) > 1 {
		best := int32(-1)
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := m.rank[pairKey(syms[i], syms[i+1])]; ok && (best < 0 || r < best) {
				best = r
			}
		}
		if best < 0 {
			break
		}
		p := m.parts[best]
		syms = merge.Replace(syms, p[0], p[1], p[2])
	}
	out := make([]int, len(syms))
	for i, s := range syms {
		out[i] = int(s)
	}
	return out
}

// Decode returns the text of ids: symbols and bytes joined, a space after
// each end of word (none at the end). <pad>, <s> and </s> are skipped;
// <unk> and ids out of range are written as U+FFFD.
func (m *Model) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		switch {
		case id == PadID || id == BosID || id == EosID:
		case id == UnkID || id < 0 || id >= len(m.keys):
			b.WriteRune(utf8.RuneError)
		case id < eowID:
			b.WriteByte(byte(id - byteID))
		case id == eowID:
			b.WriteByte(' ')
		default:
			k := m.keys[id]
			if t, ok := strings.CutSuffix(k, EndOfWord); ok {
				b.WriteString(t)
				b.WriteByte(' ')
			} else {
				b.WriteString(k)
			}
		}
	}
	return strings.TrimSuffix(b.String(), " ")
}
