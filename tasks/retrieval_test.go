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
// Genesis to train, and the Song of Songs (dropped).
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
			[][][]string{{{`In the beginning.`, `¶ And the earth was.`}}, {{`Ruth k.`}}, {{`Esther k.`, `Selah.`, `Selah.`}}, {{`Song k.`}}, {{`Jonah k.`}}},
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
	wantTest := RetrievalSplit{
		Queries: []retrieval.Doc{{ID: "WEB.Esth.1.1", Text: "Esther w."}, {ID: "WEB.Esth.1.2", Text: "Selah 1."}, {ID: "WEB.Esth.1.3", Text: "Selah 2."},
			{ID: "WEB.John.1.1", Text: "John w."}, {ID: "WEB.Phil.1.1", Text: "Phil w."}},
		Corpus: []retrieval.Doc{{ID: "KJV.Esth.1.1", Text: "Esther k."}, {ID: "KJV.Esth.1.2", Text: "Selah."}, {ID: "KJV.Esth.1.3", Text: "Selah."},
			{ID: "KJV.John.1.1", Text: "John k."}, {ID: "KJV.Phil.1.1", Text: "Phil k."}},
		Qrels: retrieval.Qrels{"WEB.Esth.1.1": {"KJV.Esth.1.1": 1}, "WEB.Esth.1.2": {"KJV.Esth.1.2": 1, "KJV.Esth.1.3": 1},
			"WEB.Esth.1.3": {"KJV.Esth.1.2": 1, "KJV.Esth.1.3": 1}, "WEB.John.1.1": {"KJV.John.1.1": 1}, "WEB.Phil.1.1": {"KJV.Phil.1.1": 1}},
	}
	if !reflect.DeepEqual(r.Test, wantTest) {
		t.Errorf("test\n got %+v\nwant %+v", r.Test, wantTest)
	}
	if got := r.Test.MultiRelevant(); !reflect.DeepEqual(got, []string{"WEB.Esth.1.2", "WEB.Esth.1.3"}) {
		t.Errorf("multi-relevant %q", got)
	}
	if len(r.Dev.Queries) != 4 || r.Dev.Queries[0].ID != "WEB.Ruth.1.1" {
		t.Errorf("dev %+v", r.Dev.Queries)
	}
	if r.Dropped["Song of Songs (versifications differ)"] != 1 || r.Dropped["verse missing or empty in one translation"] != 1 {
		t.Errorf("dropped %v, want the Song verse and the empty John verse", r.Dropped)
	}
	checkBookSplit(t, r)
	if _, err := r.Split("train"); err == nil {
		t.Error("split train was accepted")
	}
}

// checkBookSplit fails when a book has verses in two splits.
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
	for _, p := range r.Train {
		put("train", p.Ref)
	}
	for name, sp := range map[string]*RetrievalSplit{"dev": &r.Dev, "test": &r.Test} {
		for i, q := range sp.Queries {
			put(name, strings.TrimPrefix(q.ID, "WEB."))
			put(name, strings.TrimPrefix(sp.Corpus[i].ID, "KJV."))
		}
		for q, rel := range sp.Qrels {
			for d := range rel {
				put(name, strings.TrimPrefix(d, "KJV."))
			}
			put(name, strings.TrimPrefix(q, "WEB."))
		}
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
	if len(r.Train) != 29438 || len(r.Dev.Queries) != 390 || len(r.Test.Queries) != 1150 || len(r.Test.Corpus) != 1150 {
		t.Errorf("train %d, dev %d, test %d/%d; want the documented 29438, 390, 1150/1150", len(r.Train), len(r.Dev.Queries), len(r.Test.Queries), len(r.Test.Corpus))
	}
	if len(r.Dev.MultiRelevant())+len(r.Test.MultiRelevant()) != 0 {
		t.Errorf("queries with several relevant verses: %q %q", r.Dev.MultiRelevant(), r.Test.MultiRelevant())
	}
	want := TrainPair{"Gen.1.1", "In the beginning, God created the heavens and the earth.", "In the beginning God created the heaven and the earth."}
	if r.Train[0] != want {
		t.Errorf("first pair %q, want %q", r.Train[0], want)
	}
	checkBookSplit(t, r)
}
