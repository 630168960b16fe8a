package jieba

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// dictGz is jieba 0.42.1's dict.txt (MIT licence, see NOTICE), gzip -9 -n.
// Uncompressed it is 5,071,852 bytes with SHA-256
// 7197c3211ddd98962b036cdf40324d1ea2bfaa12bd028e68faa70111a88e12a8.
//
//go:embed dict.txt.gz
var dictGz []byte

// Dictionary is jieba's prefix dictionary: every word of dict.txt with its
// frequency, plus every prefix of a word, stored as a trie over runes.
//
// A route through a sentence scores each word w as log(freq(w)) − log(total)
// (jieba's Tokenizer.calc), where total is the sum of the frequencies of all
// lines of the dictionary. The trie is laid out level by level, so that the
// children of node n are the contiguous nodes first[n] … first[n+1]−1, sorted
// by rune. A Dictionary is immutable and safe for concurrent use.
type Dictionary struct {
	total    int64
	logTotal float64
	words    int // distinct words with a positive frequency

	rootBMP    []int32        // rune < 0x10000 → level-1 node index + 1 (0: none)
	rootAstral map[rune]int32 // other first runes → level-1 node index
	label      []rune         // the rune on the edge into each node
	first      []int32        // children of n: first[n] … first[n+1]−1
	weight     []float64      // log(freq) − log(total) for words, NaN for prefixes
	nodesAtL1  int32          // number of level-1 nodes
	maxWordLen int            // in runes
}

// Total returns the sum of the frequencies of all dictionary lines.
func (d *Dictionary) Total() int64 { return d.total }

// Words returns the number of distinct words with a positive frequency.
func (d *Dictionary) Words() int { return d.words }

// Nodes returns the number of trie nodes: distinct words and prefixes.
func (d *Dictionary) Nodes() int { return len(d.label) }

var (
	defaultOnce sync.Once
	defaultDict *Dictionary
	defaultErr  error
)

// Default returns the dictionary built from the embedded jieba 0.42.1
// dict.txt. The first call decompresses and builds it (about 0.2 s and
// 10 MB, see docs/tokenizer.md); later calls return the same value.
func Default() (*Dictionary, error) {
	defaultOnce.Do(func() {
		zr, err := gzip.NewReader(bytes.NewReader(dictGz))
		if err != nil {
			defaultErr = fmt.Errorf("jieba: embedded dict.txt.gz: %w", err)
			return
		}
		defaultDict, defaultErr = ReadDictionary(zr)
		if defaultErr != nil {
			defaultErr = fmt.Errorf("jieba: embedded dict.txt.gz: %w", defaultErr)
		}
	})
	return defaultDict, defaultErr
}

// DefaultDictText returns a reader of the embedded dict.txt, uncompressed.
func DefaultDictText() (io.Reader, error) {
	zr, err := gzip.NewReader(bytes.NewReader(dictGz))
	if err != nil {
		return nil, fmt.Errorf("jieba: embedded dict.txt.gz: %w", err)
	}
	return zr, nil
}

// ErrBadDictionary is returned (wrapped, with the line number) for a
// dictionary line that is not "word freq [tag]".
var ErrBadDictionary = errors.New("jieba: invalid dictionary entry")

