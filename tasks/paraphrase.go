package tasks

import (
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
)

var (
	kjvSource = Source{Kind: "deb", Package: "sword-text-kjv", Version: "14.3-1", Files: "usr/share/sword/modules/texts/ztext/engKJV2006eb/nt.*"}
	webSource = Source{Kind: "deb", Package: "sword-text-web", Version: "426.0-1", Files: "usr/share/sword/modules/texts/ztext/engWEB2015eb/nt.*"}
)

func init() {
	register(&Task{
		Name: "paraphrase",
		Description: "pairs of New Testament verses, King James Version (1769) against World English Bible (2020): " +
			"the same verse in both (paraphrase) or a KJV verse against another WEB verse of the same chapter (not_paraphrase); an MRPC stand-in",
		Spec:    labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"not_paraphrase", "paraphrase"}, Pair: true, Metric: "f1", Positive: "paraphrase"},
		Sources: []Source{kjvSource, webSource},
		Licence: "public domain (both translations; see the packages' copyright files)",
		Splits: "one pair per verse present and non-empty in both (OSIS markup, notes and headings stripped); " +
			"paraphrase when draw(\"<ref>/label\") is even, else the WEB partner is verse draw(\"<ref>/partner\") mod (n-1) among the chapter's other n-1 verses (the next one when the wording is the same), where draw is FNV-1a 64 through the splitmix64 finaliser; " +
			"key: the reference (Matt.1.1); FNV-1a 64 of the key mod 10: 0-7 train, 8 dev, 9 test",
		Settings: Settings{MaxLength: 128, Epochs: 8, LR: 2e-4, BatchSize: 32, Patience: 2},
		Build:    buildParaphrase,
	})
}

// draw is a pseudo-random number keyed by s: FNV-1a 64 of s through the
// splitmix64 finaliser. (FNV-1a alone will not do: its low bit is the low
// bit of the prefix's hash flipped by a constant, so it would follow the
// split of the reference.)
func draw(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func readBible(fsys fs.FS, src Source, module string) ([]string, map[string]string, error) {
	z, err := ReadZText(fsys, path.Join(src.Dir(), "usr", "share", "sword", "modules", "texts", "ztext", module), "nt")
	if err != nil {
		return nil, nil, err
	}
	return z.Verses()
}

func buildParaphrase(fsys fs.FS) (*Splits, error) {
	kjvRefs, kjv, err := readBible(fsys, kjvSource, "engKJV2006eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: paraphrase: %w", err)
	}
	_, web, err := readBible(fsys, webSource, "engWEB2015eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: paraphrase: %w", err)
	}
	dropped := map[string]int{}
	var refs []string
	chapters := map[string][]string{}
	var chapterOrder []string
	for _, ref := range kjvRefs {
		if kjv[ref] == "" || web[ref] == "" {
			dropped["verse missing or empty in one translation"]++
			continue
		}
		refs = append(refs, ref)
		ch := ref[:strings.LastIndexByte(ref, '.')]
		if _, ok := chapters[ch]; !ok {
			chapterOrder = append(chapterOrder, ch)
		}
		chapters[ch] = append(chapters[ch], ref)
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("tasks: paraphrase: no verse is present in both translations")
	}
	chapterIndex := map[string]int{}
	for i, ch := range chapterOrder {
		chapterIndex[ch] = i
	}
	var items []item
	for _, ref := range refs {
		a := kjv[ref]
		label := "paraphrase"
		b := web[ref]
		if draw(ref+"/label")%2 == 1 {
			label = "not_paraphrase"
			ch := ref[:strings.LastIndexByte(ref, '.')]
			others := without(chapters[ch], ref)
			if len(others) == 0 { // a one-verse chapter: use the next chapter
				others = chapters[chapterOrder[(chapterIndex[ch]+1)%len(chapterOrder)]]
			}
			k := int(draw(ref+"/partner") % uint64(len(others)))
			// A partner with the very same wording would be a paraphrase:
			// take the next one that differs.
			for j := 0; j < len(others) && web[others[(k+j)%len(others)]] == web[ref]; j++ {
				k++
			}
			b = web[others[k%len(others)]]
			if b == web[ref] {
				dropped["no differing verse in the chapter"]++
				continue
			}
		}
		items = append(items, item{key: ref, ex: labelled.Example{Text: a, TextPair: &b, Label: label}})
	}
	return split("paraphrase", items, dropped), nil
}

func without(list []string, x string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}
