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
)

// bibleFS lays out the two SWORD modules of BibleParallel: every held-out
// book with one verse, and Genesis and Psalms with the typesetting that the
// cleaning undoes.
func bibleFS(t *testing.T) fstest.MapFS {
	fsys := fstest.MapFS{}
	type side struct {
		src    Source
		module string
		ot, nt [][][]string // per book, per chapter, verses
	}
	en := side{BibleSources[0], "engKJV2006eb",
		[][][]string{
			{{`In the beginning.`, `¶ And the <transChange type="added">earth</transChange> was.`}, {`Thus the heavens.`}},
			{{`<title canonical="true" type="psalm">A Psalm of David.</title> LORD, how are they increased!`}},
			{{`Ruth one.`}}, {{`Esther one.`}}, {{`Jonah one.`}},
		},
		[][][]string{{{`John one.`}}, {{`Gal one.`}}, {{`Phil one.`}}, {{`Jas one.`}}},
	}
	es := side{BibleSources[1], "spaRV1909eb",
		[][][]string{
			{{`EN el principio.`, `Y la tierra<transChange type="added">estaba</transChange>.`}, {`Y FUERON acabados.`}},
			{{`Salmo de David. ¡OH Jehová, cuánto!`}},
			{{`Rut uno.`}}, {{``}}, {{`Jonás uno.`}},
		},
		[][][]string{{{`Juan uno.`}}, {{`Gál uno.`}}, {{`Fil uno.`}}, {{`Sant uno.`}}},
	}
	for _, s := range []side{en, es} {
		dir := path.Join(s.src.Dir(), "usr", "share", "sword", "modules", "texts", "ztext", s.module)
		putZText(t, fsys, dir, "ot", testament([]string{"Gen", "Ps", "Ruth", "Esth", "Jonah"}, s.ot, ""), 4)
		putZText(t, fsys, dir, "nt", testament([]string{"John", "Gal", "Phil", "Jas"}, s.nt, ""), 4)
	}
	return fsys
}