// ReadDictionary reads a jieba dictionary: one "word freq [tag]" line per
// word, fields separated by single spaces, as jieba's Tokenizer.gen_pfdict
// reads it. A word listed twice keeps its last frequency; the total counts
// every line. Empty lines are skipped (jieba rejects them); negative
// frequencies and invalid UTF-8 are errors.
func ReadDictionary(r io.Reader) (*Dictionary, error) {
	type entry struct {
		word string
		freq int64
		line int
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("jieba: reading dictionary: %w", err)
	}
	text := string(raw) // one copy; words below are substrings of it
	entries := make([]entry, 0, strings.Count(text, "\n")+1)
	var total int64
	for lineNo := 1; text != ""; lineNo++ {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		// gen_pfdict: line.strip() (ASCII whitespace), then split(' ')[:2].
		s := trimASCIISpace(line)
		if s == "" {
			continue
		}
		word, rest, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("%w at line %d: %q has no frequency", ErrBadDictionary, lineNo, s)
		}
		fs, _, _ := strings.Cut(rest, " ")
		freq, perr := strconv.ParseInt(fs, 10, 64)
		if perr != nil || freq < 0 {
			return nil, fmt.Errorf("%w at line %d: frequency %q is not a non-negative integer", ErrBadDictionary, lineNo, fs)
		}
		if !utf8.ValidString(word) {
			return nil, fmt.Errorf("%w at line %d: word is not valid UTF-8", ErrBadDictionary, lineNo)
		}
		if total > math.MaxInt64-freq {
			return nil, fmt.Errorf("%w at line %d: total frequency overflows int64", ErrBadDictionary, lineNo)
		}
		total += freq
		if word != "" {
			entries = append(entries, entry{word, freq, lineNo})
		}
	}
	if total <= 0 {
		return nil, fmt.Errorf("%w: the total frequency is %d, want > 0", ErrBadDictionary, total)
	}
	// Sort by word (byte order is code point order for valid UTF-8), the
	// last line of a duplicated word last; then keep the last of each run.
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.word, b.word); c != 0 {
			return c
		}
		return a.line - b.line
	})
	uniq := entries[:0]
	for i, e := range entries {
		if i+1 < len(entries) && entries[i+1].word == e.word {
			continue
		}
		uniq = append(uniq, e)
	}
	entries = uniq

	d := &Dictionary{total: total, logTotal: ln(float64(total))}
	logCache := map[int64]float64{}
	weightOf := func(f int64) float64 {
		if f <= 0 {
			return math.NaN()
		}
		w, ok := logCache[f]
		if !ok {
			// jieba: log(freq) - logtotal, evaluated in this order.
			w = ln(float64(f)) - d.logTotal
			logCache[f] = w
		}
		return w
	}

	// Build the trie level by level. At level L every active word (one with
	// at least L runes) contributes its length-L prefix; equal prefixes are
	// adjacent because the words are sorted, and their parents (length L−1
	// prefixes) are in increasing node order, so each parent's children come
	// out contiguous and sorted, and parents' child blocks follow parent order.
	n := len(entries)
	cursor := make([]int32, n) // byte offset of the next rune of each word
	parent := make([]int32, n) // node of the word's current prefix; −1 = root
	active := make([]int32, n)
	for i := range active {
		active[i] = int32(i)
		parent[i] = -1
	}
	estNodes := len(entries) * 3 / 2
	d.label = make([]rune, 0, estNodes)
	d.weight = make([]float64, 0, estNodes)
	childCount := make([]int32, 0, estNodes)
	for level := 1; len(active) > 0; level++ {
		prevParent, prevRune := int32(-2), rune(-1)
		var node int32 = -1
		next := active[:0]
		for _, i := range active {
			w := entries[i].word
			r, size := utf8.DecodeRuneInString(w[cursor[i]:])
			p := parent[i]
			if p != prevParent || r != prevRune {
				node = int32(len(d.label))
				d.label = append(d.label, r)
				d.weight = append(d.weight, math.NaN())
				childCount = append(childCount, 0)
				if p >= 0 {
					childCount[p]++
				}
				prevParent, prevRune = p, r
			}
			parent[i] = node
			cursor[i] += int32(size)
			if int(cursor[i]) == len(w) {
				d.weight[node] = weightOf(entries[i].freq)
				if entries[i].freq > 0 {
					d.words++
				}
				if level > d.maxWordLen {
					d.maxWordLen = level
				}
			} else {
				next = append(next, i)
			}
		}
		if level == 1 {
			d.nodesAtL1 = int32(len(d.label))
		}
		active = next
	}
	// first[n] = nodesAtL1 + Σ_{m<n} childCount[m].
	d.first = make([]int32, len(d.label)+1)
	acc := d.nodesAtL1
	for i, c := range childCount {
		d.first[i] = acc
		acc += c
	}
	d.first[len(d.label)] = acc
	d.rootBMP = make([]int32, 0x10000)
	d.rootAstral = map[rune]int32{}
	for i := int32(0); i < d.nodesAtL1; i++ {
		if r := d.label[i]; r < 0x10000 {
			d.rootBMP[r] = i + 1
		} else {
			d.rootAstral[r] = i
		}
	}
	return d, nil
}

// rootChild returns the level-1 node for r, or −1.
func (d *Dictionary) rootChild(r rune) int32 {
	if r >= 0 && r < 0x10000 {
		return d.rootBMP[r] - 1
	}
	if n, ok := d.rootAstral[r]; ok {
		return n
	}
	return -1
}

// child returns the child of node n along r, or −1.
func (d *Dictionary) child(n int32, r rune) int32 {
	lo, hi := d.first[n], d.first[n+1]
	if hi-lo <= 8 {
		for i := lo; i < hi; i++ {
			if d.label[i] == r {
				return i
			}
		}
		return -1
	}
	labels := d.label[lo:hi]
	i, ok := slices.BinarySearch(labels, r)
	if !ok {
		return -1
	}
	return lo + int32(i)
}

// lookup returns the node of word, or −1 when word is not a word or prefix.
func (d *Dictionary) lookup(word string) int32 {
	n := int32(-1)
	for i, r := range word {
		if i == 0 {
			n = d.rootChild(r)
		} else {
			n = d.child(n, r)
		}
		if n < 0 {
			return -1
		}
	}
	return n
}

// Freq reports whether word is in the prefix dictionary (as a word or as a
// prefix of one) and its log weight log(freq) − log(total); the weight is NaN
// for a prefix that is not itself a word (jieba's FREQ value 0).
func (d *Dictionary) Freq(word string) (weight float64, ok bool) {
	n := d.lookup(word)
	if n < 0 {
		return 0, false
	}
	return d.weight[n], true
}

// trimASCIISpace is Python's bytes.strip(): it removes leading and trailing
// ASCII whitespace (space, \t, \n, \r, \v, \f).
func trimASCIISpace(s string) string {
	isSpace := func(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}
