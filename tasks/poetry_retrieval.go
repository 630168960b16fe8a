package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/retrieval"
)

// PoetryRetrievalSource is the package PoetryRetrieval reads: the Tang shi
// of the chinese-poetry collection.
var PoetryRetrievalSource = Source{Kind: "npm", Package: "chinese-poetry", Version: "2.0.1", Files: "package/dist/quantangshi/poet.tang.*.json"}

func init() { RetrievalTasks["poetry-zh"] = PoetryRetrieval }

// PoetryRetrieval returns Chinese poem retrieval ("poetry-zh"): a query is
// one couplet (one "paragraph" of the collection, 床前明月光，疑是地上霜。)
// of a Tang shi, its relevant document the rest of that poem, among the
// rest-of-poems of all the split's poems. It fetches the chinese-poetry
// package (npm chinese-poetry 2.0.1, pinned by SHA-256; 350 MB unpacked)
// into cacheDir on first use and builds the task with BuildPoetryRetrieval.
func PoetryRetrieval(ctx context.Context, cacheDir string, log io.Writer) (*Retrieval, error) {
	if err := Fetch(ctx, PoetryRetrievalSource, cacheDir, log); err != nil {
		return nil, err
	}
	return BuildPoetryRetrieval(os.DirFS(cacheDir))
}

var reTangFile = regexp.MustCompile(`^poet\.tang\.([0-9]+)\.json$`)

// BuildPoetryRetrieval builds the task of PoetryRetrieval from the unpacked
// package in fsys (rooted at the cache folder). The poems are read from
// dist/quantangshi/poet.tang.N.json in the order of N and of the files;
// the characters are left as the collection has them (traditional).
//
// The split is by author: draw("<author>") mod 20 is 0 for dev, 1 for
// test, and anything else for training, so no poet is in two splits; a
// held-out author's poems past the first PoetryHeldPerAuthor are dropped,
// so that a few prolific poets (元稹, 910 poems) do not make up a split.
// Poems of anonymous authors (無名氏, 佚名, …), poems with fewer than two
// couplets, and every copy of a text (couplets joined) that the collection
// holds more than once are dropped. The query couplet of a poem of n
// couplets is number draw("<n>/<title>/<text>") mod n; the document is the
// other couplets in order. Query ids are "line.<i>", document ids
// "poem.<i>", i the poem's place in the collection. Training pairs are
// (the query couplet, the rest of the poem) of the training poems.
//
// With the pinned package: 48,243 training pairs, dev 1,466 queries (196
// authors), test 1,176 (176 authors), each corpus as large as its queries;
// dropped 1,830 poems of anonymous authors, 768 of one couplet, 1,406
// copies of repeated texts and 2,718 past the per-author cap.
func BuildPoetryRetrieval(fsys fs.FS) (*Retrieval, error) {
	dir := path.Join(PoetryRetrievalSource.Dir(), "package", "dist", "quantangshi")
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("tasks: poetry-zh: %w", err)
	}
	type file struct {
		name string
		n    int
	}
	var files []file
	for _, e := range entries {
		if m := reTangFile.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			files = append(files, file{e.Name(), n})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return a.n - b.n })
	if len(files) == 0 {
		return nil, fmt.Errorf("tasks: poetry-zh: no poet.tang.N.json in %s", dir)
	}
	type poem struct {
		author, title string
		couplets      []string
		text          string
	}
	var poems []poem
	count := map[string]int{}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, path.Join(dir, f.name))
		if err != nil {
			return nil, fmt.Errorf("tasks: poetry-zh: %w", err)
		}
		var ps []struct {
			Author     string   `json:"author"`
			Title      string   `json:"title"`
			Paragraphs []string `json:"paragraphs"`
		}
		if err := json.Unmarshal(b, &ps); err != nil {
			return nil, fmt.Errorf("tasks: poetry-zh: %s: %w", f.name, err)
		}
		for _, p := range ps {
			var cs []string
			for _, c := range p.Paragraphs {
				if c = strings.TrimSpace(c); c != "" {
					cs = append(cs, c)
				}
			}
			t := strings.Join(cs, "")
			poems = append(poems, poem{strings.TrimSpace(p.Author), p.Title, cs, t})
			count[t]++
		}
	}
	r := &Retrieval{Name: "poetry-zh", Dropped: map[string]int{}}
	held := map[string]int{}
	for i, p := range poems {
		switch {
		case p.author == "" || anonymousPoets[p.author]:
			r.Dropped["anonymous author"]++
			continue
		case len(p.couplets) < 2:
			r.Dropped["fewer than two couplets"]++
			continue
		case count[p.text] > 1:
			r.Dropped["text held more than once"]++
			continue
		}
		n := len(p.couplets)
		k := int(draw(fmt.Sprintf("%d/%s/%s", n, p.title, p.text)) % uint64(n))
		query := p.couplets[k]
		rest := strings.Join(append(slices.Clone(p.couplets[:k]), p.couplets[k+1:]...), "")
		var sp *RetrievalSplit
		switch draw(p.author) % 20 {
		case 0:
			sp = &r.Dev
		case 1:
			sp = &r.Test
		default:
			r.Train = append(r.Train, TrainPair{Ref: strconv.Itoa(i), Anchor: query, Positive: rest})
			continue
		}
		if held[p.author] >= PoetryHeldPerAuthor {
			r.Dropped["held-out author's poems past the cap"]++
			continue
		}
		held[p.author]++
		id := strconv.Itoa(i)
		sp.Queries = append(sp.Queries, retrieval.Doc{ID: "line." + id, Text: query})
		sp.Corpus = append(sp.Corpus, retrieval.Doc{ID: "poem." + id, Text: rest})
		if sp.Qrels == nil {
			sp.Qrels = retrieval.Qrels{}
		}
		sp.Qrels["line."+id] = map[string]int{"poem." + id: 1}
	}
	if len(r.Train) == 0 || len(r.Dev.Queries) == 0 || len(r.Test.Queries) == 0 {
		return nil, fmt.Errorf("tasks: poetry-zh: %d training pairs, %d dev and %d test queries; want some of each", len(r.Train), len(r.Dev.Queries), len(r.Test.Queries))
	}
	return r, nil
}

// PoetryHeldPerAuthor caps the poems of one author in a held-out split.
const PoetryHeldPerAuthor = 100

// anonymousPoets are the author names that are not one person.
var anonymousPoets = map[string]bool{"無名氏": true, "佚名": true, "不詳": true, "無名": true, "闕名": true}