func TestBuildBibleParallel(t *testing.T) {
	p, err := BuildBibleParallel(bibleFS(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  []Pair
		want []Pair
	}{
		{"train", p.Train, []Pair{
			{"Gen.1.1", "In the beginning.", "En el principio."},
			{"Gen.1.2", "And the earth was.", "Y la tierra estaba."},
			{"Gen.2.1", "Thus the heavens.", "Y fueron acabados."},
			{"Ps.1.1", "A Psalm of David. LORD, how are they increased!", "Salmo de David. ¡Oh Jehová, cuánto!"},
		}},
		{"dev", p.Dev, []Pair{
			{"Ruth.1.1", "Ruth one.", "Rut uno."}, {"Jonah.1.1", "Jonah one.", "Jonás uno."},
			{"Gal.1.1", "Gal one.", "Gál uno."}, {"Jas.1.1", "Jas one.", "Sant uno."},
		}},
		{"test", p.Test, []Pair{{"John.1.1", "John one.", "Juan uno."}, {"Phil.1.1", "Phil one.", "Fil uno."}}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
	if p.Dropped["verse empty in one translation"] != 1 {
		t.Errorf("dropped %v, want the empty Esther verse", p.Dropped)
	}
	again, _ := BuildBibleParallel(bibleFS(t))
	if !reflect.DeepEqual(p, again) {
		t.Error("a second build differs")
	}
}

func TestBuildBibleParallelErrors(t *testing.T) {
	fsys := bibleFS(t)
	delete(fsys, path.Join(BibleSources[1].Dir(), "usr/share/sword/modules/texts/ztext/spaRV1909eb/nt.bzv"))
	if _, err := BuildBibleParallel(fsys); err == nil || !strings.Contains(err.Error(), "spaRV1909eb/nt.bzv") {
		t.Errorf("missing file: got %v", err)
	}
	fsys = fstest.MapFS{}
	for _, s := range BibleSources {
		module := map[string]string{"sword-text-kjv": "engKJV2006eb", "sword-text-sparv": "spaRV1909eb"}[s.Package]
		dir := path.Join(s.Dir(), "usr", "share", "sword", "modules", "texts", "ztext", module)
		putZText(t, fsys, dir, "ot", testament([]string{"Gen"}, [][][]string{{{"a"}}}, ""), 4)
		putZText(t, fsys, dir, "nt", testament([]string{"Matt"}, [][][]string{{{"b"}}}, ""), 4)
	}
	if _, err := BuildBibleParallel(fsys); err == nil || !strings.Contains(err.Error(), "held-out book") {
		t.Errorf("no held-out book: got %v", err)
	}
}

func TestCleanSpanish(t *testing.T) {
	c := countCasing(map[string]string{
		"a": "Y dijo Jehová á Moisés: Los hijos de Jehová.",
		"b": "y los hijos de Aarón.",
	})
	for _, tc := range []struct{ ref, in, want string }{
		{"Gen.1.1", "EN el principio.", "En el principio."},
		{"Lev.10.1", "Y LOS hijos de Aarón.", "Y los hijos de Aarón."},
		{"Exod.25.1", "Y JEHOVÁ habló á Moisés.", "Y Jehová habló á Moisés."},
		{"2Chr.24.1", "DE SIETE años era Joas.", "De siete años era Joas."},
		{"Ps.4.1", "Salmo de David. RESPÓNDEME cuando clamo.", "Salmo de David. Respóndeme cuando clamo."},
		{"Ps.119.1", "ALEPH. BIENAVENTURADOS los perfectos.", "Bienaventurados los perfectos."},
		{"Ps.119.9", "BETH ¿CON qué limpiará?", "¿Con qué limpiará?"},
		{"Ps.119.10", "CON todo mi corazón.", "CON todo mi corazón."},              // not a stanza's first verse
		{"Exod.3.14", "YO SOY EL QUE SOY.", "YO SOY EL QUE SOY."},                  // not verse 1: as printed
		{"Gen.2.1", "Y fueron acabados.", "Y fueron acabados."},                    // nothing in capitals
		{"Exod.6.1", "JEHOVÁ dijo: YO SOY JEHOVÁ.", "Jehová dijo: YO SOY JEHOVÁ."}, // only the opening run
	} {
		if got := cleanSpanish(tc.ref, tc.in, c); got != tc.want {
			t.Errorf("%s %q: got %q, want %q", tc.ref, tc.in, got, tc.want)
		}
	}
}

// TestBibleParallelCounts builds the corpus from the real packages when they
// are in the default cache (roformer finetune or experiment translate put
// them there; TestFetchOnline fetches them) and checks the documented
// counts; otherwise it skips.
func TestBibleParallelCounts(t *testing.T) {
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	cache := filepath.Join(dir, "roformer", "tasks")
	for _, s := range BibleSources {
		if !Fetched(s, cache) {
			t.Skipf("%s is not in %s (set ROFORMER_FETCH_TESTS=1 for TestFetchOnline to fetch it)", s, cache)
		}
	}
	p, err := BibleParallel(context.Background(), cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkBibleCounts(t, p)
}

func checkBibleCounts(t *testing.T, p *Parallel) {
	t.Helper()
	if len(p.Train) != 29545 || len(p.Dev) != 389 || len(p.Test) != 1150 {
		t.Errorf("splits %d/%d/%d, want the documented 29545/389/1150", len(p.Train), len(p.Dev), len(p.Test))
	}
	for _, want := range []Pair{
		{"Gen.1.1", "In the beginning God created the heaven and the earth.", "En el principio crió Dios los cielos y la tierra."},
		{"Ps.3.1", "A Psalm of David, when he fled from Absalom his son. LORD, how are they increased that trouble me! many are they that rise up against me.",
			"Salmo de David, cuando huía de delante de Absalom su hijo. ¡Oh Jehová, cuánto se han multiplicado mis enemigos! muchos se levantan contra mí."},
	} {
		found := false
		for _, got := range p.Train {
			if got.Ref == want.Ref {
				found = true
				if got != want {
					t.Errorf("%s:\n got %q\nwant %q", want.Ref, got, want)
				}
			}
		}
		if !found {
			t.Errorf("%s is not in train", want.Ref)
		}
	}
	if p.Test[0].Ref != "Esth.1.1" || p.Dev[0].Ref != "Ruth.1.1" {
		t.Errorf("first test verse %s, first dev verse %s", p.Test[0].Ref, p.Dev[0].Ref)
	}
}
