package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PoetryLabels name the classes of the long-text-zh task.
var PoetryLabels = []string{"Tang", "Song"}

// PoetryDocOptions say how the long-text-zh documents are made from the
// Tang and Song shi of the chinese-poetry package.
type PoetryDocOptions struct {
	// MinChars: an author's poems, in the order the collection holds them,
	// are concatenated (one poem a line, its lines without the title) until
	// the document holds at least MinChars characters; the next poem starts
	// the next document, and a remainder shorter than MinChars is dropped.
	MinChars int `json:"min_chars"`
	// PerAuthor caps the documents taken from one author (the first ones),
	// so that the most prolific poets (Lu You wrote 9,000 shi) do not make
	// up the class.
	PerAuthor int `json:"per_author"`
}

// poetryFile matches the collection's files of Tang and Song shi,
// package/dist/quantangshi/poet.{tang,song}.N.json (N = 0, 1000, …); the
// error/ subfolder (the maintainers' list of known mistakes) is not read.
var poetryFile = regexp.MustCompile(`^package/dist/quantangshi/poet\.(tang|song)\.([0-9]+)\.json$`)

// anonymous are the author names that are not one person.
var anonymous = map[string]bool{"無名氏": true, "佚名": true, "不詳": true, "無名": true, "闕名": true}

// poetryDocs fetches the chinese-poetry package and returns its documents
// (poetryDocuments) with a line saying what was read.
func poetryDocs(ctx context.Context, cache string, o PoetryDocOptions, progress io.Writer) ([]LabelledDoc, string, error) {
	files, err := fetchNPMWhere(ctx, cache, poetryPackage, poetryFile.MatchString, progress)
	if err != nil {
		return nil, "", err
	}
	return poetryDocuments(files, o)
}

// poetryDocuments builds the documents from the collection's JSON files
// (path → contents): every poem of an author who appears in only one of
// the two collections and is not anonymous, and whose text does not
// appear in the other collection, goes into that author's documents
// (PoetryDocOptions). The characters are left as the collection has them:
// its Tang and Song shi are both in traditional characters.
func poetryDocuments(files map[string][]byte, o PoetryDocOptions) ([]LabelledDoc, string, error) {
	if o.MinChars < 1 || o.PerAuthor < 1 {
		return nil, "", fmt.Errorf("experiment: long-text-zh: %d characters a document and %d documents an author; need at least 1 of each", o.MinChars, o.PerAuthor)
	}
	type file struct {
		name string
		dyn  int
		n    int
	}
	var fs []file
	for name := range files {
		m := poetryFile.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		fs = append(fs, file{name, map[string]int{"tang": 0, "song": 1}[m[1]], n})
	}
	slices.SortFunc(fs, func(a, b file) int {
		if a.dyn != b.dyn {
			return a.dyn - b.dyn
		}
		return a.n - b.n
	})
	type poem struct{ author, text string }
	var poems [2][]poem
	texts := [2]map[string]bool{{}, {}}
	authors := [2]map[string]bool{{}, {}}
	for _, f := range fs {
		var ps []struct {
			Author     string   `json:"author"`
			Paragraphs []string `json:"paragraphs"`
		}
		if err := json.Unmarshal(files[f.name], &ps); err != nil {
			return nil, "", fmt.Errorf("experiment: long-text-zh: %s: %w", f.name, err)
		}
		for _, p := range ps {
			t := strings.TrimSpace(strings.Join(p.Paragraphs, ""))
			if t == "" || p.Author == "" {
				continue
			}
			poems[f.dyn] = append(poems[f.dyn], poem{p.Author, t})
			texts[f.dyn][t], authors[f.dyn][p.Author] = true, true
		}
	}
	if len(poems[0]) == 0 || len(poems[1]) == 0 {
		return nil, "", fmt.Errorf("experiment: long-text-zh: %d Tang and %d Song poems in %d files; want both (is %s the chinese-poetry package?)", len(poems[0]), len(poems[1]), len(fs), poetryPackage.Tarball)
	}
	var docs []LabelledDoc
	dropped := [3]int{} // poems of shared authors, of anonymous ones, texts in both
	for dyn := range poems {
		other := 1 - dyn
		cur := map[string]*strings.Builder{}
		count := map[string]int{}
		for _, p := range poems[dyn] {
			switch {
			case authors[other][p.author]:
				dropped[0]++
				continue
			case anonymous[p.author]:
				dropped[1]++
				continue
			case texts[other][p.text]:
				dropped[2]++
				continue
			}
			if count[p.author] >= o.PerAuthor {
				continue
			}
			b := cur[p.author]
			if b == nil {
				b = &strings.Builder{}
				cur[p.author] = b
			}
			b.WriteString(p.text)
			b.WriteByte('\n')
			if utf8.RuneCountInString(b.String()) >= o.MinChars {
				docs = append(docs, LabelledDoc{Name: fmt.Sprintf("%s-%s-%d", PoetryLabels[dyn], p.author, count[p.author]), Group: p.author, Text: b.String(), Label: dyn})
				count[p.author]++
				b.Reset()
			}
		}
	}
	src := fmt.Sprintf("chinese-poetry %s (npm, sha256 %.12s…), dist/quantangshi/poet.{tang,song}.*.json: %d Tang and %d Song shi; left out: %d poems of the %d authors in both collections, %d of anonymous authors, %d texts in both",
		poetryPackage.Spec, poetryPackage.SHA256, len(poems[0]), len(poems[1]), dropped[0], countShared(authors), dropped[1], dropped[2])
	return docs, src, nil
}

func countShared(a [2]map[string]bool) int {
	n := 0
	for k := range a[0] {
		if a[1][k] {
			n++
		}
	}
	return n
}

// splitByGroup balances the classes and splits them by group (author):
// within each label the groups are shuffled with a fixed generator; the
// label with more documents takes groups in that order until it has as many
// documents as the smallest label (the last group cut short); then the
// first share trainShare of each label's groups go to train, the next
// valShare to validation and the rest to test. No group, and so no poem, is
// in two splits.
func splitByGroup(docs []LabelledDoc, nLabels int, trainShare, valShare float64) (train, val, test []LabelledDoc) {
	r := rand.New(rand.NewPCG(0x706f656d, 0x7a68))
	byLabel := make([][][]LabelledDoc, nLabels) // label → groups → documents
	size := make([]int, nLabels)
	for l := range nLabels {
		idx := map[string]int{}
		for _, d := range docs {
			if d.Label != l {
				continue
			}
			i, ok := idx[d.Group]
			if !ok {
				i = len(byLabel[l])
				idx[d.Group] = i
				byLabel[l] = append(byLabel[l], nil)
			}
			byLabel[l][i] = append(byLabel[l][i], d)
			size[l]++
		}
		r.Shuffle(len(byLabel[l]), func(i, j int) { byLabel[l][i], byLabel[l][j] = byLabel[l][j], byLabel[l][i] })
	}
	n := slices.Min(size)
	for l, groups := range byLabel {
		var kept [][]LabelledDoc
		have := 0
		for _, g := range groups {
			if have >= n {
				break
			}
			g = g[:min(len(g), n-have)]
			kept = append(kept, g)
			have += len(g)
		}
		a := int(trainShare * float64(len(kept)))
		b := a + int(valShare*float64(len(kept)))
		for i, g := range kept {
			switch {
			case i < a:
				train = append(train, g...)
			case i < b:
				val = append(val, g...)
			default:
				test = append(test, g...)
			}
		}
		byLabel[l] = kept
	}
	return train, val, test
}
