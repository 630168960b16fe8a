package tasks

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"strings"
	"unicode"

	"github.com/roformer-go/roformer/data/labelled"
)

// The overlap-matched paraphrase task. On the plain paraphrase task word
// overlap alone nearly solves it: the same verse in two translations shares
// about 58% of its word set (median Jaccard), another verse of the chapter
// about 15%, so one threshold on the Jaccard overlap gives F1 0.99. Here the
// negatives are chosen so that, in every split, their overlap has the same
// distribution as the positives' (equal counts in every bin of width
// matchedBinWidth), and a threshold on the overlap is at chance.
const (
	// matchedBinWidth is the width of the Jaccard bins whose positive and
	// negative counts are made equal.
	matchedBinWidth = 0.02
	// matchedNearRepeat: a negative (KJV a, WEB b) is not taken when the two
	// verses repeat each other (the Jaccard overlap of their WEB texts, or
	// of their KJV texts, is at least this), since a near-repeat, such as a
	// saying in two gospels, is a paraphrase in all but its reference.
	matchedNearRepeat = 0.6
	// matchedKeep is how many candidate negatives per positive each bin
	// keeps before the assignment (which skips candidates whose verses are
	// already used).
	matchedKeep = 4
	// matchedUses is how many negatives a verse's KJV text may anchor, and
	// how many its WEB text may complete.
	matchedUses = 2
)

func init() {
	register(&Task{
		Name: "paraphrase-matched",
		Description: "pairs of New Testament verses, King James Version (1769) against World English Bible (2020): " +
			"the same verse in both (paraphrase) or a KJV verse against another verse's WEB text with as much word overlap (not_paraphrase), " +
			"so that word overlap alone cannot tell them apart; an MRPC stand-in",
		Spec:    labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"not_paraphrase", "paraphrase"}, Pair: true, Metric: "f1", Positive: "paraphrase"},
		Sources: []Source{kjvSource, webSource},
		Licence: "public domain (both translations; see the packages' copyright files)",
		Splits: "verses present and non-empty in both (OSIS markup, notes and headings stripped), each in one split by its reference (FNV-1a 64 of Matt.1.1 mod 10: 0-5 train, 6-7 dev, 8-9 test); " +
			"within a split, overlap is the Jaccard index of the lower-cased word sets (runs of letters and digits), binned by 0.02; " +
			"candidate negatives are every (KJV of verse a, WEB of verse b) of the split with b != a, texts differing from a's and the two verses not near-repeats (WEB-WEB and KJV-KJV overlap below 0.6), " +
			"the 4 per positive of smallest order splitmix64(draw(\"a/anchor\") xor draw(\"b/partner\")·0x9e3779b97f4a7c15) kept per bin; " +
			"from the highest bin down, negatives are taken in that order while the bin has fewer than its positives, a KJV verse anchoring at most 2 and a WEB verse completing at most 2; " +
			"the bin keeps as many positives (the same verse in both), those of smallest draw(\"a/pos\"), as it got negatives; draw is FNV-1a 64 through the splitmix64 finaliser. " +
			"No verse is in two splits; positives whose overlap no negative reaches (most above 0.45) are left out",
		Settings: Settings{MaxLength: 128, Epochs: 8, LR: 2e-4, BatchSize: 32, Patience: 2},
		Build:    buildParaphraseMatched,
	})
}

// wordIDs returns the sorted, distinct ids of the lower-cased words (runs
// of letters and digits) of s, adding new words to ids.
func wordIDs(s string, ids map[string]int32) []int32 {
	var out []int32
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		id, ok := ids[w]
		if !ok {
			id = int32(len(ids))
			ids[w] = id
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// jaccardIDs is |a ∩ b| / |a ∪ b| of two sorted sets (1 when both are
// empty).
func jaccardIDs(a, b []int32) float64 {
	inter := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			inter++
			i++
			j++
		}
	}
	union := len(a) + len(b) - inter
	if union == 0 {
		return 1
	}
	return float64(inter) / float64(union)
}

// matchedBin is the bin of overlap x.
func matchedBin(x float64) int {
	return min(int(x/matchedBinWidth), int(1/matchedBinWidth))
}

// verse is one verse present in both translations.
type verse struct {
	ref      string
	kjv, web string
	k, w     []int32 // word sets
}

// matchedPair is a candidate negative: the KJV text of verse a against the
// WEB text of verse b.
type matchedPair struct {
	a, b  int
	order uint64
}

func buildParaphraseMatched(fsys fs.FS) (*Splits, error) {
	kjvRefs, kjv, err := readBible(fsys, kjvSource, "engKJV2006eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: paraphrase-matched: %w", err)
	}
	_, web, err := readBible(fsys, webSource, "engWEB2015eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: paraphrase-matched: %w", err)
	}
	dropped := map[string]int{}
	ids := map[string]int32{}
	var bySplit [3][]verse
	for _, ref := range kjvRefs {
		if kjv[ref] == "" || web[ref] == "" {
			dropped["verse missing or empty in one translation"]++
			continue
		}
		s := matchedBucket(ref)
		bySplit[s] = append(bySplit[s], verse{ref: ref, kjv: kjv[ref], web: web[ref], k: wordIDs(kjv[ref], ids), w: wordIDs(web[ref], ids)})
	}
	if len(bySplit[0])+len(bySplit[1])+len(bySplit[2]) == 0 {
		return nil, fmt.Errorf("tasks: paraphrase-matched: no verse is present in both translations")
	}
	var items []item
	for _, vs := range bySplit {
		items = append(items, matchSplit(vs, dropped)...)
	}
	return splitBy("paraphrase-matched", items, dropped, matchedBucket), nil
}

