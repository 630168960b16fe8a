package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// poetOf returns a made-up author name whose draw lands in split s (0 dev,
// 1 test, 2 train).
func poetOf(s uint64) string {
	for i := 0; ; i++ {
		a := fmt.Sprintf("poet%d", i)
		if d := draw(a) % 20; d == s || s == 2 && d > 1 {
			return a
		}
	}
}

func TestBuildPoetryRetrieval(t *testing.T) {
	dev, test, train := poetOf(0), poetOf(1), poetOf(2)
	type p struct {
		Author     string   `json:"author"`
		Title      string   `json:"title"`
		Paragraphs []string `json:"paragraphs"`
	}
	files := map[string][]p{
		"poet.tang.0.json": {
			{train, "一", []string{"床前明月光，疑是地上霜。", "舉頭望明月，低頭思故鄉。"}},
			{dev, "二", []string{"白日依山盡，黃河入海流。", "欲窮千里目，更上一層樓。"}},
			{"佚名", "三", []string{"甲乙丙丁，", "戊己庚辛。"}},
		},
		"poet.tang.1000.json": {
			{test, "四", []string{"春眠不覺曉，處處聞啼鳥。", "夜來風雨聲，花落知多少。", "第三聯。"}},
			{test, "五", []string{"單獨一聯。"}},
			{dev, "六", []string{"重複，", "重複。"}},
			{train, "七", []string{"重複，", "重複。"}},
		},
		"poet.song.0.json": {{dev, "宋", []string{"不讀，", "宋詩。"}}},
	}
	fsys := fstest.MapFS{}
	dir := path.Join(PoetryRetrievalSource.Dir(), "package", "dist", "quantangshi")
	for name, ps := range files {
		b, _ := json.Marshal(ps)
		fsys[path.Join(dir, name)] = &fstest.MapFile{Data: b}
	}
	r, err := BuildPoetryRetrieval(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Train) != 1 || r.Train[0].Ref != "0" || !strings.Contains("床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。", r.Train[0].Anchor) ||
		len(r.Train[0].Anchor)+len(r.Train[0].Positive) != len("床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。") {
		t.Errorf("train %q", r.Train)
	}
	if len(r.Dev.Queries) != 1 || r.Dev.Queries[0].ID != "line.1" || r.Dev.Corpus[0].ID != "poem.1" || r.Dev.Qrels["line.1"]["poem.1"] != 1 {
		t.Errorf("dev %+v", r.Dev)
	}
	// Poem 3 of test has three couplets: the query is one, the document the
	// other two in order.
	if len(r.Test.Queries) != 1 || r.Test.Queries[0].ID != "line.3" {
		t.Fatalf("test %+v", r.Test)
	}
	q, d := r.Test.Queries[0].Text, r.Test.Corpus[0].Text
	all := []string{"春眠不覺曉，處處聞啼鳥。", "夜來風雨聲，花落知多少。", "第三聯。"}
	found := false
	for i, c := range all {
		if c == q {
			found = d == strings.Join(append(append([]string{}, all[:i]...), all[i+1:]...), "")
		}
	}
	if !found {
		t.Errorf("query %q, document %q", q, d)
	}
	want := map[string]int{"anonymous author": 1, "fewer than two couplets": 1, "text held more than once": 2}
	for k, v := range want {
		if r.Dropped[k] != v {
			t.Errorf("dropped %v, want %v", r.Dropped, want)
		}
	}
	again, _ := BuildPoetryRetrieval(fsys)
	if fmt.Sprint(again) != fmt.Sprint(r) {
		t.Error("a second build differs")
	}
}

// TestPoetryRetrievalReal builds the task from the real package when it is
// in the default cache and checks the documented counts; otherwise it
// skips. (No author is in two splits by construction: the split is a
// function of the author.)
func TestPoetryRetrievalReal(t *testing.T) {
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	cache := filepath.Join(dir, "roformer", "tasks")
	if !Fetched(PoetryRetrievalSource, cache) {
		t.Skipf("%s is not in %s", PoetryRetrievalSource, cache)
	}
	r, err := PoetryRetrieval(context.Background(), cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Train) != 48243 || len(r.Dev.Queries) != 1466 || len(r.Test.Queries) != 1176 || r.Dropped["held-out author's poems past the cap"] != 2718 ||
		r.Dropped["anonymous author"] != 1830 || r.Dropped["fewer than two couplets"] != 768 || r.Dropped["text held more than once"] != 1406 {
		t.Errorf("train %d, dev %d, test %d, dropped %v; want the documented counts", len(r.Train), len(r.Dev.Queries), len(r.Test.Queries), r.Dropped)
	}
	// A test couplet found verbatim in a training poem (a line quoted by
	// another poet) is a leak of wording, not of the pair: count them.
	seen := map[string]bool{}
	for _, p := range r.Train {
		seen[p.Anchor] = true
	}
	n := 0
	for _, q := range r.Test.Queries {
		if seen[q.Text] {
			n++
		}
	}
	t.Logf("%d of %d test couplets are also a training anchor", n, len(r.Test.Queries))
}
