package tasks

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/roformer-go/roformer/data/labelled"
)

// fixtureFS holds small versions of every task's files at their cache paths.
func fixtureFS(t testing.TB) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	// sentiment: 40 sentences per site, a record without a class, a
	// duplicate and a sentence labelled both ways.
	for s, site := range []string{"amazon", "imdb", "yelp"} {
		var recs []map[string]any
		for i := 0; i < 40; i++ {
			recs = append(recs, map[string]any{"text": fmt.Sprintf("%s sentence %d is %s", site, i, []string{"bad", "good"}[i%2]), "class": i % 2})
		}
		recs = append(recs, map[string]any{"text": "", "class": nil})
		if s == 0 {
			recs = append(recs, map[string]any{"text": "amazon sentence 0 is bad", "class": 0})
			recs = append(recs, map[string]any{"text": "It is ok.", "class": 0}, map[string]any{"text": "It is ok.", "class": 1})
		}
		b, _ := json.Marshal(recs)
		fsys[path.Join(sentimentSource.Dir(), "package/test/fixtures", site+".json")] = &fstest.MapFile{Data: b}
	}
	// spam: one mail per group and kind of encoding.
	mails := map[string][]string{
		"easy-ham-1": {"Subject: Meeting\nContent-Type: text/plain\n\nSee you at noon.\n"},
		"easy-ham-2": {"Subject: =?iso-8859-1?q?Caf=E9?=\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nOn se voit au caf=E9 =\nlundi.\n"},
		"hard-ham-1": {"Subject: News\nContent-Type: multipart/alternative; boundary=\"XX\"\n\n--XX\nContent-Type: text/plain\n\nPlain part.\n--XX\nContent-Type: text/html\n\n<p>HTML part</p>\n--XX--\n"},
		"spam-1":     {"Subject: WIN\nContent-Type: text/html\n\n<html><style>p{}</style><p>Click&nbsp;<b>now</b></p></html>\n"},
		"spam-2":     {"Subject: Cash\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\nRnJlZSBtb25l\neSE=\n", "Subject: Latin\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: base64\n\nbmHvdmU=\n"},
	}
	for g, ms := range mails {
		for i, m := range ms {
			b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%05d", i+1), "group": g, "text": m})
			fsys[path.Join(spamSource.Dir(), "package/data", g, fmt.Sprintf("%05d.abc.json", i+1))] = &fstest.MapFile{Data: b}
			fsys[path.Join(spamSource.Dir(), "package/data", g, fmt.Sprintf("%05d.abc.txt", i+1))] = &fstest.MapFile{Data: []byte(m)}
		}
	}
	// fortunes: each category file with entries; one text in two files.
	for i, cat := range topicCategories {
		var entries []string
		for j := 0; j < 5; j++ {
			entries = append(entries, fmt.Sprintf("A saying about %s,\n\tnumber %d.\n\t\t-- Someone", cat, j))
		}
		if i < 2 {
			entries = append(entries, "Shared by two files.")
		}
		fsys[path.Join(fortunesSource.Dir(), "usr/share/games/fortunes", cat)] = &fstest.MapFile{Data: []byte(strings.Join(entries, "\n%\n") + "\n%\n")}
	}
	// Bibles: two books; WEB words things differently, lacks one verse and
	// has one more.
	var kjv, web [][][]string
	for b := 0; b < 2; b++ {
		var kc, wc [][]string
		for c := 0; c < 3; c++ {
			var kv, wv []string
			for v := 0; v < 6; v++ {
				kv = append(kv, fmt.Sprintf("And <w>he</w> spake unto them, saying %d %d %d.", b, c, v))
				wv = append(wv, fmt.Sprintf("He said to them, %d %d %d.", b, c, v))
			}
			if b == 1 && c == 2 {
				wv[3] = ""
				wv = append(wv, "An extra verse.")
			}
			kc, wc = append(kc, kv), append(wc, wv)
		}
		kjv, web = append(kjv, kc), append(web, wc)
	}
	putZText(t, fsys, path.Join(kjvSource.Dir(), "usr/share/sword/modules/texts/ztext/engKJV2006eb"), "nt", testament([]string{"Matt", "Mark"}, kjv, ""), 7)
	putZText(t, fsys, path.Join(webSource.Dir(), "usr/share/sword/modules/texts/ztext/engWEB2015eb"), "nt", testament([]string{"Matt", "Mark"}, web, ""), 5)
	return fsys
}

func all(sp *Splits) []labelled.Example {
	var out []labelled.Example
	for _, ds := range []*labelled.Dataset{sp.Train, sp.Dev, sp.Test} {
		out = append(out, ds.Examples...)
	}
	return out
}

func TestBuild(t *testing.T) {
	fsys := fixtureFS(t)
	for _, tc := range []struct {
		task    string
		n       int
		dropped map[string]int
	}{
		{"sentiment", 120, map[string]int{"no text or class": 3, "duplicate": 1, "conflicting labels": 2}},
		{"spam", 6, map[string]int{}},
		{"topics", 50, map[string]int{"conflicting labels": 2}},
		{"paraphrase", 35, map[string]int{"verse missing or empty in one translation": 1}},
	} {
		t.Run(tc.task, func(t *testing.T) {
			task, err := Get(tc.task)
			if err != nil {
				t.Fatal(err)
			}
			sp, err := task.Build(fsys)
			if err != nil {
				t.Fatal(err)
			}
			exs := all(sp)
			if len(exs) != tc.n {
				t.Errorf("%d examples, want %d", len(exs), tc.n)
			}
			for k, v := range tc.dropped {
				if sp.Dropped[k] != v {
					t.Errorf("dropped %v, want %s: %d", sp.Dropped, k, v)
				}
			}
			// Labels fit the task, every split is the one its key hashes to,
			// and a second build is identical.
			for _, ds := range []*labelled.Dataset{sp.Train, sp.Dev, sp.Test} {
				if err := task.Spec.Check(ds, "task "+tc.task); err != nil {
					t.Error(err)
				}
			}
			again, _ := task.Build(fsys)
			a, b := all(sp), all(again)
			for i := range a {
				if a[i].Text != b[i].Text || a[i].Label != b[i].Label {
					t.Fatalf("build is not deterministic at %d", i)
				}
			}
			if len(sp.Train.Examples) == 0 {
				t.Error("empty train split")
			}
		})
	}
}

