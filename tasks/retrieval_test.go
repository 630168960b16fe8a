package tasks

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/roformer-go/roformer/retrieval"
)

// bibleRetrievalFS lays out the KJV and WEB modules: every held-out book,
// Genesis to train, and the Song of Songs (out of the pairs, in the corpus,
// its KJV verse the twin of two of Esther's).
func bibleRetrievalFS(t *testing.T) fstest.MapFS {
	fsys := fstest.MapFS{}
	books := []string{"Gen", "Ruth", "Esth", "Song", "Jonah"}
	nt := []string{"John", "Gal", "Phil", "Jas"}
	for _, s := range []struct {
		src    Source
		module string
		ot, nt [][][]string
	}{
		{BibleRetrievalSources[0], "engKJV2006eb",
			[][][]string{{{`In the beginning.`, `¶ And the earth was.`}}, {{`Ruth k.`}}, {{`Esther k.`, `Selah.`, `Selah.`}}, {{`Selah.`}}, {{`Jonah k.`}}},
			[][][]string{{{`John k.`, ``}}, {{`Gal k.`}}, {{`Phil k.`}}, {{`Jas k.`}}}},
		{BibleRetrievalSources[1], "engWEB2015eb",
			[][][]string{{{`In the beginning, God.`, `The earth was.`}}, {{`Ruth w.`}}, {{`Esther w.`, `Selah 1.`, `Selah 2.`}}, {{`Song w.`}}, {{`Jonah w.`}}},
			[][][]string{{{`John w.`, `John w2.`}}, {{`Gal w.`}}, {{`Phil w.`}}, {{`Jas w.`}}}},
	} {
		dir := path.Join(s.src.Dir(), "usr", "share", "sword", "modules", "texts", "ztext", s.module)
		putZText(t, fsys, dir, "ot", testament(books, s.ot, ""), 4)
		putZText(t, fsys, dir, "nt", testament(nt, s.nt, ""), 4)
	}
	return fsys
}

func TestBuildBibleRetrieval(t *testing.T) {
	r, err := BuildBibleRetrieval(bibleRetrievalFS(t))
	if err != nil {
		t.Fatal(err)
	}
	wantTrain := []TrainPair{{"Gen.1.1", "In the beginning, God.", "In the beginning."}, {"Gen.1.2", "The earth was.", "And the earth was."}}
	if !reflect.DeepEqual(r.Train, wantTrain) {
		t.Errorf("train %q, want %q", r.Train, wantTrain)
	}
	corpus := []retrieval.Doc{{ID: "KJV.Gen.1.1", Text: "In the beginning."}, {ID: "KJV.Gen.1.2", Text: "And the earth was."},
		{ID: "KJV.Ruth.1.1", Text: "Ruth k."}, {ID: "KJV.Esth.1.1", Text: "Esther k."}, {ID: "KJV.Esth.1.2", Text: "Selah."},
		{ID: "KJV.Esth.1.3", Text: "Selah."}, {ID: "KJV.Song.1.1", Text: "Selah."}, {ID: "KJV.Jonah.1.1", Text: "Jonah k."},
		{ID: "KJV.John.1.1", Text: "John k."}, {ID: "KJV.Gal.1.1", Text: "Gal k."}, {ID: "KJV.Phil.1.1", Text: "Phil k."},
		{ID: "KJV.Jas.1.1", Text: "Jas k."}}
	selah := map[string]int{"KJV.Esth.1.2": 1, "KJV.Esth.1.3": 1, "KJV.Song.1.1": 1}
	wantTest := RetrievalSplit{
		Queries: []retrieval.Doc{{ID: "WEB.Esth.1.1", Text: "Esther w."}, {ID: "WEB.Esth.1.2", Text: "Selah 1."}, {ID: "WEB.Esth.1.3", Text: "Selah 2."},
			{ID: "WEB.John.1.1", Text: "John w."}, {ID: "WEB.Phil.1.1", Text: "Phil w."}},
		Corpus: corpus,
		Qrels: retrieval.Qrels{"WEB.Esth.1.1": {"KJV.Esth.1.1": 1}, "WEB.Esth.1.2": selah, "WEB.Esth.1.3": selah,
			"WEB.John.1.1": {"KJV.John.1.1": 1}, "WEB.Phil.1.1": {"KJV.Phil.1.1": 1}},
	}
	if !reflect.DeepEqual(r.Test, wantTest) {
		t.Errorf("test\n got %+v\nwant %+v", r.Test, wantTest)
	}
	wantDev := RetrievalSplit{
		Queries: []retrieval.Doc{{ID: "WEB.Ruth.1.1", Text: "Ruth w."}, {ID: "WEB.Jonah.1.1", Text: "Jonah w."}, {ID: "WEB.Gal.1.1", Text: "Gal w."},
			{ID: "WEB.Jas.1.1", Text: "Jas w."}},
		Corpus: corpus,
		Qrels: retrieval.Qrels{"WEB.Ruth.1.1": {"KJV.Ruth.1.1": 1}, "WEB.Jonah.1.1": {"KJV.Jonah.1.1": 1}, "WEB.Gal.1.1": {"KJV.Gal.1.1": 1},
			"WEB.Jas.1.1": {"KJV.Jas.1.1": 1}},
	}
	if !reflect.DeepEqual(r.Dev, wantDev) {
		t.Errorf("dev\n got %+v\nwant %+v", r.Dev, wantDev)
	}
	if got := r.Test.MultiRelevant(); !reflect.DeepEqual(got, []string{"WEB.Esth.1.2", "WEB.Esth.1.3"}) {
		t.Errorf("multi-relevant %q", got)
	}
	if r.Dropped["Song of Songs (versifications differ)"] != 1 || r.Dropped["verse missing or empty in one translation"] != 1 {
		t.Errorf("dropped %v, want the Song verse and the empty John verse", r.Dropped)
	}
	checkBookSplit(t, r)
	if _, err := r.Split("train"); err == nil {
		t.Error("split train was accepted")
	}
}