// matchedBucket is the split of a verse: FNV-1a 64 of its reference modulo
// 10, 0–5 train, 6–7 dev, 8–9 test. Dev and test are twice the usual tenth
// because only a fifth of the verses have a positive whose overlap
// negatives reach.
func matchedBucket(ref string) int {
	h := fnv.New64a()
	h.Write([]byte(ref))
	switch h.Sum64() % 10 {
	case 6, 7:
		return 1
	case 8, 9:
		return 2
	}
	return 0
}

// matchSplit makes the pairs of one split's verses (see the task's Splits).
func matchSplit(vs []verse, dropped map[string]int) []item {
	nb := matchedBin(1) + 1
	// The positives of each bin, in the order of their draw.
	pos := make([][]int, nb)
	for i := range vs {
		b := matchedBin(jaccardIDs(vs[i].k, vs[i].w))
		pos[b] = append(pos[b], i)
	}
	for _, p := range pos {
		slices.SortFunc(p, func(x, y int) int { return cmp.Compare(draw(vs[x].ref+"/pos"), draw(vs[y].ref+"/pos")) })
	}
	// Per bin, the candidates of smallest draw, at most matchedKeep per
	// positive, kept sorted by draw.
	cand := make([][]matchedPair, nb)
	anchor, complete := make([]uint64, len(vs)), make([]uint64, len(vs))
	for i := range vs {
		anchor[i], complete[i] = draw(vs[i].ref+"/anchor"), draw(vs[i].ref+"/partner")
	}
	// The WEB word sets end to end, and a stamp per word id marking the
	// anchor's KJV words: |KJV a ∩ WEB b| is then a count over b's words.
	var words []int32
	start := make([]int, len(vs)+1)
	maxID := int32(0)
	for i := range vs {
		words = append(words, vs[i].w...)
		start[i+1] = len(words)
		for _, w := range vs[i].k {
			maxID = max(maxID, w)
		}
	}
	for _, w := range words {
		maxID = max(maxID, w)
	}
	stamp := make([]int32, maxID+1)
	for a := range vs {
		for _, w := range vs[a].k {
			stamp[w] = int32(a + 1)
		}
		ka := len(vs[a].k)
		for b := range vs {
			inter := 0
			for _, w := range words[start[b]:start[b+1]] {
				if stamp[w] == int32(a+1) {
					inter++
				}
			}
			union := ka + start[b+1] - start[b] - inter
			jac := 1.0
			if union > 0 {
				jac = float64(inter) / float64(union)
			}
			bin := matchedBin(jac)
			limit := matchedKeep * len(pos[bin])
			if limit == 0 || a == b {
				continue
			}
			c := matchedPair{a: a, b: b, order: mix64(anchor[a] ^ (complete[b] * 0x9e3779b97f4a7c15))}
			list := cand[bin]
			if len(list) == limit && c.order >= list[limit-1].order {
				continue
			}
			if vs[a].web == vs[b].web || vs[a].kjv == vs[b].kjv ||
				jaccardIDs(vs[a].w, vs[b].w) >= matchedNearRepeat || jaccardIDs(vs[a].k, vs[b].k) >= matchedNearRepeat {
				continue
			}
			at, _ := slices.BinarySearchFunc(list, c.order, func(p matchedPair, o uint64) int { return cmp.Compare(p.order, o) })
			list = slices.Insert(list, at, c)
			if len(list) > limit {
				list = list[:limit]
			}
			cand[bin] = list
		}
	}
	// From the highest bin down: negatives while the bin needs them, then
	// as many positives as negatives.
	anchored, completed := make([]int, len(vs)), make([]int, len(vs))
	type pair struct{ a, b int }
	var pairs []pair
	for bin := nb - 1; bin >= 0; bin-- {
		n := 0
		for _, c := range cand[bin] {
			if n == len(pos[bin]) {
				break
			}
			if anchored[c.a] >= matchedUses || completed[c.b] >= matchedUses {
				continue
			}
			anchored[c.a]++
			completed[c.b]++
			pairs = append(pairs, pair{c.a, c.b})
			n++
		}
		for _, i := range pos[bin][:n] {
			pairs = append(pairs, pair{i, i})
		}
		if left := len(pos[bin]) - n; left > 0 {
			dropped["positive without a negative of its overlap"] += left
		}
	}
	// In the order of the verses (a pair's place is its KJV verse's),
	// positive first.
	slices.SortFunc(pairs, func(x, y pair) int {
		if c := cmp.Compare(x.a, y.a); c != 0 {
			return c
		}
		return cmp.Compare(abs(x.a-x.b), abs(y.a-y.b)) // the positive (a = b) first
	})
	items := make([]item, len(pairs))
	for k, p := range pairs {
		label, b := "paraphrase", vs[p.b].web
		if p.a != p.b {
			label = "not_paraphrase"
		}
		items[k] = item{key: vs[p.a].ref, ex: labelled.Example{Text: vs[p.a].kjv, TextPair: &b, Label: label}}
	}
	return items
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
