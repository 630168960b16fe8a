package tasks

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/retrieval"
)

// TrainPair is an (anchor, positive) pair for contrastive training, in
// sentence-transformers' column names.
type TrainPair struct {
	Ref      string `json:"-"`
	Anchor   string `json:"anchor"`
	Positive string `json:"positive"`
}

// RetrievalSplit is one held-out split of a retrieval task in BEIR's shape:
// queries, a corpus and the relevance of corpus documents to queries.
type RetrievalSplit struct {
	Queries, Corpus []retrieval.Doc
	Qrels           retrieval.Qrels
}

// Retrieval is a retrieval task: training pairs from some books and two
// held-out splits from others.
type Retrieval struct {
	Name      string
	Train     []TrainPair
	Dev, Test RetrievalSplit
	// DevBooks and TestBooks are the OSIS names of the held-out books.
	DevBooks, TestBooks []string
	// Dropped counts verses left out while building, by reason.
	Dropped map[string]int
}

// Split returns the split named "dev" or "test".
func (r *Retrieval) Split(name string) (*RetrievalSplit, error) {
	switch name {
	case "dev":
		return &r.Dev, nil
	case "test":
		return &r.Test, nil
	}
	return nil, fmt.Errorf("tasks: retrieval task %s has splits dev and test, not %q", r.Name, name)
}

// BibleRetrievalSources are the packages BibleRetrieval reads: the King
// James Version and the World English Bible as SWORD modules.
var BibleRetrievalSources = []Source{
	{Kind: "deb", Package: kjvSource.Package, Version: kjvSource.Version, Files: "usr/share/sword/modules/texts/ztext/engKJV2006eb/{ot,nt}.*"},
	{Kind: "deb", Package: webSource.Package, Version: webSource.Version, Files: "usr/share/sword/modules/texts/ztext/engWEB2015eb/{ot,nt}.*"},
}

// RetrievalTasks are the built-in retrieval tasks by name.
var RetrievalTasks = map[string]func(ctx context.Context, cacheDir string, log io.Writer) (*Retrieval, error){
	"bible-en": BibleRetrieval,
}

// BibleRetrieval returns English paraphrase retrieval on the Bible ("bible-en"):
// a query is a verse of the World English Bible (Debian sword-text-web
// 426.0-1), its relevant document the same verse of the King James Version
// (Debian sword-text-kjv 14.3-1) among every KJV verse of the Bible.
// It fetches the packages into cacheDir on first use (pinned by SHA-256;
// progress to log) and builds the task with BuildBibleRetrieval.
func BibleRetrieval(ctx context.Context, cacheDir string, log io.Writer) (*Retrieval, error) {
	for _, s := range BibleRetrievalSources {
		if err := Fetch(ctx, s, cacheDir, log); err != nil {
			return nil, err
		}
	}
	return BuildBibleRetrieval(os.DirFS(cacheDir))
}

// BuildBibleRetrieval builds the task of BibleRetrieval from the unpacked
// packages in fsys (rooted at the cache folder). The queries are split by
// whole books, those of BibleParallel: dev Ruth, Jonah, Galatians, James;
// test Esther, John, Philippians; the verses of every other book are the
// training pairs, so no query's verse (nor chapter) is a training pair. The
// corpus of both splits is every KJV verse of the Bible, all books (one
// slice, shared by Dev and Test): a training book's KJV verses are
// distractors a query must not be matched to, not answers. Query ids are
// "WEB.<ref>", corpus ids "KJV.<ref>" (distinct, as BEIR's evaluation drops
// a hit whose id equals the query's), both in canonical order.
//
// A query or training pair is a verse paired by its reference. Verses empty
// in either module are left out of the pairs, and so is the Song of Songs,
// whose chapters the WEB module (NRSVA versification) divides differently
// from the KJV; their KJV verses that are not empty stay in the corpus. The
// texts are cleaned as in BuildBibleParallel (markup and notes removed, the
// psalms' superscriptions kept at the start of verse 1, the KJV's ¶
// removed). A query's relevant documents are its own verse and every other
// corpus verse with the very same KJV text, so that a repeated verse is not
// a coin toss.
//
// With the pinned packages: 29,438 training pairs, dev 390 queries, test
// 1,150, a corpus of 31,102 KJV verses (all of them); 117 verses of the Song
// of Songs and 7 empty in the WEB left out of the pairs. No dev query has
// more than one relevant verse; two test queries have: Philippians 1.2,
// whose KJV text is also 1 Corinthians 1.3, and 4.23, also Romans 16.24,
// 2 Thessalonians 3.18 and Revelation 22.21 (training books, so these two
// texts are also training positives).
func BuildBibleRetrieval(fsys fs.FS) (*Retrieval, error) {
	kjvRefs, kjv, err := readBibleModule(fsys, BibleRetrievalSources[0], "engKJV2006eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: bible-en: %w", err)
	}
	_, web, err := readBibleModule(fsys, BibleRetrievalSources[1], "engWEB2015eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: bible-en: %w", err)
	}
	held := map[string]*RetrievalSplit{}
	r := &Retrieval{Name: "bible-en", DevBooks: BibleDevBooks, TestBooks: BibleTestBooks, Dropped: map[string]int{}}
	for _, b := range BibleDevBooks {
		held[b] = &r.Dev
	}
	for _, b := range BibleTestBooks {
		held[b] = &r.Test
	}
	var corpus []retrieval.Doc
	byText := map[string][]string{} // KJV text → its corpus ids, in order
	seen := map[string]bool{}
	for _, ref := range kjvRefs {
		book := ref[:strings.IndexByte(ref, '.')]
		k, w := cleanEnglish(kjv[ref]), cleanEnglish(web[ref])
		if k != "" {
			id := "KJV." + ref
			corpus = append(corpus, retrieval.Doc{ID: id, Text: k})
			byText[k] = append(byText[k], id)
		}
		if book == "Song" {
			r.Dropped["Song of Songs (versifications differ)"]++
			continue
		}
		if k == "" || w == "" {
			r.Dropped["verse missing or empty in one translation"]++
			continue
		}
		seen[book] = true
		sp := held[book]
		if sp == nil {
			r.Train = append(r.Train, TrainPair{Ref: ref, Anchor: w, Positive: k})
			continue
		}
		sp.Queries = append(sp.Queries, retrieval.Doc{ID: "WEB." + ref, Text: w})
	}
	for b := range held {
		if !seen[b] {
			return nil, fmt.Errorf("tasks: bible-en: held-out book %q has no verse in both modules", b)
		}
	}
	if len(r.Train) == 0 {
		return nil, fmt.Errorf("tasks: bible-en: no training pair")
	}
	for _, sp := range []*RetrievalSplit{&r.Dev, &r.Test} {
		sp.Corpus = corpus
		sp.Qrels = make(retrieval.Qrels, len(sp.Queries))
		for _, q := range sp.Queries {
			ref := strings.TrimPrefix(q.ID, "WEB.")
			rel := map[string]int{}
			for _, id := range byText[cleanEnglish(kjv[ref])] {
				rel[id] = 1
			}
			sp.Qrels[q.ID] = rel
		}
	}
	return r, nil
}

// MultiRelevant returns the ids of the queries of s with more than one
// relevant document, sorted.
func (s *RetrievalSplit) MultiRelevant() []string {
	var out []string
	for q, rel := range s.Qrels {
		if len(rel) > 1 {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}