// checkBookSplit fails when a book has training pairs or queries in two
// splits, when a query's own verse is not among its relevant documents, or
// when the corpus lacks the KJV verse of a training pair (the corpus is
// every KJV verse).
func checkBookSplit(t *testing.T, r *Retrieval) {
	t.Helper()
	where := map[string]string{}
	put := func(split, ref string) {
		b := ref[:strings.IndexByte(ref, '.')]
		if w, ok := where[b]; ok && w != split {
			t.Errorf("book %s is in %s and %s", b, w, split)
		}
		where[b] = split
	}
	for name, sp := range map[string]*RetrievalSplit{"dev": &r.Dev, "test": &r.Test} {
		in := map[string]bool{}
		for _, d := range sp.Corpus {
			in[d.ID] = true
		}
		for _, p := range r.Train {
			if !in["KJV."+p.Ref] {
				t.Errorf("%s corpus lacks the training verse KJV.%s", name, p.Ref)
				break
			}
		}
		for _, q := range sp.Queries {
			ref := strings.TrimPrefix(q.ID, "WEB.")
			put(name, ref)
			if sp.Qrels[q.ID]["KJV."+ref] != 1 || !in["KJV."+ref] {
				t.Errorf("%s query %s: relevant %v, want its own verse among them and in the corpus", name, q.ID, sp.Qrels[q.ID])
			}
		}
		if len(sp.Qrels) != len(sp.Queries) {
			t.Errorf("%s: %d queries, %d with relevance", name, len(sp.Queries), len(sp.Qrels))
		}
	}
	for _, p := range r.Train {
		put("train", p.Ref)
	}
}

// TestBibleRetrievalCounts builds the task from the real packages when they
// are in the default cache and checks the documented counts and that no
// book is in two splits; otherwise it skips.
func TestBibleRetrievalCounts(t *testing.T) {
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	cache := filepath.Join(dir, "roformer", "tasks")
	for _, s := range BibleRetrievalSources {
		if !Fetched(s, cache) {
			t.Skipf("%s is not in %s", s, cache)
		}
	}
	r, err := BibleRetrieval(context.Background(), cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Train) != 29438 || len(r.Dev.Queries) != 390 || len(r.Test.Queries) != 1150 || len(r.Dev.Corpus) != 31102 || len(r.Test.Corpus) != 31102 {
		t.Errorf("train %d, dev %d, test %d, corpus %d/%d; want the documented 29438, 390, 1150, 31102", len(r.Train), len(r.Dev.Queries), len(r.Test.Queries), len(r.Dev.Corpus), len(r.Test.Corpus))
	}
	if r.Dropped["Song of Songs (versifications differ)"] != 117 || r.Dropped["verse missing or empty in one translation"] != 7 {
		t.Errorf("dropped %v, want the documented 117 and 7", r.Dropped)
	}
	if d, q := r.Dev.MultiRelevant(), r.Test.MultiRelevant(); len(d) != 0 || !reflect.DeepEqual(q, []string{"WEB.Phil.1.2", "WEB.Phil.4.23"}) ||
		len(r.Test.Qrels["WEB.Phil.1.2"]) != 2 || len(r.Test.Qrels["WEB.Phil.4.23"]) != 4 {
		t.Errorf("queries with several relevant verses: dev %q, test %q (%v); want the documented two of test", d, q, r.Test.Qrels["WEB.Phil.4.23"])
	}
	want := TrainPair{"Gen.1.1", "In the beginning, God created the heavens and the earth.", "In the beginning God created the heaven and the earth."}
	if r.Train[0] != want {
		t.Errorf("first pair %q, want %q", r.Train[0], want)
	}
	checkBookSplit(t, r)
}
