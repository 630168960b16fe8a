package merge

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// vocab records the merges; a merge's symbol is new unless the same pair
// was merged before (so that the re-merge of a pair is exercised too).
type vocab struct {
	next    int32
	size    int
	merges  [][3]int32
	made    map[uint64]int32
	reverse bool // ties: the larger pair first
}

func (v *vocab) Full() bool { return len(v.merges) >= v.size }
func (v *vocab) Merge(a, b int32) int32 {
	c, ok := v.made[key(a, b)]
	if !ok {
		c = v.next
		v.next++
		v.made[key(a, b)] = c
	}
	v.merges = append(v.merges, [3]int32{a, b, c})
	return c
}
func (v *vocab) Before(a, b, c, d int32) bool {
	if v.reverse {
		return key(a, b) > key(c, d)
	}
	return key(a, b) < key(c, d)
}

// randomWords returns n words over an alphabet of k symbols, few symbols
// so that runs ("a a a") and ties are common.
func randomWords(r *rand.Rand, n, k int) []Word {
	ws := make([]Word, n)
	for i := range ws {
		s := make([]int32, 1+r.IntN(9))
		for j := range s {
			s[j] = int32(r.IntN(k))
		}
		ws[i] = Word{Syms: s, Count: 1 + r.Int64N(4)}
	}
	return ws
}

func clone(ws []Word) []Word {
	out := make([]Word, len(ws))
	for i, w := range ws {
		out[i] = Word{slices.Clone(w.Syms), w.Count}
	}
	return out
}

// Learn makes, merge by merge, the merges that Naive's recount makes, and
// leaves the words in the same state.
func TestLearnMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		words, alphabet, merges int
		minCount                int64
		reverse                 bool
	}{
		{40, 2, 30, 1, false},
		{40, 2, 30, 1, true},
		{200, 5, 100, 2, false},
		{200, 5, 100, 0, true},
		{500, 26, 300, 3, false},
		{20, 1, 10, 1, false}, // runs of one symbol only
	} {
		name := fmt.Sprintf("W%d_A%d_M%d_min%d_rev%v", tc.words, tc.alphabet, tc.merges, tc.minCount, tc.reverse)
		t.Run(name, func(t *testing.T) {
			ws := randomWords(r, tc.words, tc.alphabet)
			fast := &vocab{next: int32(tc.alphabet), size: tc.merges, made: map[uint64]int32{}, reverse: tc.reverse}
			slow := &vocab{next: int32(tc.alphabet), size: tc.merges, made: map[uint64]int32{}, reverse: tc.reverse}
			fw, sw := clone(ws), clone(ws)
			Learn(fast, fw, tc.minCount)
			Naive(slow, sw, tc.minCount)
			if len(fast.merges) < 5 {
				t.Fatalf("only %d merges: the case tests little", len(fast.merges))
			}
			if !reflect.DeepEqual(fast.merges, slow.merges) {
				t.Errorf("Learn merges %v\nNaive merges %v", fast.merges, slow.merges)
			}
			if !reflect.DeepEqual(fw, sw) {
				t.Errorf("words differ after training:\nLearn %v\nNaive %v", fw, sw)
			}
		})
	}
}

// The stop conditions: a full vocabulary merges nothing, and no pair
// below minCount is merged.
func TestLearnStops(t *testing.T) {
	ws := []Word{{[]int32{0, 1, 2}, 3}, {[]int32{1, 2}, 1}}
	v := &vocab{next: 3, size: 0, made: map[uint64]int32{}}
	Learn(v, clone(ws), 1)
	if len(v.merges) != 0 {
		t.Errorf("full vocabulary: %d merges, want 0", len(v.merges))
	}
	// (1, 2) occurs 4 times, then (0, 3) 3 times: minCount 4 stops after one.
	v = &vocab{next: 3, size: 10, made: map[uint64]int32{}}
	Learn(v, clone(ws), 4)
	if want := [][3]int32{{1, 2, 3}}; !reflect.DeepEqual(v.merges, want) {
		t.Errorf("minCount 4: merges %v, want %v", v.merges, want)
	}
}

func TestReplace(t *testing.T) {
	for _, tc := range []struct{ in, want []int32 }{
		{[]int32{0, 0, 0}, []int32{9, 0}},
		{[]int32{0, 0, 0, 0}, []int32{9, 9}},
		{[]int32{1, 0, 0, 1}, []int32{1, 9, 1}},
		{[]int32{0}, []int32{0}},
		{nil, nil},
	} {
		if got := Replace(slices.Clone(tc.in), 0, 0, 9); !slices.Equal(got, tc.want) {
			t.Errorf("Replace(%v, 0, 0, 9) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