func TestSentimentSplitsByText(t *testing.T) {
	sp, err := buildSentiment(fixtureFS(t))
	if err != nil {
		t.Fatal(err)
	}
	for s, ds := range []*labelled.Dataset{sp.Train, sp.Dev, sp.Test} {
		for _, ex := range ds.Examples {
			if bucket(ex.Text) != s {
				t.Errorf("%q is in split %d, its key hashes to %d", ex.Text, s, bucket(ex.Text))
			}
		}
	}
}

func TestMailText(t *testing.T) {
	sp, err := buildSpam(fixtureFS(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ex := range all(sp) {
		got[strings.Fields(ex.Text)[0]] = ex.Text + " | " + ex.Label
	}
	for _, want := range []string{
		"Meeting See you at noon. | ham",
		"Café On se voit au café lundi. | ham",
		"News Plain part. | ham",
		"WIN Click now | spam",
		"Cash Free money! | spam",
		"Latin naïve | spam",
	} {
		if got[strings.Fields(want)[0]] != want {
			t.Errorf("got %q, want %q", got[strings.Fields(want)[0]], want)
		}
	}
}

func TestParaphrasePairs(t *testing.T) {
	sp, err := buildParaphrase(fixtureFS(t))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]int{}
	for _, ex := range all(sp) {
		labels[ex.Label]++
		// KJV "… saying b c v." against WEB "… b c v'.": same chapter always,
		// the same verse exactly for paraphrases.
		k := strings.Fields(strings.TrimSuffix(ex.Text, "."))
		w := strings.Fields(strings.TrimSuffix(*ex.TextPair, "."))
		kb, kc, kv := k[len(k)-3], k[len(k)-2], k[len(k)-1]
		wb, wc, wv := w[len(w)-3], w[len(w)-2], w[len(w)-1]
		if kb != wb || kc != wc {
			t.Errorf("pair from different chapters: %q / %q", ex.Text, *ex.TextPair)
		}
		if (kv == wv) != (ex.Label == "paraphrase") {
			t.Errorf("label %s for %q / %q", ex.Label, ex.Text, *ex.TextPair)
		}
	}
	if labels["paraphrase"] < 10 || labels["not_paraphrase"] < 10 {
		t.Errorf("labels %v are not balanced", labels)
	}
}

// The split function gives about 80/10/10, and the label draw of the
// paraphrase task does not follow the split (FNV-1a's low bit would).
func TestBucketAndDraw(t *testing.T) {
	var n [3]int
	var pos [3]int
	for i := 0; i < 20000; i++ {
		ref := fmt.Sprintf("Book%d.%d.%d", i%27, i/27%30, i)
		s := bucket(ref)
		n[s]++
		if draw(ref+"/label")%2 == 0 {
			pos[s]++
		}
	}
	for s, want := range []float64{0.8, 0.1, 0.1} {
		if f := float64(n[s]) / 20000; f < want-0.02 || f > want+0.02 {
			t.Errorf("split %d holds %.3f, want about %.1f", s, f, want)
		}
		if f := float64(pos[s]) / float64(n[s]); f < 0.45 || f > 0.55 {
			t.Errorf("split %d: %.3f positive, want about 0.5", s, f)
		}
	}
}

func TestRegistry(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "paraphrase,paraphrase-matched,sentiment,spam,topics" {
		t.Errorf("Names = %s", got)
	}
	if _, err := Get("mnli"); err == nil || !strings.Contains(err.Error(), "valid: paraphrase, paraphrase-matched, sentiment, spam, topics") {
		t.Errorf("Get(mnli): %v", err)
	}
	for _, n := range Names() {
		task, _ := Get(n)
		if err := task.Spec.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		about := task.About()
		for _, want := range []string{"source:", "licence:", "splits:"} {
			if !strings.Contains(about, want) {
				t.Errorf("%s: About lacks %s", n, want)
			}
		}
	}
}

// Each task carries the settings of its line of docs/results.md (the
// commands listed there).
func TestSettings(t *testing.T) {
	page := map[string]Settings{
		"sentiment":  {MaxLength: 64, Epochs: 6, LR: 2e-4, BatchSize: 32},
		"spam":       {MaxLength: 128, Epochs: 3, LR: 2e-4, BatchSize: 32},
		"paraphrase": {MaxLength: 128, Epochs: 8, LR: 2e-4, BatchSize: 32, Patience: 2},
		// No line of its own yet: paraphrase's settings.
		"paraphrase-matched": {MaxLength: 128, Epochs: 8, LR: 2e-4, BatchSize: 32, Patience: 2},
		"topics":             {MaxLength: 128, Epochs: 6, LR: 2e-4, BatchSize: 32},
	}
	for _, n := range Names() {
		task, _ := Get(n)
		if task.Settings != page[n] {
			t.Errorf("%s: settings %+v, the page used %+v", n, task.Settings, page[n])
		}
	}
}
